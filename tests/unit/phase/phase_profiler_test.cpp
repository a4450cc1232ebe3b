// The phase profiler (phase_profiler.h) on recorded op streams: each stream is a schedule run
// through the collbench step loop (run_steps) on one rank, the ops as the shim is told them
// (shim_descriptor), so the learned table is compared with what the shim builds from the
// schedule (declared_phase_table), not with a table typed here. No transport carries data: the
// profiler sees only which ops ran and when.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "ocslab/common/error.h"
#include "ocslab/phase/phase_profiler.h"
#include "ocslab/workloads/collbench.h"
#include "ocslab/workloads/schedule.h"
#include "ocslab/workloads/shim_hooks.h"
#include "ocslab/workloads/sweep.h"

namespace phase_profiler_test {

using namespace ocslab;
using namespace ocslab::phase;
using namespace ocslab::workloads;
using Catch::Matchers::Contains;

// The step loop needs a transport; the profiler does not look at the data (verification off).
struct NoTransport : Backend {
  void prepare(const Op&, uint64_t) override {}
  void run(const Op&) override {}
  uint64_t verify(const Op&, uint64_t) override { return 0; }
};

// What `rank` runs of the schedule's warm-up and measured steps, as the profiler is fed it;
// mark: the rank's first op of each step says so.
std::vector<ProfiledOp> recorded(const Schedule& s, int rank, bool mark) {
  NoTransport transport;
  PhaseHooks no_shim;
  std::vector<ProfiledOp> out;
  int step = -1;
  for (const auto& r : run_steps(s, rank, "test", transport, no_shim, false)) {
    out.push_back(profiled_op(s, r, mark && r.step != step));
    step = r.step;
  }
  return out;
}

Schedule repo_schedule(const std::string& name, int steps) {
  auto s = load_schedule(std::string(OCSLAB_TEST_SOURCE_DIR) + "/experiments/workloads/schedules/" + name);
  s.warmup = 0;
  s.steps = steps;
  return s;
}

// The job's step as the safe-window table lists it: every op of the schedule's step, with the
// shim's group names, a sendrecv as one op.
std::vector<PhaseEntry> job_step(const Schedule& s) {
  std::vector<PhaseEntry> out;
  for (const auto& op : s.step) {
    std::string type = op.type == OpType::kSendRecv ? "sendrecv" : std::string(op_name(op.type));
    out.push_back({static_cast<int>(out.size()), shim_group(s, op), type, op.bytes});
  }
  return out;
}

// One stage (PP=1), DP=2 x CP=2: two context-parallel allgathers, then the backward pass
// (modelled, 15 ms) and two bucketed data-parallel allreduces.
const char* kCpDp = R"(name: cp-dp-4
ranks: 4
steps: 5
groups:
  - {name: cp0s0, kind: cp, ranks: [0, 2]}
  - {name: cp1s0, kind: cp, ranks: [1, 3]}
  - {name: dp0s0, kind: dp, ranks: [0, 1]}
  - {name: dp2s0, kind: dp, ranks: [2, 3]}
step:
  - {group: cp0s0, op: allgather, bytes: 2MiB}
  - {group: cp1s0, op: allgather, bytes: 2MiB}
  - {group: cp0s0, op: allgather, bytes: 2MiB}
  - {group: cp1s0, op: allgather, bytes: 2MiB}
  - {group: dp0s0, op: allreduce, bytes: 4MiB, compute_ms: 15}
  - {group: dp2s0, op: allreduce, bytes: 4MiB, compute_ms: 15}
  - {group: dp0s0, op: allreduce, bytes: 4MiB}
  - {group: dp2s0, op: allreduce, bytes: 4MiB}
)";

