// The shim's switch from profiling to its learned phase table, over real components (the OCS
// emulator on loopback TL1, the controller on real sockets, one shim per rank in a thread):
// every op asks while the shim profiles; once profile_steps steps in a row were the same (a
// warm-up step that differs is left out) the learned table is the step, provisioning starts and
// only phase boundaries ask (O1). A stream that never repeats keeps asking, with a report.
#include <catch2/catch.hpp>

#include <fmt/format.h>

#include <mutex>
#include <thread>

#include "ocslab/phase/controller.h"
#include "ocslab/phase/phase_profiler.h"
#include "ocslab/phase/shim.h"
#include "ocslab/testing/phase_lab.h"

namespace shim_profiling_test {

using namespace phase_test;
using namespace ocslab::phase;

// PP=1, DP=2, CP=2: ranks 0..3 on one stage, local = dp + 2*cp.
JobLayout one_stage() { return JobLayout{"prof", 1, {{"dp", 2}, {"cp", 2}}}; }

struct RankRun {
  std::vector<Decision> decisions;
  std::vector<PhaseEntry> table;  // the shim's phase table at the end
  std::optional<LearnedPhases> learned;
  std::vector<std::string> reports;
  bool ready_sample = false;
  bool provisioning = false;
};

// Every rank runs `steps` steps of [its CP allgather, its DP allreduce twice (two buckets)];
// cp_bytes(step) gives the allgather's size in each step.
std::vector<RankRun> run_ranks(int port, int steps, const std::function<uint64_t(int)>& cp_bytes,
                               std::vector<std::string>& errors) {
  const auto L = one_stage();
  std::vector<RankRun> out(static_cast<size_t>(L.ranks()));
  run_cp_dp_ranks(L, port, ShimMode::kProvisioning, 3, errors,
                  [&](int r, Shim& shim, const std::string& cpg, const std::string& dpg) {
                    auto& run = out[static_cast<size_t>(r)];
                    for (int s = 0; s < steps; ++s) {
                      std::vector<OpDescriptor> step = {{cpg, "allgather", cp_bytes(s), 0},
                                                        {dpg, "allreduce", 4 << 20, 1},
                                                        {dpg, "allreduce", 4 << 20, 2}};
                      for (const auto& op : step) {
                        run.decisions.push_back(shim.pre_communication(op));
                        // load-safe: the time a collective would take; nothing asserts on it, the idle times
                        // it leaves are only recorded
                        std::this_thread::sleep_for(std::chrono::microseconds(300));
                        shim.post_communication(op);
                      }
                    }
                    run.table = shim.phase_table().ops;
                    if (shim.learned()) run.learned = *shim.learned();
                    run.reports = shim.reports();
                    for (const auto& smp : shim.samples())
                      run.ready_sample = run.ready_sample || smp.signal == "phase_table_ready";
                    run.provisioning = shim.provisioning_active();
                    shim.close();
                  });
  return out;
}

std::vector<RankRun> run_job(int steps, const std::function<uint64_t(int)>& cp_bytes) {
  Lab lab(phase_switch(1));
  const auto L = one_stage();
  auto rail = lab.rail(L, TopoId::parse("1", L));
  Controller ctl(controller_options(L, {rail}));
  ctl.start();
  std::vector<std::string> errors;
  auto ranks = run_ranks(ctl.port(), steps, cp_bytes, errors);
  ctl.stop();
  for (const auto& e : errors) FAIL_CHECK(e);
  CHECK(ctl.problems().empty());
  return ranks;
}

TEST_CASE("the shim switches to the learned table after profile_steps equal steps; then only boundaries ask",
          "[phase][profiler]") {
  // Step 0 is a warm-up whose allgather is larger; steps 1..3 are profiled; 4 and 5 run on the
  // learned table.
  auto ranks = run_job(6, [](int step) { return step == 0 ? uint64_t{8} << 20 : uint64_t{2} << 20; });
  for (size_t r = 0; r < ranks.size(); ++r) {
    INFO("rank " << r);
    const auto& run = ranks[r];
    REQUIRE(run.decisions.size() == 18);
    REQUIRE(run.learned);
    CHECK(run.ready_sample);
    CHECK(run.provisioning);
    CHECK(run.learned->warmup_ops == 3);
    CHECK(run.learned->steps == 3);
    CHECK(run.learned->table.ops == run.table);
    REQUIRE(run.table.size() == 3);
    CHECK(run.table[0] == PhaseEntry{0, fmt::format("cp{}s0", r % 2), "allgather", 2 << 20});
    CHECK(run.table[1].type == "allreduce");
    CHECK(run.table[1].group == run.table[2].group);
    CHECK(run.learned->boundaries == std::vector<int>{0, 1});
    // After three steps the warm-up kept the last three from agreeing: reported, then learned.
    REQUIRE(run.reports.size() == 2);
    CHECK_THAT(run.reports[0], Catch::Contains("no phase table after 3 profiled steps"));
    CHECK(run.reports[1] == fmt::format("rank {}: phase table learned after all, after 3 warm-up ops", r));
    CHECK(run.learned->requests() == std::vector<int>{0, 1});
    // Profiling (steps 0..3): every op asks when it starts.
    for (size_t i = 0; i < 12; ++i) {
      INFO("op " << i);
      CHECK(run.decisions[i].barrier);
      CHECK_FALSE(run.decisions[i].provisioned);
    }
    // Step 4 learns at its first op: the allreduce is provisioned by the allgather's post hook,
    // and the second allreduce is granted with the first (no round trip).
    CHECK(run.decisions[12].barrier);
    CHECK_FALSE(run.decisions[12].provisioned);
    CHECK(run.decisions[13].provisioned);
    CHECK_FALSE(run.decisions[14].barrier);
    // Step 5: both boundaries provisioned, the bucket granted: two round trips per step.
    CHECK(run.decisions[15].provisioned);
    CHECK(run.decisions[16].provisioned);
    CHECK_FALSE(run.decisions[17].barrier);
  }
}

TEST_CASE("a stream that never repeats keeps every op asking, and the shim reports it once", "[phase][profiler]") {
  auto ranks = run_job(5, [](int step) { return uint64_t(step + 1) << 20; });
  for (size_t r = 0; r < ranks.size(); ++r) {
    INFO("rank " << r);
    const auto& run = ranks[r];
    CHECK_FALSE(run.learned);
    CHECK_FALSE(run.ready_sample);
    CHECK_FALSE(run.provisioning);
    for (const auto& d : run.decisions) {
      CHECK(d.barrier);
      CHECK_FALSE(d.provisioned);
    }
    size_t warnings = 0;
    for (const auto& line : run.reports)
      warnings += line.find("no phase table after 3 profiled steps") != std::string::npos;
    CHECK(warnings == 1);
    CHECK_THAT(run.reports.front(), Catch::Contains("the op sequence does not repeat"));
  }
}

}  // namespace shim_profiling_test
