// The shared virtual labs (lab_fixture.h): ctest's fixture entries that boot and take down each
// shared lab, and the tests of the fixture's reset itself. The [lab-reset] cases run in this
// order (Catch2's declaration order, one ctest entry): the first leaves the lab dirty the way a
// case can (circuits changed, a forwarding plan applied, routes, neighbours, qdiscs, a macvlan,
// sysctls, a probe and an agent daemon left running, a stray process, files), the second dirties
// it too and then fails on purpose ([!shouldfail]), the third must find the lab clean.
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <memory>
#include <string>

#include "lab_fixture.h"
#include "ocslab/ocsctl/driver.h"
#include "ocslab/ocsctl/switch_url.h"
#include "ocslab/testing/sshd_fixture.h"
#include "ocslab/vlab/lab_spec.h"

using namespace vlab_test;
using Catch::Matchers::Contains;

namespace {

// The shared lab file this ctest entry is about ($OCSLAB_SHARED_LAB, set by tests/CMakeLists.txt).
std::string shared_lab_file() {
  const char* f = std::getenv("OCSLAB_SHARED_LAB");
  INFO("OCSLAB_SHARED_LAB names the shared lab file (ctest sets it for vlab_lab_<name>_up/_down)");
  REQUIRE(f != nullptr);
  return f;
}

std::vector<ocs::Circuit> sorted_circuits(ocs::OcsDriver& d) {
  auto c = d.list();
  std::sort(c.begin(), c.end());
  return c;
}

// What the dirty cases leave on h1 (and the switch), each checked to be there before they end.
void dirty_the_lab(Lab& lab, const std::string& tag) {
  const auto& st = lab.state();
  auto sw = lab.switch_driver();
  sw->disconnect({3, 4});  // h3 - h4 dark
  REQUIRE(sorted_circuits(*sw) != lab.initial_circuits());

  // A forwarding plan applied by ocslab-agent (relay side: macvlans, clsacts, flower filters,
  // routes, neighbours) in a namespace of h1, as forwarding_engine_test.cpp does.
  std::string dir = st.dir + "/dirty-" + tag + "-" + std::to_string(::getpid());
  fs::create_directories(dir);
  fs::copy_file(testing::bin_path("ocslab-agent"), dir + "/ocslab-agent");
  std::ofstream(dir + "/ring4.yaml") << read_file_or_empty(source_path("forwarding/examples/ring4.yaml"));
  lab.run("h1",
          "ip netns add fwh1 && ip netns add fwp && "
          "ip -n fwh1 link add eth1 type veth peer name x1 netns fwp && "
          "ip -n fwh1 link add eth2 type veth peer name x2 netns fwp && "
          "ip -n fwh1 addr add 10.0.0.10/24 dev eth1 && ip -n fwh1 addr add 10.0.0.11/24 dev eth2 && "
          "ip -n fwh1 link set eth1 up && ip -n fwh1 link set eth2 up && ip -n fwp link set x1 up && "
          "ip -n fwp link set x2 up");
  CHECK_THAT(lab.run("h1", "ip netns exec fwh1 " + dir + "/ocslab-agent forwarding apply --fabric " + dir +
                               "/ring4.yaml --host h1 --if2-macvlan --state-dir /var/lib/ocslab-dirty"),
             Contains("apply: host h1:"));
  // The same kinds of state in h1's own namespace, on its data NIC.
  lab.run("h1",
          "ip link add link eth1 name eth1v type macvlan mode private && ip link set eth1v up && "
          "ip addr add 192.0.2.1/24 dev eth1 && ip route add 198.51.100.0/24 via 10.20.0.2 dev eth1 proto 79 && "
          "ip neigh replace 10.20.0.9 lladdr 02:ee:00:00:00:09 dev eth1 nud permanent && "
          "tc qdisc add dev eth1 clsact && "
          "tc filter add dev eth1 ingress protocol ip prio 7 flower dst_ip 10.20.0.99 action drop && "
          "ip rule add pref 123 from 10.20.0.1 lookup 77 && sysctl -qw net.ipv4.ip_forward=1 && "
          "sysctl -qw net.ipv4.conf.eth1.rp_filter=2 && rdma link delete rxe_eth1");
  // A probe and an agent daemon (its spool) left running, a stray process, files.
  lab.run("h1", "setsid " + dir + "/ocslab-agent capture --probes carrier --if eth1 --interval-ms 50 " +
                    "--duration 3600 -o /tmp/left.csv </dev/null >/dev/null 2>&1 & "
                    "setsid " +
                    dir +
                    "/ocslab-agent serve --socket /run/ocslab-agent/agent.sock "
                    "</dev/null >/dev/null 2>&1 & "
                    "setsid sleep 4242 </dev/null >/dev/null 2>&1 & "
                    "mkdir -p /var/spool/ocslab-agent /var/lib/ocslab && echo x > /var/lib/ocslab/left && "
                    "echo '{}' > /var/spool/ocslab-agent/dirty-" + tag + ".jsonl && "
                    "echo x > /tmp/left.txt; true");
  // Everything is there (the daemon may take a moment to make its socket: a bounded wait, 10 s in
  // 0.1 s polls).
  lab.run("h1",
          "for i in $(seq 100); do [ -S /run/ocslab-agent/agent.sock ] && break; sleep 0.1; done; "
          "pgrep -f 'capture --probes carrier' && pgrep -x sleep && [ -S /run/ocslab-agent/agent.sock ] && "
          "ip netns list | grep -q fwh1 && ip -br link show eth1v && tc qdisc show dev eth1 | grep -q clsact && "
          "[ $(sysctl -n net.ipv4.ip_forward) = 1 ] && ! rdma link show rxe_eth1/1");
  CHECK(lab.snapshot("h1") != lab.baseline("h1"));
}

}  // namespace

