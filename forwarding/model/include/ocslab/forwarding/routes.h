// Routes over the circuits the OCS currently makes: one shortest-path tree per destination
// address (relays match on the destination IP only, so every path to one address must follow
// the same next hops), host-pair paths, and the link loads and bandwidth tax of a traffic matrix.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ocslab/forwarding/fabric.h"

namespace ocslab::forwarding {

// One direction of one circuit: frames leave `from` and arrive at `to`.
struct Hop {
  size_t circuit = 0;
  PortRef from;
  PortRef to;
};
std::string to_string(const Hop& hop);  // "h1:p0->h2:p1", also the name of a directed link
using Path = std::vector<Hop>;

// Everything every other host needs to reach the if1 address of one port `dst`. Paths end
// with the circuit of `dst` and never pass through dst.host before that: a relay there would
// send the frame out again instead of delivering it. Hosts that cannot reach it that way
// have no entry in `next`.
struct DestinationTree {
  PortRef dst;
  uint32_t ip = 0;
  std::map<std::string, int> distance;  // host -> hops; dst.host -> 0
  std::map<std::string, Hop> next;      // host -> first hop toward dst
};

struct Demand {
  std::string src;
  std::string dst;
  double volume = 1.0;
};
using TrafficMatrix = std::vector<Demand>;

// Every ordered pair of distinct hosts, in host-name order, each with `volume`.
TrafficMatrix all_to_all(const Fabric& fabric, double volume = 1.0);
// Each host to the next one in `order` (the fabric's host order when empty), the last to the
// first: the neighbour exchange of a ring collective.
TrafficMatrix ring(const Fabric& fabric, double volume = 1.0, std::vector<std::string> order = {});

struct RouteOptions {
  // Spread destinations over equal-cost next hops: each host, visited nearest-first, takes
  // the candidate hop whose directed link carries the least demand routed so far (ties by the
  // default rule). Demand is `traffic` (all-to-all with volume 1 when empty).
  bool balance = false;
  TrafficMatrix traffic;
  // A fabric whose circuits do not connect every host (the survivors of a dark circuit, the
  // circuits a reconfiguration keeps): pairs without a path are left out (has_route false,
  // tree_for throws for them) instead of an error. Such a fabric need not pass validate().
  bool partial = false;
};

class Routes {
 public:
  // One tree per if1 address of a port in a circuit, ordered by (host, port) name.
  const std::vector<DestinationTree>& trees() const { return trees_; }
  // The tree a pair's traffic uses: dst's address nearest to src, ties to the lowest port name.
  const DestinationTree& tree_for(const std::string& src, const std::string& dst) const;
  // Whether src has a path to dst (always, unless RouteOptions::partial).
  bool has_route(const std::string& src, const std::string& dst) const { return pair_tree_.count({src, dst}) > 0; }
  // The hops from src to dst (empty when src == dst). Throws Error for unknown hosts.
  Path path(const std::string& src, const std::string& dst) const;
  Path path_to(const DestinationTree& tree, const std::string& src) const;

 private:
  friend Routes compute_routes(const Fabric&, const RouteOptions&);
  friend Routes bridge_routes(const Fabric&, const Routes&, const Routes&);
  std::vector<DestinationTree> trees_;
  std::map<std::pair<std::string, std::string>, size_t> pair_tree_;
};

// Deterministic shortest paths. Tie rule without balancing: at every host, of the hops that
// get one step closer, take the one to the lowest neighbour host name, then the lowest local
// port name (names compare byte-wise, so "h10" < "h2"). The fabric must be validated.
Routes compute_routes(const Fabric& fabric, const RouteOptions& options = {});

// The routes of make-before-break (reroute.h): over `from` (the fabric installed now), every
// destination that `kept_routes` (computed on from's hosts with only the circuits that stay lit,
// with RouteOptions::partial) still has takes kept's next hop at each host kept's tree reaches, and
// keeps its old next hop at the others (they cannot reach it over kept circuits; the old hop
// leads down the old tree, strictly closer, until it meets the kept tree, so no loop is made).
// Destinations whose own circuit breaks keep their old tree. A pair uses the address kept's
// routes give it when it has one, else the old one. Hop::circuit indexes `from`'s circuits.
Routes bridge_routes(const Fabric& from, const Routes& from_routes, const Routes& kept_routes);

struct LoadReport {
  std::map<std::string, double> link_load;  // directed link "h1:p0->h2:p1" -> carried volume
  double max_load = 0;
  std::string max_link;  // the first link (by name) carrying max_load
  double demanded = 0;   // sum of demand volumes
  double carried = 0;    // sum over links of carried volume = sum of volume x hops
  double tax() const { return demanded > 0 ? carried / demanded : 0; }
};
LoadReport evaluate(const Fabric& fabric, const Routes& routes, const TrafficMatrix& traffic);

}  // namespace ocslab::forwarding
