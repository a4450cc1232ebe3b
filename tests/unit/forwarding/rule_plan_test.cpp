// The rule plan of forwarding/examples/ring4.yaml against hand-written expectations: h1 is
// both a source (routes + permanent neighbours) and a relay (clsact + flower/pedit/mirred).
#include <catch2/catch.hpp>
#include <cstdlib>
#include <string>
#include <vector>

#include "fabrics.h"
#include "ocslab/forwarding/apply.h"
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

namespace {

// Where a frame that host `h` sends out of its port `x` to `dst` ends up, following only the
// plan's rules, as RDMA does: the first hop's MAC from h's neighbour for dst on x's if1 (the
// subnet route on x), then each relay's filter on the if2 the frame arrives on. Returns the
// number of hops to dst's own if1, or -1 with `why` set (no neighbour, no filter, a frame for
// another MAC, a loop).
int walk(const Fabric& f, const Plan& plan, const PortRef& x, const PortRef& dst, std::string& why) {
  const Port* dst_port = f.find_port(dst);
  std::string ip = format_ipv4(dst_port->if1.ip.addr);
  const HostPlan& hp = plan.host(x.host);
  std::string mac;
  for (const auto& n : hp.neighbours)
    if (n.dst == ip && n.dev == f.find_port(x)->if1.name) mac = n.lladdr;
  if (mac.empty()) {
    why = "no neighbour for " + ip + " on " + to_string(x);
    return -1;
  }
  PortRef out = x;
  for (int hops = 1; hops <= 4 * static_cast<int>(f.hosts.size()); ++hops) {
    auto c = f.circuit_of(out);
    if (!c) {
      why = to_string(out) + " has no circuit";
      return -1;
    }
    PortRef in = f.circuits[*c].a == out ? f.circuits[*c].b : f.circuits[*c].a;
    const Port* in_port = f.find_port(in);
    if (mac == in_port->if1.mac) {
      if (in == dst) return hops;
      why = "delivered to " + to_string(in) + " instead of " + to_string(dst);
      return -1;
    }
    if (mac != in_port->if2->mac) {
      why = "frame for " + mac + " on " + to_string(in);
      return -1;
    }
    const FilterRule* rule = nullptr;
    for (const auto& fr : plan.host(in.host).filters)
      if (fr.dev == in_port->if2->name && fr.dst == ip + "/32") rule = &fr;
    if (!rule) {
      why = "no filter for " + ip + " on " + in.host + " " + in_port->if2->name;
      return -1;
    }
    mac = rule->set_eth_dst;
    out.host = in.host;
    out.port.clear();
    for (const auto& p : f.find_host(in.host)->ports)
      if (p.if1.name == rule->redirect_dev) out.port = p.name;
  }
  why = "a loop";
  return -1;
}

// Every connected NIC of every host reaches every other host's every connected address; the
// NIC its route leaves takes exactly the routed path.
void check_every_nic(const Fabric& f) {
  Routes routes = compute_routes(f);
  Plan plan = make_plan(f, routes, PlanOptions{true});
  Plan plain = make_plan(f, routes);
  size_t walks = 0, plain_fails = 0;
  for (const auto& t : routes.trees())
    for (const auto& h : f.hosts) {
      if (h.name == t.dst.host || !t.next.count(h.name)) continue;
      for (const auto& x : h.ports) {
        PortRef xref{h.name, x.name};
        if (!f.circuit_of(xref)) continue;
        std::string why;
        int hops = walk(f, plan, xref, t.dst, why);
        INFO(to_string(xref) << " -> " << to_string(t.dst) << ": " << why);
        CHECK(hops > 0);
        if (t.next.at(h.name).from == xref) {
          CHECK(hops == t.distance.at(h.name));
          CHECK(walk(f, plain, xref, t.dst, why) == hops);  // the plan without the option agrees
        } else if (walk(f, plain, xref, t.dst, why) < 0) {
          ++plain_fails;  // what the option is for
        }
        ++walks;
      }
    }
  CHECK(walks > 0);
  CHECK(plain_fails > 0);
  // The option only adds: every rule of the plain plan is in it, unchanged but for priorities.
  for (const auto& hp : plain.hosts) {
    const HostPlan& full = plan.host(hp.host);
    CHECK(full.routes.size() == hp.routes.size());
    CHECK(full.neighbours.size() > hp.neighbours.size());
    for (const auto& n : hp.neighbours) {
      bool found = false;
      for (const auto& m : full.neighbours) found = found || (m.dst == n.dst && m.dev == n.dev && m.lladdr == n.lladdr);
      CHECK(found);
    }
    CHECK(full.filters.size() >= hp.filters.size());
  }
}

}  // namespace

TEST_CASE("every_nic: each NIC reaches each address through its own circuit (ring, torus, 4-regular, TopoOpt 12x4)") {
  SECTION("ring of 6") { check_every_nic(fabrics::ring(6)); }
  SECTION("torus 3x4") { check_every_nic(fabrics::torus(3, 4)); }
  SECTION("random 4-regular, 16 hosts") { check_every_nic(fabrics::random_regular(16, 4, 7)); }
  SECTION("TopoOpt 12 x 4: a ring and a stride-5 ring (experiments/labs/topoopt-12.yaml)") {
    Fabric f = fabrics::hosts_with_ports(12, 4);
    for (int i = 0; i < 12; ++i) {
      fabrics::connect(f, i, 0, (i + 1) % 12, 1);
      fabrics::connect(f, i, 2, (i + 5) % 12, 3);
    }
    check_every_nic(f);
  }
}

