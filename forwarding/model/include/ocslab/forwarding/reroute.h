// Forwarding while the fabric changes under it: around a circuit that went dark (a port whose
// light is gone), and across a planned reconfiguration, where make-before-break moves the routes
// that can move onto the circuits that stay lit before the switch breaks the others. Pure data
// and functions; the runner (runner/lab_forwarding.h) applies the plans they lead to. See
// docs/forwarding.md ("Around a dark circuit and before breaking one").
#pragma once

#include <set>
#include <string>
#include <utility>
#include <vector>

#include "ocslab/forwarding/fabric.h"
#include "ocslab/forwarding/routes.h"

namespace ocslab::forwarding {

// Circuits are bidirectional and forwarding needs both directions: one dark end kills the circuit.
bool touches(const Circuit& c, const std::set<PortRef>& ports);
// Whether a and b connect the same two ports, in either orientation.
bool same_circuit(const Circuit& a, const Circuit& b);

// The fabric's hosts with the circuits that have no end in `dark`; `dropped` (optional) gets the
// others. The result may leave hosts unreachable: route it with RouteOptions::partial.
Fabric surviving_fabric(const Fabric& fabric, const std::set<PortRef>& dark, std::vector<Circuit>* dropped = nullptr);

// A planned change of the circuits from `from` to `to` (the same hosts and ports).
struct ChangePlan {
  std::vector<Circuit> kept;    // in both: lit before, during and after the change
  std::vector<Circuit> broken;  // in from only: dark from the switch's command on
  std::vector<Circuit> made;    // in to only: lit once the switch has made them
  Fabric kept_fabric;           // from's hosts with the kept circuits only
};
ChangePlan plan_change(const Fabric& from, const Fabric& to);

// The routes to install before the switch's command when making before breaking: the kept
// fabric's wherever it reaches, the installed ones elsewhere (bridge_routes in routes.h).
// `options` routes the kept fabric (partial is set here).
Routes make_before_break_routes(const Fabric& from, const Routes& installed, const ChangePlan& change,
                                RouteOptions options = {});

// An ordered host pair as the verify matrix exercises it: src sends to dst's address
// (Routes::tree_for) out of the port of its first hop, and dst answers to that port's address
// (an RC queue pair needs both directions).
struct PairPaths {
  std::string src, dst;
  Path forward, reply;
  bool routed = false;  // false: no route one way or the other (RouteOptions::partial)
};
std::vector<PairPaths> pair_paths(const Fabric& fabric, const Routes& routes);

// The ordered pairs (src, dst) that cannot complete while the circuits in `dark` are down with
// `routes` installed: a path either way crosses one of them, or there is no route. In host order.
std::vector<std::pair<std::string, std::string>> pairs_lost(const Fabric& fabric, const Routes& routes,
                                                            const std::vector<Circuit>& dark);

}  // namespace ocslab::forwarding
