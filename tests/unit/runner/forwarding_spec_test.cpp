// The spec's forwarding section, the fabric built from a mapping, and the verify matrix's
// assembly from relay counter deltas (runner/forwarding_spec.h, runner/lab_forwarding.h).
#include <catch2/catch.hpp>

#include <filesystem>
#include <map>
#include <set>
#include <string>

#include "ocslab/common/file.h"
#include "ocslab/forwarding/routes.h"
#include "ocslab/runner/experiment_spec.h"
#include "ocslab/runner/forwarding_follow.h"
#include "ocslab/runner/lab_forwarding.h"
#include "ocslab/testing/small_disk.h"
#include "spec_test_support.h"

using namespace ocslab;
using namespace ocslab::runner;
using Catch::Matchers::Contains;
using spec_test::error_of;
using spec_test::parse;
using spec_test::source_dir;

namespace {

// Next to the runner-forwarding test's spec, so `fwdrun-ring.yaml` resolves to its lab file.
constexpr const char* kOrigin = "/tests/vlab/labs/test.spec.yaml";

// The runner-forwarding test's lab: ring4's addresses, no if2 in the lab.
const char* kHead =
    "lab: {vlab: fwdrun-ring.yaml}\n"
    "mappings:\n"
    "  ring-a: [h1:eth2 <-> h2:eth1, h2:eth2 <-> h3:eth1, h3:eth2 <-> h4:eth1, h4:eth2 <-> h1:eth1]\n"
    "  ring-b: [h1:eth2 <-> h3:eth1, h3:eth2 <-> h2:eth1, h2:eth2 <-> h4:eth1, h4:eth2 <-> h1:eth1]\n";
const char* kMacs =
    "  hosts:\n"
    "    h1: {nics: {eth1: {if2_mac: '02:00:00:00:01:10'}, eth2: {if2_mac: '02:00:00:00:01:11'}}}\n"
    "    h2: {nics: {eth1: {if2_mac: '02:00:00:00:02:10'}, eth2: {if2_mac: '02:00:00:00:02:11'}}}\n"
    "    h3: {nics: {eth1: {if2_mac: '02:00:00:00:03:10'}, eth2: {if2_mac: '02:00:00:00:03:11'}}}\n"
    "    h4: {nics: {eth1: {if2_mac: '02:00:00:00:04:10'}, eth2: {if2_mac: '02:00:00:00:04:11'}}}\n";

// kMacs without host's line, for a case that writes that host's entry itself: a key given twice
// is refused (YAML would keep only one of them).
std::string macs_but(const std::string& host) {
  std::string m = kMacs;
  const size_t at = m.find("    " + host + ": ");
  return m.erase(at, m.find('\n', at) + 1 - at);
}

}  // namespace

