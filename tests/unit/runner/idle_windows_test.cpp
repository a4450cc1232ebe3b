// Idle windows between a group's communication phases (ocslab/runner/idle_windows.h) from
// hand-built op rows: the phase boundaries, the min-over-members rule, management ops, warm-up
// steps, hides_switch and the summary's fractions.
#include <catch2/catch.hpp>

#include <fstream>
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
                                                         "step", "to_op", "window_ms", "switching_ms", "hides_switch",
                                                         "kind", "next_type", "next_bytes"});
  CHECK(f == std::vector<std::string>{"provisioning", "a", "1", "2", "1", "0", "1", "3", "25.000", "100.000", "0",
                                      "group", "", ""});
  // With the schedule: the op that ends the window, its type and bytes.
  f = window_csv_fields(w[0], 100, &s);
  CHECK(f == std::vector<std::string>{"provisioning", "a", "1", "2", "1", "0", "1", "3", "25.000", "100.000", "0",
                                      "group", "allreduce", "1024"});
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
        "mode,group,rank,members,from_step,from_op,step,to_op,window_ms,switching_ms,hides_switch,kind,next_type,"
        "next_bytes\n"
        "on-demand,a,1,2,1,0,1,3,25.000,100.000,0,group,,\n"
        "on-demand,b,2,2,1,2,2,2,988.000,100.000,1,group,,\n"
        "on-demand,a,1,2,2,0,2,3,25.000,100.000,0,group,,\n"
        "provisioning,a,1,2,1,0,1,3,25.000,100.000,0,group,,\n"
        "provisioning,b,2,2,1,2,2,2,988.000,100.000,1,group,,\n"
        "provisioning,a,1,2,2,0,2,3,25.000,100.000,0,group,,\n");
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

namespace idle_windows_test {

namespace {

// Four ranks, PP = 2 x DP = 2 (stage 0 = {0, 1}, stage 1 = {2, 3}): per step the pipeline pairs
// (pp0 = {0, 2}, pp1 = {1, 3}) send, then each stage's DP pair allreduces, then a management
// barrier. Phases: {pp0, pp1} (topology "00"), {dp-s0} ("10"), {dp-s1} ("11").
const std::string kPhaseSchedule =
    "name: phases\n"
    "ranks: 4\n"
    "steps: 2\n"
    "warmup: 1\n"
    "groups:\n"
    "  - {name: pp0, kind: pp, ranks: [0, 2]}\n"
    "  - {name: pp1, kind: pp, ranks: [1, 3]}\n"
    "  - {name: dp-s0, kind: dp, ranks: [0, 1]}\n"
    "  - {name: dp-s1, kind: dp, ranks: [2, 3]}\n"
    "  - {name: world, kind: world, ranks: [0, 1, 2, 3]}\n"
    "step:\n"
    "  - {group: pp0, op: sendrecv, bytes: 64KiB}\n"
    "  - {group: pp1, op: sendrecv, bytes: 64KiB}\n"
    "  - {group: dp-s0, op: allreduce, bytes: 256KiB}\n"
    "  - {group: dp-s1, op: allreduce, bytes: 256KiB}\n"
    "  - {group: world, op: barrier}\n";

const std::vector<bool> kStarts = {true, false, true, true, false};

// Steps 0 (warm-up), 1 and 2, the same times in each (ms from the step's base, 1000 x step).
std::vector<workloads::OpRecord> phase_rows() {
  std::vector<workloads::OpRecord> v;
  for (int st = 0; st <= 2; ++st) {
    v.push_back(row(0, st, 0, 0, 1, 10));  // pp0
    v.push_back(row(2, st, 0, 0, 1, 12));
    v.push_back(row(1, st, 1, 2, 3, 11));  // pp1
    v.push_back(row(3, st, 1, 2, 3, 14));
    v.push_back(row(0, st, 2, 20, 21, 30));  // dp-s0
    v.push_back(row(1, st, 2, 25, 26, 31));
    v.push_back(row(2, st, 3, 40, 41, 50));  // dp-s1
    v.push_back(row(3, st, 3, 45, 46, 52));
    for (int r = 0; r < 4; ++r) v.push_back(row(r, st, 4, 60, 61, 62));  // management: no phase
  }
  return v;
}

}  // namespace

TEST_CASE("phase-to-phase windows: the next phase's latest start minus this phase's latest end", "[runner][windows]") {
  auto s = workloads::parse_schedule(kPhaseSchedule, "phases.yaml");
  auto w = phase_windows(s, "on-demand", phase_rows(), kStarts, 100);
  // By hand: {pp0, pp1} ends at 14 (rank 3), dp-s0's ranks enter at 20 and 25: 11 ms (rank 1);
  // dp-s0 ends at 31, dp-s1's ranks enter at 40 and 45: 14 ms (rank 3); dp-s1 ends at 1052,
  // the next step's pipeline sends enter at 2000 (ranks 0, 2) and 2002 (ranks 1, 3): 950 ms.
  REQUIRE(w.size() == 5);
  CHECK(w[0].step == 1);
  CHECK(w[0].from_op == 1);
  CHECK(w[0].to_op == 2);
  CHECK(w[0].window_ms == Approx(11));
  CHECK(w[0].rank == 1);
  CHECK(w[0].members == 2);
  CHECK(w[0].next_group == "dp-s0");
  CHECK(w[0].next_type == "allreduce");
  CHECK(w[0].next_bytes == 262144);
  CHECK_FALSE(w[0].hides_switch);
  CHECK(w[1].window_ms == Approx(14));
  CHECK(w[1].rank == 3);
  CHECK(w[2].from_step == 1);
  CHECK(w[2].from_op == 3);
  CHECK(w[2].step == 2);
  CHECK(w[2].to_op == 0);
  CHECK(w[2].window_ms == Approx(950));
  CHECK(w[2].members == 4);  // both pipelines start the phase, each at its own first op
  CHECK(w[2].next_type == "sendrecv");
  CHECK(w[2].hides_switch);
  CHECK(w[3].window_ms == Approx(11));
  CHECK(w[4].window_ms == Approx(14));

  // OrchestrRL's slack per op type: allreduce 11, 14, 11, 14; sendrecv 950.
  auto slack = slack_per_type(w);
  REQUIRE(slack.size() == 2);
  CHECK(slack[0].type == "allreduce");
  CHECK(slack[0].windows == 4);
  CHECK(slack[0].min_ms == Approx(11));
  CHECK(slack[0].p50_ms == Approx(12.5));
  CHECK(slack[0].hiding == 0);
  CHECK(slack[1].type == "sendrecv");
  CHECK(slack[1].hiding == 1);

  auto f = window_csv_fields(w[2], 100);
  CHECK(f == std::vector<std::string>{"on-demand", "pp0", "1", "4", "1", "3", "2", "0", "950.000", "100.000", "1",
                                      "phase", "sendrecv", "65536"});
  std::ostringstream out;
  print_window_summary(out, {summarize_windows("on-demand", 100, {}, {})}, w);
  CHECK_THAT(out.str(), Contains("on-demand     allreduce           4      0%     11.00     12.50"));
  CHECK_THAT(out.str(), Contains("on-demand     sendrecv            1    100%    950.00    950.00"));

  // One topology for the whole step: no phase, no window.
  CHECK(phase_windows(s, "native", phase_rows(), {false, false, false, false, false}, 100).empty());
  CHECK_THROWS_WITH(phase_windows(s, "x", phase_rows(), {true}, 100), Contains("phase starts for 1 ops"));
}

}  // namespace idle_windows_test

