// ocslab-collbench-verbs: runs a collective schedule (docs/workloads.md) over ibverbs RC in
// host memory, one process per rank, and prints an nccl-tests-like table on rank 0.
#include <fmt/format.h>

#include <iostream>
#include <memory>

#include "ocslab/common/error.h"
#include "ocslab/workloads/collbench.h"
#include "ocslab/workloads/shim_hooks.h"
#include "verbs_backend.h"

namespace po = boost::program_options;
using namespace ocslab;
using namespace ocslab::workloads;

namespace {

constexpr const char* kUsage =
    R"(usage: ocslab-collbench-verbs --schedule FILE --rank R (--ranks H0,H1,... | --rendezvous HOST:PORT) --if IFACE [options]

Runs every collective of the schedule's step (ring allreduce / allgather / reducescatter,
send/recv, barrier; float32 sum) over ibverbs RC queue pairs on the RoCE device of IFACE,
one process per rank. Rank 0 listens for the TCP bootstrap; the others connect to it.
Every result is checked against the exact expected values. Rank 0 prints a table like
nccl-tests'; with --output each rank writes ops-rank<R>.csv and timeline-rank<R>.csv.

Example (two hosts, rank 0 on h1):
  h1$ ocslab-collbench-verbs -s dp-pp.yaml --ranks h1,h2 --rank 0 --if eth1 -o out
  h2$ ocslab-collbench-verbs -s dp-pp.yaml --ranks h1,h2 --rank 1 --if eth1 -o out

With --controller HOST:PORT --job NAME the phase shim asks the job's phase controller
(`ocslab controller`) to wire the fabric for each op's group before it runs
(--phase-mode on-demand) or ahead of it (--phase-mode provisioning); see docs/workloads.md.

Exit status: 0 all results exact; 1 some result wrong; 2 bad input or a transport failure.

)";

}  // namespace

int main(int argc, char** argv) {
  po::options_description desc("options");
  add_common_options(desc);
  add_phase_options(desc);
  desc.add_options()("if", po::value<std::string>(),
                     "network interface of the RoCE port (selects the RDMA device and its RoCE v2 GID)")(
      "group-if", po::value<std::vector<std::string>>()->composing(),
      "GROUP=IFACE: run that group's ops on another interface (repeatable; same on every rank)")(
      "ib-port", po::value<int>()->default_value(1), "port of the RDMA device")(
      "qp-timeout", po::value<int>()->default_value(14), "RC local ACK timeout exponent: 4.096 us x 2^N (0..31)")(
      "qp-retry", po::value<int>()->default_value(7), "RC retry count (0..7)")(
      "max-msg", po::value<std::string>(),
      "split transfers into SENDs of at most this size (e.g. 64KiB; default: the "
      "device's limit, at most 1GiB)")("help,h", "this help");
  po::variables_map vm;
  try {
    po::store(po::parse_command_line(argc, argv, desc), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    std::cerr << "ocslab-collbench-verbs: " << e.what() << "\n\n" << kUsage << desc;
    return 2;
  }
  if (vm.count("help")) {
    std::cout << kUsage << desc;
    return 0;
  }
  try {
    CommonOptions o = common_options(vm);
    Schedule s = load_schedule(o.schedule_path);
    if (o.steps >= 1) s.steps = o.steps;
    if (o.warmup >= 0) s.warmup = o.warmup;
    if (o.nranks < 0) o.nranks = s.ranks;
    if (o.nranks != s.ranks) {
      throw Error(fmt::format("{}: the schedule has {} ranks, this job {} (--nranks/--ranks/launcher)", s.origin,
                              s.ranks, o.nranks));
    }
    if (o.rank >= o.nranks) throw Error(fmt::format("--rank {} is outside 0..{}", o.rank, o.nranks - 1));
    if (o.rendezvous.empty() && o.nranks > 1) throw Error("missing --ranks or --rendezvous HOST:PORT");
    // Flag errors before anything starts; the shim joins after the rendezvous (every rank is up).
    auto phase = phase_options(vm, o.rank, o.nranks, o.host, o.timeout);
    if (!vm.count("if")) throw Error("missing --if IFACE (the network interface of the RoCE port)");
    VerbsOptions vo;
    vo.interface = vm["if"].as<std::string>();
    if (vm.count("group-if")) {
      for (const auto& gi : vm["group-if"].as<std::vector<std::string>>()) {
        auto eq = gi.find('=');
        if (eq == std::string::npos || eq == 0 || eq + 1 == gi.size()) {
          throw Error("--group-if '" + gi + "': want GROUP=IFACE");
        }
        vo.group_iface[gi.substr(0, eq)] = gi.substr(eq + 1);
      }
    }
    vo.port = vm["ib-port"].as<int>();
    int t = vm["qp-timeout"].as<int>(), r = vm["qp-retry"].as<int>();
    if (t < 0 || t > 31) throw Error("--qp-timeout must be 0..31");
    if (r < 0 || r > 7) throw Error("--qp-retry must be 0..7");
    vo.timeout = static_cast<uint8_t>(t);
    vo.retry_cnt = static_cast<uint8_t>(r);
    vo.op_timeout = o.timeout;
    if (vm.count("max-msg")) {
      vo.max_msg_bytes = parse_bytes(vm["max-msg"].as<std::string>());
      if (vo.max_msg_bytes < 4) throw Error("--max-msg must be at least 4 bytes");
    }

    Rendezvous rv(o.rank, o.nranks, o.rendezvous.empty() ? "localhost:1" : o.rendezvous, rendezvous_tag(s, "verbs"),
                  o.timeout);
    // Without --controller the fabric is never reconfigured (no-op hooks). A refused join
    // (group size disagreement, unknown dimension) throws PhaseError naming rank and group: exit 2.
    std::unique_ptr<PhaseHooks> hooks =
        phase ? std::make_unique<ShimHooks>(s, o.rank, *phase) : std::make_unique<PhaseHooks>();
    VerbsBackend backend(s, o.rank, vo, rv);
    std::cerr << fmt::format("rank {} on {}: {}\n", o.rank, o.host, backend.describe());
    int rc = run_and_report(s, o, "verbs", backend, *hooks, rv);
    // The shim's own record (requests, ACK waits, provisioning, fallbacks) next to the rows.
    if (auto* sh = dynamic_cast<ShimHooks*>(hooks.get()); sh && !o.output.empty()) {
      sh->shim().write_csv(fmt::format("{}/shim-rank{}.csv", o.output, o.rank));
      if (sh->shim().provisioning_active()) {
        sh->shim().phase_table().save(fmt::format("{}/phase-table-rank{}.csv", o.output, o.rank));
      }
    }
    return rc;
  } catch (const Error& e) {
    std::cerr << "ocslab-collbench-verbs: " << e.what() << "\n";
    return 2;
  }
}
