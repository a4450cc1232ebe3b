#include "ocslab/forwarding/routes.h"

#include <fmt/format.h>

#include <algorithm>
#include <deque>
#include <set>
#include <tuple>

namespace ocslab::forwarding {

std::string to_string(const Hop& hop) { return to_string(hop.from) + "->" + to_string(hop.to); }

TrafficMatrix all_to_all(const Fabric& fabric, double volume) {
  std::vector<std::string> names;
  for (const auto& h : fabric.hosts) names.push_back(h.name);
  std::sort(names.begin(), names.end());
  TrafficMatrix tm;
  for (const auto& s : names)
    for (const auto& d : names)
      if (s != d) tm.push_back({s, d, volume});
  return tm;
}

TrafficMatrix ring(const Fabric& fabric, double volume, std::vector<std::string> order) {
  if (order.empty())
    for (const auto& h : fabric.hosts) order.push_back(h.name);
  for (const auto& name : order)
    if (!fabric.find_host(name)) throw Error("ring traffic: unknown host '" + name + "'");
  TrafficMatrix tm;
  if (order.size() < 2) return tm;
  for (size_t i = 0; i < order.size(); ++i) tm.push_back({order[i], order[(i + 1) % order.size()], volume});
  return tm;
}

namespace {

// Outgoing hops of every host, sorted by the tie rule: neighbour host name, then local port.
std::map<std::string, std::vector<Hop>> adjacency(const Fabric& fabric) {
  std::map<std::string, std::vector<Hop>> adj;
  for (const auto& h : fabric.hosts) adj[h.name];
  for (size_t i = 0; i < fabric.circuits.size(); ++i) {
    const auto& c = fabric.circuits[i];
    adj[c.a.host].push_back({i, c.a, c.b});
    adj[c.b.host].push_back({i, c.b, c.a});
  }
  for (auto& [host, hops] : adj)
    std::sort(hops.begin(), hops.end(), [](const Hop& x, const Hop& y) {
      return std::tie(x.to.host, x.from.port) < std::tie(y.to.host, y.from.port);
    });
  return adj;
}

// BFS from the destination port's host, which may only be entered over dst's own circuit.
DestinationTree distances(const std::map<std::string, std::vector<Hop>>& adj, const PortRef& dst, uint32_t ip,
                          std::vector<std::string>& order) {
  DestinationTree t;
  t.dst = dst;
  t.ip = ip;
  t.distance[dst.host] = 0;
  order.clear();
  std::deque<std::string> todo{dst.host};
  while (!todo.empty()) {
    std::string h = todo.front();
    todo.pop_front();
    for (const Hop& hop : adj.at(h)) {
      if (h == dst.host && hop.from != dst) continue;
      if (t.distance.count(hop.to.host)) continue;
      t.distance[hop.to.host] = t.distance[h] + 1;
      order.push_back(hop.to.host);
      todo.push_back(hop.to.host);
    }
  }
  return t;
}

// Hops from `host` that get one step closer to the tree's destination, in tie-rule order.
std::vector<Hop> candidates(const std::map<std::string, std::vector<Hop>>& adj, const DestinationTree& t,
                            const std::string& host) {
  std::vector<Hop> out;
  int d = t.distance.at(host);
  for (const Hop& hop : adj.at(host)) {
    auto it = t.distance.find(hop.to.host);
    if (it == t.distance.end() || it->second != d - 1) continue;
    if (hop.to.host == t.dst.host && hop.to != t.dst) continue;  // another circuit into dst.host
    out.push_back(hop);
  }
  return out;
}

}  // namespace

Routes compute_routes(const Fabric& fabric, const RouteOptions& options) {
  Routes r;
  auto adj = adjacency(fabric);
  std::vector<PortRef> ports;
  for (const auto& h : fabric.hosts)
    for (const auto& p : h.ports)
      if (fabric.circuit_of({h.name, p.name})) ports.push_back({h.name, p.name});
  std::sort(ports.begin(), ports.end());

  std::vector<std::vector<std::string>> orders(ports.size());
  for (size_t i = 0; i < ports.size(); ++i)
    r.trees_.push_back(distances(adj, ports[i], fabric.find_port(ports[i])->if1.ip.addr, orders[i]));

  std::vector<std::string> names;
  for (const auto& h : fabric.hosts) names.push_back(h.name);
  std::sort(names.begin(), names.end());
  for (const auto& s : names) {
    for (const auto& d : names) {
      if (s == d) continue;
      std::optional<size_t> best;
      for (size_t i = 0; i < r.trees_.size(); ++i) {
        const auto& t = r.trees_[i];
        if (t.dst.host != d || !t.distance.count(s)) continue;
        if (!best || t.distance.at(s) < r.trees_[*best].distance.at(s)) best = i;  // ports sorted: lowest wins ties
      }
      if (!best && options.partial) continue;
      if (!best) throw Error(fmt::format("no route from '{}' to '{}' (was the fabric validated?)", s, d));
      r.pair_tree_[{s, d}] = *best;
    }
  }

  TrafficMatrix traffic = options.traffic.empty() ? all_to_all(fabric) : options.traffic;
  std::map<std::string, double> load;  // directed link name -> demand routed over it so far
  for (size_t i = 0; i < r.trees_.size(); ++i) {
    auto& t = r.trees_[i];
    for (const auto& host : orders[i]) {  // nearest first
      auto c = candidates(adj, t, host);
      const Hop* pick = &c.front();
      if (options.balance)
        for (const Hop& hop : c)
          if (load[to_string(hop)] < load[to_string(*pick)]) pick = &hop;
      t.next[host] = *pick;
    }
    if (!options.balance) continue;
    for (const auto& dem : traffic)
      if (dem.src != dem.dst && r.has_route(dem.src, dem.dst) && r.pair_tree_.at({dem.src, dem.dst}) == i)
        for (const Hop& hop : r.path_to(t, dem.src)) load[to_string(hop)] += dem.volume;
  }
  if (!options.balance) return r;

  // A host with several ports has several addresses, often at the same distance (a ring's
  // far host): spread pairs over them. Pairs with a single nearest address are placed first
  // (their load is unavoidable), then the others by decreasing volume; each takes the address
  // whose path has the lowest maximum link load after adding it, then the lowest total, then
  // the lowest port name. A pair listed twice keeps its first choice.
  struct Choice {
    Demand demand;
    std::vector<size_t> trees;
  };
  std::vector<Choice> choices;
  std::set<std::pair<std::string, std::string>> seen;
  for (const auto& d : traffic) {
    if (d.src == d.dst || !r.has_route(d.src, d.dst)) continue;
    Choice c{d, {}};
    if (seen.insert({d.src, d.dst}).second) {
      int best_dist = r.trees_[r.pair_tree_.at({d.src, d.dst})].distance.at(d.src);
      for (size_t i = 0; i < r.trees_.size(); ++i) {
        const auto& t = r.trees_[i];
        auto it = t.distance.find(d.src);
        if (t.dst.host == d.dst && it != t.distance.end() && it->second == best_dist) c.trees.push_back(i);
      }
    }
    choices.push_back(std::move(c));
  }
  std::stable_sort(choices.begin(), choices.end(), [](const Choice& x, const Choice& y) {
    bool fx = x.trees.size() <= 1, fy = y.trees.size() <= 1;  // fixed (or repeated) pairs first
    if (fx != fy) return fx;
    return x.demand.volume > y.demand.volume;
  });
  load.clear();
  for (const auto& c : choices) {
    const Demand& dem = c.demand;
    if (c.trees.size() > 1) {
      std::optional<size_t> best;
      std::pair<double, double> best_cost;
      for (size_t i : c.trees) {
        std::pair<double, double> cost{0, 0};
        for (const Hop& hop : r.path_to(r.trees_[i], dem.src)) {
          double after = load[to_string(hop)] + dem.volume;
          cost.first = std::max(cost.first, after);
          cost.second += after;
        }
        if (!best || cost < best_cost) {
          best = i;
          best_cost = cost;
        }
      }
      r.pair_tree_[{dem.src, dem.dst}] = *best;
    }
    for (const Hop& hop : r.path(dem.src, dem.dst)) load[to_string(hop)] += dem.volume;
  }
  return r;
}

const DestinationTree& Routes::tree_for(const std::string& src, const std::string& dst) const {
  auto it = pair_tree_.find({src, dst});
  if (it == pair_tree_.end()) throw Error(fmt::format("no route from '{}' to '{}'", src, dst));
  return trees_[it->second];
}

Path Routes::path_to(const DestinationTree& tree, const std::string& src) const {
  Path p;
  std::string at = src;
  while (at != tree.dst.host) {
    // A tree's path visits each host once; longer means the next hops loop (a bug upstream).
    if (p.size() > tree.next.size()) throw Error(fmt::format("the routes to {} loop", to_string(tree.dst)));
    auto it = tree.next.find(at);
    if (it == tree.next.end())
      throw Error(fmt::format("'{}' cannot reach {} ({})", src, format_ipv4(tree.ip), to_string(tree.dst)));
    p.push_back(it->second);
    at = it->second.to.host;
  }
  return p;
}

Path Routes::path(const std::string& src, const std::string& dst) const {
  if (src == dst) return {};
  return path_to(tree_for(src, dst), src);
}

Routes bridge_routes(const Fabric& from, const Routes& from_routes, const Routes& kept_routes) {
  // A kept hop names a circuit of `kept`; the same circuit's index in `from` (by its two ends).
  auto from_index = [&](const Hop& hop) {
    for (size_t i = 0; i < from.circuits.size(); ++i) {
      const auto& c = from.circuits[i];
      if ((c.a == hop.from && c.b == hop.to) || (c.b == hop.from && c.a == hop.to)) return i;
    }
    throw Error(fmt::format("bridge routes: {} is not a circuit of the installed fabric", to_string(hop)));
  };
  Routes r = from_routes;
  std::map<PortRef, size_t> kept_tree;  // destination port -> index in kept_routes.trees()
  for (size_t i = 0; i < kept_routes.trees_.size(); ++i) kept_tree[kept_routes.trees_[i].dst] = i;
  std::map<PortRef, size_t> tree_index;  // destination port -> index in r.trees_
  for (size_t i = 0; i < r.trees_.size(); ++i) {
    DestinationTree& t = r.trees_[i];
    tree_index[t.dst] = i;
    auto k = kept_tree.find(t.dst);
    if (k == kept_tree.end()) continue;  // its own circuit breaks: nothing to move onto
    const DestinationTree& kt = kept_routes.trees_[k->second];
    for (const auto& [host, hop] : kt.next) {
      Hop h = hop;
      h.circuit = from_index(hop);
      t.next[host] = h;
      t.distance[host] = kt.distance.at(host);
    }
    // Hosts kept's tree does not reach keep their old hop; their distance is the old path's,
    // which may now end on a kept path of another length: recomputed from the hops.
    for (auto& [host, d] : t.distance)
      if (host != t.dst.host && !kt.next.count(host)) d = static_cast<int>(r.path_to(t, host).size());
  }
  for (auto& [pair, index] : r.pair_tree_)
    if (kept_routes.has_route(pair.first, pair.second))
      index = tree_index.at(kept_routes.trees_[kept_routes.pair_tree_.at(pair)].dst);
  return r;
}

LoadReport evaluate(const Fabric& fabric, const Routes& routes, const TrafficMatrix& traffic) {
  LoadReport rep;
  for (size_t i = 0; i < fabric.circuits.size(); ++i) {
    const auto& c = fabric.circuits[i];
    rep.link_load[to_string(Hop{i, c.a, c.b})] = 0;
    rep.link_load[to_string(Hop{i, c.b, c.a})] = 0;
  }
  for (const auto& d : traffic) {
    if (d.src == d.dst) continue;
    rep.demanded += d.volume;
    for (const Hop& hop : routes.path(d.src, d.dst)) {
      rep.link_load[to_string(hop)] += d.volume;
      rep.carried += d.volume;
    }
  }
  for (const auto& [link, v] : rep.link_load)
    if (v > rep.max_load) {
      rep.max_load = v;
      rep.max_link = link;
    }
  return rep;
}

}  // namespace ocslab::forwarding
