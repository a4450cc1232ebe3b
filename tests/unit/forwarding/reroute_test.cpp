// Forwarding while the fabric changes (forwarding/reroute.h): routes recomputed around a dark
// circuit, and make-before-break across a planned change, judged by the pairs each ordering
// loses while the broken circuits are down (forward path and reply, as an RC queue pair needs).
#include <catch2/catch.hpp>

#include <algorithm>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "fabrics.h"
#include "ocslab/forwarding/reroute.h"
#include "ocslab/forwarding/routes.h"
#include "ocslab/forwarding/rule_plan.h"

using namespace ocslab;
using namespace ocslab::forwarding;
using Pairs = std::vector<std::pair<std::string, std::string>>;

namespace {

// Hosts joined over the fabric's circuits (both directions), from `from`.
std::set<std::string> joined_from(const Fabric& f, const std::string& from) {
  std::set<std::string> seen{from};
  std::vector<std::string> todo{from};
  while (!todo.empty()) {
    std::string h = todo.back();
    todo.pop_back();
    for (const auto& c : f.circuits)
      for (const auto& [x, y] : {std::pair{c.a.host, c.b.host}, std::pair{c.b.host, c.a.host}})
        if (x == h && seen.insert(y).second) todo.push_back(y);
  }
  return seen;
}

// The 4-ring with ring4-a's shape: h00:p1 <-> h01:p0, ..., h03:p1 <-> h00:p0 (circuit 3).
Fabric ring_of_four() { return fabrics::ring(4); }

}  // namespace

TEST_CASE("a dark end kills its circuit: the surviving fabric and its routes", "[forwarding][reroute]") {
  const Fabric ring = ring_of_four();
  const Routes installed = compute_routes(ring);
  std::vector<Circuit> dropped;
  const Fabric line = surviving_fabric(ring, {{"h00", "p0"}}, &dropped);  // h00:p0's light is gone
  REQUIRE(line.circuits.size() == 3);
  REQUIRE(dropped.size() == 1);
  CHECK(to_string(dropped[0].a) == "h03:p1");
  CHECK(line.hosts.size() == ring.hosts.size());

  // With the ring's routes still installed, these pairs cross the dead circuit one way or the
  // other (h02 -> h00 takes h00:p0, the lower port name of two addresses two hops away).
  CHECK(pairs_lost(ring, installed, dropped) == Pairs{{"h00", "h03"}, {"h02", "h00"}, {"h03", "h00"}, {"h03", "h01"}});
  // Recomputed on the survivors: every pair routed, none over the dead circuit; h03 reaches h00
  // the long way round, at h00's address that still has a circuit.
  const Routes rerouted = compute_routes(line);
  CHECK(pairs_lost(line, rerouted, dropped).empty());
  CHECK(rerouted.path("h03", "h00").size() == 3);
  CHECK(to_string(rerouted.tree_for("h03", "h00").dst) == "h00:p1");
  // The dead port's address is no destination any more: no host keeps a route to it.
  for (const auto& t : rerouted.trees()) CHECK(to_string(t.dst) != "h00:p0");
  const Plan plan = make_plan(line, rerouted);
  for (const auto& hp : plan.hosts)
    for (const auto& r : hp.routes) CHECK(r.dst != format_ipv4(ring.find_port({"h00", "p0"})->if1.ip.addr) + "/32");
}

TEST_CASE("routes over survivors that split the hosts: partial, pairs across the split unrouted",
          "[forwarding][reroute]") {
  const Fabric ring = ring_of_four();
  // Two dark ends on opposite circuits: {h00, h01} and {h02, h03} are cut apart.
  std::vector<Circuit> dropped;
  const Fabric split = surviving_fabric(ring, {{"h00", "p0"}, {"h02", "p0"}}, &dropped);
  CHECK(split.circuits.size() == 2);
  CHECK_THROWS_WITH(compute_routes(split), Catch::Contains("no route from"));
  RouteOptions partial;
  partial.partial = true;
  const Routes r = compute_routes(split, partial);
  CHECK(r.has_route("h00", "h01"));
  CHECK_FALSE(r.has_route("h00", "h02"));
  CHECK_THROWS(r.tree_for("h00", "h02"));
  // 8 of 12 pairs cross the cut; the 4 inside a half are reachable over their own circuit.
  CHECK(pairs_lost(split, r, dropped).size() == 8);
  // The plan programs what is reachable and names nothing of the other half.
  const Plan plan = make_plan(split, r);
  CHECK(plan.host("h00").routes.size() == 1);  // h01:p0, its one neighbour's address
}