// ctest's vlab_lab_<name>_up: boots the shared lab (or takes the running one, reset) and leaves it up.
TEST_CASE("shared lab: up for the cases that share it", "[.lab-up]") {
  Lab lab(shared_lab_file(), 180s, Sharing::kShared);
  for (const auto& h : lab.state().hosts) CHECK_FALSE(lab.baseline(h.name).empty());
}

// ctest's vlab_lab_<name>_down: `vlab down` of the shared lab leaves no process and no folder.
TEST_CASE("shared lab: down leaves nothing", "[.lab-down]") {
  std::string name = vlab::load_lab_spec(source_path(shared_lab_file())).name;
  std::string dir = vlab::labs_dir(vlab::default_cache_dir()) + "/" + name;
  ProgramResult r = ocslab_cli({"vlab", "down", name});
  INFO(r.out << r.err);
  CHECK(r.status == 0);
  require_nothing_left(dir);
}

TEST_CASE("shared lab reset 1/3: a case leaves the lab dirty", "[vlab][lab-reset]") {
  Lab lab(kSharedFour, 120s, Sharing::kShared);
  dirty_the_lab(lab, "a");
}

TEST_CASE("shared lab reset 2/3: a case fails in the middle of a dirty lab", "[vlab][lab-reset][!shouldfail]") {
  Lab lab(kSharedFour, 120s, Sharing::kShared);
  dirty_the_lab(lab, "b");
  FAIL("failing on purpose with the lab dirty: the next case must still get a clean lab");
}

TEST_CASE("shared lab reset 3/3: the next case gets a clean lab", "[vlab][lab-reset]") {
  Lab lab(kSharedFour, 120s, Sharing::kShared);
  auto sw = lab.switch_driver();
  CHECK(sorted_circuits(*sw) == lab.initial_circuits());
  for (const auto& h : lab.state().hosts) {
    INFO(h.name);
    CHECK(lab.snapshot(h.name) == lab.baseline(h.name));
  }
  // The same, asked directly rather than through the fixture's own snapshot.
  ocs::ExecResult r =
      lab.exec("h1",
               "pgrep -x ocslab-agent; pgrep -x sleep; ip netns list; ip -br link show type macvlan; "
               "tc qdisc show dev eth1 | grep clsact; ip route show proto 79; "
               "ip neigh show nud permanent; ip rule show pref 123; ip -br addr show dev eth1 | grep 192.0.2; "
               "ls /run/ocslab-agent/agent.sock /var/spool/ocslab-agent/dirty-a.jsonl "
               "/var/spool/ocslab-agent/dirty-b.jsonl /var/lib/ocslab/left /var/lib/ocslab-dirty "
               "/tmp/left.txt /tmp/left.csv 2>/dev/null; true");
  INFO(r.out << r.err);
  CHECK(r.out.empty());
  CHECK(lab.run("h1", "sysctl -n net.ipv4.ip_forward net.ipv4.conf.eth1.rp_filter") ==
        lab.run("h2", "sysctl -n net.ipv4.ip_forward net.ipv4.conf.eth1.rp_filter"));
  CHECK_THAT(lab.run("h1", "cat /sys/class/net/eth1/carrier; rdma link show rxe_eth1/1"),
             Contains("1\n") && Contains("state ACTIVE"));
  CHECK_THAT(lab.run("h3", "cat /sys/class/net/eth1/carrier"), Contains("1"));
}
