// Deriving the fabric from a wiring file and the OCS's circuits: the virtual lab's ring4 (the
// shipped example files) and a 3x3 torus give the expected circuits and plan exactly like the
// hand-written fabrics; every inconsistent wiring or circuit set is refused naming the entry.
#include <algorithm>
#include <catch2/catch.hpp>
#include <random>
#include <set>
#include <string>

#include "fabrics.h"
#include "ocslab/forwarding/routes.h"
#include "ocslab/forwarding/rule_plan.h"
#include "ocslab/forwarding/wiring.h"
#include "ocslab/ocsctl/mapping.h"

// This file's helpers in a namespace of its own: the unity build compiles it together with
// the other tests of its binary.
namespace wiring_test {

using namespace ocslab;
using namespace ocslab::forwarding;

namespace {

std::vector<OcsCircuit> mapping(const std::string& example) {
  std::vector<OcsCircuit> out;
  for (const auto& e : ocs::load_mapping_entries(fabrics::example(example)))
    out.push_back({e.circuit.ingress, e.circuit.egress, e.where});
  return out;
}

// Circuits as unordered "a <-> b" with a < b, so orientation and order do not matter.
std::set<std::string> links(const Fabric& f) {
  std::set<std::string> out;
  for (const auto& c : f.circuits) {
    auto a = to_string(c.a), b = to_string(c.b);
    out.insert(a < b ? a + " <-> " + b : b + " <-> " + a);
  }
  return out;
}

std::string plan_json(const Fabric& f) { return to_json(make_plan(f, compute_routes(f))).dump(); }

// A three-host wiring: h1 (p0), h2 (p0, p1), h3 (p0), cabled to a 8x8 switch.
std::string wiring3(const std::string& cables =
                        "  - {host: h1, port: p0, tx: 1, rx: 9}\n"
                        "  - {host: h2, port: p0, tx: 2, rx: 10}\n"
                        "  - {host: h2, port: p1, tx: 3, rx: 11}\n"
                        "  - {host: h3, port: p0, tx: 4, rx: 12}\n",
                    const std::string& h3_ip = "10.0.0.3/24", const std::string& h3_if2_mac = "02:00:00:00:03:11") {
  return "hosts:\n"
         "  - name: h1\n"
         "    ports:\n"
         "      - name: p0\n"
         "        if1: {name: e1, ip: 10.0.0.1/24, mac: \"02:00:00:00:01:01\"}\n"
         "        if2: {name: e1v, mac: \"02:00:00:00:01:11\"}\n"
         "  - name: h2\n"
         "    ports:\n"
         "      - name: p0\n"
         "        if1: {name: e1, ip: 10.0.0.2/24, mac: \"02:00:00:00:02:01\"}\n"
         "        if2: {name: e1v, mac: \"02:00:00:00:02:11\"}\n"
         "      - name: p1\n"
         "        if1: {name: e2, ip: 10.0.0.12/24, mac: \"02:00:00:00:02:02\"}\n"
         "        if2: {name: e2v, mac: \"02:00:00:00:02:12\"}\n"
         "  - name: h3\n"
         "    ports:\n"
         "      - name: p0\n"
         "        if1: {name: e1, ip: " +
         h3_ip +
         ", mac: \"02:00:00:00:03:01\"}\n"
         "        if2: {name: e1v, mac: \"" +
         h3_if2_mac +
         "\"}\n"
         "cables:\n" +
         cables;
}

std::string wiring_error(const std::string& yaml) {
  try {
    load_wiring_string(yaml, "w.yaml");
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "(accepted)";
}

// h1:p0 <-> h2:p0 (1-10, 2-9) and h2:p1 <-> h3:p0 (3-12, 4-11), each at m.yaml:<line>:5.
std::vector<OcsCircuit> line3() {
  return {{1, 10, "m.yaml:2:5"}, {2, 9, "m.yaml:3:5"}, {3, 12, "m.yaml:4:5"}, {4, 11, "m.yaml:5:5"}};
}

std::string derive_error(const std::vector<OcsCircuit>& circuits) {
  try {
    derive_fabric(load_wiring_string(wiring3(), "w.yaml"), circuits);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "(accepted)";
}

}  // namespace

TEST_CASE("ring4 in the virtual lab: the example wiring and ring A's mapping give ring4.yaml's fabric") {
  Wiring w = load_wiring_file(fabrics::example("vlab-ring4.wiring.yaml"));
  REQUIRE(w.cables.size() == 8);
  CHECK(w.by_tx(3)->port == PortRef{"h2", "p0"});
  CHECK(w.by_rx(24)->port == PortRef{"h4", "p1"});
  DerivedFabric d = derive_fabric(w, mapping("ring4-a.mapping.yaml"));
  CHECK(d.ignored.empty());
  // In the wiring's order, each link named from its first port; where: the a -> b circuit.
  REQUIRE(d.fabric.circuits.size() == 4);
  CHECK(to_string(d.fabric.circuits[0].a) == "h1:p0");
  CHECK(to_string(d.fabric.circuits[0].b) == "h4:p1");
  CHECK_THAT(d.fabric.circuits[0].where, Catch::EndsWith("ring4-a.mapping.yaml:11:5"));  // 1-24
  CHECK(to_string(d.fabric.circuits[1].a) == "h1:p1");
  CHECK(to_string(d.fabric.circuits[1].b) == "h2:p0");
  CHECK(to_string(d.fabric.circuits[2].a) == "h2:p1");
  CHECK(to_string(d.fabric.circuits[3].a) == "h3:p1");
  CHECK(to_string(d.fabric.circuits[3].b) == "h4:p0");

  Fabric hand = load_fabric_file(fabrics::example("ring4.yaml"));
  CHECK(links(d.fabric) == links(hand));
  // Round trip: the derived fabric plans exactly like the hand-written one used by the ring
  // test, also after being written out and read back.
  CHECK(plan_json(d.fabric) == plan_json(hand));
  Fabric reread = load_fabric_string(to_yaml(d.fabric, "derived\nfor the test"), "derived.yaml");
  CHECK(plan_json(reread) == plan_json(hand));
  CHECK(links(reread) == links(hand));
  REQUIRE(reread.hosts.size() == 4);
  CHECK(reread.hosts[1].ports[1].if1.rdma == "rxe1");
  CHECK(reread.hosts[1].ports[1].if2->name == "eth2v");
  CHECK(reread.hosts[1].ports[1].if2->mac == "02:00:00:00:02:11");
  CHECK(reread.hosts[1].ports[1].if1.ip.prefix_len == 24);
  CHECK_THAT(to_yaml(d.fabric, "derived\nfor the test"), Catch::StartsWith("# derived\n# for the test\nhosts:"));
}

TEST_CASE("ring4 in the virtual lab: ring B's mapping gives the fabric the ring test re-wires to") {
  Wiring w = load_wiring_file(fabrics::example("vlab-ring4.wiring.yaml"));
  DerivedFabric d = derive_fabric(w, mapping("ring4-b.mapping.yaml"));
  // The ring test's ring B: ring4's hosts with these circuits.
  Fabric hand = load_fabric_file(fabrics::example("ring4.yaml"));
  hand.circuits = {{{"h1", "p1"}, {"h3", "p0"}, ""},
                   {{"h3", "p1"}, {"h2", "p0"}, ""},
                   {{"h2", "p1"}, {"h4", "p0"}, ""},
                   {{"h4", "p1"}, {"h1", "p0"}, ""}};
  CHECK(links(d.fabric) == links(hand));
  CHECK(plan_json(d.fabric) == plan_json(hand));
}

TEST_CASE("a 3x3 torus on a 40x40 switch: shuffled circuits give the torus and its plan") {
  Wiring w;
  w.hosts = fabrics::hosts_with_ports(9, 4).hosts;  // p0 east, p1 west, p2 south, p3 north
  for (int i = 0; i < 9; ++i)
    for (int j = 0; j < 4; ++j)
      w.cables.push_back({{fabrics::host(i), "p" + std::to_string(j)}, 4 * i + j + 1, 41 + 4 * i + j, ""});
  validate_wiring(w);
  const std::vector<std::string> expected = {
      "h00:p0 <-> h01:p1", "h01:p0 <-> h02:p1", "h02:p0 <-> h00:p1", "h03:p0 <-> h04:p1", "h04:p0 <-> h05:p1",
      "h05:p0 <-> h03:p1", "h06:p0 <-> h07:p1", "h07:p0 <-> h08:p1", "h08:p0 <-> h06:p1", "h00:p2 <-> h03:p3",
      "h01:p2 <-> h04:p3", "h02:p2 <-> h05:p3", "h03:p2 <-> h06:p3", "h04:p2 <-> h07:p3", "h05:p2 <-> h08:p3",
      "h06:p2 <-> h00:p3", "h07:p2 <-> h01:p3", "h08:p2 <-> h02:p3"};
  // The switch's circuits: two per link, light from each port's tx to the other's rx.
  std::vector<OcsCircuit> circuits;
  auto cable = [&](const std::string& ref) { return *w.by_port({ref.substr(0, 3), ref.substr(4)}); };
  for (const auto& l : expected) {
    Cable a = cable(l.substr(0, 6)), b = cable(l.substr(11));
    circuits.push_back({a.tx, b.rx, "sw"});
    circuits.push_back({b.tx, a.rx, "sw"});
  }
  std::shuffle(circuits.begin(), circuits.end(), std::mt19937(7));
  circuits.push_back({38, 78, "sw"});  // an unwired pair: another user's circuit, ignored
  DerivedFabric d = derive_fabric(w, circuits);
  std::set<std::string> want;
  for (const auto& l : expected) {
    auto a = l.substr(0, 6), b = l.substr(11);
    want.insert(a < b ? a + " <-> " + b : b + " <-> " + a);
  }
  CHECK(links(d.fabric) == want);
  REQUIRE(d.ignored.size() == 1);
  CHECK(d.ignored[0].ingress == 38);
  CHECK(plan_json(d.fabric) == plan_json(fabrics::torus(3, 3)));
  // The switch's listing order does not change the result.
  std::shuffle(circuits.begin(), circuits.end(), std::mt19937(8));
  CHECK(to_yaml(derive_fabric(w, circuits).fabric) == to_yaml(d.fabric));
}

TEST_CASE("wiring files: every inconsistent entry is refused naming file:line and the entry") {
  CHECK(wiring_error(wiring3()) == "(accepted)");
  // A host port cabled twice, an OCS port used twice (as tx, or as tx of one and rx of another).
  CHECK(wiring_error(wiring3("  - {host: h1, port: p0, tx: 1, rx: 9}\n"
                             "  - {host: h1, port: p0, tx: 2, rx: 10}\n")) ==
        "w.yaml:22:5: port h1:p0 is cabled twice (w.yaml:21:5)");
  CHECK(wiring_error(wiring3("  - {host: h1, port: p0, tx: 1, rx: 9}\n"
                             "  - {host: h2, port: p0, tx: 1, rx: 10}\n")) ==
        "w.yaml:22:5: OCS port 1 is wired twice: tx of h1:p0 and tx of h2:p0 (w.yaml:21:5)");
  CHECK(wiring_error(wiring3("  - {host: h1, port: p0, tx: 1, rx: 9}\n"
                             "  - {host: h2, port: p0, tx: 2, rx: 1}\n")) ==
        "w.yaml:22:5: OCS port 1 is wired twice: tx of h1:p0 and rx of h2:p0 (w.yaml:21:5)");
  CHECK(wiring_error(wiring3("  - {host: h1, port: p0, tx: 5, rx: 5}\n")) ==
        "w.yaml:21:5: OCS port 5 is wired twice: tx of h1:p0 and rx of h1:p0 (w.yaml:21:5)");
  // Entries for hosts and ports the file does not define.
  CHECK(wiring_error(wiring3("  - {host: h9, port: p0, tx: 1, rx: 9}\n")) ==
        "w.yaml:21:5: cable for unknown host 'h9'");
  CHECK(wiring_error(wiring3("  - {host: h2, port: p7, tx: 1, rx: 9}\n")) ==
        "w.yaml:21:5: cable for unknown port: host 'h2' has no port 'p7'");
  // MACs and IPs used twice, as in fabric files.
  CHECK(wiring_error(wiring3("  - {host: h1, port: p0, tx: 1, rx: 9}\n", "10.0.0.2/24")) ==
        "w.yaml:18:14: IP 10.0.0.2 of h3:p0 if1 already used by h2:p0 if1 (w.yaml:10:14)");
  CHECK(wiring_error(wiring3("  - {host: h1, port: p0, tx: 1, rx: 9}\n", "10.0.0.3/24", "02:00:00:00:02:12")) ==
        "w.yaml:19:14: MAC 02:00:00:00:02:12 of h3:p0 if2 already used by h2:p1 if2 (w.yaml:14:14)");
  // Names a derived circuit "host:port <-> host:port" could not carry.
  std::string colon = wiring3();
  colon.replace(colon.find("- name: h3"), 10, "- name: \"h:3\"");
  CHECK(wiring_error(colon) ==
        "w.yaml:15:5: host name 'h:3' cannot be written in a circuit 'host:port <-> host:port' (no ':', '<->' or "
        "white space)");
  std::string space = wiring3();
  space.replace(space.find("- name: p1"), 10, "- name: \"p 1\"");
  CHECK_THAT(wiring_error(space), Catch::StartsWith("w.yaml:12:9: port name 'p 1' cannot be written"));
  // Malformed entries point at the value.
  CHECK(wiring_error(wiring3("  - {host: h1, port: p0, tx: 0, rx: 9}\n")) ==
        "w.yaml:21:30: 'tx' must be an OCS port number >= 1");
  CHECK_THAT(wiring_error(wiring3("  - {host: h1, port: p0, tx: one, rx: 9}\n")), Catch::StartsWith("w.yaml:21:30: "));
  CHECK_THAT(wiring_error(wiring3("  - {host: h1, port: p0, tx: 1, rx: 9, speed: 100}\n")),
             Catch::StartsWith("w.yaml:21:") && Catch::Contains("unknown key 'speed'"));
  CHECK_THAT(wiring_error(wiring3("  - h1:p0 1 9\n")), Catch::StartsWith("w.yaml:21:5: expected a cable as"));
  CHECK_THAT(wiring_error("hosts: []\n"), Catch::Contains("cables"));
  CHECK_THAT(wiring_error(wiring3() + "circuits: []\n"), Catch::Contains("unknown key 'circuits'"));
}

TEST_CASE("wiring against a switch's layout: tx on an ingress, rx on an egress") {
  Wiring w = load_wiring_string(wiring3(), "w.yaml");
  check_wiring_ports(w, 8, 8, "switch sw");  // 1..8 ingress, 9..16 egress
  CHECK_THROWS_WITH(check_wiring_ports(w, 2, 12, "switch sw"),
                    "w.yaml:23:5: h2:p1 tx 3 is not an ingress port (switch sw is 2x12: ingress 1..2, egress 3..14)");
  CHECK_THROWS_WITH(check_wiring_ports(w, 10, 8, "switch sw"),
                    "w.yaml:21:5: h1:p0 rx 9 is not an egress port (switch sw is 10x8: ingress 1..10, egress 11..18)");
  CHECK_THROWS_WITH(check_wiring_ports(w, 3, 8, "switch sw"),
                    "w.yaml:24:5: h3:p0 tx 4 is not an ingress port (switch sw is 3x8: ingress 1..3, egress 4..11)");
  CHECK_THROWS_WITH(check_wiring_ports(w, 8, 3, "switch sw"),
                    "w.yaml:24:5: h3:p0 rx 12 is not an egress port (switch sw is 8x3: ingress 1..8, egress 9..11)");
}

TEST_CASE("deriving: circuits that do not make bidirectional links between wired ports are refused") {
  auto c = line3();
  DerivedFabric d = derive_fabric(load_wiring_string(wiring3(), "w.yaml"), c);
  CHECK(links(d.fabric) == std::set<std::string>{"h1:p0 <-> h2:p0", "h2:p1 <-> h3:p0"});

  // A circuit to an unwired port (either end).
  auto to_unwired = c;
  to_unwired[2].egress = 16;
  CHECK(derive_error(to_unwired) ==
        "m.yaml:4:5: circuit 3-16: egress 16 is not in the wiring, but ingress 3 is the tx of h2:p1 (w.yaml:23:5): "
        "forwarding needs circuits between wired ports");
  auto from_unwired = c;
  from_unwired[2].ingress = 8;
  CHECK(derive_error(from_unwired) ==
        "m.yaml:4:5: circuit 8-12: ingress 8 is not in the wiring, but egress 12 is the rx of h3:p0 (w.yaml:24:5): "
        "forwarding needs circuits between wired ports");
  // A circuit written the wrong way round (egress-ingress) touches wired ports: not ignored.
  auto reversed = c;
  reversed[1] = {9, 2, "m.yaml:3:5"};
  CHECK(derive_error(reversed) ==
        "m.yaml:3:5: circuit 9-2: ingress 9 is wired as the rx of h1:p0 (w.yaml:21:5): light enters the switch at a "
        "tx port and leaves at an rx port");
  reversed[1] = {7, 2, "m.yaml:3:5"};
  CHECK(derive_error(reversed) ==
        "m.yaml:3:5: circuit 7-2: egress 2 is wired as the tx of h2:p0 (w.yaml:22:5): light enters the switch at a "
        "tx port and leaves at an rx port");
  // One direction only.
  auto one_way = c;
  one_way.pop_back();  // 4-11 (h3 -> h2) missing
  CHECK(derive_error(one_way) ==
        "m.yaml:4:5: circuit 3-12 carries h2:p1 -> h3:p0, but h3:p0's tx (ingress 4) is in no circuit: forwarding "
        "needs both directions (add circuit 4-11)");
  // The reverse direction leads to another port: a one-way triangle h1 -> h2 -> h3 -> h1.
  std::vector<OcsCircuit> crossed = {{1, 10, "m.yaml:2:5"}, {2, 12, "m.yaml:3:5"}, {4, 9, "m.yaml:4:5"}};
  CHECK(derive_error(crossed) ==
        "m.yaml:2:5: circuit 1-10 carries h1:p0 -> h2:p0, but h2:p0's tx goes to h3:p0 by circuit 2-12 (m.yaml:3:5), "
        "not back to h1:p0: forwarding needs both directions on one pair of ports");
  // Two ports of one host.
  std::vector<OcsCircuit> loop = {{2, 11, "m.yaml:2:5"}, {3, 10, "m.yaml:3:5"}};
  CHECK(derive_error(loop) == "m.yaml:2:5: circuit 2-11 connects h2:p0 to h2:p1: both on host 'h2'");
  // An ingress twice (a switch listing can be read without the mapping file's checks).
  auto twice = c;
  twice.push_back({1, 12, "sw"});
  CHECK(derive_error(twice) == "sw: circuit 1-12: ingress 1 is also in circuit 1-10 (m.yaml:2:5)");
  // Links that leave a host unreachable: the fabric check names the host in the wiring.
  std::vector<OcsCircuit> half = {c[0], c[1]};
  CHECK(derive_error(half) == "w.yaml:15:5: host 'h3' is unreachable from 'h1' over the circuits");
  // Circuits between unwired ports are somebody else's: ignored, not an error.
  auto others = c;
  others.push_back({7, 15, "m.yaml:6:5"});
  DerivedFabric o = derive_fabric(load_wiring_string(wiring3(), "w.yaml"), others);
  REQUIRE(o.ignored.size() == 1);
  CHECK(o.ignored[0].where == "m.yaml:6:5");
  CHECK(links(o.fabric) == links(d.fabric));
}

}  // namespace wiring_test