TEST_CASE("make-before-break: ring to line keeps every pair, breaking first loses four", "[forwarding][reroute]") {
  const Fabric ring = ring_of_four();
  Fabric line = ring;
  line.circuits.pop_back();  // h03:p1 <-> h00:p0 broken by the reconfiguration
  const ChangePlan change = plan_change(ring, line);
  CHECK(change.kept.size() == 3);
  REQUIRE(change.broken.size() == 1);
  CHECK(change.made.empty());
  CHECK(change.kept_fabric.circuits.size() == 3);

  const Routes installed = compute_routes(ring);
  const Routes bridge = make_before_break_routes(ring, installed, change);
  const auto without = pairs_lost(ring, installed, change.broken);
  const auto with = pairs_lost(ring, bridge, change.broken);
  CHECK(without.size() == 4);
  CHECK(with.empty());
  // The bridge is a plan over the installed fabric (its hops name the ring's circuits): h03 goes
  // to h00 over the three kept circuits; the broken port's address keeps its old tree.
  CHECK(bridge.path("h03", "h00").size() == 3);
  for (const auto& hop : bridge.path("h03", "h00")) CHECK(hop.circuit != 3);
  CHECK_NOTHROW(make_plan(ring, bridge));
  // After the change the line's own routes take the same paths as the bridge's.
  const Routes after = compute_routes(line);
  for (const auto& p : pair_paths(line, after)) {
    INFO(p.src << " -> " << p.dst);
    CHECK(bridge.path(p.src, p.dst).size() == p.forward.size());
  }
}

TEST_CASE("make-before-break: a change that keeps one circuit, and one that keeps none", "[forwarding][reroute]") {
  const Fabric ring = ring_of_four();
  // h00 - h02 - h01 - h03 - h00: only h03:p1 <-> h00:p0 stays.
  Fabric other = fabrics::hosts_with_ports(4, 2);
  fabrics::connect(other, 0, 1, 2, 0);
  fabrics::connect(other, 2, 1, 1, 0);
  fabrics::connect(other, 1, 1, 3, 0);
  fabrics::connect(other, 3, 1, 0, 0);
  const ChangePlan change = plan_change(ring, other);
  CHECK(change.kept.size() == 1);
  CHECK(change.broken.size() == 3);
  CHECK(change.made.size() == 3);
  const Routes installed = compute_routes(ring);
  const Routes bridge = make_before_break_routes(ring, installed, change);
  // Only h00 <-> h03 can stay up (their circuit is kept); both orderings keep exactly that.
  CHECK(pairs_lost(ring, bridge, change.broken).size() == 10);
  CHECK(pairs_lost(ring, installed, change.broken).size() == 10);

  // Nothing kept: the bridge is the installed routes themselves.
  Fabric none = fabrics::hosts_with_ports(4, 2);
  fabrics::connect(none, 0, 1, 2, 1);
  fabrics::connect(none, 2, 0, 1, 0);
  fabrics::connect(none, 1, 1, 3, 1);
  fabrics::connect(none, 3, 0, 0, 0);
  const ChangePlan all = plan_change(ring, none);
  CHECK(all.kept.empty());
  const Routes same = make_before_break_routes(ring, installed, all);
  for (const auto& p : pair_paths(ring, installed)) CHECK(same.path(p.src, p.dst).size() == p.forward.size());
}

TEST_CASE("make-before-break never loses a pair that breaking first keeps, on random fabrics",
          "[forwarding][reroute]") {
  for (unsigned seed = 1; seed <= 40; ++seed) {
    const int n = 6 + static_cast<int>(seed % 5), d = 2 + static_cast<int>(seed % 3);
    const Fabric from = fabrics::random_regular(n, d, seed);
    Fabric to = fabrics::random_regular(n, d, seed + 1000);
    // Keep part of the old circuits: the first half of from's, those whose ports to leaves free.
    std::set<PortRef> used;
    Fabric mixed = to;
    mixed.circuits.clear();
    for (size_t i = 0; i < from.circuits.size() / 2; ++i) {
      mixed.circuits.push_back(from.circuits[i]);
      used.insert(from.circuits[i].a);
      used.insert(from.circuits[i].b);
    }
    for (const auto& c : to.circuits)
      if (!used.count(c.a) && !used.count(c.b)) mixed.circuits.push_back(c);
    INFO("seed " << seed << ", " << n << " hosts of degree " << d);
    const ChangePlan change = plan_change(from, mixed);
    const Routes installed = compute_routes(from);
    const Routes bridge = make_before_break_routes(from, installed, change);
    CHECK_NOTHROW(make_plan(from, bridge));
    const auto without = pairs_lost(from, installed, change.broken);
    const auto with = pairs_lost(from, bridge, change.broken);
    for (const auto& p : with) {
      INFO(p.first << " -> " << p.second);
      CHECK(std::find(without.begin(), without.end(), p) != without.end());
      // Lost with the bridge only when no kept path joins them.
      CHECK_FALSE(joined_from(change.kept_fabric, p.first).count(p.second));
    }
    CHECK(with.size() <= without.size());

    // A dark end on the installed fabric: the survivors' routes lose only pairs they cannot join.
    std::vector<Circuit> dropped;
    const Fabric alive = surviving_fabric(from, {from.circuits[0].a}, &dropped);
    RouteOptions partial;
    partial.partial = true;
    const Routes rerouted = compute_routes(alive, partial);
    for (const auto& p : pairs_lost(alive, rerouted, dropped)) CHECK_FALSE(joined_from(alive, p.first).count(p.second));
  }
}