TEST_CASE("the forwarding section: lab defaults, options, per-NIC values", "[runner][forwarding]") {
  auto s = load_experiment_spec(source_dir() + "/tests/vlab/labs/fwdrun-ring.spec.yaml");
  const auto& f = s.forwarding;
  REQUIRE(f.enabled);
  CHECK(f.verify == VerifyWhen::kEvery);
  CHECK(f.state_dir == "/var/lib/fwdrun-ring");
  CHECK(f.ping_count == 20);
  REQUIRE(f.hosts.size() == 4);
  CHECK(f.hosts[1].if2 == If2Mode::kMacvlan);
  REQUIRE(f.hosts[1].nics.size() == 2);
  const auto& n = f.hosts[1].nics[1];  // h2:eth2, from the lab file and the section
  CHECK(n.nic == "eth2");
  CHECK(n.ip == "10.0.0.21/24");
  CHECK(n.mac == "02:00:00:00:02:01");
  CHECK(n.rdma == "rxe_eth2");
  CHECK(n.if2 == "eth2v");
  CHECK(n.if2_mac == "02:00:00:00:02:11");

  auto o = parse(std::string(kHead) +
                     "forwarding:\n  if2: device\n  verify: true\n  relay: false\n  every_nic: true\n"
                     "  routes: {balance: true, traffic: ring, ring: [h1, h3, h2, h4]}\n"
                     "  ping: {count: 5, timeout_s: 3, port: 19000}\n" +
                     macs_but("h3") +
                     "    h3: {if2: macvlan, nics: {eth1: {if2: p1v, rdma: mlx5_0, if2_mac: '02:00:00:00:03:10'}, "
                     "eth2: {if2_mac: '02:00:00:00:03:11'}}}\n",
                 kOrigin);
  CHECK(o.forwarding.verify == VerifyWhen::kFirst);
  CHECK_FALSE(o.forwarding.relay);
  CHECK(o.forwarding.every_nic);
  CHECK(o.forwarding.balance);
  CHECK(o.forwarding.ring == std::vector<std::string>{"h1", "h3", "h2", "h4"});
  CHECK(o.forwarding.ping_count == 5);
  CHECK(o.forwarding.ping_port == 19000);
  CHECK(o.forwarding.hosts[0].if2 == If2Mode::kDevice);
  CHECK(o.forwarding.hosts[2].if2 == If2Mode::kMacvlan);
  CHECK(o.forwarding.hosts[2].nics[0].if2 == "p1v");
  CHECK(o.forwarding.hosts[2].nics[0].rdma == "mlx5_0");
  // Without the section, forwarding is off; every_nic is opt-in.
  CHECK_FALSE(parse(kHead, kOrigin).forwarding.enabled);
  CHECK_FALSE(parse(std::string(kHead) + "forwarding:\n  verify: true\n" + kMacs, kOrigin).forwarding.every_nic);
  // if2 names reach netlink and the hosts' shells: the kernel's rule, named in the error.
  CHECK_THAT(error_of(std::string(kHead) + "forwarding:\n  if2: macvlan\n" + macs_but("h3") +
                          "    h3: {nics: {eth1: {if2: 'p1v/../x', if2_mac: '02:00:00:00:03:10'}}}\n",
                      kOrigin),
             Contains("h3:eth1: if2 'p1v/../x' is not an interface name ('/' is not allowed"));
}

TEST_CASE("the forwarding section rejects bad input naming the entry", "[runner][forwarding]") {
  std::string base = std::string(kHead) + "forwarding:\n";
  // No if2 MAC anywhere for a NIC a mapping links.
  CHECK_THAT(error_of(base + "  if2: macvlan\n", kOrigin),
             Contains("h1:eth1 is linked by a mapping but has no if2_mac"));
  CHECK_THAT(error_of(base + kMacs + "    h9: {}\n", kOrigin), Contains("test.spec.yaml:11:5: unknown host 'h9'"));
  CHECK_THAT(error_of(base + macs_but("h1") + "    h1: {nics: {eth7: {}}}\n", kOrigin),
             Contains("host 'h1' has no data NIC 'eth7'"));
  CHECK_THAT(error_of(base + "  if2: npar\n" + kMacs, kOrigin), Contains("if2 must be macvlan"));
  CHECK_THAT(error_of(base + "  verify: sometimes\n" + kMacs, kOrigin), Contains("verify must be true"));
  CHECK_THAT(error_of(base + "  routes: {traffic: hotspot}\n" + kMacs, kOrigin),
             Contains("traffic must be all-to-all or ring"));
  CHECK_THAT(error_of(base + "  routes: {ring: [h1, h2]}\n" + kMacs, kOrigin), Contains("ring must list all 4 hosts"));
  CHECK_THAT(error_of(base + "  state_dir: relative\n" + kMacs, kOrigin),
             Contains("state_dir must be an absolute path"));
  CHECK_THAT(error_of(base + "  colour: red\n" + kMacs, kOrigin), Contains("unknown key 'colour'"));
  CHECK_THAT(error_of(base + kMacs + "    h1b: {nics: {eth1: {mac: 'zz'}}}\n", kOrigin),
             Contains("unknown host 'h1b'"));
  // h2:eth1's if2 MAC equal to h1:eth1's: the fabric of every mapping is validated at parse time.
  std::string dup = kMacs;
  dup.replace(dup.find("02:00:00:00:02:10"), 17, "02:00:00:00:01:10");
  CHECK_THAT(error_of(base + dup, kOrigin), Contains("forwarding over mapping 'ring-a'"));
  CHECK_THAT(error_of(base + dup, kOrigin), Contains("02:00:00:00:01:10"));
  // A malformed MAC names its position.
  std::string bad = kMacs;
  bad.replace(bad.find("02:00:00:00:03:11"), 17, "02:00:00:00:03:1g");
  CHECK_THAT(error_of(base + bad, kOrigin), Contains("is not a MAC address"));
}

