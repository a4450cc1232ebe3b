// The per-rail orchestrator against the project's OCS emulator over real TCP (TL1): only the
// ports of changed sub-mappings are touched (checked in the emulator's ground truth), jobs
// sharing a switch never touch each other's ports, the allow-list holds, failed ports are
// masked by moving the rank to a spare slot or reported infeasible.
#include <catch2/catch.hpp>

#include <algorithm>

#include "ocslab/ocsctl/errors.h"
#include "ocslab/phase/orchestrator.h"
#include "ocslab/testing/phase_lab.h"

using namespace phase_test;
using namespace ocslab::phase;
using ocslab::ocs::Circuit;

namespace {

JobLayout fig8(const std::string& name = "fig8") { return JobLayout{name, 3, {{"dp", 2}, {"cp", 2}}}; }

std::set<int> ports_of(const std::vector<Slot>& slots, const std::vector<int>& ranks) {
  std::set<int> out;
  for (int r : ranks) {
    out.insert(slots[static_cast<size_t>(r)].ingress);
    out.insert(slots[static_cast<size_t>(r)].egress);
  }
  return out;
}

std::vector<Circuit> sorted(std::vector<Circuit> v) {
  std::sort(v.begin(), v.end());
  return v;
}

// fig8 on slots(1, 16): rank r sits on slot {r + 1, 65 + r}, so the edge src -> dst is the
// circuit {src + 1, 65 + dst}. Written out by hand from the topology rules (digit 1: DP rings
// local 0<->1, 2<->3; digit 2: CP rings 0<->2, 1<->3; digit 0: same local index in the next
// stage also in PP, cyclically), independently of the orchestrator's own composition.
const std::vector<Circuit> kFig8Stage0Dp = {{1, 66}, {2, 65}, {3, 68}, {4, 67}};
const std::vector<Circuit> kFig8Stage1Dp = {{5, 70}, {6, 69}, {7, 72}, {8, 71}};
const std::vector<Circuit> kFig8Stage2Dp = {{9, 74}, {10, 73}, {11, 76}, {12, 75}};

std::vector<Circuit> concat(std::initializer_list<std::vector<Circuit>> parts) {
  std::vector<Circuit> out;
  for (const auto& p : parts) out.insert(out.end(), p.begin(), p.end());
  return sorted(out);
}

}  // namespace

