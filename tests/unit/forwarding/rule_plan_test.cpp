// The rule plan of forwarding/examples/ring4.yaml against hand-written expectations: h1 is
// both a source (routes + permanent neighbours) and a relay (clsact + flower/pedit/mirred).
#include <catch2/catch.hpp>
#include <cstdlib>
#include <string>
#include <vector>

#include "fabrics.h"
#include "ocslab/forwarding/rule_plan.h"

using namespace ocslab;
using namespace ocslab::forwarding;

namespace {

Fabric ring4() { return load_fabric_file(fabrics::example("ring4.yaml")); }

}  // namespace

// ring4: h1 - h2 - h3 - h4 - h1; hN:p1 faces h(N+1):p0. Address of hN:pJ is 10.0.0.NJ, if1 MAC
// 02:00:00:00:0N:0J, if2 MAC 02:00:00:00:0N:1J; p0 is eth1 (if2 eth1v), p1 is eth2 (eth2v).
TEST_CASE("ring4: h1's commands, worked out by hand") {
  Fabric f = ring4();
  Plan plan = make_plan(f, compute_routes(f));
  // Source side. 10.0.0.20 (h2:p0) and 10.0.0.41 (h4:p1) face h1: direct, neighbour = their
  // if1 MAC. 10.0.0.30 (h3:p0) and 10.0.0.40 (h4:p0) are entered from h2 and h3 respectively,
  // so h1 sends both to h2 (h2:p0's if2); 10.0.0.21 and 10.0.0.31 go round via h4 (h4:p1's if2).
  // Relay side: h1 relays what h4 sends it (arriving on h1:p0, eth1v) toward h2, and what h2
  // sends it (h1:p1, eth2v) toward h4; one priority per destination per if2, by address.
  // NOLINTBEGIN(bugprone-suspicious-missing-comma): long commands are split literals
  std::vector<std::string> expected = {
      "tc qdisc add dev eth1v clsact",
      "tc qdisc add dev eth2v clsact",
      "tc filter add dev eth1v ingress protocol ip prio 20224 flower skip_hw dst_ip 10.0.0.20/32 action pedit ex "
      "munge eth dst set 02:00:00:00:02:00 pipe action mirred egress redirect dev eth2",
      "tc filter add dev eth1v ingress protocol ip prio 20225 flower skip_hw dst_ip 10.0.0.30/32 action pedit ex "
      "munge eth dst set 02:00:00:00:02:10 pipe action mirred egress redirect dev eth2",
      "tc filter add dev eth2v ingress protocol ip prio 20224 flower skip_hw dst_ip 10.0.0.31/32 action pedit ex "
      "munge eth dst set 02:00:00:00:04:11 pipe action mirred egress redirect dev eth1",
      "tc filter add dev eth2v ingress protocol ip prio 20225 flower skip_hw dst_ip 10.0.0.41/32 action pedit ex "
      "munge eth dst set 02:00:00:00:04:01 pipe action mirred egress redirect dev eth1",
      "ip neigh replace 10.0.0.20 lladdr 02:00:00:00:02:00 dev eth2 nud permanent",
      "ip neigh replace 10.0.0.21 lladdr 02:00:00:00:04:11 dev eth1 nud permanent",
      "ip neigh replace 10.0.0.30 lladdr 02:00:00:00:02:10 dev eth2 nud permanent",
      "ip neigh replace 10.0.0.31 lladdr 02:00:00:00:04:11 dev eth1 nud permanent",
      "ip neigh replace 10.0.0.40 lladdr 02:00:00:00:02:10 dev eth2 nud permanent",
      "ip neigh replace 10.0.0.41 lladdr 02:00:00:00:04:01 dev eth1 nud permanent",
      "ip route replace 10.0.0.20/32 dev eth2 src 10.0.0.11 proto 79",
      "ip route replace 10.0.0.21/32 dev eth1 src 10.0.0.10 proto 79",
      "ip route replace 10.0.0.30/32 dev eth2 src 10.0.0.11 proto 79",
      "ip route replace 10.0.0.31/32 dev eth1 src 10.0.0.10 proto 79",
      "ip route replace 10.0.0.40/32 dev eth2 src 10.0.0.11 proto 79",
      "ip route replace 10.0.0.41/32 dev eth1 src 10.0.0.10 proto 79",
  };
  // NOLINTEND(bugprone-suspicious-missing-comma)
  CHECK(commands(plan.host("h1")) == expected);
  CHECK(plan.unreachable.empty());
}