TEST_CASE("the fabric of a mapping: the spec's hosts and NICs, the mapping's links as circuits",
          "[runner][forwarding]") {
  auto s = load_experiment_spec(source_dir() + "/tests/vlab/labs/fwdrun-ring.spec.yaml");
  auto a = fabric_for(s, s.mappings[0]);
  REQUIRE(a.hosts.size() == 4);
  REQUIRE(a.hosts[0].ports.size() == 2);
  CHECK(a.hosts[0].ports[0].if1.name == "eth1");
  CHECK(a.hosts[0].ports[0].if2->name == "eth1v");
  CHECK(a.hosts[0].ports[0].if2->mac == "02:00:00:00:01:10");
  REQUIRE(a.circuits.size() == 4);
  CHECK(to_string(a.circuits[0].a) == "h1:eth2");
  CHECK(to_string(a.circuits[0].b) == "h2:eth1");

  // Ring A: h1 -> h3 goes through h2 and uses h3:eth1 (10.0.0.30); ring B: h1 and h2 are
  // opposite, h3 relays, 10.0.0.20 from h1's eth2.
  auto ra = forwarding::compute_routes(a, route_options(s, a));
  auto p = plan_pair(a, ra, "h1", "h3");
  CHECK(p.dst_ip == "10.0.0.30/32");
  CHECK(p.src_if == "eth2");
  CHECK(p.dst_if == "eth1");
  CHECK(p.expected_hops == 2);
  CHECK(p.expected_relays == std::vector<std::string>{"h2"});
  CHECK(plan_pair(a, ra, "h1", "h2").expected_hops == 1);
  auto b = fabric_for(s, s.mappings[1]);
  auto rb = forwarding::compute_routes(b, route_options(s, b));
  auto q = plan_pair(b, rb, "h1", "h2");
  CHECK(q.dst_ip == "10.0.0.20/32");
  CHECK(q.src_if == "eth2");
  CHECK(q.expected_relays == std::vector<std::string>{"h3"});
  CHECK(plan_pair(b, rb, "h1", "h3").expected_hops == 1);

  // Every host's plan; the if2 macvlans (if2: macvlan) only where a clsact is planned.
  auto plans = lab_plans(s, s.mappings[0]);
  REQUIRE(plans.size() == 4);
  CHECK(plans[0].host == "h1");
  CHECK(plans[0].routes.size() == 6);
  CHECK(plans[0].links.size() == 2);
  CHECK(plans[0].links[0].parent == "eth1");
  CHECK(plans[0].links[0].mac == "02:00:00:00:01:10");
}

TEST_CASE("hops from relay counter deltas", "[runner][forwarding]") {
  std::vector<FilterCount> before = {{"h2", "eth1v", "10.0.0.30/32", 100},
                                     {"h2", "eth2v", "10.0.0.11/32", 50},
                                     {"h3", "eth1v", "10.0.0.30/32", 7},
                                     {"h4", "eth1v", "10.0.0.10/32", 0}};
  // The ping's 20 SENDs went through h2; its replies (to 10.0.0.11) moved another filter; h3's
  // filter for the same address moved by less than the ping (background), h4's is new.
  std::vector<FilterCount> after = {{"h2", "eth1v", "10.0.0.30/32", 121},
                                    {"h2", "eth2v", "10.0.0.11/32", 71},
                                    {"h3", "eth1v", "10.0.0.30/32", 9},
                                    {"h4", "eth1v", "10.0.0.10/32", 30}};
  CHECK(relays_from_counters(before, after, "10.0.0.30/32", 20, {"h2"}) == std::vector<std::string>{"h2"});
  CHECK(relays_from_counters(before, after, "10.0.0.30/32", 2, {"h2"}) == std::vector<std::string>{"h2", "h3"});
  // A counter absent before counts from 0; one that went down (filter re-created) from 0 too.
  CHECK(relays_from_counters({}, after, "10.0.0.10/32", 20, {}) == std::vector<std::string>{"h4"});
  std::vector<FilterCount> reset = {{"h2", "eth1v", "10.0.0.30/32", 25}};
  CHECK(relays_from_counters(before, reset, "10.0.0.30/32", 20, {}) == std::vector<std::string>{"h2"});
  CHECK(relays_from_counters(before, before, "10.0.0.30/32", 20, {"h2"}).empty());
  // Path order first, then the unexpected ones by name.
  std::vector<FilterCount> b2 = {{"h4", "x", "d", 0}, {"h3", "x", "d", 0}, {"h1", "x", "d", 0}};
  std::vector<FilterCount> a2 = {{"h4", "x", "d", 5}, {"h3", "x", "d", 5}, {"h1", "x", "d", 5}};
  CHECK(relays_from_counters(b2, a2, "d", 5, {"h4", "h3"}) == std::vector<std::string>{"h4", "h3", "h1"});
}