TEST_CASE("DP x PP: the learned table of dp-pp-4-phase equals the declared one on every rank, marked or not",
          "[phase][profiler]") {
  const auto s = repo_schedule("dp-pp-4-phase.yaml", 5);
  std::vector<LearnedPhases> ranks;
  for (int rank = 0; rank < s.ranks; ++rank) {
    for (bool mark : {true, false}) {
      INFO("rank " << rank << (mark ? ", steps marked" : ", steps found by period"));
      auto r = learn_phases(recorded(s, rank, mark));
      REQUIRE(r.learned);
      CHECK(r.reason.empty());
      CHECK(r.learned->table.ops == declared_phase_table(s, rank).ops);
      CHECK(r.learned->steps == 5);
      CHECK(r.learned->warmup_ops == 0);
      CHECK(r.learned->marked == mark);
      if (mark) ranks.push_back(*r.learned);
    }
  }
  // Rank 0: forward send and backward recv on pp0, its stage's allreduce, three world ops.
  const auto& r0 = ranks[0];
  CHECK(r0.pipeline_sends == std::vector<int>{0, 1});
  CHECK(r0.boundaries == std::vector<int>{0, 2, 3});
  CHECK(r0.requests() == std::vector<int>{0, 1, 2, 3});
  REQUIRE(r0.phases.size() == 3);
  CHECK(r0.phases[0] == Phase{"pp0", OpKind::kPointToPoint, 0, 2, r0.idle_ns[0]});
  CHECK(r0.phases[2].group == "world");
  CHECK(r0.phases[2].count == 3);
  CHECK(r0.groups ==
        std::map<std::string, std::vector<int>>{{"pp0", {0, 2}}, {"dp-s0", {0, 1}}, {"world", {0, 1, 2, 3}}});
  // Rank 2 receives first: the same pipeline ops in the other direction.
  CHECK(ranks[2].table.ops[0].type == "recv");
  CHECK(ranks[2].pipeline_sends == std::vector<int>{0, 1});

  // The job's step from the four ranks: the schedule's step, op for op, in its order.
  const auto job = merge_ranks(ranks);
  CHECK(job.table.ops == job_step(s));
  CHECK(job.pipeline_sends == std::vector<int>{0, 1, 2, 3});
  // Every pipeline op asks; so do the two stages' allreduces and the first world op.
  CHECK(job.requests() == std::vector<int>{0, 1, 2, 3, 4, 5, 6});
}

TEST_CASE("CP x DP on one stage: two phases per rank, no pipeline sends, the backward compute measured before DP",
          "[phase][profiler]") {
  const auto s = parse_schedule(kCpDp, "cp-dp-4");
  std::vector<LearnedPhases> ranks;
  for (int rank = 0; rank < s.ranks; ++rank) {
    INFO("rank " << rank);
    auto r = learn_phases(recorded(s, rank, true));
    REQUIRE(r.learned);
    CHECK(r.learned->table.ops == declared_phase_table(s, rank).ops);
    CHECK(r.learned->pipeline_sends.empty());
    CHECK(r.learned->boundaries == std::vector<int>{0, 2});
    REQUIRE(r.learned->phases.size() == 2);
    CHECK(r.learned->phases[0].count == 2);
    CHECK(r.learned->phases[1].count == 2);
    CHECK(r.learned->phases[1].kind == OpKind::kCollective);
    // The modelled backward pass is spent before the first allreduce: at least 15 ms of idle.
    CHECK(r.learned->phases[1].idle_ns >= 15'000'000);
    CHECK(r.learned->idle_ns[2] >= 15'000'000);
    ranks.push_back(*r.learned);
  }
  CHECK(ranks[0].groups == std::map<std::string, std::vector<int>>{{"cp0s0", {0, 2}}, {"dp0s0", {0, 1}}});
  const auto job = merge_ranks(ranks);
  CHECK(job.table.ops == job_step(s));
  CHECK(job.boundaries == std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7});  // the job alternates groups
  CHECK(job.idle_ns[4] >= 15'000'000);
}

