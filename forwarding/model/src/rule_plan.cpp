#include "ocslab/forwarding/rule_plan.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <tuple>

namespace ocslab::forwarding {

const HostPlan& Plan::host(const std::string& name) const {
  for (const auto& h : hosts)
    if (h.host == name) return h;
  throw Error("plan has no host '" + name + "'");
}

namespace {

// The MAC the frame must carry on `hop`: the next host relays it (if2) unless that host owns
// the destination port, which then receives it on its if1.
std::string next_mac(const Fabric& fabric, const DestinationTree& t, const Hop& hop) {
  const Port* to = fabric.find_port(hop.to);
  return hop.to == t.dst ? to->if1.mac : to->if2->mac;
}

using FilterLists = std::map<std::pair<std::string, std::string>, std::vector<std::pair<uint32_t, FilterRule>>>;

// The other end of `port`'s circuit; nullopt when it has none.
std::optional<PortRef> peer_of(const Fabric& fabric, const PortRef& port) {
  auto c = fabric.circuit_of(port);
  if (!c) return std::nullopt;
  const Circuit& circuit = fabric.circuits[*c];
  return circuit.a == port ? circuit.b : circuit.a;
}

// PlanOptions::every_nic: the neighbours on every other connected port (returned per host, with
// their destination for ordering) and the filters on the peers' if2s that carry those frames
// onto the trees (added to `filters`).
using ExtraNeighbours = std::map<std::string, std::vector<std::pair<uint32_t, NeighbourRule>>>;
ExtraNeighbours every_nic_rules(const Fabric& fabric, const Routes& routes, FilterLists& filters) {
  ExtraNeighbours out;
  std::set<std::tuple<std::string, std::string, uint32_t>> have;  // (host, if2, destination)
  for (const auto& [key, list] : filters)
    for (const auto& [ip, f] : list) have.insert({key.first, key.second, ip});
  // The filter with which the host of `in` passes D's frames arriving on in's if2 on: along its
  // own tree, or, as D's owner (frames for D reach it on another port), out of D's port to D's
  // circuit partner, whose tree hands them straight back. nullopt when there is no way on.
  auto relay_filter = [&](const DestinationTree& t, const PortRef& in) -> std::optional<FilterRule> {
    FilterRule f;
    f.dev = fabric.find_port(in)->if2->name;
    f.dst = format_ipv4(t.ip) + "/32";
    if (in.host == t.dst.host) {
      auto partner = peer_of(fabric, t.dst);
      if (!partner || partner->host == t.dst.host) return std::nullopt;
      f.set_eth_dst = fabric.find_port(*partner)->if2->mac;
      f.redirect_dev = fabric.find_port(t.dst)->if1.name;
    } else {
      auto it = t.next.find(in.host);
      if (it == t.next.end()) return std::nullopt;
      f.set_eth_dst = next_mac(fabric, t, it->second);
      f.redirect_dev = fabric.find_port(it->second.from)->if1.name;
    }
    return f;
  };
  auto add_filter = [&](const DestinationTree& t, const PortRef& in, const FilterRule& f) {
    if (have.insert({in.host, f.dev, t.ip}).second) filters[{in.host, f.dev}].push_back({t.ip, f});
  };
  for (const auto& t : routes.trees()) {
    std::string dst = format_ipv4(t.ip);
    for (const auto& h : fabric.hosts) {
      if (h.name == t.dst.host) continue;
      auto planned = t.next.find(h.name);
      if (planned == t.next.end()) continue;  // unreachable from h: make_plan reports it
      for (const auto& x : h.ports) {
        PortRef xref{h.name, x.name};
        if (planned->second.from == xref) continue;
        auto peer = peer_of(fabric, xref);
        if (!peer) continue;
        if (*peer == t.dst) {  // a circuit straight to D (the tree took another equal one)
          out[h.name].push_back({t.ip, {dst, fabric.find_port(*peer)->if1.mac, x.if1.name}});
          continue;
        }
        auto first = relay_filter(t, *peer);
        if (!first) continue;
        std::optional<FilterRule> back;
        std::optional<PortRef> partner;
        if (peer->host == t.dst.host) {
          partner = peer_of(fabric, t.dst);
          back = relay_filter(t, *partner);
          if (!back) continue;
        }
        add_filter(t, *peer, *first);
        if (back) add_filter(t, *partner, *back);
        out[h.name].push_back({t.ip, {dst, fabric.find_port(*peer)->if2->mac, x.if1.name}});
      }
    }
  }
  return out;
}

}  // namespace

Plan make_plan(const Fabric& fabric, const Routes& routes, const PlanOptions& options) {
  Plan plan;
  std::map<std::string, HostPlan> by_host;
  // (if2 device owner, device) -> filters awaiting priorities
  FilterLists filters;
  for (const auto& h : fabric.hosts) {
    HostPlan& hp = by_host[h.name];
    hp.host = h.name;
    for (const auto& p : h.ports)
      if (fabric.circuit_of({h.name, p.name})) hp.qdiscs.push_back({p.if2->name});
  }
  // Trees are ordered by (host, port); sort each host's rules by address afterwards.
  std::map<std::string, std::vector<std::pair<uint32_t, size_t>>> route_order;
  for (const auto& t : routes.trees()) {
    std::string dst = format_ipv4(t.ip);
    for (const auto& h : fabric.hosts) {
      if (h.name == t.dst.host) continue;
      auto it = t.next.find(h.name);
      if (it == t.next.end()) {
        plan.unreachable.push_back(fmt::format("{} -> {} ({})", h.name, dst, to_string(t.dst)));
        continue;
      }
      const Hop& hop = it->second;
      const Port* out = fabric.find_port(hop.from);
      std::string mac = next_mac(fabric, t, hop);
      HostPlan& hp = by_host[h.name];
      route_order[h.name].push_back({t.ip, hp.routes.size()});
      hp.routes.push_back({dst + "/32", out->if1.name, format_ipv4(out->if1.ip.addr), kRouteProtocol});
      hp.neighbours.push_back({dst, mac, out->if1.name});
      // Relay side: h forwards what upstream hosts send it for this destination, on the if2
      // of the port each of them reaches h through.
      for (const auto& [up, up_hop] : t.next) {
        if (up_hop.to.host != h.name) continue;
        const Port* in = fabric.find_port(up_hop.to);
        FilterRule f;
        f.dev = in->if2->name;
        f.dst = dst + "/32";
        f.set_eth_dst = mac;
        f.redirect_dev = out->if1.name;
        filters[{h.name, f.dev}].push_back({t.ip, f});
      }
    }
  }
  ExtraNeighbours extra;
  if (options.every_nic) extra = every_nic_rules(fabric, routes, filters);
  for (auto& [host, order] : route_order) {
    HostPlan& hp = by_host[host];
    std::sort(order.begin(), order.end());
    std::vector<RouteRule> r;
    std::vector<NeighbourRule> n;
    for (const auto& [ip, idx] : order) {
      r.push_back(hp.routes[idx]);
      n.push_back(hp.neighbours[idx]);
    }
    hp.routes = std::move(r);
    hp.neighbours = std::move(n);
  }
  // Every-NIC neighbours after the routes' own, by destination then device.
  for (auto& [host, list] : extra) {
    std::sort(list.begin(), list.end(), [](const auto& x, const auto& y) {
      return std::tie(x.first, x.second.dev) < std::tie(y.first, y.second.dev);
    });
    for (auto& [ip, n] : list) by_host[host].neighbours.push_back(std::move(n));
  }
  for (auto& [key, list] : filters) {
    std::sort(list.begin(), list.end(), [](const auto& x, const auto& y) { return x.first < y.first; });
    if (list.size() > static_cast<size_t>(kTcPrioLast) - kTcPrioFirst + 1)
      throw Error(fmt::format("{} {}: {} relayed destinations exceed ocslab's tc priority range {:#x}..{:#x}",
                              key.first, key.second, list.size(), kTcPrioFirst, kTcPrioLast));
    uint16_t prio = kTcPrioFirst;
    for (auto& [ip, f] : list) {
      f.prio = prio++;
      by_host[key.first].filters.push_back(f);
    }
  }
  for (const auto& h : fabric.hosts) plan.hosts.push_back(std::move(by_host[h.name]));
  return plan;
}

std::string render(const RouteRule& r) {
  return fmt::format("ip route replace {} dev {} src {} proto {}", r.dst, r.dev, r.src, r.protocol);
}

std::string render(const NeighbourRule& n) {
  return fmt::format("ip neigh replace {} lladdr {} dev {} nud permanent", n.dst, n.lladdr, n.dev);
}

std::string render(const LinkRule& l) {
  return fmt::format("ip link add link {} name {} address {} type macvlan mode private", l.parent, l.name, l.mac);
}

std::string render(const QdiscRule& q) { return fmt::format("tc qdisc add dev {} clsact", q.dev); }

// `protocol ip` is required: iproute2's flower rejects dst_ip ("Illegal \"dst_ip\"") unless the
// filter's protocol is IPv4; it is the ETH_P_IP of tcm_info in the netlink form.
std::string render(const FilterRule& f) {
  std::string chain = f.chain == 0 ? "" : fmt::format(" chain {}", f.chain);
  return fmt::format(
      "tc filter add dev {} ingress protocol ip prio {}{} flower skip_hw dst_ip {} action pedit ex munge eth dst set "
      "{} pipe action mirred egress redirect dev {}",
      f.dev, f.prio, chain, f.dst, f.set_eth_dst, f.redirect_dev);
}

std::vector<std::string> commands(const HostPlan& plan) {
  std::vector<std::string> out;
  for (const auto& l : plan.links) out.push_back(render(l));
  for (const auto& q : plan.qdiscs) out.push_back(render(q));
  for (const auto& f : plan.filters) out.push_back(render(f));
  for (const auto& n : plan.neighbours) out.push_back(render(n));
  for (const auto& r : plan.routes) out.push_back(render(r));
  return out;
}

nlohmann::json to_json(const Plan& plan) {
  nlohmann::json j;
  j["tags"] = {{"route_protocol", kRouteProtocol},
               {"tc_chain", kTcChain},
               {"tc_prio_first", kTcPrioFirst},
               {"tc_prio_last", kTcPrioLast},
               {"action_cookie", kActionCookie}};
  j["hosts"] = nlohmann::json::array();
  for (const auto& h : plan.hosts) {
    nlohmann::json jh = to_json(h);
    jh["commands"] = commands(h);
    j["hosts"].push_back(std::move(jh));
  }
  j["unreachable"] = plan.unreachable;
  return j;
}

namespace {

// A field of a plan's JSON, or an Error naming it and where it is missing or mistyped.
template <class T>
T field(const nlohmann::json& j, const char* name, const char* what) {
  if (!j.is_object() || !j.contains(name))
    throw Error(fmt::format("{}: missing field '{}' in {}", what, name, j.dump()));
  try {
    return j.at(name).get<T>();
  } catch (const nlohmann::json::exception& e) {
    throw Error(fmt::format("{}: field '{}' in {}: {}", what, name, j.dump(), e.what()));
  }
}

}  // namespace

nlohmann::json to_json(const HostPlan& h) {
  nlohmann::json jh;
  jh["host"] = h.host;
  if (!h.links.empty()) {  // only when the agent manages macvlans: plan JSON stays as it was otherwise
    jh["links"] = nlohmann::json::array();
    for (const auto& l : h.links)
      jh["links"].push_back({{"name", l.name}, {"parent", l.parent}, {"mac", l.mac}, {"kind", "macvlan"}});
  }
  jh["routes"] = nlohmann::json::array();
  for (const auto& r : h.routes)
    jh["routes"].push_back({{"dst", r.dst}, {"dev", r.dev}, {"src", r.src}, {"protocol", r.protocol}});
  jh["neighbours"] = nlohmann::json::array();
  for (const auto& n : h.neighbours) jh["neighbours"].push_back({{"dst", n.dst}, {"lladdr", n.lladdr}, {"dev", n.dev}});
  jh["qdiscs"] = nlohmann::json::array();
  for (const auto& q : h.qdiscs) jh["qdiscs"].push_back({{"dev", q.dev}, {"kind", "clsact"}});
  jh["filters"] = nlohmann::json::array();
  for (const auto& f : h.filters)
    jh["filters"].push_back({{"dev", f.dev},
                             {"chain", f.chain},
                             {"prio", f.prio},
                             {"dst", f.dst},
                             {"set_eth_dst", f.set_eth_dst},
                             {"redirect_dev", f.redirect_dev},
                             {"cookie", f.cookie}});
  return jh;
}

HostPlan host_plan_from_json(const nlohmann::json& j) {
  const char* w = "host plan";
  HostPlan h;
  h.host = field<std::string>(j, "host", w);
  if (j.contains("links"))
    for (const auto& l : field<nlohmann::json>(j, "links", w))
      h.links.push_back({field<std::string>(l, "name", "link"), field<std::string>(l, "parent", "link"),
                         field<std::string>(l, "mac", "link")});
  for (const auto& r : field<nlohmann::json>(j, "routes", w))
    h.routes.push_back({field<std::string>(r, "dst", "route"), field<std::string>(r, "dev", "route"),
                        field<std::string>(r, "src", "route"), field<int>(r, "protocol", "route")});
  for (const auto& n : field<nlohmann::json>(j, "neighbours", w))
    h.neighbours.push_back({field<std::string>(n, "dst", "neighbour"), field<std::string>(n, "lladdr", "neighbour"),
                            field<std::string>(n, "dev", "neighbour")});
  for (const auto& q : field<nlohmann::json>(j, "qdiscs", w))
    h.qdiscs.push_back({field<std::string>(q, "dev", "qdisc")});
  for (const auto& f : field<nlohmann::json>(j, "filters", w)) {
    FilterRule r;
    r.dev = field<std::string>(f, "dev", "filter");
    r.chain = field<uint32_t>(f, "chain", "filter");
    r.prio = field<uint16_t>(f, "prio", "filter");
    r.dst = field<std::string>(f, "dst", "filter");
    r.set_eth_dst = field<std::string>(f, "set_eth_dst", "filter");
    r.redirect_dev = field<std::string>(f, "redirect_dev", "filter");
    r.cookie = field<std::string>(f, "cookie", "filter");
    h.filters.push_back(std::move(r));
  }
  return h;
}

}  // namespace ocslab::forwarding
