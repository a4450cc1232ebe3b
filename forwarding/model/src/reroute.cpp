#include "ocslab/forwarding/reroute.h"

#include <algorithm>

namespace ocslab::forwarding {

bool touches(const Circuit& c, const std::set<PortRef>& ports) { return ports.count(c.a) || ports.count(c.b); }

bool same_circuit(const Circuit& a, const Circuit& b) {
  return (a.a == b.a && a.b == b.b) || (a.a == b.b && a.b == b.a);
}

Fabric surviving_fabric(const Fabric& fabric, const std::set<PortRef>& dark, std::vector<Circuit>* dropped) {
  Fabric out;
  out.hosts = fabric.hosts;
  for (const auto& c : fabric.circuits) {
    if (!touches(c, dark))
      out.circuits.push_back(c);
    else if (dropped)
      dropped->push_back(c);
  }
  return out;
}

ChangePlan plan_change(const Fabric& from, const Fabric& to) {
  ChangePlan p;
  p.kept_fabric.hosts = from.hosts;
  auto in = [](const Fabric& f, const Circuit& c) {
    return std::any_of(f.circuits.begin(), f.circuits.end(), [&](const Circuit& x) { return same_circuit(x, c); });
  };
  for (const auto& c : from.circuits) {
    if (in(to, c)) {
      p.kept.push_back(c);
      p.kept_fabric.circuits.push_back(c);
    } else {
      p.broken.push_back(c);
    }
  }
  for (const auto& c : to.circuits)
    if (!in(from, c)) p.made.push_back(c);
  return p;
}

Routes make_before_break_routes(const Fabric& from, const Routes& installed, const ChangePlan& change,
                                RouteOptions options) {
  options.partial = true;
  return bridge_routes(from, installed, compute_routes(change.kept_fabric, options));
}

std::vector<PairPaths> pair_paths(const Fabric& fabric, const Routes& routes) {
  std::vector<std::string> names;
  for (const auto& h : fabric.hosts) names.push_back(h.name);
  std::vector<PairPaths> out;
  for (const auto& s : names)
    for (const auto& d : names) {
      if (s == d) continue;
      PairPaths p{s, d, {}, {}, false};
      if (routes.has_route(s, d)) {
        p.forward = routes.path(s, d);
        // The reply goes to the address of the port src's first hop leaves from.
        const PortRef back = p.forward.front().from;
        for (const auto& t : routes.trees())
          if (t.dst == back && t.next.count(d)) {
            p.reply = routes.path_to(t, d);
            p.routed = true;
          }
      }
      out.push_back(std::move(p));
    }
  return out;
}

std::vector<std::pair<std::string, std::string>> pairs_lost(const Fabric& fabric, const Routes& routes,
                                                            const std::vector<Circuit>& dark) {
  auto crosses = [&](const Path& path) {
    return std::any_of(path.begin(), path.end(), [&](const Hop& hop) {
      const Circuit& c = fabric.circuits.at(hop.circuit);
      return std::any_of(dark.begin(), dark.end(), [&](const Circuit& x) { return same_circuit(x, c); });
    });
  };
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& p : pair_paths(fabric, routes))
    if (!p.routed || crosses(p.forward) || crosses(p.reply)) out.push_back({p.src, p.dst});
  return out;
}

}  // namespace ocslab::forwarding