namespace idle_windows_test {

TEST_CASE("the safe-window table from measured windows, and from a previous run's windows.csv", "[runner][windows]") {
  auto s = workloads::parse_schedule(kSchedule, "windows.yaml");
  // Windows ending at op 3 (group a): 25, 30 and 40 ms -> median 30 ms; at op 2 (b): 988 ms.
  std::vector<IdleWindow> w(4);
  w[0].to_op = 3, w[0].window_ms = 25;
  w[1].to_op = 3, w[1].window_ms = 40;
  w[2].to_op = 3, w[2].window_ms = 30;
  w[3].to_op = 2, w[3].window_ms = 988;
  auto t = windows_table(s, w);
  REQUIRE(t.ops.size() == 4);  // every op of the step, in order: find() counts a group's seq over them
  CHECK(t.ops[0].group == "a");
  CHECK(t.ops[0].idle_us == 0);  // no window ends there
  CHECK(t.ops[1].group == "world");
  CHECK(t.ops[2].idle_us == 988000);
  CHECK(t.ops[3].idle_us == 30000);
  CHECK(t.ops[3].type == "allreduce");
  CHECK(t.ops[3].bytes == 1024);
  CHECK_THROWS_WITH(windows_table(s, {}), Contains("no group window was measured"));

  // Written and read back as the policy reads a phase table.
  testing::TempDir dir;
  write_phase_table(dir.path() + "/phases.csv", t);
  auto back = phase::PhaseWindows::load(dir.path() + "/phases.csv");
  REQUIRE(back.ops.size() == 4);
  CHECK(back.ops[3].idle_us == 30000);

  // windows.csv: the native mode's group rows only (phase rows and other modes left out).
  std::ofstream(dir.path() + "/windows.csv")
      << "mode,group,rank,members,from_step,from_op,step,to_op,window_ms,switching_ms,hides_switch,kind,next_type,"
         "next_bytes\n"
         "on-demand,a,1,2,1,0,1,3,99.000,100.000,0,group,allreduce,1024\n"
         "native,a,1,2,1,0,1,3,20.000,100.000,0,group,allreduce,1024\n"
         "native,b,2,2,1,2,2,2,900.000,100.000,1,group,allreduce,1024\n"
         "native,b,2,2,1,3,2,0,5.000,100.000,0,phase,allreduce,1024\n";
  auto read = read_group_windows(dir.path() + "/windows.csv");
  REQUIRE(read.size() == 2);
  CHECK(read[0].mode == "native");
  CHECK(read[0].to_op == 3);
  CHECK(read[0].window_ms == 20);
  CHECK(windows_table(s, read).ops[2].idle_us == 900000);
  std::ofstream(dir.path() + "/bad.csv") << "mode,group,to_op,window_ms\nnative,a,x,3\n";
  CHECK_THROWS_WITH(read_group_windows(dir.path() + "/bad.csv"), Contains("bad.csv:2: to_op is not an op index: 'x'"));
  std::ofstream(dir.path() + "/other.csv") << "index,group,type,bytes,idle_us\n";
  CHECK_THROWS_WITH(read_group_windows(dir.path() + "/other.csv"), Contains("other.csv:1: no column 'mode'"));
}

}  // namespace idle_windows_test