TEST_CASE("the matrix: table, CSV columns, JSON and the planned-path check", "[runner][forwarding]") {
  VerifyMatrix m;
  m.mapping = "ring-a";
  m.hosts = {"h1", "h2", "h3"};
  m.in_sync = {{"h1", true}, {"h2", true}, {"h3", false}};
  PairResult direct;
  direct.src = "h1";
  direct.dst = "h2";
  direct.expected_hops = direct.hops = 1;
  direct.reachable = true;
  PairResult relayed = direct;
  relayed.dst = "h3";
  relayed.expected_hops = relayed.hops = 2;
  relayed.expected_relays = relayed.relays = {"h2"};
  PairResult failed = direct;
  failed.src = "h3";
  failed.dst = "h1";
  failed.reachable = false;
  failed.hops = 0;
  m.pairs = {direct, relayed};
  CHECK(m.all_reachable());
  CHECK(m.hops_as_planned());
  auto t = format_matrix(m);
  CHECK_THAT(t, Contains("2 via h2"));
  CHECK_THAT(t, Contains("out of sync with the plan: h3"));
  m.pairs[1].relays = {"h3"};  // another relay than planned
  CHECK_FALSE(m.hops_as_planned());
  CHECK_THAT(format_matrix(m), Contains("2 via h3 !"));
  m.pairs.push_back(failed);
  CHECK_FALSE(m.all_reachable());
  CHECK_THAT(format_matrix(m), Contains("FAIL"));
  CHECK_THAT(format_matrix(m), Contains("2 of 3 pairs reachable, 1 over the planned path"));
  auto j = to_json(m);
  CHECK(j["pairs"].size() == 3);
  CHECK(j["all_reachable"] == false);
  CHECK(j["pairs"][1]["relays"][0] == "h3");
}

TEST_CASE("the matrix files on a full disk: the one that does not fit is named, none truncated silently",
          "[runner][forwarding]") {
  VerifyMatrix m;
  m.mapping = "m";
  for (int i = 0; i < 24; ++i) {
    PairResult p;
    p.src = "h" + std::to_string(i);
    p.dst = "h" + std::to_string(i + 1);
    p.expected_hops = p.hops = 1;
    p.reachable = true;
    m.hosts.push_back(p.src);
    m.pairs.push_back(p);
  }
  // Two 4 KiB pages: the CSV takes one, the JSON needs more than the other.
  testing::SmallDisk disk("8k");
  testing::TempDir roomy;
  write_matrix_csv(m, roomy.path() + "/m.csv");
  REQUIRE(std::filesystem::file_size(roomy.path() + "/m.csv") < 4096u);
  REQUIRE(to_json(m).dump(2).size() > 4096u);
  const std::string base = disk.path() + "/forwarding-verify-0-m";
  CHECK_THROWS_WITH(write_matrix_files(m, disk.path(), 0), Contains("cannot write " + base + ".json"));
  CHECK(read_file(base + ".csv") == read_file(roomy.path() + "/m.csv"));
}

TEST_CASE("verify matrix rounds: every ordered pair once, no host twice in a round", "[runner][forwarding]") {
  for (size_t n : {1u, 2u, 3u, 4u, 5u, 8u, 16u}) {
    INFO(n << " hosts");
    auto rounds = verify_rounds(n);
    std::set<std::pair<size_t, size_t>> seen;
    for (const auto& round : rounds) {
      CHECK_FALSE(round.empty());
      std::set<size_t> hosts;
      for (auto [s, d] : round) {
        CHECK(s != d);
        CHECK(s < n);
        CHECK(d < n);
        CHECK(hosts.insert(s).second);  // a source is in no other pair of its round...
        CHECK(hosts.insert(d).second);  // ...nor is a destination, nor one host both
        CHECK(seen.insert({s, d}).second);
      }
    }
    CHECK(seen.size() == n * (n - 1));
    CHECK(rounds.size() <= 3 * n);
  }
  // The fewest possible where n is even and the greedy order finds it: 2 (n - 1) rounds of n / 2.
  CHECK(verify_rounds(4).size() == 6);
  CHECK(verify_rounds(16).size() == 30);
  CHECK(verify_rounds(4)[0] == std::vector<std::pair<size_t, size_t>>{{0, 1}, {2, 3}});
}

