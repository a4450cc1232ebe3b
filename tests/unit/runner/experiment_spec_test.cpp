#include <catch2/catch.hpp>

#include <string>

#include "ocslab/runner/experiment_spec.h"
#include "ocslab/runner/fault_injection.h"
#include "ocslab/runner/merge.h"
#include "ocslab/runner/runner.h"
#include "spec_test_support.h"

using namespace ocslab;
using namespace ocslab::runner;
using Catch::Matchers::Contains;
using spec_test::error_of;
using spec_test::parse;
using spec_test::source_dir;

namespace {

const char* kLab = "lab: {vlab: ../labs/four-hosts.yaml}\n";
const char* kMaps =
    "mappings:\n"
    "  rail-a: [h1:eth1 <-> h2:eth1, h3:eth1 <-> h4:eth1]\n"
    "  rail-b: [h1:eth1 <-> h3:eth1, h2:eth1 <-> h4:eth1]\n";

}  // namespace

TEST_CASE("the demo spec loads with the lab's hosts, ports and derived RDMA pairs", "[runner][spec]") {
  auto s = load_experiment_spec(source_dir() + "/experiments/specs/demo.yaml");
  CHECK(s.name == "demo");
  CHECK(s.vlab_name == "four-hosts");
  REQUIRE(s.hosts.size() == 4);
  CHECK(s.hosts[0].name == "h1");
  CHECK(s.hosts[0].nics.at(0).tx_port == 1);
  CHECK(s.hosts[0].nics.at(0).rx_port == 17);
  REQUIRE(s.mappings.size() == 2);
  CHECK(s.mappings[0].name == "rail-a");
  // h1-h2 and h3-h4: 1->18, 2->17, 3->20, 4->19, sorted
  std::vector<ocs::Circuit> a = {{1, 18}, {2, 17}, {3, 20}, {4, 19}};
  CHECK(s.mappings[0].circuits == a);
  CHECK(s.allow.to_string() == "1..4,17..20");
  CHECK(s.reconfigurations == 10);
  CHECK(s.rdma.enabled);
  CHECK(s.rdma.pairs.size() == 4);  // one per distinct link of either mapping
  CHECK(s.rdma.timeout == 12);
  CHECK_FALSE(s.rdma.pin_neighbours.has_value());
  CHECK(rdma_pins_neighbours(s));  // a virtual lab without forwarding: pinned by default
  REQUIRE(s.probes.size() == 2);
  auto sched = s.schedule();
  REQUIRE(sched.size() == 10);
  CHECK(sched[0] == 1);
  CHECK(sched[1] == 0);
  CHECK(sched[9] == 0);
}

TEST_CASE("random order never repeats the current mapping and follows the seed", "[runner][spec]") {
  auto s = parse(std::string(kLab) + kMaps +
                 "  rail-c: [h1:eth1 <-> h4:eth1, h2:eth1 <-> h3:eth1]\n"
                 "schedule: {reconfigurations: 50, order: random}\nseed: 7\n");
  auto a = s.schedule();
  size_t cur = 0;
  for (auto m : a) {
    CHECK(m != cur);
    cur = m;
  }
  auto b = s.schedule();
  CHECK(a == b);
  s.seed = 8;
  CHECK(s.schedule() != a);
}