TEST_CASE("ring4: h2 relays h1's traffic for h3 and rewrites to h3's if1 on the last hop") {
  Fabric f = ring4();
  Plan plan = make_plan(f, compute_routes(f));
  const HostPlan& h2 = plan.host("h2");
  // h1 -> 10.0.0.30 (h3:p0): h1 sends to h2's if2 on p0 (eth1v); h2 is the last relay.
  bool found = false;
  for (const auto& flt : h2.filters)
    if (flt.dst == "10.0.0.30/32") {
      found = true;
      CHECK(flt.dev == "eth1v");
      CHECK(render(flt) ==
            "tc filter add dev eth1v ingress protocol ip prio 20224 flower skip_hw dst_ip 10.0.0.30/32 action pedit "
            "ex munge eth dst set 02:00:00:00:03:00 pipe action mirred egress redirect dev eth2");
      CHECK(flt.chain == kTcChain);
      CHECK(flt.cookie == std::string(kActionCookie));
    }
  CHECK(found);
  // Every host: a route and a neighbour per other host's address (all reachable in a ring),
  // clsact on both if2s, every route tagged.
  for (const auto& hp : plan.hosts) {
    CHECK(hp.routes.size() == 6);
    CHECK(hp.neighbours.size() == 6);
    CHECK(hp.qdiscs.size() == 2);
    for (const auto& r : hp.routes) CHECK(r.protocol == kRouteProtocol);
    for (const auto& flt : hp.filters) {
      CHECK(flt.prio >= kTcPrioFirst);
      CHECK(flt.prio <= kTcPrioLast);
    }
  }
  auto j = to_json(plan);
  CHECK(j["tags"]["route_protocol"] == 79);
  CHECK(j["hosts"][0]["host"] == "h1");
  CHECK(j["hosts"][0]["commands"].size() == 18);
}

TEST_CASE("the three-host line: h1 cannot reach h2's far port without passing through h2") {
  Fabric f = fabrics::hosts_with_ports(3, 2);
  fabrics::connect(f, 0, 0, 1, 0);
  fabrics::connect(f, 1, 1, 2, 0);
  validate(f);
  Routes routes = compute_routes(f);
  Plan plan = make_plan(f, routes);
  // h00 -> h02 is relayed by h01: frames arrive on h01:p0's if2 and leave through h01:p1's if1
  // toward h02:p0's if1 MAC.
  const HostPlan& h1 = plan.host("h01");
  REQUIRE(h1.filters.size() == 2);
  CHECK(render(h1.filters[0]) ==
        "tc filter add dev eth1v ingress protocol ip prio 20224 flower skip_hw dst_ip 10.0.2.1/32 action pedit ex "
        "munge eth dst set 02:00:00:02:00:01 pipe action mirred egress redirect dev eth2");
  CHECK(render(h1.filters[1]) ==
        "tc filter add dev eth2v ingress protocol ip prio 20224 flower skip_hw dst_ip 10.0.0.1/32 action pedit ex "
        "munge eth dst set 02:00:00:00:00:01 pipe action mirred egress redirect dev eth1");
  CHECK(render(plan.host("h00").neighbours.at(1)) ==
        "ip neigh replace 10.0.2.1 lladdr 02:00:00:01:00:02 dev eth1 nud permanent");
  CHECK(plan.unreachable == std::vector<std::string>{"h02 -> 10.0.1.1 (h01:p0)", "h00 -> 10.0.1.2 (h01:p1)"});
}
