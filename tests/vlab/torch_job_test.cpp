// The example PyTorch training job (experiments/torch/examples/train_lm.py: DP=2 x PP=2, gloo)
// under phase control on the shared phase lab, started by `ocslab run` of the shipped spec
// experiments/specs/lm-torch-vlab.yaml: one rank per guest, each rank's inner gloo groups on its
// rail NIC (eth1) and connected only once the controller made the group's circuits, with every
// guest's carrier probe. Checked from the results folder: the losses are a plain gloo run's at
// every step in every mode (the data path is unharmed by reconfiguration), every reconfiguration
// the controller made has its breakdown rows and is one the emulated switch acknowledged, and on
// demand each step asks the controller exactly at the learned phase boundaries and pipeline
// transfers.
//
// Two cases: the shipped spec as it is (native, on demand and provisioning, 6 steps: about
// 6 minutes under TCG, hidden, `make torch-vlab`), and in CI the same spec on demand only with 4
// steps, the step learned after 3 (about 2 minutes).
#include <fmt/format.h>
#include <catch2/catch.hpp>

#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "lab_fixture.h"
#include "ocslab/common/clock.h"
#include "ocslab/common/file.h"

namespace fs = std::filesystem;
using namespace ocslab;
using Catch::Matchers::Contains;
using vlab_test::kSharedPhase;
using vlab_test::Lab;
using vlab_test::ocslab_cli;
using vlab_test::read_csv_rows;
using vlab_test::RemovedAtEnd;
using vlab_test::Sharing;
using vlab_test::source_path;