TEST_CASE("a bad spec is refused with file:line:col before anything runs", "[runner][spec]") {
  CHECK_THAT(error_of(std::string(kLab) + "mappings:\n  rail-a: [h1:eth1 <-> h9:eth1]\n  rail-b: [h1:eth1 <-> h3:eth1]\n"),
             Catch::Matchers::Contains("test.yaml:3:") && Catch::Matchers::Contains("unknown host 'h9'"));
  CHECK_THAT(error_of(std::string(kLab) + "mappings:\n  rail-a: [h1:eth7 <-> h2:eth1]\n  rail-b: [h1:eth1 <-> h3:eth1]\n"),
             Catch::Matchers::Contains("host 'h1' has no data NIC 'eth7' (it has: eth1)"));
  CHECK_THAT(error_of(std::string(kLab) + "mappings:\n  rail-a: [h1:eth1 <-> h2:eth1]\n"),
             Catch::Matchers::Contains("at least two"));
  CHECK_THAT(error_of(std::string(kLab) + "mappings:\n  rail-a: [h1:eth1 <-> h2:eth1]\n  rail-b: [h2:eth1 <-> h1:eth1]\n"),
             Catch::Matchers::Contains("makes the same circuits as 'rail-a'"));
  CHECK_THAT(error_of(std::string(kLab) + "mappings:\n  rail-a: [h1:eth1 <-> h2:eth1, h1:eth1 <-> h3:eth1]\n"
                                          "  rail-b: [h1:eth1 <-> h3:eth1]\n"),
             Catch::Matchers::Contains("uses h1:eth1 twice"));
  CHECK_THAT(error_of(std::string(kLab) + "switch: {allow: '1..3,17..19'}\n" + kMaps),
             Catch::Matchers::Contains("needs switch port 4, which is outside switch.allow (1..3,17..19)"));
  CHECK_THAT(error_of(std::string(kLab) + kMaps + "probes: {carier: {}}\n"),
             Catch::Matchers::Contains("test.yaml:5:10: unknown probe 'carier'"));
  CHECK_THAT(error_of(std::string(kLab) + kMaps + "schedule: {dwell_s: 0}\n"),
             Catch::Matchers::Contains("dwell_s must be in"));
  CHECK_THAT(error_of(std::string(kLab) + kMaps + "schedule: {order: shuffled}\n"),
             Catch::Matchers::Contains("order must be alternate or random"));
  CHECK_THAT(error_of(std::string(kLab) + kMaps + "probes: {rdma: {pairs: [h1:eth1 -> h1:eth1]}}\n"),
             Catch::Matchers::Contains("links a NIC to itself"));
  CHECK_THAT(error_of(std::string(kLab) + kMaps + "probes: {rdma: {pin_neighbours: sometimes}}\n"),
             Catch::Matchers::Contains("test.yaml:5:33: expected true or false"));
  CHECK_FALSE(rdma_pins_neighbours(parse(std::string(kLab) + kMaps + "probes: {rdma: {pin_neighbours: false}}\n")));
  CHECK_THAT(error_of("lab: {vlab: ../labs/no-such-lab.yaml}\n" + std::string(kMaps)),
             Catch::Matchers::Contains("the virtual-lab file is not valid"));
  CHECK_THAT(error_of(std::string(kMaps)), Catch::Matchers::Contains("'lab'"));
  CHECK_THAT(error_of(std::string(kLab) + kMaps + "extra: 1\n"), Catch::Matchers::Contains("unknown key 'extra'"));
}

TEST_CASE("an inventory of real hosts: ssh targets, ports and the switch URL", "[runner][spec]") {
  const char* inv =
      "lab:\n"
      "  inventory:\n"
      "    - {name: gpu1, ssh: 'lab@10.0.0.11:2222', agent: /opt/ocslab/bin/ocslab-agent,\n"
      "       nics: [{name: ens1f0, tx_port: 1, rx_port: 33}]}\n"
      "    - {name: gpu2, ssh: 10.0.0.12, mgmt: gpu2.mgmt, nics: [{name: ens1f0, tx_port: 2, rx_port: 34}]}\n"
      "    - {name: gpu3, ssh: 10.0.0.13, nics: [{name: ens1f0, tx_port: 3, rx_port: 35}]}\n";
  const char* maps =
      "mappings:\n"
      "  a: [gpu1:ens1f0 <-> gpu2:ens1f0]\n"
      "  b: [gpu1:ens1f0 <-> gpu3:ens1f0]\n";
  auto s = parse(std::string(inv) + "switch: {url: 'tl1://admin@10.0.0.5:3082'}\n" + maps);
  REQUIRE(s.hosts.size() == 3);
  CHECK(s.hosts[0].user == "lab");
  CHECK(s.hosts[0].ssh_host == "10.0.0.11");
  CHECK(s.hosts[0].ssh_port == 2222);
  CHECK(s.hosts[0].agent == "/opt/ocslab/bin/ocslab-agent");
  CHECK(s.hosts[1].user == "root");
  CHECK(s.hosts[1].ssh_port == 22);
  CHECK(s.hosts[1].mgmt == "gpu2.mgmt");
  CHECK(s.hosts[2].mgmt == "10.0.0.13");
  CHECK(s.switch_url == "tl1://admin@10.0.0.5:3082");
  CHECK(s.allow.to_string() == "1..3,33..35");
  CHECK_FALSE(rdma_pins_neighbours(s));  // real hosts: their neighbour tables are left alone
  auto pinned = parse(std::string(inv) + "switch: {url: 'tl1://admin@10.0.0.5:3082'}\n" + maps +
                      "probes: {rdma: {pin_neighbours: true}}\n");
  CHECK(rdma_pins_neighbours(pinned));
  CHECK_THAT(error_of(std::string(inv) + maps), Catch::Matchers::Contains("switch.url is needed"));
  CHECK_THAT(error_of("lab:\n  inventory:\n    - {name: x, ssh: 'h:99999', nics: [{name: e, tx_port: 1, rx_port: 2}]}\n" +
                      std::string(maps)),
             Catch::Matchers::Contains("bad port"));
}

