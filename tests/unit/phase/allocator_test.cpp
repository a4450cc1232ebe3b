// The circuit allocators (allocator.h) on small demand matrices whose allocations are worked
// out by hand in the comments: the expected plans are written out, never computed by the code.
#include <catch2/catch.hpp>

#include <cmath>

#include "ocslab/phase/allocator.h"
#include "ocslab/phase/topology.h"

using namespace ocslab::phase;

namespace {

constexpr uint64_t MB = 1000 * 1000;

// 4 nodes, 3 ports each (3 transmitters, 3 receivers). The demand (MB) is a 4-cycle 0-2-3-1-0
// of unequal pairs:
//   0->1 100,  0->2 900, 2->0 300,  1->3 200,  2->3 600, 3->2 600.
// Every node has two peers, so one circuit per pair leaves each node one spare port; who gets
// the spares is where the allocators differ. (With 2 ports per node every allocator would fill
// each node's ports with its two first circuits and the three plans would coincide.)
std::vector<Demand> cycle() {
  return {{0, 1, 100 * MB}, {0, 2, 900 * MB}, {2, 0, 300 * MB}, {1, 3, 200 * MB}, {2, 3, 600 * MB}, {3, 2, 600 * MB}};
}

CircuitPlan plan_of(int nodes, int ports, std::map<std::pair<int, int>, int> circuits) {
  CircuitPlan p;
  p.nodes = nodes;
  p.ports = ports;
  p.circuits = std::move(circuits);
  return p;
}

}  // namespace

TEST_CASE("allocator names parse and print", "[phase][allocator]") {
  CHECK(parse_allocator("largest-demand") == Allocator::kLargestDemand);
  CHECK(parse_allocator("uniform") == Allocator::kUniform);
  CHECK(parse_allocator("orchestrrl") == Allocator::kOrchestrRL);
  CHECK_FALSE(parse_allocator("greedy"));
  CHECK_FALSE(parse_allocator("OrchestrRL"));
  CHECK(allocator_names() == "largest-demand, uniform, orchestrrl");
  for (auto a : {Allocator::kLargestDemand, Allocator::kUniform, Allocator::kOrchestrRL})
    CHECK(parse_allocator(to_string(a)) == a);
}

TEST_CASE("orchestrrl: PAIRTIME order, several circuits per pair, per-port budget (hand-worked)", "[phase][allocator]") {
  // Pairs and MAXDIRDEMAND: {0,1} 100, {0,2} max(900,300) = 900, {1,3} 200, {2,3} max(600,600) = 600.
  // A duplex circuit takes one transmitter and one receiver at each end; used(n) counts them.
  //   1. no pair has a circuit: every PAIRTIME is infinite, the tie goes to the largest
  //      MAXDIRDEMAND: {0,2} -> 1 circuit.                     used 0:1 1:0 2:1 3:0
  //   2. infinite: {0,1},{1,3},{2,3}; largest MAXDIRDEMAND {2,3} -> 1.   used 2:2 3:1
  //   3. infinite: {0,1},{1,3} -> {1,3} (200 > 100) -> 1.                used 1:1 3:2
  //   4. infinite: {0,1} -> 1.                                           used 0:2 1:2
  //   5. PAIRTIME (MB per circuit): {0,2} 900, {2,3} 600, {1,3} 200, {0,1} 100, all four feasible
  //      (every node used 2 < 3): {0,2} -> 2 circuits.                   used 0:3 2:3
  //   6. feasible: only {1,3} (nodes 0 and 2 are full): {1,3} -> 2.      used 1:3 3:3
  //   7. every pair touches a full node: done.
  auto p = allocate_circuits(Allocator::kOrchestrRL, cycle(), 4, 3);
  CHECK(p == plan_of(4, 3, {{{0, 1}, 1}, {{1, 0}, 1}, {{0, 2}, 2}, {{2, 0}, 2}, {{1, 3}, 2}, {{3, 1}, 2},
                            {{2, 3}, 1}, {{3, 2}, 1}}));
  CHECK(p.total() == 12);  // 4 nodes x 3 transmitters: every port is used

  // At 100 Gb/s, 100 MB take 8 ms on one circuit. 0->2: 900 MB / 2 circuits = 36 ms;
  // 2->3 and 3->2: 600 MB / 1 = 48 ms, the slowest; the rest less.
  auto t = transfer_time(cycle(), p, 100);
  CHECK(t.unserved == 0);
  CHECK(t.ms == Approx(48.0));
  REQUIRE(t.demands.size() == 6);
  CHECK(t.demands[1].demand == Demand{0, 2, 900 * MB});
  CHECK(t.demands[1].circuits == 2);
  CHECK(t.demands[1].ms == Approx(36.0));
}