TEST_CASE("a warm-up that differs from the steady state: skipped, marked or found by period", "[phase][profiler]") {
  // The job's start: a parameter broadcast modelled as a world allreduce, then a barrier; then
  // the training steps.
  auto init = parse_schedule(R"(name: init
ranks: 4
groups: [{name: world, kind: world, ranks: [0, 1, 2, 3]}]
step:
  - {group: world, op: allreduce, bytes: 1MiB}
  - {group: world, op: barrier}
)",
                             "init");
  const auto s = repo_schedule("dp-pp-4-phase.yaml", 5);
  for (int rank : {0, 3}) {
    INFO("rank " << rank);
    auto marked = recorded(init, rank, true);
    for (auto& op : recorded(s, rank, true)) marked.push_back(op);
    auto m = learn_phases(marked);
    REQUIRE(m.learned);
    CHECK(m.learned->table.ops == declared_phase_table(s, rank).ops);
    CHECK(m.learned->warmup_ops == 2);
    CHECK(m.learned->steps == 5);

    // Unmarked, the repetition starts one op early: the warm-up's barrier is the step's last
    // op too, so the step found is the declared one turned by one op (docs/phase-control.md).
    auto unmarked = recorded(init, rank, false);
    for (auto& op : recorded(s, rank, false)) unmarked.push_back(op);
    auto u = learn_phases(unmarked);
    REQUIRE(u.learned);
    CHECK(u.learned->warmup_ops == 1);
    auto declared = declared_phase_table(s, rank).ops;
    std::rotate(declared.begin(), declared.end() - 1, declared.end());
    for (size_t i = 0; i < declared.size(); ++i) declared[i].index = static_cast<int>(i);
    CHECK(u.learned->table.ops == declared);
  }
  // A warm-up step whose op differs (the first step's allreduce carries more): marked steps
  // keep the later five.
  auto first = repo_schedule("dp-pp-4-phase.yaml", 1);
  for (auto& op : first.step) {
    if (op.type == OpType::kAllReduce) op.bytes *= 4;
  }
  auto stream = recorded(first, 1, true);
  for (auto& op : recorded(s, 1, true)) stream.push_back(op);
  auto r = learn_phases(stream);
  REQUIRE(r.learned);
  CHECK(r.learned->table.ops == declared_phase_table(s, 1).ops);
  CHECK(r.learned->warmup_ops == static_cast<int>(declared_phase_table(s, 1).ops.size()));
}

TEST_CASE("a stream that never repeats gives no table and says why", "[phase][profiler]") {
  // nccl-tests' size sweep, each step another range of sizes: no two steps alike.
  std::vector<ProfiledOp> marked, unmarked;
  for (uint64_t lo : {1ull << 10, 1ull << 14, 1ull << 18, 1ull << 22, 1ull << 12, 1ull << 16}) {
    SweepOptions w;
    w.min_bytes = lo;
    w.max_bytes = lo * 8;
    w.step_factor = 2;
    w.iters = 1;
    w.warmup_iters = 0;
    const auto s = sweep_schedule(w, 2);
    for (auto& op : recorded(s, 0, true)) marked.push_back(op);
    for (auto& op : recorded(s, 0, false)) unmarked.push_back(op);
  }
  auto m = learn_phases(marked);
  CHECK_FALSE(m.learned);
  CHECK_THAT(m.reason, Contains("the op sequence does not repeat: step 5 has world allreduce 4096 B at op 0 "
                                "where step 6 has world allreduce 65536 B; the last 1 step(s) agree, 5 needed"));
  auto u = learn_phases(unmarked);
  CHECK_FALSE(u.learned);
  CHECK(u.reason ==
        "the op sequence does not repeat: no step of at most 4096 op(s) occurs 5 times in a row in the "
        "24 op(s) profiled");
  // Too few steps yet is a reason too (the online case: the shim keeps asking meanwhile).
  const auto s = repo_schedule("dp-pp-4-phase.yaml", 4);
  auto short_run = learn_phases(recorded(s, 0, true));
  CHECK_FALSE(short_run.learned);
  CHECK(short_run.reason == "4 whole step(s) profiled, 5 needed");
  CHECK(learn_phases(recorded(s, 0, true), {.steps = 4}).learned);
  CHECK_THROWS_WITH(PhaseProfiler({.steps = 0}), "profiling steps 0: want at least 1");
}

TEST_CASE("online: a marked step closes at the next mark; the table is ready at the first op after the fifth step",
          "[phase][profiler]") {
  const auto s = repo_schedule("dp-pp-4-phase.yaml", 6);
  const auto stream = recorded(s, 0, true);
  const size_t per_step = declared_phase_table(s, 0).ops.size();
  PhaseProfiler p;
  for (size_t i = 0; i < stream.size(); ++i) {
    p.add(stream[i]);
    INFO("after op " << i);
    CHECK(p.result().learned.has_value() == (i >= 5 * per_step));
  }
}