TEST_CASE("NIC and probe interface names must be names the kernel accepts (they reach remote shells)",
          "[runner][spec]") {
  const std::string maps = "mappings:\n  a: [gpu1:ens1f0 <-> gpu2:ens1f0]\n  b: [gpu1:ens1f0 <-> gpu3:ens1f0]\n";
  auto lab = [](const std::string& nic) {
    return "switch: {url: 'tl1://admin@10.0.0.5:3082'}\nlab:\n  inventory:\n"
           "    - {name: gpu1, ssh: 10.0.0.11, nics: [{name: '" +
           nic + "', tx_port: 1, rx_port: 33}]}\n    - {name: gpu2, ssh: 10.0.0.12, nics: [{name: ens1f0, tx_port: 2, "
           "rx_port: 34}]}\n    - {name: gpu3, ssh: 10.0.0.13, nics: [{name: ens1f0, tx_port: 3, rx_port: 35}]}\n";
  };
  CHECK_THAT(error_of(lab("e0 $(reboot)") + maps),
             Contains("NIC 'e0 $(reboot)' is not an interface name (whitespace is not allowed)"));
  CHECK_THAT(error_of(lab("ens1f0/../x") + maps), Contains("('/' is not allowed)"));
  CHECK_THAT(error_of(lab("a-very-long-nic-name") + maps), Contains("(longer than 15 bytes)"));
  CHECK_THAT(error_of(lab("ens1f0") + maps + "probes:\n  carrier: {interfaces: [ens1f0, 'eth0:1']}\n"),
             Contains("probe 'carrier': 'eth0:1' is not an interface name (':' is not allowed)"));
  CHECK(parse(lab("ens1f0") + maps).hosts[0].nics[0].name == "ens1f0");
}

TEST_CASE("NIC names with shell metacharacters and a bad mgmt are refused where the spec gives them",
          "[runner][spec]") {
  // The kernel allows `; $ ( ) \`` in an interface name; a spec's names reach remote command
  // lines, so the spec allows only characters no shell treats specially.
  const std::string file = source_dir() + spec_test::kSpecsOrigin;
  const std::string maps = "mappings:\n  a: [gpu1:ens1f0 <-> gpu2:ens1f0]\n  b: [gpu1:ens1f0 <-> gpu3:ens1f0]\n";
  auto lab = [](const std::string& nic, const std::string& mgmt) {
    return "switch: {url: 'tl1://admin@10.0.0.5:3082'}\nlab:\n  inventory:\n"
           "    - {name: gpu1, ssh: 10.0.0.11, nics: [{name: '" +
           nic + "', tx_port: 1, rx_port: 33}]" + mgmt +
           "}\n    - {name: gpu2, ssh: 10.0.0.12, nics: [{name: ens1f0, tx_port: 2, "
           "rx_port: 34}]}\n    - {name: gpu3, ssh: 10.0.0.13, nics: [{name: ens1f0, tx_port: 3, rx_port: 35}]}\n";
  };
  for (const char* name : {"e;x", "e$x", "e(x", "e)x", "e`x`", "e|x", "e&x", "e'x'", "e\\x", "e*", "e>x"}) {
    const std::string nic = name;
    INFO(nic);
    std::string q = nic;  // as YAML's single quotes carry it
    for (size_t p = 0; (p = q.find('\'', p)) != std::string::npos; p += 2) q.insert(p, "'");
    CHECK_THAT(error_of(lab(q, "") + maps),
               Contains(file + ":4:50: NIC '" + nic + "' is not an interface name (") && Contains("is not allowed"));
  }
  CHECK_THAT(error_of(lab("ens1f0", "") + maps + "probes:\n  carrier: {interfaces: [ens1f0, 'e$(reboot)']}\n"),
             Contains("probe 'carrier': 'e$(reboot)' is not an interface name ('$' is not allowed"));
  CHECK_THAT(error_of(lab("ens1f0", ", mgmt: 'h1;reboot'") + maps),
             Contains(file + ":4:93: mgmt 'h1;reboot' is not a host name or address (';' is not allowed"));
  CHECK_THAT(error_of(lab("ens1f0", ", mgmt: '-oProxyCommand=x'") + maps), Contains("(it starts with '-')"));
  CHECK(parse(lab("ens1f0", ", mgmt: h1.lab") + maps).hosts[0].mgmt == "h1.lab");
  CHECK(parse(lab("ens1f0", ", mgmt: 'fd00::1'") + maps).hosts[0].mgmt == "fd00::1");
}

