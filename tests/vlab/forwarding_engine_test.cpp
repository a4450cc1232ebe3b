// The whole forwarding engine (`ocslab-agent forwarding apply/diff/rollback/clear`) against a
// kernel that has cls_flower and act_pedit: one virtual-lab guest, in which a network namespace
// plays ring4's h1 (veths as its if1s). The relay side must be created (if2 macvlans, clsacts,
// flower filters), read back equal to the plan (diff empty), a changed filter replaced, and
// rollback and clear must take exactly ocslab's objects away again, also after a kill -9 in the
// middle of an apply that had made the relay side.
#include <unistd.h>
#include <catch2/catch.hpp>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "lab_fixture.h"
#include "ocslab/forwarding/diff.h"
#include "ocslab/forwarding/fabric.h"
#include "ocslab/forwarding/routes.h"
#include "ocslab/testing/sshd_fixture.h"
#include "ocslab/testing/wait.h"

using namespace vlab_test;
using Catch::Matchers::Contains;
using nlohmann::json;

namespace {

// ocslab's filters on one if2 (tc's own view), by pref: {dst_ip, to_dev, cookie}.
std::map<int, std::string> tc_filters(const Lab& g, const std::string& dev) {
  std::map<int, std::string> out;
  for (auto& e : json::parse(g.run("h1", "ip netns exec fwh1 tc -j filter show dev " + dev + " ingress"))) {
    if (!e.contains("options")) continue;
    const auto& o = e["options"];
    out[e["pref"].get<int>()] = o["keys"]["dst_ip"].get<std::string>() + " -> " +
                                o["actions"][1]["to_dev"].get<std::string>() + " " +
                                o["actions"][0]["cookie"].get<std::string>();
  }
  return out;
}

}  // namespace