namespace torch_job_test {

// Rank 2's loss per step with the example's default arguments and seed, from a plain gloo run of
// the unmodified script on this machine (docs/workloads.md): every mode must print these.
const std::vector<std::string> kLosses = {"4.34536266", "4.22004604", "3.82249260",
                                          "3.63958597", "3.23414302", "3.03774190"};

// Replaces the one occurrence of `from` in text (REQUIREd).
void replace_once(std::string& text, const std::string& from, const std::string& to) {
  const auto at = text.find(from);
  INFO("spec text: " << from);
  REQUIRE(at != std::string::npos);
  REQUIRE(text.find(from, at + 1) == std::string::npos);
  text.replace(at, from.size(), to);
}

// Runs `spec` on the shared phase lab and checks what every torch run must show.
void run_and_check(const Lab& lab, const std::string& spec, const std::string& out,
                   const std::vector<std::string>& modes, int steps) {
  const auto t0 = std::chrono::steady_clock::now();
  const int64_t since_ns = realtime_ns();
  auto r = ocslab_cli({"run", spec, "-o", out});
  const double minutes = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / 60;
  std::cout << r.out << r.err;
  INFO(r.out << r.err);
  REQUIRE(r.status == 0);

  // The data path is gloo's over the rail: the same losses as a plain gloo run, in every mode.
  std::string losses;
  for (int s = 0; s < steps; ++s) losses += fmt::format("step {} loss {}\n", s, kLosses.at(static_cast<size_t>(s)));
  for (const auto& mode : modes) {
    for (int rank = 0; rank < 4; ++rank) {
      const std::string log = read_file_or_empty(fmt::format("{}/{}/rank{}.log", out, mode, rank));
      INFO(mode << " rank " << rank << ": " << log);
      CHECK_THAT(log, Contains("# exit status 0"));
      if (rank == 2) CHECK_THAT(log, Contains(losses));
    }
  }

  // Every reconfiguration the controller made has its breakdown rows (one per host x NIC), and
  // each is a connect the emulated switch acknowledged; a mode's placement adds one when the
  // switch was on another topology.
  auto meta = nlohmann::json::parse(read_file_or_empty(out + "/meta.json"));
  const int reconfigs = meta.at("reconfigurations").get<int>();
  std::set<std::string> iterations;
  std::map<std::string, int> statuses;
  for (const auto& row : read_csv_rows(out + "/breakdown.csv")) {
    iterations.insert(row.at("iteration"));
    ++statuses[row.at("status")];
  }
  int placements = 0;
  for (const auto& m : meta.at("modes")) placements += m.at("placement_circuits_added").get<int>() > 0 ? 1 : 0;
  const int emulator = lab.switch_acks_since(since_ns);
  std::string status_text;
  for (const auto& [s, n] : statuses) status_text += fmt::format(" {} {}", n, s);
  std::cout << fmt::format("torch job: {:.1f} min; {} reconfigurations by the controller, {} breakdown iterations "
                           "(rows:{}), the emulator acknowledged {} connects ({} placement(s))\n",
                           minutes, reconfigs, iterations.size(), status_text, emulator, placements);
  CHECK(reconfigs > 0);
  CHECK(static_cast<int>(iterations.size()) == reconfigs);
  CHECK(emulator == reconfigs + placements);

  // On demand, a step asks the controller at each learned phase boundary and pipeline transfer:
  // the rows of the job's learned phases.csv (each of this job's ops is a phase of its own: both
  // stages' all-reduces and 8 pipeline transfers). The reconfigurations mapped to the steps are
  // those the controller made for an op.
  const auto phases = read_csv_rows(out + "/on-demand/phases.csv");
  CHECK(phases.size() == 10);
  std::set<std::pair<std::string, std::string>> reconfigured_ops;
  for (const auto& e : read_csv_rows(out + "/on-demand/controller-events.csv"))
    if (e.at("kind") == "reconfig_start" && e.at("value") == "1") reconfigured_ops.insert({e.at("group"), e.at("seq")});
  int mapped = 0;
  std::map<std::string, int> rows_per_mode;
  for (const auto& row : read_csv_rows(out + "/phase-steps.csv")) {
    INFO(row.at("mode") << " step " << row.at("step"));
    ++rows_per_mode[row.at("mode")];
    CHECK(row.at("rows") == "20");
    if (row.at("mode") == "native") CHECK(row.at("barriers") == "0");
    if (row.at("mode") != "on-demand") continue;
    CHECK(std::stoul(row.at("barriers")) == phases.size());
    CHECK(std::stoi(row.at("reconfigurations")) >= 2);  // to the pipeline and back to the DP rings
    mapped += std::stoi(row.at("reconfigurations"));
  }
  CHECK(mapped == static_cast<int>(reconfigured_ops.size()));
  for (const auto& mode : modes) CHECK(rows_per_mode[mode] == steps);
  CHECK_THAT(read_file_or_empty(out + "/summary.txt"), Contains("Learned phase tables:"));
}

TEST_CASE("the example PyTorch job on the phase lab, on demand, over the rail NICs", "[vlab][torch-job]") {
  const std::string out = fs::temp_directory_path().string() + "/ocslab-torch-job-" + std::to_string(::getpid());
  fs::remove_all(out);
  Lab lab(kSharedPhase, std::chrono::seconds(120), Sharing::kShared);
  RemovedAtEnd cleanup{out};
  // The shipped spec, shortened: on demand only, 4 steps, the step learned after 3 repetitions
  // (so the last step runs on the learned table).
  std::string text = read_file_or_empty(source_path("experiments/specs/lm-torch-vlab.yaml"));
  replace_once(text, "vlab: ../labs/phase-four.yaml", "vlab: " + source_path("experiments/labs/phase-four.yaml"));
  replace_once(text, "script: ../torch/examples/train_lm.py",
               "script: " + source_path("experiments/torch/examples/train_lm.py"));
  replace_once(text, "args: [--steps, \"6\"]", "args: [--steps, \"4\"]\n  profile_steps: 3");
  replace_once(text, "modes: [native, on-demand, provisioning]", "modes: [on-demand]");
  replace_once(text, "native_group_if: {pp: lan0}", "");
  fs::create_directories(out);
  const std::string spec = out + "/lm-torch-ci.yaml";
  std::ofstream(spec) << text;
  run_and_check(lab, spec, out + "/results", {"on-demand"}, 4);
}

TEST_CASE("the example PyTorch job on the phase lab: native, on demand and provisioning", "[.torch-vlab]") {
  const std::string out = fs::temp_directory_path().string() + "/ocslab-torch-vlab-" + std::to_string(::getpid());
  fs::remove_all(out);
  Lab lab(kSharedPhase, std::chrono::seconds(120), Sharing::kShared);
  RemovedAtEnd cleanup{out};
  run_and_check(lab, source_path("experiments/specs/lm-torch-vlab.yaml"), out,
                {"native", "on-demand", "provisioning"}, 6);
  // Provisioning: once a rank's shim learned the step (after step 4), the next phase's
  // topology was asked for ahead, by the previous op's post hook.
  int provisioned = 0;
  for (const auto& e : read_csv_rows(out + "/provisioning/controller-events.csv"))
    provisioned += e.at("kind") == "request" && e.at("value") == "1";
  CHECK(provisioned > 0);
  std::cout << read_file_or_empty(out + "/summary.txt");
}

}  // namespace torch_job_test