TEST_CASE("forwarding's remote commands quote every word: a hostile NIC name stays one word", "[runner][forwarding]") {
  // The spec refuses such names; the command line is quoted anyway (one path for every command).
  auto argv = ping_argv("e0;reboot", true, "h2$(id)", 18600, 20, 15);
  CHECK(agent_forwarding_command("sudo -n /usr/bin/ocslab-agent", argv) ==
        "sudo -n /usr/bin/ocslab-agent forwarding ping --if 'e0;reboot' --listen 'h2$(id):18600' --secret-file - "
        "--count 20 --timeout-s 15");
  CHECK(agent_forwarding_command("ocslab-agent", ping_argv("ens1f0", false, "10.0.0.2", 18601, 5, 10)) ==
        "ocslab-agent forwarding ping --if ens1f0 --connect 10.0.0.2:18601 --secret-file - --count 5 --timeout-s 10");
  CHECK(agent_forwarding_command("ocslab-agent", {"clear", "--host", "h1", "--state-dir", "/var/lib/x y"}) ==
        "ocslab-agent forwarding clear --host h1 --state-dir '/var/lib/x y'");
}

TEST_CASE("following the fabric: reroute_on_dark, make_before_break, verify_change", "[runner][forwarding]") {
  const std::string line = "  line: [h1:eth2 <-> h2:eth1, h2:eth2 <-> h3:eth1, h3:eth2 <-> h4:eth1]\n";
  const std::string monitor = "switch: {power_monitor: {interval_ms: 20}}\n";
  // The shipped spec of the vlab case: all three on, the power monitor they need.
  auto s = load_experiment_spec(source_dir() + "/tests/vlab/labs/fwdrun-ring-reroute.spec.yaml");
  CHECK(s.forwarding.reroute_on_dark);
  CHECK(s.forwarding.make_before_break);
  CHECK(s.forwarding.verify_change);
  CHECK(s.power_monitor_ms == 20);
  // Off unless asked for.
  auto plain = parse(std::string(kHead) + "forwarding:\n" + kMacs, kOrigin);
  CHECK_FALSE(plain.forwarding.reroute_on_dark);
  CHECK_FALSE(plain.forwarding.make_before_break);
  CHECK_FALSE(plain.forwarding.verify_change);
  auto on = parse(std::string(kHead) + line + monitor + "forwarding:\n  reroute_on_dark: true\n  make_before_break: true\n" +
                      "  verify_change: true\n" + kMacs,
                  kOrigin);
  CHECK(on.forwarding.reroute_on_dark);
  CHECK(on.forwarding.make_before_break);

  // Bad input, at its position, before anything is touched: kHead's 4 lines and `line`, then
  // the forwarding section (after the switch's when it has one).
  const std::string head = std::string(kHead) + line;
  CHECK_THAT(error_of(head + "forwarding:\n  reroute_on_dark: true\n" + kMacs, kOrigin),
             Contains("test.spec.yaml:7:20: reroute_on_dark needs switch.power_monitor"));
  CHECK_THAT(error_of(head + monitor + "forwarding:\n  reroute_on_dark: often\n" + kMacs, kOrigin),
             Contains("test.spec.yaml:8:20: expected true or false"));
  CHECK_THAT(error_of(head + "forwarding:\n  make_before_break: 2\n" + kMacs, kOrigin),
             Contains("test.spec.yaml:7:22: expected true or false"));
  CHECK_THAT(error_of(head + "forwarding:\n  make_before_brake: true\n" + kMacs, kOrigin),
             Contains("test.spec.yaml:7:3: unknown key 'make_before_brake'"));
  CHECK_THAT(error_of(head + "forwarding:\n  verify_change: yes please\n" + kMacs, kOrigin),
             Contains("test.spec.yaml:7:18: expected true or false"));
  // The hosts' carrier probe is the other source of dark circuits.
  CHECK(error_of(head + "probes: {carrier: {interval_ms: 1}}\nforwarding:\n  reroute_on_dark: true\n" + kMacs,
                 kOrigin) == "accepted");
}

