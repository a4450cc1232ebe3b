// Modelled compute end to end: two ranks of collbench-tcp (the collbench driver over TCP on
// loopback, the same step loop as ocslab-collbench-verbs) run one schedule with 50 ms of
// per-step compute and 20 ms on one op, and the same schedule without; the ops-rank<R>.csv rows
// record the compute, the compute lies between the ops (not in their times), and each step
// grows by about the modelled 70 ms. The program's older --compute-ms keeps working.
#include <sys/wait.h>

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "ocslab/common/csv_reader.h"
#include "ocslab/common/file.h"
#include "ocslab/testing/shell_run.h"
#include "ocslab/testing/sshd_fixture.h"

using ocslab::testing::bin_path;
using ocslab::testing::TempDir;

// Named, not anonymous: the unity build puts this file in one unit with its neighbours.
namespace compute_it {

using Run = ocslab::testing::ShellRun;
using ocslab::testing::shell;

std::string slurp(const std::string& path) { return ocslab::read_file_or_empty(path); }

// One ops-rank<R>.csv row by column name (the file's own header).
using Row = std::map<std::string, std::string>;

std::vector<Row> read_ops(const std::string& path) {
  std::istringstream in(slurp(path));
  std::string line;
  std::vector<Row> rows;
  if (!std::getline(in, line)) return rows;
  auto header = ocslab::split_csv_line(line);
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    auto f = ocslab::split_csv_line(line);
    REQUIRE(f.size() == header.size());
    Row r;
    for (size_t i = 0; i < f.size(); ++i) r[header[i]] = f[i];
    rows.push_back(std::move(r));
  }
  return rows;
}

int64_t num(const Row& r, const std::string& col) {
  auto it = r.find(col);
  REQUIRE(it != r.end());
  return std::stoll(it->second);
}

const char* kSchedule = R"(name: compute
ranks: 2
steps: 5
warmup: 1
groups:
  - {name: dp, kind: dp, ranks: [0, 1]}
step:
  - {group: dp, op: allreduce, bytes: 4KiB}
  - {group: dp, op: allreduce, bytes: 4KiB}
)";

const char* kWithCompute = R"(name: compute
ranks: 2
steps: 5
warmup: 1
compute_ms: 50
groups:
  - {name: dp, kind: dp, ranks: [0, 1]}
step:
  - {group: dp, op: allreduce, bytes: 4KiB}
  - {group: dp, op: allreduce, bytes: 4KiB, compute_ms: 20}
)";

// Runs both ranks on the schedule text; returns each rank's rows.
std::vector<std::vector<Row>> run_ranks(const TempDir& dir, const std::string& name, const std::string& schedule,
                                        const std::string& extra = "") {
  const std::string path = dir.path() + "/" + name + ".yaml";
  std::ofstream(path) << schedule;
  const std::string out = dir.path() + "/" + name;
  const std::string rv = "--nranks 2 --rendezvous 127.0.0.1:" + std::to_string(ocslab::testing::free_loopback_port());
  const std::string args = " " + rv + " --schedule " + path + " --output " + out + " --timeout-s 60" + extra;
  const std::string bin = bin_path("collbench-tcp");
  Run r = shell("{ " + bin + " --rank 1" + args + " > " + out + "-rank1.txt 2>&1; echo $? > " + out +
                "-rank1.rc; } & " + bin + " --rank 0" + args + "; rc=$?; wait; exit $rc");
  INFO("rank 0:\n" << r.out << "\nrank 1:\n" << slurp(out + "-rank1.txt"));
  REQUIRE(r.rc == 0);
  REQUIRE(slurp(out + "-rank1.rc") == "0\n");
  std::vector<std::vector<Row>> ranks;
  for (int k = 0; k < 2; ++k) ranks.push_back(read_ops(out + "/ops-rank" + std::to_string(k) + ".csv"));
  return ranks;
}

// The runner's step time: end of the step's last op minus end of the previous step's last op,
// for every measured step (the warm-up step gives the first one its start).
std::vector<int64_t> step_ns(const std::vector<Row>& rows) {
  std::map<int64_t, int64_t> last_end;
  for (const auto& r : rows) {
    int64_t& e = last_end[num(r, "step")];
    e = std::max(e, num(r, "end_ns"));
  }
  std::vector<int64_t> out;
  for (auto it = std::next(last_end.begin()); it != last_end.end(); ++it) {
    out.push_back(it->second - std::prev(it)->second);
  }
  return out;
}