TEST_CASE("samples get the iteration of the reconfiguration they follow", "[runner]") {
  std::vector<int64_t> issued = {10'000'000'000, 20'000'000'000};
  CHECK(iteration_of(0, issued) == 0);
  CHECK(iteration_of(9'799'999'999, issued) == 0);
  CHECK(iteration_of(9'800'000'000, issued) == 1);  // 200 ms before the command: the stall that leads it
  CHECK(iteration_of(19'799'999'999, issued) == 1);
  CHECK(iteration_of(19'800'000'000, issued) == 2);
  CHECK(iteration_of(99'000'000'000, issued) == 2);
}

TEST_CASE("lab.connect_concurrency bounds the SSH handshakes: default 8, a positive integer or refused at file:line:col",
          "[runner][spec]") {
  CHECK(parse(std::string(kLab) + kMaps).connect_concurrency == 8);
  CHECK(kDefaultConnectConcurrency < 10);  // below sshd's default MaxStartups 10:30:100
  CHECK(parse("lab: {vlab: ../labs/four-hosts.yaml, connect_concurrency: 3}\n" + std::string(kMaps))
            .connect_concurrency == 3);
  CHECK(parse("lab:\n  vlab: ../labs/four-hosts.yaml\n  connect_concurrency: 1\n" + std::string(kMaps))
            .connect_concurrency == 1);
  CHECK_THAT(error_of("lab:\n  vlab: ../labs/four-hosts.yaml\n  connect_concurrency: 0\n" + std::string(kMaps)),
             Contains("test.yaml:3:24: connect_concurrency must be in [1, 1024], got 0"));
  CHECK_THAT(error_of("lab:\n  vlab: ../labs/four-hosts.yaml\n  connect_concurrency: -4\n" + std::string(kMaps)),
             Contains("test.yaml:3:24: connect_concurrency must be in [1, 1024], got -4"));
  CHECK_THAT(error_of("lab:\n  vlab: ../labs/four-hosts.yaml\n  connect_concurrency: 2.5\n" + std::string(kMaps)),
             Contains("test.yaml:3:24: expected an integer, got '2.5'"));
  CHECK_THAT(error_of("lab:\n  vlab: ../labs/four-hosts.yaml\n  connect_concurrency: many\n" + std::string(kMaps)),
             Contains("test.yaml:3:24: expected an integer, got 'many'"));
  CHECK_THAT(error_of("lab:\n  vlab: ../labs/four-hosts.yaml\n  connect_concurrency: [4]\n" + std::string(kMaps)),
             Contains("test.yaml:3:24: expected an integer"));
}

TEST_CASE("faults: a NIC held down before a reconfiguration, checked against the lab and the schedule",
          "[runner][spec]") {
  auto s = parse(std::string(kLab) + kMaps + "schedule: {reconfigurations: 3}\n" +
                 "faults:\n"
                 "  - {kind: nic-held-down, nic: h3:eth1, before_iteration: 2}\n"
                 "  - kind: nic-held-down\n"
                 "    nic: h1:eth1\n"
                 "    before_iteration: 3\n");
  REQUIRE(s.faults.size() == 2);
  CHECK(s.faults[0].kind == kNicHeldDown);
  CHECK(s.hosts[s.faults[0].host].name == "h3");
  CHECK(s.faults[0].nic == "eth1");
  CHECK(s.faults[0].before_iteration == 2);
  CHECK_THAT(s.faults[0].where, Contains("test.yaml:7:5"));
  CHECK(s.hosts[s.faults[1].host].name == "h1");
  CHECK(s.faults[1].before_iteration == 3);
  CHECK(parse(std::string(kLab) + kMaps).faults.empty());
}

TEST_CASE("faults: a switch port darkened before a reconfiguration, the NIC on it found from the lab",
          "[runner][spec]") {
  auto s = parse(std::string(kLab) + kMaps + "schedule: {reconfigurations: 3}\n" +
                 "faults:\n"
                 "  - {kind: port-dark, port: 19, before_iteration: 2}\n"
                 "  - {kind: port-dark, port: 2, before_iteration: 3}\n"
                 "  - {kind: nic-held-down, nic: h3:eth1, before_iteration: 3}\n"  // same NIC: another fault
                 "  - {kind: switch-unreachable, for_ms: 1500, before_iteration: 1}\n");
  REQUIRE(s.faults.size() == 4);
  CHECK(s.faults[3].kind == kSwitchUnreachable);
  CHECK(s.faults[3].for_ms == 1500);
  CHECK(FaultInjector::describe(s, s.faults[3]) == "switch-unreachable for 1500 ms");
  Sample spell = FaultInjector::row(s, s.faults[3], true, 7);
  CHECK(spell.host == "switch");
  CHECK(spell.subject == "control");
  CHECK(spell.signal == "unreachable");
  CHECK(s.faults[0].kind == kPortDark);
  CHECK(s.faults[0].port == 19);
  CHECK(s.hosts[s.faults[0].host].name == "h3");  // four-hosts.yaml: h3:eth1 is tx 3, rx 19
  CHECK(s.faults[0].nic == "eth1");
  CHECK(s.faults[0].before_iteration == 2);
  CHECK(FaultInjector::describe(s, s.faults[0]) == "port-dark on switch port 19 (h3:eth1 rx)");
  CHECK(FaultInjector::describe(s, s.faults[1]) == "port-dark on switch port 2 (h2:eth1 tx)");
  CHECK(FaultInjector::describe(s, s.faults[2]) == "nic-held-down on h3:eth1");
  Sample row = FaultInjector::row(s, s.faults[0], true, 5);
  CHECK(row.host == "switch");
  CHECK(row.source == "fault");
  CHECK(row.subject == "port 19");
  CHECK(row.signal == "dark");
  CHECK(row.value == 1.0);
}

TEST_CASE("faults: bad entries are refused at file:line:col before anything runs", "[runner][spec]") {
  const std::string head = std::string(kLab) + kMaps + "schedule: {reconfigurations: 3}\nfaults:\n";
  auto fault = [&](const std::string& entry) { return error_of(head + "  - " + entry + "\n"); };
  CHECK_THAT(fault("{kind: nic-flapping, nic: h3:eth1, before_iteration: 2}"),
             Contains("test.yaml:7:12: unknown fault kind 'nic-flapping' (known: nic-held-down, port-dark, "
                      "switch-unreachable, agent-killed)"));
  CHECK_THAT(fault("{kind: switch-unreachable, for_ms: 0, before_iteration: 2}"),
             Contains("test.yaml:7:40: for_ms must be above 0 and at most 3600000 (an hour), got 0"));
  CHECK_THAT(fault("{kind: switch-unreachable, for_ms: 4000000, before_iteration: 2}"),
             Contains("for_ms must be above 0 and at most 3600000"));
  CHECK_THAT(fault("{kind: switch-unreachable, before_iteration: 2}"), Contains("missing key 'for_ms'"));
  CHECK_THAT(fault("{kind: switch-unreachable, for_ms: 10, port: 3, before_iteration: 2}"),
             Contains("unknown key 'port'"));
  CHECK_THAT(fault("{kind: nic-held-down, nic: h9:eth1, before_iteration: 2}"),
             Contains("test.yaml:7:32: unknown host 'h9' in 'h9:eth1' (the lab has: h1, h2, h3, h4)"));
  CHECK_THAT(fault("{kind: nic-held-down, nic: h3:eth4, before_iteration: 2}"),
             Contains("test.yaml:7:32: host 'h3' has no data NIC 'eth4' (it has: eth1)"));
  CHECK_THAT(fault("{kind: nic-held-down, nic: h3, before_iteration: 2}"), Contains("expected HOST:NIC"));
  // The "fault at a time after the run ends" case: the schedule has 3 reconfigurations.
  CHECK_THAT(
      fault("{kind: nic-held-down, nic: h3:eth1, before_iteration: 4}"),
      Contains("test.yaml:7:59: before_iteration 4 is after the run's last reconfiguration (the schedule has 3)"));
  CHECK_THAT(fault("{kind: nic-held-down, nic: h3:eth1, before_iteration: 0}"),
             Contains("test.yaml:7:59: before_iteration must be 1 or more, got 0"));
  CHECK_THAT(fault("{kind: nic-held-down, nic: h3:eth1}"), Contains("test.yaml:7:5: missing key 'before_iteration'"));
  CHECK_THAT(fault("{kind: nic-held-down, nic: h3:eth1, before_iteration: 1, for_s: 3}"),
             Contains("test.yaml:7:") && Contains("unknown key 'for_s'"));
  CHECK_THAT(fault("nic-held-down h3:eth1"), Contains("test.yaml:7:5: a fault is a map {kind: nic-held-down"));
  CHECK_THAT(error_of(head.substr(0, head.size() - 1) + " {kind: nic-held-down}\n"),
             Contains("test.yaml:6:9: faults must be a list"));
  CHECK_THAT(error_of(head + "  - {kind: nic-held-down, nic: h3:eth1, before_iteration: 1}\n" +
                      "  - {kind: nic-held-down, nic: h3:eth1, before_iteration: 2}\n"),
             Contains("test.yaml:8:32: h3:eth1 is held down already (at ") && Contains("test.yaml:7:5)"));
  // port-dark: a port of the lab's NICs, inside switch.allow, darkened once.
  CHECK_THAT(fault("{kind: port-dark, port: 30, before_iteration: 2}"),
             Contains("test.yaml:7:29: unknown port 30: no NIC of the lab is on it (the lab's NIC ports: 1..4,17..20)"));
  CHECK_THAT(fault("{kind: port-dark, port: x, before_iteration: 2}"), Contains("test.yaml:7:29: expected an integer, got 'x'"));
  CHECK_THAT(fault("{kind: port-dark, nic: h3:eth1, before_iteration: 2}"),
             Contains("test.yaml:7:") && Contains("unknown key 'nic'"));
  CHECK_THAT(fault("{kind: port-dark, before_iteration: 2}"), Contains("test.yaml:7:5: missing key 'port'"));
  CHECK_THAT(fault("{kind: port-dark, port: 19, before_iteration: 4}"),
             Contains("before_iteration 4 is after the run's last reconfiguration (the schedule has 3)"));
  CHECK_THAT(error_of(head + "  - {kind: port-dark, port: 19, before_iteration: 1}\n" +
                      "  - {kind: port-dark, port: 19, before_iteration: 2}\n"),
             Contains("test.yaml:8:29: port 19 is dark already (at ") && Contains("test.yaml:7:5)"));
  const std::string narrow = std::string(kLab) + "switch: {allow: '1..3,17..19'}\nmappings:\n" +
                             "  a: [h1:eth1 <-> h2:eth1]\n  b: [h1:eth1 <-> h3:eth1]\n" +
                             "schedule: {reconfigurations: 2}\nfaults:\n";
  CHECK_THAT(error_of(narrow + "  - {kind: port-dark, port: 20, before_iteration: 1}\n"),
             Contains("port 20 (h4:eth1) is outside switch.allow (1..3,17..19): the run may not touch it"));
  // Only a virtual lab's emulated firmware can hold a link down.
  const char* inv =
      "lab:\n  inventory:\n"
      "    - {name: gpu1, ssh: 10.0.0.11, nics: [{name: ens1f0, tx_port: 1, rx_port: 33}]}\n"
      "    - {name: gpu2, ssh: 10.0.0.12, nics: [{name: ens1f0, tx_port: 2, rx_port: 34}]}\n"
      "    - {name: gpu3, ssh: 10.0.0.13, nics: [{name: ens1f0, tx_port: 3, rx_port: 35}]}\n"
      "switch: {url: 'tl1://admin@10.0.0.5:3082'}\n"
      "mappings:\n  a: [gpu1:ens1f0 <-> gpu2:ens1f0]\n  b: [gpu1:ens1f0 <-> gpu3:ens1f0]\n";
  CHECK_THAT(error_of(std::string(inv) + "faults:\n  - {kind: nic-held-down, nic: gpu1:ens1f0, before_iteration: 1}\n"),
             Contains("test.yaml:11:12: a nic-held-down fault needs a virtual lab (lab.vlab)") &&
                 Contains("on real hosts only agent-killed can be injected"));
  CHECK_THAT(error_of(std::string(inv) + "faults:\n  - {kind: port-dark, port: 33, before_iteration: 1}\n"),
             Contains("test.yaml:11:12: a port-dark fault needs a virtual lab"));
  // An agent can be killed on real hosts too (over SSH, like any of the runner's commands).
  auto real = parse(std::string(inv) +
                    "schedule: {reconfigurations: 3}\nfaults:\n  - {kind: agent-killed, host: gpu2, before_iteration: 2}\n");
  REQUIRE(real.faults.size() == 1);
  CHECK(real.faults[0].kind == "agent-killed");
  CHECK(real.faults[0].host == 1);
  CHECK(real.faults[0].nic.empty());
  CHECK(real.faults[0].before_iteration == 2);
  CHECK_THAT(real.faults[0].where, Catch::EndsWith("test.yaml:12:5"));
  CHECK_THAT(error_of(std::string(inv) + "faults:\n  - {kind: agent-killed, host: gpu9, before_iteration: 1}\n"),
             Contains("test.yaml:11:32: unknown host 'gpu9' (the lab has: gpu1, gpu2, gpu3)"));
  CHECK_THAT(error_of(std::string(inv) + "faults:\n  - {kind: agent-killed, nic: gpu1:ens1f0, before_iteration: 1}\n"),
             Contains("test.yaml:11:") && Contains("unknown key 'nic'"));
  CHECK_THAT(error_of(std::string(inv) + "faults:\n  - {kind: agent-killed, before_iteration: 1}\n"),
             Contains("test.yaml:11:5: missing key 'host'"));
  CHECK_THAT(error_of(std::string(inv) + "faults:\n  - {kind: agent-killed, host: gpu1, before_iteration: 1}\n" +
                      "  - {kind: agent-killed, host: gpu1, before_iteration: 2}\n"),
             Contains("test.yaml:12:32: gpu1's agent is killed already (at ") && Contains("test.yaml:11:5)"));
  // A reconfig-latency run has no ranks to kill (a phase workload's faults: integration_phase_runner).
  CHECK_THAT(error_of(std::string(kLab) + kMaps + "schedule: {reconfigurations: 3}\n" +
                      "faults:\n  - {kind: rank-killed, rank: 1, before_iteration: 1}\n"),
             Contains("test.yaml:") && Contains("rank-killed needs a phase-workload spec (it kills one of the job's ranks)"));
}

TEST_CASE("the gid probe is known to specs and polls every 100 ms unless the spec says", "[runner][spec]") {
  auto s = parse(std::string(kLab) + kMaps + "probes: {carrier: {}, gid: {}}\n");
  REQUIRE(s.probes.size() == 2);
  CHECK(s.probes[0].name == "carrier");
  CHECK(s.probes[0].interval_ms == 1);
  CHECK(s.probes[1].name == "gid");
  CHECK(s.probes[1].interval_ms == 100);
  auto fast = parse(std::string(kLab) + kMaps + "probes: {gid: {interval_ms: 20, interfaces: [eth1]}}\n");
  REQUIRE(fast.probes.size() == 1);
  CHECK(fast.probes[0].interval_ms == 20);
  CHECK_THAT(error_of(std::string(kLab) + kMaps + "probes: {gdi: {}}\n"),
             Contains("unknown probe 'gdi' (known: carrier, firmware, gid, heartbeat, rdma, rx_power)"));
}
