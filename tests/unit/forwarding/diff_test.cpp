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