TEST_CASE("orchestrator wires a job and reprograms only the changed stages' ports", "[phase][orchestrator]") {
  Lab lab;
  Orchestrator orch("rail0", lab.slots(1, 16), lab.driver());
  auto layout = fig8();
  auto placed = orch.add_job(layout, TopoId::parse("111", layout));
  CHECK(placed.added.size() == 12);
  auto slots = orch.slots_of("fig8");
  REQUIRE(slots.size() == 12);
  CHECK(slots[0] == Slot{1, 65});
  CHECK(slots[11] == Slot{12, 76});
  const auto wired_111 = concat({kFig8Stage0Dp, kFig8Stage1Dp, kFig8Stage2Dp});
  CHECK(sorted(lab.circuits()) == wired_111);
  CHECK(sorted(orch.circuits_of("fig8")) == wired_111);

  // Symmetric shift on stage 1: only ranks 4..7's ports move.
  size_t mark = lab.mark();
  auto r = orch.set_topology("fig8", TopoId::parse("121", layout));
  CHECK(r.stages == std::vector<int>{1});
  CHECK(r.removed.size() == 4);
  CHECK(r.added.size() == 4);
  CHECK(r.total_ms > 0);
  CHECK_FALSE(r.calls.empty());
  auto touched = lab.ports_touched(mark);
  CHECK_FALSE(touched.empty());
  auto stage1 = ports_of(slots, {4, 5, 6, 7});
  for (int p : touched) CHECK(stage1.count(p) == 1);
  CHECK(touched == stage1);  // every stage-1 port carries a new circuit
  CHECK(std::set<int>(r.ports_touched.begin(), r.ports_touched.end()) == stage1);
  // Stage 1 in CP rings (4<->6, 5<->7); stages 0 and 2 as before.
  const auto wired_121 = concat({kFig8Stage0Dp, {{5, 71}, {6, 72}, {7, 69}, {8, 70}}, kFig8Stage2Dp});
  CHECK(sorted(lab.circuits()) == wired_121);
  CHECK(sorted(orch.circuits_of("fig8")) == wired_121);

  // Asymmetric shift: stages 1 and 2 into PP; stage 0's ports stay untouched.
  mark = lab.mark();
  r = orch.set_topology("fig8", TopoId::parse("100", layout));
  CHECK(r.stages == std::vector<int>{1, 2});
  auto stage0 = ports_of(slots, {0, 1, 2, 3});
  touched = lab.ports_touched(mark);
  REQUIRE_FALSE(touched.empty());
  for (int p : touched) CHECK(stage0.count(p) == 0);
  CHECK(touched == ports_of(slots, {4, 5, 6, 7, 8, 9, 10, 11}));
  // Stages 1 and 2 form a two-stage PP ring (4+l <-> 8+l); stage 0 keeps its DP rings.
  CHECK(sorted(lab.circuits()) ==
        concat({kFig8Stage0Dp, {{5, 73}, {6, 74}, {7, 75}, {8, 76}}, {{9, 69}, {10, 70}, {11, 71}, {12, 72}}}));
  // Stage 0 joins: stage 2's successor moves although its digit does not; stage 1 stays.
  mark = lab.mark();
  r = orch.set_topology("fig8", TopoId::parse("000", layout));
  CHECK(r.stages == std::vector<int>{0, 2});
  auto stage1_in = std::set<int>{slots[4].ingress, slots[5].ingress, slots[6].ingress, slots[7].ingress};
  touched = lab.ports_touched(mark);
  REQUIRE_FALSE(touched.empty());
  for (int p : touched) CHECK(stage1_in.count(p) == 0);
  // Stage 0's and stage 2's transmit ports, and the receive ports of their new successors
  // (stage 1's for stage 0, stage 0's for stage 2).
  CHECK(touched == std::set<int>{1, 2, 3, 4, 9, 10, 11, 12, 65, 66, 67, 68, 69, 70, 71, 72});
  // One PP ring over all three stages: l -> 4+l -> 8+l -> l.
  const auto wired_000 = concat({{{1, 69}, {2, 70}, {3, 71}, {4, 72}},
                                 {{5, 73}, {6, 74}, {7, 75}, {8, 76}},
                                 {{9, 65}, {10, 66}, {11, 67}, {12, 68}}});
  CHECK(sorted(lab.circuits()) == wired_000);
  CHECK(sorted(orch.circuits_of("fig8")) == wired_000);

  // Same topology again: nothing is sent.
  mark = lab.mark();
  r = orch.set_topology("fig8", TopoId::parse("000", layout));
  CHECK_FALSE(r.changed());
  CHECK(r.calls.empty());
  CHECK(lab.ports_touched(mark).empty());
  CHECK_THROWS_WITH(orch.set_topology("fig8", TopoId({0, 3, 0})),
                    Catch::Contains("digit 3 at stage 1 names a dimension the job lacks"));
}

