// Queue-pair settings through outages, under a job (issue 45 item 3): experiments/specs/
// job-survival-vlab.yaml on the shared phase lab. ocslab-collbench-verbs takes its queue pairs'
// timeout and retry count from NCCL_IB_TIMEOUT / NCCL_IB_RETRY_CNT, one run of the job per
// (setting, outage length); the outage is the emulator's dark spell on h3's receive fibre when
// step 3 starts. Asserted from job_survival.csv and each run's files: timeout 14 x 2 retries
// (134 ms by the arithmetic, 128 ms on Soft-RoCE) rides through 30 ms and errors through 600 ms
// with Soft-RoCE's "transport retry counter exceeded"; timeout 17 x 2 (1074 ms) rides through
// both; the summary finds no disagreement and the run has no problem (a job that errored through
// its outage is the measurement). Then the same job through a circuit-cut: the circuit into port
// 19 deleted through the switch's driver and made again 200 ms after, and the job rides through.
#include <catch2/catch.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "lab_fixture.h"
#include "ocslab/common/file.h"
#include "ocslab/common/process.h"
#include "ocslab/testing/quiet_background.h"
#include "ocslab/testing/sshd_fixture.h"

namespace job_survival_vlab_test {

using namespace vlab_test;
using Catch::Matchers::Contains;
using json = nlohmann::json;
namespace fs = std::filesystem;

namespace {

// The shipped spec with its lab and schedule named by absolute path, its sweep and faults
// replaced when asked, written into dir.
std::string spec_copy(const std::string& dir, const std::string& name, const std::string& sweep = {},
                      const std::string& faults = {}) {
  std::string text = read_file_or_empty(source_path("experiments/specs/job-survival-vlab.yaml"));
  auto swap = [&](const std::string& from, const std::string& to) {
    const auto at = text.find(from);
    REQUIRE(at != std::string::npos);
    text.replace(at, from.size(), to);
  };
  swap("../labs/phase-four.yaml", source_path("experiments/labs/phase-four.yaml"));
  swap("../workloads/schedules/dp-pairs-4.yaml", source_path("experiments/workloads/schedules/dp-pairs-4.yaml"));
  if (!sweep.empty()) swap("  env: {NCCL_IB_TIMEOUT: [14, 17], NCCL_IB_RETRY_CNT: [2]}\n  outage_ms: [30, 600]\n", sweep);
  if (!faults.empty()) swap("  - {kind: port-dark, port: 19, at_step: 3}\n", faults);
  const std::string path = dir + "/" + name + ".yaml";
  std::ofstream(path) << text;
  return path;
}

int run_spec(const std::string& spec, const std::string& out, const std::string& log) {
  SpawnOptions so;
  so.log_file = log;
  const pid_t runner = spawn_program({testing::bin_path("ocslab"), "run", spec, "-o", out, "--no-plot"}, so);
  int status = 0;
  REQUIRE(::waitpid(runner, &status, 0) == runner);
  std::cout << read_file_or_empty(log);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

std::map<std::string, std::map<std::string, std::string>> rows_by_run(const std::string& out) {
  std::map<std::string, std::map<std::string, std::string>> by;
  for (auto& r : read_csv_rows(out + "/job_survival.csv")) by[r["run"]] = r;
  return by;
}

}  // namespace

TEST_CASE("a job through outages: each queue-pair setting survives or errors as the timer arithmetic says",
          "[vlab][job-survival]") {
  Lab lab(kSharedPhase, std::chrono::seconds(120), Sharing::kShared);
  // The outages' lengths are far from each boundary (4.5x below, 1.8x above), but a guest
  // stalled by a build behind the tests could stretch the job's own timing (quiet_background.h).
  testing::QuietBackground quiet;
  RemovedAtEnd dir{fs::temp_directory_path().string() + "/ocslab-job-survival-" + std::to_string(::getpid())};
  fs::remove_all(dir.dir);
  fs::create_directories(dir.dir);

  SECTION("dark spells: two settings x 30 and 600 ms") {
    const std::string out = dir.dir + "/spells";
    CHECK(run_spec(spec_copy(dir.dir, "spells"), out, dir.dir + "/spells.log") == 0);
    auto by = rows_by_run(out);
    REQUIRE(by.size() == 4);
    const std::string t14 = "on-demand-timeout14.retry_cnt2-";
    const std::string t17 = "on-demand-timeout17.retry_cnt2-";
    CHECK(by[t14 + "out30ms-r1"]["outcome"] == "survived");
    auto& err = by[t14 + "out600ms-r1"];
    CHECK(err["outcome"] == "errored");
    CHECK(err["predicted_survive"] == "0");
    CHECK_THAT(err["failure"], Contains("transport retry counter exceeded"));
    // Soft-RoCE errors after (retry_cnt + 1) timer expiries, 3 x 64 ms; the runner sees the rank
    // end later still. It failed inside the outage's reach, not before it.
    REQUIRE_FALSE(err["error_after_ms"].empty());
    CHECK(std::stod(err["error_after_ms"]) >= 192);
    for (const char* len : {"out30ms-r1", "out600ms-r1"}) {
      auto& r = by[t17 + len];
      INFO(t17 + len);
      CHECK(r["outcome"] == "survived");
      CHECK(r["predicted_survive"] == "1");
      REQUIRE_FALSE(r["stall_ms"].empty());
      CHECK(std::stod(r["stall_ms"]) > 0);  // the op in flight waited for the light, then went on
    }
    // Every run's outage is in its own timeline: the fault's start and end rows.
    for (const auto& [run, row] : by) {
      size_t dark = 0;
      for (auto& t : read_csv_rows(out + "/" + run + "/timeline.csv"))
        dark += t["source"] == "fault" && t["subject"] == "port 19" && t["signal"] == "dark";
      CHECK(dark == 2);
    }
    const std::string summary = read_file_or_empty(out + "/summary.txt");
    INFO(summary);
    CHECK_THAT(summary, Contains("job survival 4 run(s) through outages of 30, 600 ms: 3 survived, 1 errored"));
    CHECK_THAT(summary, Contains("t14 r2: survives <= 30 ms, errors >= 600 ms; predicted 134.218 ms"));
    CHECK_THAT(summary, Contains("t17 r2: survives <= 600 ms, no errors; predicted 1073.742 ms"));
    CHECK_THAT(summary, Contains("disagreements: none"));
    CHECK(fs::exists(out + "/job_survival_matrix.csv"));
  }

  SECTION("a circuit cut through the switch's driver, made again 200 ms later") {
    const std::string out = dir.dir + "/cut";
    const std::string spec =
        spec_copy(dir.dir, "cut", "  env: {NCCL_IB_TIMEOUT: [17], NCCL_IB_RETRY_CNT: [2]}\n  outage_ms: [200]\n",
                  "  - {kind: circuit-cut, port: 19, at_step: 3}\n");
    CHECK(run_spec(spec, out, dir.dir + "/cut.log") == 0);
    auto by = rows_by_run(out);
    REQUIRE(by.size() == 1);
    auto& r = by.begin()->second;
    CHECK(r["outcome"] == "survived");
    // The outage ran from the deletion's acknowledgement to the remaking's: 200 ms and the
    // switch's switching time.
    REQUIRE_FALSE(r["dark_ms"].empty());
    CHECK(std::stod(r["dark_ms"]) >= 200);
    const json meta = json::parse(read_file_or_empty(out + "/meta.json"));
    const auto& fault = meta["modes"][0]["faults"][0];
    CHECK(fault["kind"] == "circuit-cut");
    CHECK(fault["released_ns"].get<int64_t>() > fault["held_ns"].get<int64_t>());
    CHECK_FALSE(fault.contains("not_remade"));
    size_t cut = 0;
    for (auto& t : read_csv_rows(out + "/" + by.begin()->first + "/timeline.csv"))
      cut += t["source"] == "fault" && t["subject"] == "port 19" && t["signal"] == "cut";
    CHECK(cut == 2);
  }
}

}  // namespace job_survival_vlab_test