TEST_CASE("a long stream that does not repeat is profiled in bounded memory and still learns later",
          "[phase][profiler]") {
  // dp-pp-4-phase for 40 steps, the first 30 with other sizes each step (a job whose shapes
  // change), then 10 alike.
  const auto s = repo_schedule("dp-pp-4-phase.yaml", 40);
  auto stream = recorded(s, 0, true);
  const size_t per_step = declared_phase_table(s, 0).ops.size();
  PhaseProfiler p;
  for (size_t i = 0; i < stream.size(); ++i) {
    if (i < 30 * per_step) stream[i].bytes += i / per_step + 1;
    p.add(stream[i]);
    if (i + 1 == 30 * per_step + 1) {  // the first op of step 31: step 30 closed
      auto r = p.result();
      CHECK_FALSE(r.learned);
      CHECK_THAT(r.reason, Contains("step 29 has pp0 send 65565 B at op 0 where step 30 has pp0 send 65566 B"));
    }
  }
  p.finish();
  CHECK(p.ops() == 40 * per_step);
  auto r = p.result();
  REQUIRE(r.learned);
  CHECK(r.learned->table.ops == declared_phase_table(s, 0).ops);
  // Only the newest steps are kept: older ones that repeated count as warm-up.
  CHECK(r.learned->steps >= 5);
  CHECK(r.learned->warmup_ops >= static_cast<int>(30 * per_step));
  CHECK(r.learned->warmup_ops + r.learned->steps * static_cast<int>(per_step) == static_cast<int>(40 * per_step));
}

TEST_CASE("merge_ranks refuses ranks that disagree on an op or on the order", "[phase][profiler]") {
  const auto s = repo_schedule("dp-pp-4-phase.yaml", 5);
  auto r0 = *learn_phases(recorded(s, 0, true)).learned;
  auto r2 = *learn_phases(recorded(s, 2, true)).learned;
  auto bad = r2;
  bad.table.ops[0].bytes = 1;
  CHECK_THROWS_WITH(merge_ranks({r0, bad}), "ranks 0 and 1 disagree on pp0 #1: sendrecv 65536 B against sendrecv 1 B");
  // Rank 2 running the world ops before its pipeline ops cannot be ordered with rank 0.
  auto swapped = r2;
  std::rotate(swapped.table.ops.begin(), swapped.table.ops.begin() + 3, swapped.table.ops.end());
  std::rotate(swapped.kinds.begin(), swapped.kinds.begin() + 3, swapped.kinds.end());
  CHECK_THROWS_WITH(merge_ranks({r0, swapped}), Contains("the ranks' steps order their ops inconsistently") &&
                                                    Contains("rank 0 next runs pp0 #1") &&
                                                    Contains("rank 1 next runs world #1"));
}

TEST_CASE("phases.csv from a learned table: the safe-window policy reads it back and decides on its idle times",
          "[phase][profiler][policy]") {
  const auto s = parse_schedule(kCpDp, "cp-dp-4");
  std::vector<LearnedPhases> ranks;
  for (int rank = 0; rank < s.ranks; ++rank) ranks.push_back(*learn_phases(recorded(s, rank, true)).learned);
  const auto job = merge_ranks(ranks);
  const auto dir = std::filesystem::temp_directory_path() / ("ocslab-profiler-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const auto path = (dir / "phases.csv").string();
  write_phases_csv(job, path);
  const auto loaded = PhaseWindows::load(path);
  const auto expected = job.windows();
  REQUIRE(loaded.ops.size() == expected.ops.size());
  for (size_t i = 0; i < loaded.ops.size(); ++i) {
    INFO("row " << i);
    CHECK(loaded.ops[i].index == expected.ops[i].index);
    CHECK(loaded.ops[i].group == expected.ops[i].group);
    CHECK(loaded.ops[i].type == expected.ops[i].type);
    CHECK(loaded.ops[i].bytes == expected.ops[i].bytes);
    CHECK(loaded.ops[i].idle_us == expected.ops[i].idle_us);
  }
  // A switch of 10 ms hides behind the 15 ms backward pass before each stage's first allreduce.
  using std::chrono::microseconds;
  CHECK(decide_safe_window(loaded, "dp0s0", 1, microseconds(10'000)).reconfigure);
  CHECK(decide_safe_window(loaded, "dp2s0", 1, microseconds(10'000)).reconfigure);
  // The second allreduce of a stage is the group's seq 2: whatever its measured window, the
  // decision is the one its row gives.
  const auto second = decide_safe_window(loaded, "dp0s0", 2, microseconds(10'000));
  CHECK(second.idle_us == loaded.ops[6].idle_us);
  CHECK(second.reconfigure == (loaded.ops[6].idle_us > 10'000));

  auto comma = job;
  comma.table.ops[0].group = "cp0,s0";
  CHECK_THROWS_WITH(write_phases_csv(comma, (dir / "x.csv").string()), Contains("'cp0,s0' cannot be a cell"));
  CHECK_FALSE(std::filesystem::exists(dir / "x.csv"));  // refused before the file is made
  std::filesystem::remove_all(dir);
}

}  // namespace phase_profiler_test
