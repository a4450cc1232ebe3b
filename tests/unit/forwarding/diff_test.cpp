// diff(desired, installed): the minimal changes per kind, none for a plan already in place,
// and the apply order of the resulting commands.
#include <catch2/catch.hpp>

#include "fabrics.h"
#include "ocslab/forwarding/diff.h"

using namespace ocslab;
using namespace ocslab::forwarding;

namespace {

HostPlan ring4_h1() {
  Fabric f = load_fabric_file(fabrics::example("ring4.yaml"));
  return make_plan(f, compute_routes(f)).host("h1");
}

}  // namespace

TEST_CASE("diff: a plan against itself is empty, against nothing is all adds") {
  HostPlan p = ring4_h1();
  REQUIRE_FALSE(p.routes.empty());
  CHECK(diff(p, p).empty());
  HostPlan none;
  PlanDiff d = diff(p, none);
  CHECK(d.routes.size() == p.routes.size());
  CHECK(d.neighbours.size() == p.neighbours.size());
  CHECK(d.qdiscs.size() == p.qdiscs.size());
  CHECK(d.filters.size() == p.filters.size());
  for (const auto& c : d.routes) CHECK(c.op == ChangeOp::add);
  // The reverse removes everything, and the commands say so in removal order.
  PlanDiff r = diff(none, p);
  CHECK(r.size() == d.size());
  auto cmds = commands(r);
  REQUIRE(cmds.size() == r.size());
  CHECK(cmds.front().rfind("ip route del ", 0) == 0);
  CHECK(cmds.back().rfind("tc qdisc del dev ", 0) == 0);
}

TEST_CASE("diff: only changed rules, as replace, keyed per kind") {
  HostPlan installed = ring4_h1();
  HostPlan desired = installed;
  desired.routes[0].src = "10.0.0.99";                 // same dst: replace
  desired.neighbours[1].lladdr = "02:00:00:00:09:09";  // same (dst, dev): replace
  desired.neighbours[2].dev = "eth9";                  // another key: add the new, remove the old
  desired.filters[0].redirect_dev = "eth9";            // same (dev, chain, prio): replace
  desired.qdiscs.pop_back();                           // remove
  PlanDiff d = diff(desired, installed);
  REQUIRE(d.routes.size() == 1);
  CHECK(d.routes[0].op == ChangeOp::replace);
  CHECK(d.routes[0].rule.src == "10.0.0.99");
  CHECK(d.routes[0].old.src == installed.routes[0].src);
  REQUIRE(d.neighbours.size() == 3);
  int adds = 0, replaces = 0, removes = 0;
  for (const auto& c : d.neighbours) {
    adds += c.op == ChangeOp::add;
    replaces += c.op == ChangeOp::replace;
    removes += c.op == ChangeOp::remove;
    if (c.op == ChangeOp::remove) CHECK(c.rule.dev == installed.neighbours[2].dev);
    if (c.op == ChangeOp::add) CHECK(c.rule.dev == "eth9");
  }
  CHECK((adds == 1 && replaces == 1 && removes == 1));
  REQUIRE(d.filters.size() == 1);
  CHECK(d.filters[0].op == ChangeOp::replace);
  REQUIRE(d.qdiscs.size() == 1);
  CHECK(d.qdiscs[0].op == ChangeOp::remove);
  CHECK(d.qdiscs[0].rule.dev == installed.qdiscs.back().dev);

  // Apply order: adds/replaces qdisc, filter, neighbour, route; removals the other way round.
  // A changed filter is deleted and added again (tc cannot change its actions in place).
  auto cmds = commands(d);
  std::vector<std::string> kinds;
  for (const auto& c : cmds) kinds.push_back(c.substr(0, c.find(' ', c.find(' ') + 1)));
  std::vector<std::string> expected = {"tc filter", "tc filter", "ip neigh", "ip neigh",
                                       "ip route",  "ip neigh",  "tc qdisc"};
  CHECK(kinds == expected);
  CHECK(cmds[0].rfind("tc filter del dev eth1v ingress protocol ip prio 20224", 0) == 0);
  CHECK(cmds[2].find("lladdr 02:00:00:00:09:09") != std::string::npos);  // key order: by address
  CHECK(cmds[3].find(" dev eth9 nud permanent") != std::string::npos);
  CHECK(cmds[4] == "ip route replace 10.0.0.20/32 dev eth2 src 10.0.0.99 proto 79");
  CHECK(cmds[5] == "ip neigh del " + installed.neighbours[2].dst + " dev " + installed.neighbours[2].dev);
}

TEST_CASE("diff: duplicate keys are named") {
  HostPlan p = ring4_h1();
  HostPlan dup = p;
  dup.routes.push_back(dup.routes[0]);
  CHECK_THROWS_WITH(diff(dup, p), Catch::Contains("desired state has route " + p.routes[0].dst + " twice"));
  CHECK_THROWS_WITH(diff(p, dup), Catch::Contains("installed state has route"));
}

TEST_CASE("host plan JSON round trip, and bad JSON named") {
  HostPlan p = ring4_h1();
  HostPlan back = host_plan_from_json(nlohmann::json::parse(to_json(p).dump()));
  CHECK(diff(p, back).empty());
  CHECK(back.host == "h1");
  auto j = to_json(p);
  j["routes"][0].erase("dev");
  CHECK_THROWS_WITH(host_plan_from_json(j), Catch::Contains("route: missing field 'dev'"));
}

TEST_CASE("diff: if2 macvlans by name, created first and removed last, in the journal JSON") {
  HostPlan p = ring4_h1();
  p.links = {{"eth1v", "eth1", "02:00:00:00:01:10"}, {"eth2v", "eth2", "02:00:00:00:01:11"}};
  HostPlan none;
  auto add = commands(diff(p, none));
  REQUIRE(add.size() == 2 + p.qdiscs.size() + p.filters.size() + p.neighbours.size() + p.routes.size());
  CHECK(add[0] == "ip link add link eth1 name eth1v address 02:00:00:00:01:10 type macvlan mode private");
  CHECK(add[2] == "tc qdisc add dev eth1v clsact");  // relays before sources: links, then clsacts
  auto del = commands(diff(none, p));
  CHECK(del[del.size() - 2] == "ip link del eth1v");
  CHECK(del.back() == "ip link del eth2v");
  CHECK(del[del.size() - 3].rfind("tc qdisc del dev ", 0) == 0);

  // A changed MAC is a replace of that one link; a changed filter a delete + add.
  HostPlan q = p;
  q.links[1].mac = "02:00:00:00:01:1f";
  q.filters[0].set_eth_dst = "02:00:00:00:09:09";
  PlanDiff d = diff(q, p);
  REQUIRE(d.links.size() == 1);
  CHECK(d.links[0].op == ChangeOp::replace);
  CHECK(d.links[0].old.mac == "02:00:00:00:01:11");
  REQUIRE(d.filters.size() == 1);
  auto c = commands(d);
  REQUIRE(c.size() == 3);
  CHECK(c[1].rfind("tc filter del dev " + p.filters[0].dev, 0) == 0);
  CHECK(c[2].find("set 02:00:00:00:09:09") != std::string::npos);

  HostPlan back = host_plan_from_json(nlohmann::json::parse(to_json(p).dump()));
  CHECK(diff(p, back).empty());
  REQUIRE(back.links.size() == 2);
  CHECK(back.links[0].parent == "eth1");
  CHECK_FALSE(to_json(ring4_h1()).contains("links"));  // plans without macvlans look as before
}