TEST_CASE("forwarding engine in a guest: relay side applied, read back, replaced, rolled back, cleared",
          "[vlab][forwarding-engine]") {
  Lab g(kSharedFour, 180s, Sharing::kShared);  // h1's kernel; the test's own namespaces and veths
  // A folder per run (outside the guest's /tmp): a guest may keep serving an old file from its 9p cache.
  std::string dir = g.state().dir + "/fwd-" + std::to_string(::getpid());
  fs::create_directories(dir);
  fs::copy_file(testing::bin_path("ocslab-agent"), dir + "/ocslab-agent");
  std::string ring4 = read_file_or_empty(source_path("forwarding/examples/ring4.yaml"));
  std::ofstream(dir + "/ring4.yaml") << ring4;
  // h2:p0's if1 MAC changes: the filter h1 uses to relay toward 10.0.0.20 must be replaced.
  std::string b = ring4;
  b.replace(b.find("\"02:00:00:00:02:00\""), 19, "\"02:00:00:00:02:0a\"");
  std::ofstream(dir + "/ring4b.yaml") << b;

  namespace fw = forwarding;
  fw::Fabric fa = fw::load_fabric_file(dir + "/ring4.yaml"), fb = fw::load_fabric_file(dir + "/ring4b.yaml");
  fw::HostPlan pa = fw::make_plan(fa, fw::compute_routes(fa)).host("h1");
  fw::HostPlan pb = fw::make_plan(fb, fw::compute_routes(fb)).host("h1");
  fw::PlanDiff ab = fw::diff(pb, pa);
  REQUIRE(pa.filters.size() == 4);
  REQUIRE(ab.filters.size() == 1);  // the case this test is about
  REQUIRE(ab.filters[0].op == fw::ChangeOp::replace);

  const std::string agent = "ip netns exec fwh1 " + dir + "/ocslab-agent forwarding ";
  const std::string opts = " --host h1 --if2-macvlan --state-dir /var/lib/fwdint-state";
  g.run("h1",
        "ip netns add fwh1 && ip netns add fwp && "
        "ip -n fwh1 link add eth1 type veth peer name x1 netns fwp && "
        "ip -n fwh1 link add eth2 type veth peer name x2 netns fwp && "
        "ip -n fwh1 addr add 10.0.0.10/24 dev eth1 && ip -n fwh1 addr add 10.0.0.11/24 dev eth2 && "
        "ip -n fwh1 link set eth1 up && ip -n fwh1 link set eth2 up && ip -n fwp link set x1 up && "
        "ip -n fwp link set x2 up && rm -rf /var/lib/fwdint-state");

  std::string out = g.run("h1", agent + "apply --fabric " + dir + "/ring4.yaml" + opts);
  CHECK_THAT(out, Contains("apply: host h1: 20 change(s)"));
  CHECK_THAT(out, Contains("macvlans +2 ~0 -0, qdiscs +2 -0, filters +4 ~0 -0"));
  auto link = json::parse(g.run("h1", "ip -n fwh1 -d -j link show eth1v"))[0];
  CHECK(link["linkinfo"]["info_kind"] == "macvlan");
  CHECK(link["linkinfo"]["info_data"]["mode"] == "private");
  CHECK(link["address"] == "02:00:00:00:01:10");
  // tc sees exactly the plan's filters, each with ocslab's cookie.
  std::map<std::string, std::map<int, std::string>> want;
  for (const auto& f : pa.filters)
    want[f.dev][f.prio] = f.dst.substr(0, f.dst.find('/')) + " -> " + f.redirect_dev + " " + f.cookie;
  CHECK(tc_filters(g, "eth1v") == want["eth1v"]);
  CHECK(tc_filters(g, "eth2v") == want["eth2v"]);

  // Read back through list_owned etc.: nothing to do.
  CHECK_THAT(g.run("h1", agent + "diff --fabric " + dir + "/ring4.yaml" + opts), Contains("diff: host h1: no changes"));
  CHECK_THAT(g.run("h1", agent + "apply --fabric " + dir + "/ring4.yaml" + opts),
             Contains("apply: host h1: no changes"));

  // A changed filter: delete + add, nothing else of the relay side.
  out = g.run("h1", agent + "apply --fabric " + dir + "/ring4b.yaml" + opts);
  CHECK_THAT(out, Contains("macvlans +0 ~0 -0, qdiscs +0 -0, filters +0 ~1 -0"));
  CHECK_THAT(out, Contains("set 02:00:00:00:02:0a"));
  CHECK_THAT(g.run("h1", agent + "diff --fabric " + dir + "/ring4b.yaml" + opts), Contains("no changes"));
  CHECK_THAT(g.run("h1", agent + "diff --fabric " + dir + "/ring4.yaml" + opts), Contains("filters +0 ~1 -0"));

  // rollback: ring4's filter again.
  CHECK(g.exec("h1", agent + "rollback --state-dir /var/lib/fwdint-state").exit_status == 0);
  CHECK_THAT(g.run("h1", agent + "diff --fabric " + dir + "/ring4.yaml" + opts), Contains("no changes"));

  // clear: every route, neighbour, filter, clsact and macvlan ocslab made is gone.
  out = g.run("h1", agent + "clear --host h1 --state-dir /var/lib/fwdint-state");
  CHECK_THAT(out, Contains("macvlans +0 ~0 -2, qdiscs +0 -2, filters +0 ~0 -4"));
  CHECK(g.exec("h1", "ip -n fwh1 link show eth1v").exit_status != 0);
  CHECK(g.exec("h1", "ip -n fwh1 link show eth2v").exit_status != 0);
  CHECK(g.run("h1", "ip -n fwh1 route show proto 79").empty());
  CHECK(g.run("h1", "ip -n fwh1 link show eth1").find("eth1") != std::string::npos);  // if1 untouched

  // kill -9 in the middle of an apply, with the relay side made: the test hook pauses after the
  // 2 macvlans, 2 clsacts and 4 filters (relays go first), before any neighbour or route. The
  // journal still says 'applying'; another apply refuses until `rollback`, which takes every
  // one of them away again (the journal's previous state: nothing, after the clear above).
  const std::string paused = "/run/ocslab-test-fwkill";  // the guest's own: its log and pid
  g.run("h1", "(OCSLAB_FORWARDING_TEST_PAUSE_AFTER=8 setsid " + agent + "apply --fabric " + dir + "/ring4.yaml" + opts +
                  " > " + paused + ".log 2>&1 & echo $! > " + paused + ".pid)");
  const bool held = testing::poll_until(
      [&] { return g.exec("h1", "grep -q 'paused after 8 changes' " + paused + ".log").exit_status == 0; }, 120s,
      200ms);
  INFO(g.exec("h1", "cat " + paused + ".log").out);
  REQUIRE(held);
  CHECK(tc_filters(g, "eth1v") == want["eth1v"]);  // the relay side is in the kernel
  CHECK(tc_filters(g, "eth2v") == want["eth2v"]);
  CHECK(g.run("h1", "ip -n fwh1 route show proto 79").empty());  // no route yet
  g.run("h1", "kill -9 -- -$(cat " + paused + ".pid)");
  REQUIRE(testing::poll_until(
      [&] { return g.exec("h1", "kill -0 $(cat " + paused + ".pid) 2>/dev/null").exit_status != 0; }, 60s, 200ms));
  CHECK(g.exec("h1", "grep -q '\"applying\"' /var/lib/fwdint-state/journal.json").exit_status == 0);
  auto again = g.exec("h1", agent + "apply --fabric " + dir + "/ring4.yaml" + opts);
  CHECK(again.exit_status != 0);
  CHECK_THAT(again.err, Contains("did not finish") && Contains("rollback' first"));
  CHECK(g.exec("h1", "ip -n fwh1 link show eth1v").exit_status == 0);  // the refused apply changed nothing
  out = g.run("h1", agent + "rollback --state-dir /var/lib/fwdint-state");
  INFO(out);
  CHECK(g.run("h1", "ip -n fwh1 -br link show type macvlan").empty());
  CHECK(g.run("h1", "ip netns exec fwh1 tc qdisc show | grep -c clsact || true") == "0\n");
  CHECK(g.run("h1", "ip -n fwh1 route show proto 79").empty());
  CHECK(g.run("h1", "ip -n fwh1 neigh show nud permanent").empty());
  CHECK(g.run("h1", "ip -n fwh1 link show eth1").find("eth1") != std::string::npos);  // if1 untouched
  g.exec("h1", "rm -f " + paused + ".log " + paused + ".pid");

  g.exec("h1", "ip netns del fwh1; ip netns del fwp");
  fs::remove_all(dir);
}
