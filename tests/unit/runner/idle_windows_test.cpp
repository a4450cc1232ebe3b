// Idle windows between a group's communication phases (ocslab/runner/idle_windows.h) from
// hand-built op rows: the phase boundaries, the min-over-members rule, management ops, warm-up
// steps, hides_switch and the summary's fractions.
#include <catch2/catch.hpp>

#include <sstream>
#include <string>
#include <vector>

#include "ocslab/common/error.h"
#include "ocslab/common/file.h"
#include "ocslab/runner/idle_windows.h"
#include "ocslab/testing/sshd_fixture.h"

// This file's helpers in a namespace of its own: the unity build compiles it together with
// the other tests of its binary.
namespace idle_windows_test {

using namespace ocslab;
using namespace ocslab::runner;
using Catch::Matchers::Contains;

namespace {

// Three ranks: a = {0, 1}, b = {0, 2}, world = all. Per step: a, world, b, a. Rank 0 goes
// a -> b -> a, so a's two ops are two phases on it; on rank 1 (a, world, a) they are one phase
// (management ops do not split one); b runs once per step on ranks 0 and 2.
const std::string kSchedule =
    "name: windows\n"
    "ranks: 3\n"
    "steps: 2\n"
    "warmup: 1\n"
    "groups:\n"
    "  - {name: a, kind: dp, ranks: [0, 1]}\n"
    "  - {name: b, kind: tp, ranks: [0, 2]}\n"
    "  - {name: world, kind: world, ranks: [0, 1, 2]}\n"
    "step:\n"
    "  - {group: a, op: allreduce, bytes: 1KiB}\n"
    "  - {group: world, op: barrier}\n"
    "  - {group: b, op: allreduce, bytes: 1KiB}\n"
    "  - {group: a, op: allreduce, bytes: 1KiB}\n";

// Times in ms since the step's base (1000 ms per step).
workloads::OpRecord row(int rank, int step, int index, double wait_start, double start, double end,
                        bool reconfigured = false) {
  workloads::OpRecord r;
  r.rank = rank;
  r.step = step;
  r.warmup = step == 0;
  r.index = index;
  double base = 1000.0 * step;
  r.wait_start_ns = static_cast<int64_t>((base + wait_start) * 1e6);
  r.start_ns = static_cast<int64_t>((base + start) * 1e6);
  r.end_ns = static_cast<int64_t>((base + end) * 1e6);
  r.duration_ns = r.end_ns - r.start_ns;
  r.wait_ns = r.start_ns - r.wait_start_ns;
  r.reconfigured = reconfigured;
  return r;
}

// Steps 0 (warm-up), 1 and 2. Rank 1 enters op 3 at +30 ms (and waits in the pre hook for rank
// 0, which enters at +50); rank 2 enters b at +8, rank 0 at +10.
std::vector<workloads::OpRecord> rows() {
  std::vector<workloads::OpRecord> v;
  for (int st = 0; st <= 2; ++st) {
    // the warm-up step's a->a gap would be 1 ms on rank 1: it must not show
    double rank1_a3 = st == 0 ? 6 : 30;
    v.push_back(row(0, st, 0, 0, 1, 5));
    v.push_back(row(0, st, 1, 5, 5, 6));
    v.push_back(row(0, st, 2, 10, 12, 20, st == 2));
    v.push_back(row(0, st, 3, 50, 52, 60, st <= 1));  // warm-up: reconfigured, 2 ms: not counted
    v.push_back(row(1, st, 0, 0, 1, 5));
    v.push_back(row(1, st, 1, 5, 5, 6));
    v.push_back(row(1, st, 3, rank1_a3, 52, 60, st == 1));  // 22 ms in the pre hook
    v.push_back(row(2, st, 1, 5, 5, 6));
    v.push_back(row(2, st, 2, 8, 12, 20));
  }
  return v;
}

}  // namespace

TEST_CASE("idle windows: per group, the smallest member gap between two phases", "[runner][windows]") {
  auto s = workloads::parse_schedule(kSchedule, "windows.yaml");
  auto w = idle_windows(s, "provisioning", rows(), 100);
  REQUIRE(w.size() == 3);
  // a, step 1: op 0 -> op 3; rank 0's gap 50 - 5 = 45 ms, rank 1's 30 - 5 = 25 ms: the switch
  // can only move while neither uses a's circuits, so 25 ms (rank 1), though only rank 0 changed
  // phase in between.
  CHECK(w[0].mode == "provisioning");
  CHECK(w[0].group == "a");
  CHECK(w[0].from_step == 1);
  CHECK(w[0].from_op == 0);
  CHECK(w[0].step == 1);
  CHECK(w[0].to_op == 3);
  CHECK(w[0].rank == 1);
  CHECK(w[0].members == 2);
  CHECK(w[0].window_ms == Approx(25));
  CHECK_FALSE(w[0].hides_switch);
  // b, step 1 op 2 -> step 2 op 2, across the step boundary: rank 0 1010 - 20 = 990, rank 2 988.
  CHECK(w[1].group == "b");
  CHECK(w[1].from_step == 1);
  CHECK(w[1].from_op == 2);
  CHECK(w[1].step == 2);
  CHECK(w[1].to_op == 2);
  CHECK(w[1].rank == 2);
  CHECK(w[1].window_ms == Approx(988));
  CHECK(w[1].hides_switch);
  CHECK(w[2].group == "a");
  CHECK(w[2].step == 2);
  CHECK(w[2].window_ms == Approx(25));
  // a's op 3 -> next step's op 0 is one phase on both members; the warm-up step gives nothing;
  // the world group never reconfigures and has no windows.
  for (const auto& x : w) {
    CHECK(x.group != "world");
    CHECK(x.from_step >= 1);
    CHECK_FALSE((x.from_op == 3 && x.to_op == 0));
  }
}

TEST_CASE("idle windows: per rank, only the rank's own phase changes", "[runner][windows]") {
  auto s = workloads::parse_schedule(kSchedule, "windows.yaml");
  auto w = rank_idle_windows(s, "on-demand", rows(), 100);
  // rank 0: a 1:0 -> 1:3 (45), b 1:2 -> 2:2 (990), a 2:0 -> 2:3 (45); rank 1's world barrier
  // between its two a ops does not split the phase; rank 2 only ever runs b.
  REQUIRE(w.size() == 3);
  for (const auto& x : w) CHECK(x.rank == 0);
  CHECK(w[0].group == "a");
  CHECK(w[0].window_ms == Approx(45));
  CHECK(w[1].group == "b");
  CHECK(w[1].window_ms == Approx(990));
  CHECK(w[2].group == "a");
  CHECK(w[2].step == 2);
  CHECK(w[2].window_ms == Approx(45));
}

TEST_CASE("idle windows: hides_switch is strictly longer than the switching time", "[runner][windows]") {
  auto s = workloads::parse_schedule(kSchedule, "windows.yaml");
  auto w = idle_windows(s, "on-demand", rows(), 25);
  REQUIRE(w.size() == 3);
  CHECK_FALSE(w[0].hides_switch);  // 25 ms window, 25 ms switch
  w = idle_windows(s, "on-demand", rows(), 24.9);
  CHECK(w[0].hides_switch);
  CHECK(w[1].hides_switch);
  w = idle_windows(s, "on-demand", rows(), 1000);
  for (const auto& x : w) CHECK_FALSE(x.hides_switch);
}

TEST_CASE("idle windows: the summary's fractions and percentiles", "[runner][windows]") {
  auto s = workloads::parse_schedule(kSchedule, "windows.yaml");
  auto r = rows();
  auto w = idle_windows(s, "provisioning", r, 100);
  auto sum = summarize_windows("provisioning", 100, w, r);
  CHECK(sum.windows == 3);
  CHECK(sum.hiding == 1);
  CHECK(sum.hiding_fraction == Approx(1.0 / 3));
  CHECK(sum.p50_ms == Approx(25));
  CHECK(sum.p90_ms == Approx(25 + (988 - 25) * 0.8));  // numpy's linear interpolation
  // Measured reconfigured rows: rank 0 op 3 step 1 (2 ms pre hook), rank 1 op 3 step 1 (22 ms),
  // rank 0 op 2 step 2 (2 ms); the warm-up step's row is not counted. Threshold 10 ms.
  CHECK(sum.threshold_ms == Approx(10));
  CHECK(sum.reconfigured_ops == 3);
  CHECK(sum.hidden_reconfigs == 2);
  CHECK(sum.reconfig_hidden_fraction == Approx(2.0 / 3));
  // At 5 ms switching the threshold is its 1 ms floor: a 2 ms wait is no longer hidden.
  CHECK(hidden_threshold_ms(5) == Approx(1));
  CHECK(hidden_threshold_ms(400) == Approx(40));
  auto fast = summarize_windows("provisioning", 5, idle_windows(s, "provisioning", r, 5), r);
  CHECK(fast.hidden_reconfigs == 0);
  CHECK(fast.reconfig_hidden_fraction == 0);
  CHECK(fast.hiding_fraction == Approx(1));
  auto none = summarize_windows("x", 100, {}, {});
  CHECK(none.windows == 0);
  CHECK(none.hiding_fraction == 0);
  CHECK(none.p50_ms == 0);
  CHECK(none.reconfig_hidden_fraction == 0);

  std::ostringstream out;
  print_window_summary(out, {sum, fast});
  CHECK_THAT(out.str(), Contains("provisioning") && Contains("33%") && Contains("67%"));
  CHECK_THAT(out.str(), Contains("# provisioning: threshold 10.00 ms, 2 of 3 reconfigured op rows hidden"));
}

TEST_CASE("idle windows: windows.csv fields and a row of a foreign schedule", "[runner][windows]") {
  auto s = workloads::parse_schedule(kSchedule, "windows.yaml");
  auto w = idle_windows(s, "provisioning", rows(), 100);
  REQUIRE(!w.empty());
  auto f = window_csv_fields(w[0], 100);
  REQUIRE(f.size() == window_csv_columns().size());
  CHECK(window_csv_columns() == std::vector<std::string>{"mode", "group", "rank", "members", "from_step", "from_op",
                                                         "step", "to_op", "window_ms", "switching_ms", "hides_switch"});
  CHECK(f == std::vector<std::string>{"provisioning", "a", "1", "2", "1", "0", "1", "3", "25.000", "100.000", "0"});
  auto bad = rows();
  bad.push_back(row(0, 1, 9, 0, 1, 2));
  CHECK_THROWS_WITH(idle_windows(s, "x", bad, 100), Contains("windows.yaml") && Contains("op index 9"));
}

TEST_CASE("idle windows: windows.csv on disk", "[runner][windows]") {
  auto s = workloads::parse_schedule(kSchedule, "windows.yaml");
  auto w = idle_windows(s, "on-demand", rows(), 100);
  auto p = idle_windows(s, "provisioning", rows(), 100);
  w.insert(w.end(), p.begin(), p.end());
  testing::TempDir dir;
  write_windows_csv(dir.path() + "/windows.csv", w, 100);
  CHECK(read_file_or_empty(dir.path() + "/windows.csv") ==
        "mode,group,rank,members,from_step,from_op,step,to_op,window_ms,switching_ms,hides_switch\n"
        "on-demand,a,1,2,1,0,1,3,25.000,100.000,0\n"
        "on-demand,b,2,2,1,2,2,2,988.000,100.000,1\n"
        "on-demand,a,1,2,2,0,2,3,25.000,100.000,0\n"
        "provisioning,a,1,2,1,0,1,3,25.000,100.000,0\n"
        "provisioning,b,2,2,1,2,2,2,988.000,100.000,1\n"
        "provisioning,a,1,2,2,0,2,3,25.000,100.000,0\n");
  CHECK_THROWS_WITH(write_windows_csv(dir.path() + "/no/such/windows.csv", w, 100), Contains("no/such/windows.csv"));
}

TEST_CASE("idle windows: a sendrecv on a larger group is a pair group of its own", "[runner][windows]") {
  // p = {0, 1, 2}: 0 -> 1 and 1 -> 2 are the shim groups p:0-1 and p:1-2; rank 1 alternates
  // between them, so each pair's op is a phase of its own on rank 1, while ranks 0 and 2 only
  // ever run their one pair (their gaps, step to step, bound the windows).
  auto s = workloads::parse_schedule(
      "name: pairs\nranks: 3\nsteps: 2\ngroups:\n  - {name: p, kind: pp, ranks: [0, 1, 2]}\nstep:\n"
      "  - {group: p, op: sendrecv, bytes: 1KiB, src: 0, dst: 1}\n"
      "  - {group: p, op: sendrecv, bytes: 1KiB, src: 1, dst: 2}\n",
      "pairs.yaml");
  std::vector<workloads::OpRecord> v;
  for (int st = 1; st <= 2; ++st) {
    v.push_back(row(0, st, 0, 0, 1, 10));
    v.push_back(row(1, st, 0, 0, 1, 10));
    v.push_back(row(1, st, 1, 20, 21, 30));
    v.push_back(row(2, st, 1, 15, 21, 30));
  }
  auto w = idle_windows(s, "on-demand", v, 100);
  REQUIRE(w.size() == 2);
  // p:0-1: step 1 op 0 -> step 2 op 0: rank 0 1000 - 10 = 990, rank 1 the same: 990 (rank 0)
  CHECK(w[0].group == "p:0-1");
  CHECK(w[0].window_ms == Approx(990));
  CHECK(w[0].rank == 0);
  // p:1-2: rank 1 1020 - 30 = 990, rank 2 1015 - 30 = 985
  CHECK(w[1].group == "p:1-2");
  CHECK(w[1].window_ms == Approx(985));
  CHECK(w[1].rank == 2);
  CHECK(w[1].hides_switch);
}

}  // namespace idle_windows_test