TEST_CASE("largest-demand and uniform on the same matrix (hand-worked)", "[phase][allocator]") {
  // largest-demand: directed demands largest first, one circuit each while the source has a
  // transmitter and the destination a receiver: 0->2, 2->3, 3->2, 2->0, 1->3, 0->1 all fit
  // (node 0 and 2 transmit twice, nobody more than 3): one circuit per demand.
  auto ld = allocate_circuits(Allocator::kLargestDemand, cycle(), 4, 3);
  CHECK(ld == plan_of(4, 3, {{{0, 1}, 1}, {{0, 2}, 1}, {{2, 0}, 1}, {{1, 3}, 1}, {{2, 3}, 1}, {{3, 2}, 1}}));
  // 0->2: 900 MB on one circuit = 72 ms.
  CHECK(transfer_time(cycle(), ld, 100).ms == Approx(72.0));

  // uniform: rounds in (src,dst) order 0->1, 0->2, 1->3, 2->0, 2->3, 3->2.
  //   round 1: every demand gets one.  tx 0:2 1:1 2:2 3:1   rx 0:1 1:1 2:2 3:2
  //   round 2: 0->1 yes (tx0 3, rx1 2); 0->2 no (tx0 full); 1->3 yes (tx1 2, rx3 3);
  //            2->0 yes (tx2 3, rx0 2); 2->3 no (tx2 full); 3->2 yes (tx3 2, rx2 3)
  //   round 3: 0->1 tx0 full, 0->2 tx0 full, 1->3 rx3 full, 2->0 tx2 full, 2->3 tx2 full,
  //            3->2 rx2 full: nothing added, done.
  auto u = allocate_circuits(Allocator::kUniform, cycle(), 4, 3);
  CHECK(u == plan_of(4, 3, {{{0, 1}, 2}, {{0, 2}, 1}, {{2, 0}, 2}, {{1, 3}, 2}, {{2, 3}, 1}, {{3, 2}, 2}}));
  // 0->2 again on one circuit: 72 ms.
  CHECK(transfer_time(cycle(), u, 100).ms == Approx(72.0));
}

TEST_CASE("orchestrrl: a PAIRTIME tie goes to the larger MAXDIRDEMAND", "[phase][allocator]") {
  // 3 nodes, 4 ports. {0,1}: 400 MB each way (MAXDIRDEMAND 400, total 800); {0,2}: 800 MB one
  // way (MAXDIRDEMAND 800, total 800). Node 0 is shared.
  //   1. both infinite, larger MAXDIRDEMAND: {0,2} -> 1.   used 0:1
  //   2. {0,1} infinite -> 1.                              used 0:2
  //   3. PAIRTIME {0,2} 800, {0,1} 400 -> {0,2} -> 2.      used 0:3
  //   4. PAIRTIME {0,2} 400, {0,1} 400: a tie; MAXDIRDEMAND 800 > 400 -> {0,2} -> 3.  used 0:4
  //   5. node 0 is full: done.
  // (Ties by the lower pair, or by total demand, would have given {0,1} its second circuit.)
  std::vector<Demand> d = {{0, 1, 400 * MB}, {1, 0, 400 * MB}, {0, 2, 800 * MB}};
  auto p = allocate_circuits(Allocator::kOrchestrRL, d, 3, 4);
  CHECK(p == plan_of(3, 4, {{{0, 1}, 1}, {{1, 0}, 1}, {{0, 2}, 3}, {{2, 0}, 3}}));
}

TEST_CASE("largest-demand with one port per node is today's greedy allocation", "[phase][allocator]") {
  // The greedy policy's own example (policy_test.cpp): 0->2 (500), 2->3 (400) and 1->0 (50) get
  // circuits; 3->2, 1->3 and 0->1 lose an end to a larger demand.
  std::vector<Demand> demands = {{0, 1, 100}, {0, 2, 500}, {3, 2, 300}, {1, 0, 50}, {2, 3, 400}, {1, 3, 200}};
  auto p = allocate_circuits(Allocator::kLargestDemand, demands, 4, 1);
  CHECK(p == plan_of(4, 1, {{{0, 2}, 1}, {{2, 3}, 1}, {{1, 0}, 1}}));
  auto t = transfer_time(demands, p, 100);
  CHECK(t.unserved == 3);
  CHECK(std::isinf(t.ms));
}

TEST_CASE("allocators refuse bad input and sum duplicate demands", "[phase][allocator]") {
  CHECK_THROWS_WITH(allocate_circuits(Allocator::kOrchestrRL, {{0, 4, 1}}, 4, 2), "demand 0->4: rank 4 is outside 0..3");
  CHECK_THROWS_WITH(allocate_circuits(Allocator::kUniform, {{2, 2, 1}}, 4, 2), "demand 2->2: a rank cannot send to itself");
  CHECK_THROWS_WITH(allocate_circuits(Allocator::kUniform, {}, 4, 0),
                    "circuit allocation with 0 ports per node: needs at least one");
  CHECK(allocate_circuits(Allocator::kOrchestrRL, {}, 4, 2).circuits.empty());
  // 0->1 twice (300 + 300 = 600) outweighs 0->2 (500) for node 0's only transmitter.
  auto p = allocate_circuits(Allocator::kLargestDemand, {{0, 1, 300}, {0, 2, 500}, {0, 1, 300}}, 3, 1);
  CHECK(p == plan_of(3, 1, {{{0, 1}, 1}}));
  CHECK_THROWS_WITH(transfer_time({{0, 1, 1}}, p, 0), "link rate 0 Gb/s: must be positive");
}

TEST_CASE("assign_ports puts each node's circuits on its own ports", "[phase][allocator]") {
  // Node n transmits on ingress 1+2n, 2+2n and receives on egress 64 + the same numbers.
  auto p = plan_of(3, 2, {{{0, 1}, 2}, {{1, 0}, 1}, {{2, 1}, 0}, {{1, 2}, 1}});
  auto c = assign_ports(p, 1, 64);
  CHECK(c == std::vector<ocslab::ocs::Circuit>{{1, 67}, {2, 68}, {3, 65}, {4, 69}});
  auto over = plan_of(3, 1, {{{0, 1}, 1}, {{2, 1}, 1}});
  CHECK_THROWS_WITH(assign_ports(over, 1, 64), "circuit 2->1: node 1 has no free receive port left (of 1)");
}
