// What one change to a host's ocslab-owned forwarding state does, and the `ip` command that
// undoes a route or neighbour: shared by the plan diff (pure) and the rtnetlink programming.
#pragma once

#include <string>

#include "ocslab/forwarding/rule_plan.h"

namespace ocslab::forwarding {

enum class ChangeOp { add, replace, remove };
const char* to_string(ChangeOp op);  // "add", "replace", "delete"

std::string render_delete(const RouteRule& r);      // ip route del D dev X proto 79
std::string render_delete(const NeighbourRule& n);  // ip neigh del D dev X

}  // namespace ocslab::forwarding