TEST_CASE("collbench-tcp spends and records the schedule's compute: 50 ms per step and 20 ms on one op",
          "[workloads][compute]") {
  TempDir dir;
  auto plain = run_ranks(dir, "plain", kSchedule);
  auto computed = run_ranks(dir, "compute", kWithCompute);
  constexpr int64_t kStepMs = 50, kOpMs = 20, kModelled = (kStepMs + kOpMs) * 1'000'000;
  for (int rank = 0; rank < 2; ++rank) {
    INFO("rank " << rank);
    const auto& rows = computed[static_cast<size_t>(rank)];
    REQUIRE(rows.size() == 12);  // 2 ops x (5 + 1 warm-up) steps
    for (size_t i = 0; i < rows.size(); ++i) {
      const Row& r = rows[i];
      INFO("step " << r.at("step") << " op " << r.at("op_index"));
      CHECK(r.at("wrong") == "0");
      if (r.at("op_index") == "0") {
        // The step's compute, spent before the first op and recorded on its row.
        CHECK(num(r, "step_compute_ns") >= kStepMs * 1'000'000);
        CHECK(num(r, "compute_ns") == 0);
      } else {
        CHECK(num(r, "step_compute_ns") == 0);
        CHECK(num(r, "compute_ns") >= kOpMs * 1'000'000);
      }
      // The compute lies between the previous op's end and this op's start (before the wait):
      // the op's own time is communication only.
      if (i > 0) {
        CHECK(num(r, "wait_start_ns") - num(rows[i - 1], "end_ns") >= num(r, "compute_ns") + num(r, "step_compute_ns"));
        CHECK(num(r, "start_ns") >= num(r, "wait_start_ns"));
      }
    }
    for (const auto& r : plain[static_cast<size_t>(rank)]) {
      CHECK(num(r, "compute_ns") == 0);
      CHECK(num(r, "step_compute_ns") == 0);
    }
    // Every step holds the compute, and the fastest step grew by at least 0.9 x the modelled
    // 70 ms. Fastest against fastest: on a loaded machine the scheduler adds milliseconds to
    // some plain steps (a median of 4 ms was seen once, against 0.1 ms usually), while the
    // compute hides the same noise, so a typical-step difference could fall short of the model
    // although every compute was spent in full.
    auto with = step_ns(rows), without = step_ns(plain[static_cast<size_t>(rank)]);
    REQUIRE(with.size() == 5);
    REQUIRE(without.size() == 5);
    for (int64_t s : with) CHECK(s >= kModelled);
    int64_t fastest_with = *std::min_element(with.begin(), with.end());
    int64_t fastest_without = *std::min_element(without.begin(), without.end());
    int64_t grew = fastest_with - fastest_without;
    std::printf("rank %d: fastest step %.3f ms with compute, %.3f ms without: %.3f ms more (modelled %lld ms)\n", rank,
                static_cast<double>(fastest_with) / 1e6, static_cast<double>(fastest_without) / 1e6,
                static_cast<double>(grew) / 1e6, static_cast<long long>(kModelled / 1'000'000));
    CHECK(grew >= kModelled * 9 / 10);
  }
}

TEST_CASE("collbench-tcp's --compute-ms still sleeps before every collective, unrecorded", "[workloads][compute]") {
  TempDir dir;
  auto slept = run_ranks(dir, "slept", kSchedule, " --compute-ms 15");
  for (int rank = 0; rank < 2; ++rank) {
    INFO("rank " << rank);
    REQUIRE(slept[static_cast<size_t>(rank)].size() == 12);
    for (const auto& r : slept[static_cast<size_t>(rank)]) {
      CHECK(num(r, "compute_ns") == 0);
      CHECK(num(r, "step_compute_ns") == 0);
      CHECK(r.at("wrong") == "0");
    }
    // Two ops per step, 15 ms before each, one after the other on this rank: every step holds
    // both. (Not a difference against a run without: the sleeps also absorb the ranks' skew,
    // which a few-ms baseline on a loaded machine is made of.)
    auto steps = step_ns(slept[static_cast<size_t>(rank)]);
    REQUIRE(steps.size() == 5);
    for (int64_t st : steps) CHECK(st >= 30'000'000);
  }
}

}  // namespace compute_it
