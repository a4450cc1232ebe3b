// `ocslab schedule generate CONFIG.yaml [-o FILE] [--check FILE]`: a parallel configuration
// (model shape, parallel sizes, pipeline schedule, sharding, MoE) -> the collective schedule
// (ocslab/workloads/schedule_generator.h; docs/workloads.md, "Generating a schedule").
#include <nlohmann/json.hpp>

#include <fstream>
#include <ostream>
#include <sstream>

#include "cli_args.h"
#include "commands.h"
#include "ocslab/cli/ocslab_cli.h"
#include "ocslab/workloads/schedule_generator.h"

namespace ocslab::cli {

namespace {

nlohmann::json summary_json(const workloads::GeneratedSchedule& g) {
  nlohmann::json dims = nlohmann::json::array();
  for (const auto& d : g.layout.dims) dims.push_back({{"name", d.name}, {"size", d.size}});
  return {{"schedule", g.schedule.name},
          {"ranks", g.schedule.ranks},
          {"ops_per_step", g.schedule.step.size()},
          {"job", {{"pp", g.layout.pp}, {"dims", dims}, {"initial", g.initial.str()}}},
          {"reconfigurations", g.reconfigurations}};
}

const char* kScheduleHelp = R"(ocslab schedule - collective schedules from a job's parallel configuration

Usage: ocslab schedule generate CONFIG.yaml [-o FILE] [--check FILE] [--json]

Reads a parallel configuration (model: layers, hidden, heads, sequence, vocabulary,
micro_batch, dtype, or kind: dlrm with batch, tables, embedding_dim, dense_params; parallel: tp,
dp, pp, cp, ep, whose product is ranks; pipeline: schedule gpipe or 1f1b, micro_batches;
sharding: none, zero1, zero2, zero3 or fsdp; moe: experts, top_k; scale_down) and writes the
schedule YAML that ocslab-collbench-verbs and ocslab-collbench-nccl run. Every op's bytes are
derived from the shape, and each op's comment in the file shows the product it came from:
  pipeline send        micro_batch x sequence/cp x hidden x dtype, per micro-batch each way
  tp allreduce         2 x layers/pp x micro_batch x sequence/cp x hidden x dtype, per
                       micro-batch forward and backward (the layers' two allreduces, fused)
  cp allgather         2 x layers/pp x micro_batch x sequence x hidden/tp x dtype (K and V),
                       forward; a reducescatter of the same size backward
  ep alltoall          2 x layers/pp x micro_batch x sequence/cp x top_k x hidden x dtype
                       (dispatch and combine), forward and backward
  dp gradients         P x dtype, P = (layers/pp x (4 hidden^2 + 8 hidden^2 [x experts/ep]) +
                       vocabulary x hidden on the first and on the last stage) / tp:
                       none: allreduce; zero1, zero2: reducescatter + allgather; zero3, fsdp:
                       allgather of P per micro-batch forward and backward, reducescatter once
  dlrm                 alltoall batch x tables x embedding_dim x dtype out and back, allreduce of
                       dense_params x dtype
Each count is divided by scale_down and rounded up to whole 4-byte floats (x the group size
for allgather, reducescatter, alltoall). Ranks are numbered as the phase controller's job
layout (stage-major; tp, cp, ep, dp inside a stage, tp fastest).

Prints, besides the file: the controller job that serves the schedule (phase: pp, dims,
initial) and the reconfigurations per step on demand from that initial topology (the count of
ops whose topo_id gives the rail other circuits than the one before), also written as a
comment at the top of the file.

Options:
  -o, --output FILE   write the schedule to FILE and the summary to stdout (default: the
                      schedule to stdout, the summary to stderr)
  --check FILE        write nothing: exit 0 when FILE holds exactly what would be generated,
                      7 when it differs (a shipped schedule that is out of date)
  --json              the summary as one JSON object on stdout (schedule, ranks, ops_per_step,
                      job {pp, dims, initial}, reconfigurations: one count per step, warm-up
                      included); needs -o or --check; failures as a JSON object too
)";

}  // namespace

int run_schedule(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  std::string sub, config, output, check;
  bool json = false;
  auto option = [&](const std::string& a, const OptionValue& value) {
    if (a == "-o" || a == "--output") {
      output = value();
    } else if (a == "--check") {
      check = value();
    } else if (a == "--json") {
      json = true;
    } else {
      return false;
    }
    return true;
  };
  auto positional = [&](const std::string& a) {
    if (sub.empty()) {
      sub = a;
    } else if (config.empty()) {
      config = a;
    } else {
      throw UsageError("unexpected argument '" + a + "' (ocslab schedule --help)");
    }
  };
  if (!parse_args(args, "schedule", kScheduleHelp, out, option, positional)) return kExitOk;
  if (sub.empty()) throw UsageError("usage: ocslab schedule generate CONFIG.yaml [-o FILE] (ocslab schedule --help)");
  if (sub != "generate") throw unknown_word("schedule command", sub, {"generate"}, "ocslab schedule");
  if (config.empty()) throw UsageError("ocslab schedule generate: give the parallel configuration file");
  if (!output.empty() && !check.empty()) throw UsageError("-o and --check exclude each other");
  if (json && output.empty() && check.empty()) throw UsageError("--json needs -o FILE or --check FILE");
  workloads::GeneratedSchedule g = workloads::generate_schedule(workloads::load_generator_config(config));
  if (!check.empty()) {
    std::ifstream in(check, std::ios::binary);
    if (!in) throw BadValue("--check: cannot read '" + check + "'");
    std::stringstream have;
    have << in.rdbuf();
    if (have.str() != g.yaml) {
      err << "ocslab schedule generate: " << check << " differs from what " << config
          << " generates; regenerate it with -o " << check << "\n";
      return kExitMismatch;
    }
    if (json) {
      nlohmann::json j = summary_json(g);
      j["check"] = check;
      out << j.dump() << "\n";
    } else {
      out << check << " is up to date\n" << g.summary;
    }
    return kExitOk;
  }
  if (output.empty()) {
    out << g.yaml;
    err << g.summary;
    return kExitOk;
  }
  std::ofstream f(output, std::ios::binary | std::ios::trunc);
  f << g.yaml;
  f.close();
  if (!f) throw BadValue("-o: cannot write '" + output + "'");
  if (json) {
    nlohmann::json j = summary_json(g);
    j["output"] = output;
    out << j.dump() << "\n";
  } else {
    out << "wrote " << output << "\n" << g.summary;
  }
  return kExitOk;
}

}  // namespace ocslab::cli