TEST_CASE("every_nic: a frame for the owner's other port is bounced off that port's circuit partner") {
  // ring of 3: h_i:p1 <-> h_{i+1}:p0; hNN:pJ has address 10.0.NN.(J+1).
  Fabric f = fabrics::ring(3);
  Plan plan = make_plan(f, compute_routes(f), PlanOptions{true});
  std::string why;
  // h00 reaches h01:p0 (10.0.1.1) straight out of p1. Out of p0 the frame goes to h02, whose
  // tree sends it back through h00 (a path may not enter h01 by its other port): 3 hops.
  CHECK(walk(f, plan, {"h00", "p0"}, {"h01", "p0"}, why) == 3);
  // h00's route to h01:p1 (10.0.1.2) leaves p0 (through h02). Out of p1 the frame lands on
  // h01, the owner, at p0: h01 sends it out of p1 to h02:p0, which hands it straight back.
  CHECK(walk(f, plan, {"h00", "p1"}, {"h01", "p1"}, why) == 3);
  INFO(why);
  bool bounce = false;
  for (const auto& fr : plan.host("h01").filters)
    bounce = bounce || (fr.dev == "eth1v" && fr.dst == "10.0.1.2/32" && fr.redirect_dev == "eth2");
  CHECK(bounce);
}

namespace {

// A host's kernel as the fabric describes it: each if1 holds its address, eth0 the default route.
HostNics nics_of(const Fabric& f, const std::string& host) {
  HostNics n;
  n.management = {"lo", "eth0"};
  for (const auto& p : f.find_host(host)->ports) n.addresses[p.if1.name].insert(format_ipv4(p.if1.ip.addr));
  n.addresses["eth0"].insert("192.168.1.2");
  for (const auto& [dev, addresses] : n.addresses) n.devices.insert(dev);
  n.devices.insert({"lo", "docker0"});
  return n;
}

}  // namespace

TEST_CASE("plan checker: every plan make_plan makes passes; each kind of hostile rule is refused, naming it",
          "[plan-check]") {
  for (bool every_nic : {false, true})
    for (const Fabric& f : {ring4(), fabrics::ring(6), fabrics::torus(3, 4), fabrics::random_regular(16, 4, 7)}) {
      Plan plan = make_plan(f, compute_routes(f), PlanOptions{every_nic});
      for (const auto& h : plan.hosts) {
        HostPlan p = h;
        for (const auto& port : f.find_host(h.host)->ports)  // as --if2-macvlan adds them
          if (port.if2) p.links.push_back({port.if2->name, port.if1.name, port.if2->mac});
        INFO(h.host << (every_nic ? " every-nic" : ""));
        CHECK(plan_problem(p, nics_of(f, h.host)) == "");
      }
    }

  const Fabric f = ring4();
  const HostPlan good = make_plan(f, compute_routes(f)).host("h1");
  const HostNics nics = nics_of(f, "h1");
  REQUIRE(!good.routes.empty());
  REQUIRE(!good.filters.empty());
  auto refused = [&](auto change) {
    HostPlan p = good;
    change(p);
    return plan_problem(p, nics);
  };
  const RouteRule& r0 = good.routes[0];
  const std::string other_src = r0.dev == "eth1" ? "10.0.0.11" : "10.0.0.10";  // the other if1's
  CHECK(refused([](HostPlan& p) { p.routes[0].dev = "eth0"; }) ==
        fmt::format("route {} dev eth0: eth0 is the management interface (it holds the default route); a plan "
                    "touches only the fabric's NICs",
                    r0.dst));
  CHECK_THAT(refused([](HostPlan& p) { p.neighbours[0].dev = "lo"; }), Catch::Contains("lo is the loopback"));
  CHECK(refused([](HostPlan& p) { p.routes[0].protocol = 4; }) ==
        fmt::format("route {} dev {}: protocol 4 is not ocslab's (79): rollback and clear would never remove it",
                    r0.dst, r0.dev));
  CHECK(refused([](HostPlan& p) { p.routes[0].dst = "0.0.0.0/0"; }) ==
        fmt::format("route 0.0.0.0/0 dev {}: not an IPv4 /32 host route", r0.dev));
  CHECK(refused([](HostPlan& p) { p.routes[0].dev = "docker0"; }) ==
        fmt::format("route {} dev docker0: src {} is not an address of docker0", r0.dst, r0.src));
  CHECK(refused([](HostPlan& p) { p.routes[0].dev = "nosuch1"; }) ==
        fmt::format("route {} dev nosuch1: no network device 'nosuch1' in this namespace", r0.dst));
  CHECK(refused([&](HostPlan& p) { p.routes[0].src = other_src; }) ==
        fmt::format("route {} dev {}: src {} is not an address of {}", r0.dst, r0.dev, other_src, r0.dev));
  CHECK(refused([](HostPlan& p) { p.neighbours[0].dev = "docker0"; }) ==
        fmt::format("neighbour {} dev docker0: docker0 is not one of the plan's own NICs (the devices its routes "
                    "leave from their own address)",
                    good.neighbours[0].dst));
  CHECK_THAT(refused([](HostPlan& p) { p.filters[0].redirect_dev = "eth0"; }),
             Catch::Contains("eth0 is the management interface"));
  CHECK_THAT(refused([](HostPlan& p) { p.filters[0].dev = "eth9"; }),
             Catch::Contains("the plan has no clsact on eth9"));
  CHECK_THAT(refused([](HostPlan& p) {
               p.links.push_back({"eth1v", "eth0", "02:00:00:00:01:10"});
             }),
             Catch::Contains("macvlan eth1v over eth0: eth0 is the management interface"));
  CHECK_THAT(refused([](HostPlan& p) { p.qdiscs.push_back({"eth0"}); }),
             Catch::Contains("clsact on eth0: eth0 is the management interface"));
}