TEST_CASE("two jobs on one switch never touch each other's ports", "[phase][orchestrator]") {
  Lab lab;
  Orchestrator orch("rail0", lab.slots(1, 20), lab.driver());
  auto a = fig8("a");
  JobLayout b{"b", 2, {{"dp", 3}}};
  orch.add_job(a, TopoId::parse("111", a));
  orch.add_job(b, TopoId::parse("11", b));
  auto bslots = orch.slots_of("b");
  auto aslots = orch.slots_of("a");
  std::set<int> bports = ports_of(bslots, {0, 1, 2, 3, 4, 5});
  std::set<int> aports = ports_of(aslots, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11});
  for (int p : aports) CHECK(bports.count(p) == 0);
  auto b_before = sorted(orch.circuits_of("b"));
  // b follows a: slots 12..17 = ports {13..18, 77..82}; DP rings of 3 per stage (0->1->2->0).
  const auto b_11 = sorted({{13, 78}, {14, 79}, {15, 77}, {16, 81}, {17, 82}, {18, 80}});
  CHECK(b_before == b_11);

  size_t mark = lab.mark();
  for (auto t : {"121", "100", "000", "222", "012", "111"}) orch.set_topology("a", TopoId::parse(t, a));
  auto touched = lab.ports_touched(mark);
  REQUIRE_FALSE(touched.empty());
  for (int p : touched) CHECK(bports.count(p) == 0);
  CHECK(touched == aports);  // "222" alone rewires every port of a
  mark = lab.mark();
  for (auto t : {"00", "10", "11"}) orch.set_topology("b", TopoId::parse(t, b));
  touched = lab.ports_touched(mark);
  REQUIRE_FALSE(touched.empty());
  for (int p : touched) CHECK(aports.count(p) == 0);
  CHECK(touched == bports);  // "00" rewires every port of b
  CHECK(sorted(orch.circuits_of("b")) == b_11);
  // The switch holds exactly both jobs' circuits: a back at "111", b at "11".
  auto both = concat({kFig8Stage0Dp, kFig8Stage1Dp, kFig8Stage2Dp, b_11});
  CHECK(sorted(lab.circuits()) == both);
  auto both_orch = orch.circuits_of("a");
  for (auto c : orch.circuits_of("b")) both_orch.push_back(c);
  CHECK(sorted(both_orch) == both);
  // Not enough slots left for a third job: infeasible, nothing sent.
  mark = lab.mark();
  CHECK_THROWS_AS(orch.add_job(JobLayout{"c", 1, {{"dp", 4}}}, TopoId({1})), InfeasibleError);
  CHECK(lab.ports_touched(mark).empty());
  orch.remove_job("a");
  CHECK(sorted(lab.circuits()) == b_11);
}

TEST_CASE("orchestrator respects the switch allow-list", "[phase][orchestrator]") {
  Lab lab;
  auto allow = ocslab::ocs::PortSet::parse("1..4,65..68");
  CHECK_THROWS_WITH(Orchestrator("rail0", lab.slots(1, 6), lab.driver(allow)),
                    Catch::Contains("rail rail0: slot port 5 is outside the switch allow-list 1..4,65..68"));
  Orchestrator ok("rail0", lab.slots(1, 4), lab.driver(allow));
  ok.add_job(JobLayout{"j", 2, {{"dp", 2}}}, TopoId({1, 1}));
  CHECK(lab.circuits().size() == 4);
}

TEST_CASE("a failed port moves its rank to a spare slot, or the job is reported infeasible", "[phase][orchestrator]") {
  Lab lab;
  Orchestrator orch("rail0", lab.slots(1, 6), lab.driver());  // 4 ranks + 2 spares
  JobLayout j{"j", 2, {{"dp", 2}}};
  orch.add_job(j, TopoId::parse("11", j));
  auto before = orch.slots_of("j");
  size_t mark = lab.mark();
  auto m = orch.mask_port(before[1].egress);
  CHECK(m.job == "j");
  CHECK(m.rank == 1);
  REQUIRE(m.to);
  CHECK(*m.to == Slot{5, 69});
  auto after = orch.slots_of("j");
  CHECK(after[1] == Slot{5, 69});
  // Only rank 1's DP partner (rank 0) and rank 1's old/new ports are touched.
  auto allowed = ports_of(before, {0, 1});
  allowed.insert(5);
  allowed.insert(69);
  auto touched = lab.ports_touched(mark);
  REQUIRE_FALSE(touched.empty());
  for (int p : touched) CHECK(allowed.count(p) == 1);
  // Removed 1->66 and 2->65 (recorded by ingress), added 1->69 and 5->65.
  CHECK(touched == std::set<int>{1, 2, 5, 65, 69});
  for (auto c : lab.circuits()) {
    CHECK(c.ingress != before[1].ingress);
    CHECK(c.egress != before[1].egress);
  }
  auto now_wired = sorted(lab.circuits());
  // Rank 1 now on slot {5, 69}: DP rings 0<->1 and 2<->3.
  CHECK(now_wired == sorted({{1, 69}, {5, 65}, {3, 68}, {4, 67}}));
  CHECK(now_wired == sorted(orch.circuits_of("j")));
  CHECK(std::find(now_wired.begin(), now_wired.end(), Circuit{1, 69}) != now_wired.end());

  // A masked free slot is never used for placement.
  orch.mask_port(6);
  CHECK(orch.free_slots() == 0);
  // No spare left: infeasible, named.
  CHECK_THROWS_WITH(orch.mask_port(after[3].ingress),
                    Catch::Contains("port 4 failed under job j rank 3; no healthy spare slot remains"));
  CHECK_THROWS_WITH(orch.mask_port(99), Catch::Contains("port 99 is not one of the rail's slot ports"));
}