TEST_CASE("port states: the power monitor's light and the hosts' carrier, link-up after a change",
          "[runner][forwarding]") {
  auto s = load_experiment_spec(source_dir() + "/tests/vlab/labs/fwdrun-ring.spec.yaml");
  const auto fabric = fabric_for(s, s.mappings[0]);
  auto sample = [](const char* host, const char* nic, const char* source, const char* signal, double v, int64_t t) {
    return Sample{t, 0, host, source, nic, signal, v, "bool"};
  };
  PortStates st;
  uint64_t v0 = 0;
  CHECK(st.snapshot(&v0).empty());
  st.observe(sample("h1", "eth1", "ocs_power", "light", 1, 100), 1000);
  st.observe(sample("h1", "eth1", "ocs_power", "power_dbm", -3, 100), 1000);  // not a light reading
  st.observe(sample("h1", "eth1", "heartbeat", "light", 0, 100), 1000);       // nor another source's
  CHECK(dark_circuit_ends(fabric, st.snapshot()).empty());
  // The switch sees h1:eth1's light go: dark since the monitor's reading (its clock is the runner's).
  st.observe(sample("h1", "eth1", "ocs_power", "light", 0, 200), 5000);
  auto snap = st.snapshot();
  CHECK(dark_circuit_ends(fabric, snap) == std::set<forwarding::PortRef>{{"h1", "eth1"}});
  CHECK(snap.at({"h1", "eth1"}).since_ns == 200);
  // A host's carrier: stamped when the runner received it (a host's own clock is corrected later).
  st.observe(sample("h3", "eth2", "carrier", "carrier", 0, 7), 300);
  CHECK(dark_circuit_ends(fabric, st.snapshot()).size() == 2);
  CHECK(st.snapshot().at({"h3", "eth2"}).since_ns == 300);
  st.observe(sample("h1", "eth1", "ocs_power", "light", 1, 400), 5000);
  st.observe(sample("h3", "eth2", "carrier", "carrier", 1, 8), 450);
  snap = st.snapshot();
  CHECK(dark_circuit_ends(fabric, snap).empty());
  CHECK(snap.at({"h3", "eth2"}).since_ns == 450);
  // The same reading again changes nothing (the version stays, check() has nothing to do).
  uint64_t v1 = st.version();
  st.observe(sample("h3", "eth2", "carrier", "carrier", 1, 9), 460);
  CHECK(st.version() == v1);
  // A change made a circuit on h2:eth1, whose carrier is down until its link comes up: not dark
  // meanwhile, and dark again when it drops after having been up.
  st.observe(sample("h2", "eth1", "carrier", "carrier", 0, 10), 500);
  CHECK(dark_circuit_ends(fabric, st.snapshot()).size() == 1);
  st.expect_link_up({{"h2", "eth1"}, {"h4", "eth2"}});  // h4:eth2 never reported: nothing to wait for
  CHECK(dark_circuit_ends(fabric, st.snapshot()).empty());
  st.observe(sample("h2", "eth1", "carrier", "carrier", 1, 11), 600);
  st.observe(sample("h2", "eth1", "carrier", "carrier", 0, 12), 700);
  CHECK(dark_circuit_ends(fabric, st.snapshot()) == std::set<forwarding::PortRef>{{"h2", "eth1"}});
}

TEST_CASE("the dark ends of a mapping's circuits, from the power monitor's last readings", "[runner][forwarding]") {
  auto s = load_experiment_spec(source_dir() + "/tests/vlab/labs/fwdrun-ring.spec.yaml");
  const auto fabric = fabric_for(s, s.mappings[0]);  // ring-a: h4:eth2 <-> h1:eth1 among them
  std::map<forwarding::PortRef, PortLight> light;
  CHECK(dark_circuit_ends(fabric, light).empty());  // nothing read yet: lit
  light[{"h1", "eth1"}] = {false, 100};
  light[{"h2", "eth2"}] = {true, 50};
  light[{"h9", "eth1"}] = {false, 70};  // not an end of any circuit: ignored
  CHECK(dark_circuit_ends(fabric, light) == std::set<forwarding::PortRef>{{"h1", "eth1"}});
}
