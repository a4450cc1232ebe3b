// The minimal set of changes that turns what a host holds (the ocslab-owned part) into a
// desired HostPlan, for routes, neighbours, clsact qdiscs and filters: an apply of a plan that
// is already in place changes nothing. Pure: no kernel access.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ocslab/forwarding/change.h"
#include "ocslab/forwarding/rule_plan.h"

namespace ocslab::forwarding {

// add: the key is not installed; replace: installed with other values (`old`); remove:
// installed, not desired (`rule` is the installed one).
template <class Rule>
struct Change {
  ChangeOp op = ChangeOp::add;
  Rule rule;
  Rule old;  // replace only
};

struct PlanDiff {
  std::vector<Change<LinkRule>> links;            // key: name (replace: brought back to MAC/mode/up)
  std::vector<Change<RouteRule>> routes;          // key: dst
  std::vector<Change<NeighbourRule>> neighbours;  // key: (dst, dev)
  std::vector<Change<QdiscRule>> qdiscs;          // key: dev (no replace)
  std::vector<Change<FilterRule>> filters;        // key: (dev, chain, prio)
  bool empty() const { return size() == 0; }
  size_t size() const { return links.size() + routes.size() + neighbours.size() + qdiscs.size() + filters.size(); }
};

// Changes in key order within each kind. Duplicate keys in either side: Error naming them.
PlanDiff diff(const HostPlan& desired, const HostPlan& installed);

// The diff as commands in the order apply makes them: macvlan adds/updates, qdisc adds, filter adds/replaces,
// neighbour adds/replaces, route adds/replaces, then route, neighbour, filter, qdisc, macvlan removals
// (a relay and a neighbour exist before a route uses them; a route goes before its neighbour).
std::vector<std::string> commands(const PlanDiff& d);
nlohmann::json to_json(const PlanDiff& d);

}  // namespace ocslab::forwarding