TEST_CASE("a failed port's rank takes the spare on its own host first, then any", "[phase][orchestrator]") {
  JobLayout j{"j", 2, {{"dp", 2}}};
  // Slot 6 is h3's standby NIC, slot 5 another host's spare.
  const std::vector<std::string> hosts = {"h1", "h2", "h3", "h4", "h5", "h3"};
  {
    Lab lab;
    Orchestrator orch("rail0", lab.slots(1, 6), lab.driver());  // ranks on slots 1..4, spares 5 and 6
    orch.set_slot_hosts(hosts);
    orch.add_job(j, TopoId::parse("11", j));
    auto m = orch.mask_port(orch.slots_of("j")[2].egress);  // rank 2, on h3
    REQUIRE(m.to);
    CHECK(*m.to == Slot{6, 70});  // not the first free slot (5): h3's own
    // h4 has no spare of its own: the first healthy free slot.
    m = orch.mask_port(orch.slots_of("j")[3].ingress);
    REQUIRE(m.to);
    CHECK(*m.to == Slot{5, 69});
    CHECK_THROWS_WITH(orch.set_slot_hosts({"h1"}), Catch::Contains("rail rail0: 1 slot host(s) for 6 slot(s)"));
  }
  // The next run's orchestrator finds the circuits a mask left between the job's slots and a
  // spare: its own rail's, so placing the job on slots 1..4 again removes them.
  Lab lab;
  {
    Orchestrator orch("rail0", lab.slots(1, 6), lab.driver());
    orch.set_slot_hosts(hosts);
    orch.add_job(j, TopoId::parse("11", j));
    orch.mask_port(orch.slots_of("j")[2].egress);
  }
  CHECK(sorted(lab.circuits()) == sorted({{1, 66}, {2, 65}, {4, 70}, {6, 68}}));
  Orchestrator next("rail0", lab.slots(1, 6), lab.driver());
  auto placed = next.add_job(j, TopoId::parse("11", j), lab.slots(1, 4));
  CHECK(sorted(placed.removed) == sorted({{4, 70}, {6, 68}}));
  CHECK(sorted(lab.circuits()) == sorted({{1, 66}, {2, 65}, {3, 68}, {4, 67}}));
  // A circuit from a job port to a port of no slot of the rail is someone else's: refused.
  auto other = lab.driver();
  other->disconnect({1});
  other->connect({{1, 71}});
  Orchestrator third("rail0", lab.slots(1, 6), lab.driver());
  CHECK_THROWS_WITH(third.add_job(j, TopoId::parse("11", j), lab.slots(1, 4)),
                    Catch::Contains("circuit 1-71 links one of its ports to a port it does not own"));
}

TEST_CASE("a refused reprogramming is reported and read back, so a retry converges", "[phase][orchestrator]") {
  Lab lab;
  Orchestrator orch("rail0", lab.slots(1, 4), lab.driver());
  JobLayout j{"j", 2, {{"dp", 2}}};
  orch.add_job(j, TopoId::parse("10", j));  // stage 1 alone in PP: ranks 2, 3 dark
  CHECK(lab.circuits().size() == 2);
  // Someone outside ocslab's allow-list discipline patches into rank 2's free receive port.
  auto other = lab.driver();
  other->connect({{10, 67}});
  CHECK_THROWS_AS(orch.set_topology("j", TopoId::parse("11", j)), ocslab::ocs::DenyError);
  CHECK(orch.topology("j")->str() == "10");  // not pretending it got there
  other->disconnect({10});
  auto r = orch.set_topology("j", TopoId::parse("11", j));
  CHECK(r.added == std::vector<Circuit>{{3, 68}, {4, 67}});
  CHECK(sorted(lab.circuits()) == sorted({{1, 66}, {2, 65}, {3, 68}, {4, 67}}));
  CHECK(sorted(lab.circuits()) == sorted(orch.circuits_of("j")));
  CHECK(orch.topology("j")->str() == "11");
}
