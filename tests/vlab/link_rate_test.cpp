// A link-rate sweep on the shared four-host lab (issue 43 item 3): a phase workload of two DP
// pairs (h1-h2 and h3-h4, the lab file's circuits) run natively at two link rates set on the
// emulator per sweep point (sweep.link_gbps). Asserted from the results folder: sweep.csv has one
// row per rate, the bandwidth the ranks measured is lower at the lower rate and does not exceed
// it, sweep.png is drawn, and the lab's own rate (no cap) is back after the run.
#include <catch2/catch.hpp>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "lab_fixture.h"
#include "ocslab/common/file.h"
#include "ocslab/testing/quiet_background.h"

namespace link_rate_vlab_test {

using namespace vlab_test;
namespace fs = std::filesystem;

namespace {

// Two pairs allreducing 256 KiB each step: at 2 Mbit/s a step takes about a second, at 20 Mbit/s
// (or the guests' own Soft-RoCE rate, about 1 MB/s under TCG, when that is lower) a fraction.
constexpr const char* kSchedule = R"(name: rate-pairs
ranks: 4
steps: 2
warmup: 1
groups:
  - {name: dp-s0, kind: dp, ranks: [0, 1]}
  - {name: dp-s1, kind: dp, ranks: [2, 3]}
step:
  - {group: dp-s0, op: allreduce, bytes: 256KiB}
  - {group: dp-s1, op: allreduce, bytes: 256KiB}
)";

// native: the rail wired once as "11" (the lab file's links), no controller. Soft-RoCE keeps up
// to 128 packets unacknowledged, about 0.6 s of queue at 2 Mbit/s: NCCL_IB_TIMEOUT 20 (4.3 s)
// instead of the default 67 ms keeps the queue pairs from retransmitting what is only delayed.
std::string spec_text(const std::string& dir) {
  return "type: phase-workload\nname: link-rate-vlab\nlab:\n  vlab: " + source_path(kSharedFour) +
         "\n  keep: true\n"
         "workload:\n  program: ocslab-collbench-verbs\n  schedule: " +
         dir +
         "/rate-pairs.yaml\n  modes: [native]\n"
         "  placement: [h1:eth1, h2:eth1, h3:eth1, h4:eth1]\n  pin_neighbours: true\n  timeout_s: 60\n"
         "phase: {job: rate, pp: 2, dims: [{name: dp, size: 2}], initial: '11'}\n"
         "sweep: {link_gbps: [0.002, 0.02], env: {NCCL_IB_TIMEOUT: [20]}}\n"
         "output: results\n";
}

}  // namespace

TEST_CASE("a link-rate sweep: the lower rate measures lower, and sweep.png is drawn", "[vlab][link-rate]") {
  Lab lab(kSharedFour, std::chrono::seconds(60), Sharing::kShared);
  // The bandwidths are compared with each other, but a guest stalled by a build behind the tests
  // could slow the uncapped-looking point below the capped one (quiet_background.h).
  testing::QuietBackground quiet;
  RemovedAtEnd dir{fs::temp_directory_path().string() + "/ocslab-link-rate-" + std::to_string(::getpid())};
  fs::remove_all(dir.dir);
  fs::create_directories(dir.dir);
  std::ofstream(dir.dir + "/rate-pairs.yaml") << kSchedule;
  std::ofstream(dir.dir + "/spec.yaml") << spec_text(dir.dir);
  const std::string out = dir.dir + "/out";

  const auto t0 = std::chrono::steady_clock::now();
  auto r = ocslab_cli({"run", dir.dir + "/spec.yaml", "-o", out});
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::cout << r.out << r.err << "link-rate: the sweep took " << seconds << " s\n";
  INFO(r.out << r.err);
  REQUIRE(r.status == 0);

  for (const char* f : {"sweep.csv", "sweep.png", "phase-steps.csv"}) {
    INFO(f);
    CHECK(fs::file_size(out + "/" + f) > 0);
  }
  std::map<double, double> algbw;  // link rate -> the ranks' measured bandwidth, Gbit/s
  for (auto& row : read_csv_rows(out + "/sweep.csv")) {
    INFO(row["mode"] << " " << row["link_gbps"] << ": " << row["algbw_gbps"] << " Gbit/s");
    CHECK(row["mode"] == "native");
    CHECK(std::stoi(row["steps"]) == 2);
    algbw[std::stod(row["link_gbps"])] = std::stod(row["algbw_gbps"]);
  }
  REQUIRE(algbw.size() == 2);
  std::cout << "link-rate: measured " << algbw[0.002] << " Gbit/s at a 0.002 cap, " << algbw[0.02]
            << " Gbit/s at 0.02\n";
  CHECK(algbw[0.002] > 0);
  CHECK(algbw[0.002] < algbw[0.02]);
  // An allreduce of two ranks moves its size each way: its bandwidth cannot beat the wire's.
  CHECK(algbw[0.002] <= 0.002 * 1.1);

  auto meta = nlohmann::json::parse(std::ifstream(out + "/meta.json"));
  CHECK(meta["sweep"]["link_gbps"] == nlohmann::json({0.002, 0.02}));
  CHECK(meta["modes"][0]["link_gbps"] == 0.002);
  // The runner put the lab's own rate back: the lab file has no cap.
  CHECK(vlab::lab_timing(lab.state().dir).link_gbps == 0);
}

}  // namespace link_rate_vlab_test
