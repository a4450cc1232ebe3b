// Orchestrator policies over real components: the OCS emulator on loopback TL1 as the switch,
// the controller on real sockets and one shim per rank (a thread each). The emulator's own
// command record is the ground truth for how often the switch was reprogrammed.
//   safe-window: reconfigurations only in the phase table's long idle windows (counted), the
//                declined ops still complete, the declines are counted;
//   greedy:      a demand set larger than the ports gets the largest-first allocation on the
//                switch; an infeasible plan (masked port, locked stage) sends nothing.
#include <catch2/catch.hpp>

#include <fmt/format.h>

#include <mutex>
#include <thread>

#include "ocslab/phase/controller.h"
#include "ocslab/phase/policy.h"
#include "ocslab/phase/shim.h"
#include "ocslab/testing/phase_lab.h"

namespace policy_integration {

using namespace phase_test;
using namespace ocslab::phase;

// The emulator's TL1 commands with this verb since sample index `from` (ENT-PATCH: one connect
// command, i.e. one reprogramming that made circuits; DLT-PATCH: one that removed circuits).
size_t commands(const Lab& lab, const std::string& verb, size_t from) {
  size_t n = 0;
  auto all = lab.truth.samples();
  for (size_t i = from; i < all.size(); ++i) n += all[i].signal == "command" && all[i].subject == verb;
  return n;
}

// PP=1, DP=2, CP=2: ranks 0..3 on one stage, local = dp + 2*cp.
JobLayout one_stage() { return JobLayout{"sw", 1, {{"dp", 2}, {"cp", 2}}}; }

struct RankRun {
  std::vector<Decision> decisions;
  bool in_fallback = false;
};

// Every rank: `steps` steps of [its CP allgather (op 0), its DP allreduce (op 1)] under a shim.
std::vector<RankRun> run_steps(const JobLayout& L, int port, ShimMode mode, int steps,
                               std::vector<std::string>& errors) {
  std::vector<RankRun> out(static_cast<size_t>(L.ranks()));
  run_cp_dp_ranks(L, port, mode, 1, errors, [&](int r, Shim& shim, const std::string& cpg, const std::string& dpg) {
    std::vector<OpDescriptor> step = {{cpg, "allgather", 2 << 20, 0}, {dpg, "allreduce", 4 << 20, 1}};
    for (int s = 0; s < steps; ++s) {
      for (const auto& op : step) {
        auto d = shim.pre_communication(op);
        out[static_cast<size_t>(r)].decisions.push_back(d);
        // load-safe: models the collective; the checks compare decisions, not durations.
        std::this_thread::sleep_for(std::chrono::microseconds(300));  // kept: models the collective
        shim.post_communication(op);
      }
    }
    out[static_cast<size_t>(r)].in_fallback = shim.in_fallback();
    shim.close();
  });
  return out;
}

PhaseWindows windows(int64_t cp_idle_us, int64_t dp_idle_us) {
  PhaseWindows w;
  // The job's step: both CP groups' allgathers, then both DP groups' allreduces.
  w.ops = {{0, "cp0s0", "allgather", 2 << 20, cp_idle_us},
           {1, "cp1s0", "allgather", 2 << 20, cp_idle_us},
           {2, "dp0s0", "allreduce", 4 << 20, dp_idle_us},
           {3, "dp2s0", "allreduce", 4 << 20, dp_idle_us}};
  return w;
}

struct PolicyRun {
  size_t connects = 0;  // the emulator's ENT-PATCH commands during the run
  size_t declined = 0;  // Controller::declined()
  size_t declined_events = 0;
  std::vector<std::string> reconfigured_groups;  // group of every reconfig_start
  std::vector<RankRun> ranks;
  std::vector<std::string> errors;
  std::vector<ocs::Circuit> circuits;  // on the switch at the end
};

PolicyRun run_policy(Policy policy, const PhaseWindows& w, ShimMode mode, int steps) {
  Lab lab(phase_switch(1));
  const auto L = one_stage();
  auto rail = lab.rail(L, TopoId::parse("1", L));  // starts on the DP rings
  auto co = controller_options(L, {rail});
  co.policy = policy;
  co.windows = w;
  co.switch_time = std::chrono::microseconds(5000);  // declared: 5 ms
  const size_t mark = lab.mark();
  PolicyRun res;
  {
    Controller ctl(co);
    ctl.start();
    res.ranks = run_steps(L, ctl.port(), mode, steps, res.errors);
    ctl.stop();
    res.declined = ctl.declined();
    for (const auto& e : ctl.events()) {
      if (e.kind == ControllerEvent::Kind::kDeclined) ++res.declined_events;
      if (e.kind == ControllerEvent::Kind::kReconfigStart) res.reconfigured_groups.push_back(e.group);
    }
    CHECK(ctl.problems().empty());
  }
  res.connects = commands(lab, "ENT-PATCH", mark);
  res.circuits = lab.circuits();
  return res;
}

TEST_CASE("safe-window reconfigures only in long windows; declined ops still complete and are counted",
          "[phase][policy][integration]") {
  constexpr int kSteps = 4;
  const auto mode = GENERATE(ShimMode::kOnDemand, ShimMode::kProvisioning);
  INFO("mode " << (mode == ShimMode::kOnDemand ? "on-demand" : "provisioning"));

  // The CP ops have 40 ms before them, the DP ops 0.8 ms; the switch takes 5 ms.
  auto mixed = run_policy(Policy::kSafeWindow, windows(40000, 800), mode, kSteps);
  REQUIRE(mixed.errors.empty());
  // Ground truth: the switch made circuits once, for the first CP op (1 -> 2); the CP rings
  // then stay, every DP barrier (2 groups per step) is declined.
  CHECK(mixed.connects == 1);
  CHECK(mixed.reconfigured_groups.size() == 1);
  for (const auto& g : mixed.reconfigured_groups) CHECK(g.rfind("cp", 0) == 0);
  CHECK(mixed.declined == 2 * kSteps);
  CHECK(mixed.declined_events == 2 * kSteps);
  // The switch holds the CP rings (topo_id 2) at the end: ring 0 -> 2 -> 0 and 1 -> 3 -> 1.
  auto sorted = mixed.circuits;
  std::sort(sorted.begin(), sorted.end(), [](auto& a, auto& b) { return a.ingress < b.ingress; });
  CHECK(sorted == std::vector<ocs::Circuit>{{1, 67}, {2, 68}, {3, 65}, {4, 66}});
  for (const auto& rr : mixed.ranks) {
    REQUIRE(rr.decisions.size() == 2 * kSteps);  // every op ran
    CHECK_FALSE(rr.in_fallback);                 // a decline is per op, not the job's fallback
    for (size_t i = 0; i < rr.decisions.size(); ++i) {
      const auto& d = rr.decisions[i];
      if (i % 2 == 1) {  // DP: over the circuits as they are, said as fallback for the op
        CHECK(d.fallback);
        CHECK_FALSE(d.reconfigured);
      } else {
        CHECK_FALSE(d.fallback);
      }
    }
  }

  // Both windows long: every phase change reconfigures, as on-request does (2 per step).
  // Provisioning asks for one more step's first phase after the last op (docs): that CP change
  // may or may not reach the switch before the ranks close, so it is allowed once there.
  const size_t extra = mode == ShimMode::kProvisioning ? 1 : 0;
  auto longw = run_policy(Policy::kSafeWindow, windows(40000, 30000), mode, kSteps);
  REQUIRE(longw.errors.empty());
  CHECK(longw.connects >= 2 * kSteps);
  CHECK(longw.connects <= 2 * kSteps + extra);
  CHECK(longw.declined == 0);
  auto onreq = run_policy(Policy::kOnRequest, {}, mode, kSteps);
  REQUIRE(onreq.errors.empty());
  CHECK(onreq.connects >= 2 * kSteps);
  CHECK(onreq.connects <= 2 * kSteps + extra);
  CHECK(onreq.declined == 0);
}

// ---- greedy ----

// The switch's circuits, by ingress.
std::vector<ocs::Circuit> sorted_circuits(Lab& lab) {
  auto c = lab.circuits();
  std::sort(c.begin(), c.end(), [](auto& a, auto& b) { return a.ingress < b.ingress; });
  return c;
}

TEST_CASE("greedy: more demanded pairs than ports get the largest-first allocation; an infeasible plan sends nothing",
          "[phase][policy][integration]") {
  Lab lab(phase_switch(1));
  // PP=1, DP=4: ranks 0..3 on slots 1..4 (egress 65..68), wired as the DP ring 0->1->2->3->0.
  const JobLayout L{"g", 1, {{"dp", 4}}};
  auto rail = lab.rail(L, TopoId::parse("1", L));
  REQUIRE(sorted_circuits(lab) == std::vector<ocs::Circuit>{{1, 66}, {2, 67}, {3, 68}, {4, 65}});

  size_t mark = lab.mark();
  // Six demanded pairs, four transmitters and four receivers.
  auto rep = rail->allocate("g", {{0, 1, 100}, {0, 2, 500}, {3, 2, 300}, {1, 0, 50}, {2, 3, 400}, {1, 3, 200}});
  CHECK(rep.allocation.granted == std::vector<Demand>{{0, 2, 500}, {2, 3, 400}, {1, 0, 50}});
  CHECK(rep.allocation.dropped.size() == 3);
  // On the switch: 0->2 (1-67), 1->0 (2-65), 2->3 (3-68); rank 3 transmits nothing.
  CHECK(sorted_circuits(lab) == std::vector<ocs::Circuit>{{1, 67}, {2, 65}, {3, 68}});
  CHECK(commands(lab, "DLT-PATCH", mark) == 1);  // one disconnect, one connect: the whole plan
  CHECK(commands(lab, "ENT-PATCH", mark) == 1);
  CHECK_FALSE(rail->topology("g"));

  // Rank 3's transmit port fails with no spare slot: the job keeps what it has.
  CHECK_THROWS_AS(rail->mask_port(4), InfeasibleError);
  const auto before = sorted_circuits(lab);
  mark = lab.mark();
  // The largest demand needs the masked port: the whole plan is refused, nothing is sent.
  CHECK_THROWS_WITH(rail->allocate("g", {{3, 0, 900}, {0, 1, 100}, {1, 2, 50}}),
                    Catch::Contains("job g: the plan needs rank 3's port 4, which is masked; nothing was sent"));
  CHECK(sorted_circuits(lab) == before);
  CHECK(commands(lab, "ENT-PATCH", mark) == 0);
  CHECK(commands(lab, "DLT-PATCH", mark) == 0);
  CHECK(lab.ports_touched(mark).empty());
  // A rank outside the job is refused the same way.
  CHECK_THROWS_AS(rail->allocate("g", {{0, 7, 1}}), InfeasibleError);
  CHECK(sorted_circuits(lab) == before);
  CHECK(lab.ports_touched(mark).empty());
  // Without rank 3's transmitter the plan is feasible again.
  auto ok = rail->allocate("g", {{0, 1, 100}, {1, 2, 50}, {2, 0, 10}});
  CHECK(ok.allocation.dropped.empty());
  CHECK(sorted_circuits(lab) == std::vector<ocs::Circuit>{{1, 66}, {2, 67}, {3, 65}});
}

TEST_CASE(
    "greedy: a plan that changes a locked stage (G1/G2) is refused whole; the controller's greedy rails "
    "change topology through it",
    "[phase][policy][integration]") {
  Lab lab(phase_switch(1));
  // PP=2, DP=2: ranks 0,1 | 2,3 on slots 1..4, both stages on their DP rings ("11").
  const JobLayout L{"l", 2, {{"dp", 2}}};
  auto rail = lab.rail(L, TopoId::parse("11", L));
  const auto before = sorted_circuits(lab);
  REQUIRE(before == std::vector<ocs::Circuit>{{1, 66}, {2, 65}, {3, 68}, {4, 67}});
  size_t mark = lab.mark();
  // Stage 1 has an op in flight. 0->2 would take rank 2's receiver (stage 1): refused.
  CHECK_THROWS_WITH(rail->allocate("l", {{0, 2, 10}, {1, 0, 5}, {2, 3, 1}, {3, 2, 1}}, {1}),
                    Catch::Contains("job l: the plan changes rank") && Catch::Contains("on stage 1, which has an op in "
                                                                                       "flight or is under "
                                                                                       "reconfiguration (G1/G2)"));
  CHECK(sorted_circuits(lab) == before);
  CHECK(lab.ports_touched(mark).empty());
  // Dropping stage 0's 0->1 leaves stage 1 alone: allowed under the same lock.
  auto rep = rail->allocate("l", {{1, 0, 5}, {2, 3, 1}, {3, 2, 1}}, {1});
  CHECK(rep.reconfig.removed == std::vector<ocs::Circuit>{{1, 66}});
  CHECK(rep.reconfig.added.empty());
  CHECK(sorted_circuits(lab) == std::vector<ocs::Circuit>{{2, 65}, {3, 68}, {4, 67}});

  // The controller's greedy path: a topo_id as demands; all granted, so the job has it again.
  mark = lab.mark();
  auto topo = rail->allocate_topology("l", TopoId::parse("00", L));
  CHECK(topo.allocation.dropped.empty());
  REQUIRE(rail->topology("l"));
  CHECK(rail->topology("l")->str() == "00");
  CHECK(sorted_circuits(lab) == std::vector<ocs::Circuit>{{1, 67}, {2, 68}, {3, 65}, {4, 66}});
  CHECK(commands(lab, "ENT-PATCH", mark) == 1);
}

TEST_CASE("a controller under greedy serves a workload on loopback with on-request's reconfigurations",
          "[phase][policy][integration]") {
  Lab lab(phase_switch(1));
  const auto L = one_stage();
  auto rail = lab.rail(L, TopoId::parse("1", L));
  auto co = controller_options(L, {rail});
  co.policy = Policy::kGreedy;
  const size_t mark = lab.mark();
  std::vector<std::string> errors;
  {
    Controller ctl(co);
    ctl.start();
    auto ranks = run_steps(L, ctl.port(), ShimMode::kOnDemand, 2, errors);
    ctl.stop();
    REQUIRE(errors.empty());
    for (const auto& r : ranks) CHECK(r.decisions.size() == 4);
    CHECK_FALSE(ctl.in_fallback());
  }
  CHECK(commands(lab, "ENT-PATCH", mark) == 4);  // 1 -> 2 -> 1 per step, as on-request
}

}  // namespace policy_integration
