#include "ocslab/forwarding/diff.h"

#include <fmt/format.h>

#include <map>
#include <tuple>
#include <type_traits>

namespace ocslab::forwarding {

const char* to_string(ChangeOp op) {
  switch (op) {
    case ChangeOp::add:
      return "add";
    case ChangeOp::replace:
      return "replace";
    case ChangeOp::remove:
      return "delete";
  }
  return "?";
}

std::string render_delete(const RouteRule& r) {
  return fmt::format("ip route del {} dev {} proto {}", r.dst, r.dev, r.protocol);
}
std::string render_delete(const NeighbourRule& n) { return fmt::format("ip neigh del {} dev {}", n.dst, n.dev); }

namespace {

auto key(const RouteRule& r) { return r.dst; }
auto key(const NeighbourRule& n) { return std::make_tuple(n.dst, n.dev); }
auto key(const LinkRule& l) { return l.name; }
auto key(const QdiscRule& q) { return q.dev; }
auto key(const FilterRule& f) { return std::make_tuple(f.dev, f.chain, f.prio); }

std::string key_text(const RouteRule& r) { return "route " + r.dst; }
std::string key_text(const NeighbourRule& n) { return fmt::format("neighbour {} dev {}", n.dst, n.dev); }
std::string key_text(const LinkRule& l) { return "macvlan " + l.name; }
std::string key_text(const QdiscRule& q) { return "clsact qdisc on " + q.dev; }
std::string key_text(const FilterRule& f) { return fmt::format("filter {} chain {} prio {}", f.dev, f.chain, f.prio); }

bool same(const RouteRule& a, const RouteRule& b) {
  return a.dst == b.dst && a.dev == b.dev && a.src == b.src && a.protocol == b.protocol;
}
bool same(const NeighbourRule& a, const NeighbourRule& b) {
  return a.dst == b.dst && a.dev == b.dev && a.lladdr == b.lladdr;
}
bool same(const LinkRule& a, const LinkRule& b) { return a.name == b.name && a.parent == b.parent && a.mac == b.mac; }
bool same(const QdiscRule& a, const QdiscRule& b) { return a.dev == b.dev; }
bool same(const FilterRule& a, const FilterRule& b) {
  return a.dev == b.dev && a.chain == b.chain && a.prio == b.prio && a.dst == b.dst && a.set_eth_dst == b.set_eth_dst &&
         a.redirect_dev == b.redirect_dev && a.cookie == b.cookie;
}

template <class Rule>
auto index(const std::vector<Rule>& rules, const char* side) {
  std::map<decltype(key(rules.front())), const Rule*> m;
  for (const auto& r : rules)
    if (!m.emplace(key(r), &r).second) throw Error(fmt::format("{} state has {} twice", side, key_text(r)));
  return m;
}

template <class Rule>
std::vector<Change<Rule>> diff_kind(const std::vector<Rule>& desired, const std::vector<Rule>& installed) {
  auto want = index(desired, "desired");
  auto have = index(installed, "installed");
  std::vector<Change<Rule>> out;
  for (const auto& [k, r] : want) {
    auto it = have.find(k);
    if (it == have.end())
      out.push_back({ChangeOp::add, *r, {}});
    else if (!same(*r, *it->second))
      out.push_back({ChangeOp::replace, *r, *it->second});
  }
  for (const auto& [k, r] : have)
    if (!want.count(k)) out.push_back({ChangeOp::remove, *r, {}});
  return out;
}

std::string render_delete(const LinkRule& l) { return fmt::format("ip link del {}", l.name); }
std::string render_delete(const QdiscRule& q) { return fmt::format("tc qdisc del dev {} clsact", q.dev); }
std::string render_delete(const FilterRule& f) {
  return fmt::format("tc filter del dev {} ingress protocol ip prio {}{}", f.dev, f.prio,
                     f.chain == 0 ? "" : fmt::format(" chain {}", f.chain));
}

template <class Rule>
void add_commands(const std::vector<Change<Rule>>& changes, bool removals, std::vector<std::string>& out) {
  for (const auto& c : changes) {
    if ((c.op == ChangeOp::remove) != removals) continue;
    if (c.op == ChangeOp::remove) {
      out.push_back(render_delete(c.rule));
    } else if (c.op == ChangeOp::replace && std::is_same_v<Rule, FilterRule>) {
      // tc has no in-place change of a flower filter's actions: delete, then add.
      out.push_back(render_delete(c.old));
      out.push_back(render(c.rule));
    } else {
      out.push_back(render(c.rule));
    }
  }
}

template <class Rule>
nlohmann::json change_json(const Change<Rule>& c) {
  nlohmann::json j = {{"op", to_string(c.op)}};
  auto rule_json = [](const Rule& r) {
    HostPlan p;
    if constexpr (std::is_same_v<Rule, RouteRule>) {
      p.routes = {r};
      return to_json(p)["routes"][0];
    } else if constexpr (std::is_same_v<Rule, NeighbourRule>) {
      p.neighbours = {r};
      return to_json(p)["neighbours"][0];
    } else if constexpr (std::is_same_v<Rule, LinkRule>) {
      p.links = {r};
      return to_json(p)["links"][0];
    } else if constexpr (std::is_same_v<Rule, QdiscRule>) {
      p.qdiscs = {r};
      return to_json(p)["qdiscs"][0];
    } else {
      p.filters = {r};
      return to_json(p)["filters"][0];
    }
  };
  j["rule"] = rule_json(c.rule);
  if (c.op == ChangeOp::replace) j["old"] = rule_json(c.old);
  return j;
}

}  // namespace

PlanDiff diff(const HostPlan& desired, const HostPlan& installed) {
  PlanDiff d;
  d.links = diff_kind(desired.links, installed.links);
  d.routes = diff_kind(desired.routes, installed.routes);
  d.neighbours = diff_kind(desired.neighbours, installed.neighbours);
  d.qdiscs = diff_kind(desired.qdiscs, installed.qdiscs);
  d.filters = diff_kind(desired.filters, installed.filters);
  return d;
}

std::vector<std::string> commands(const PlanDiff& d) {
  std::vector<std::string> out;
  add_commands(d.links, false, out);
  add_commands(d.qdiscs, false, out);
  add_commands(d.filters, false, out);
  add_commands(d.neighbours, false, out);
  add_commands(d.routes, false, out);
  add_commands(d.routes, true, out);
  add_commands(d.neighbours, true, out);
  add_commands(d.filters, true, out);
  add_commands(d.qdiscs, true, out);
  add_commands(d.links, true, out);
  return out;
}

nlohmann::json to_json(const PlanDiff& d) {
  nlohmann::json j;
  auto list = [](const auto& changes) {
    nlohmann::json a = nlohmann::json::array();
    for (const auto& c : changes) a.push_back(change_json(c));
    return a;
  };
  j["links"] = list(d.links);
  j["routes"] = list(d.routes);
  j["neighbours"] = list(d.neighbours);
  j["qdiscs"] = list(d.qdiscs);
  j["filters"] = list(d.filters);
  j["changes"] = d.size();
  j["commands"] = commands(d);
  return j;
}

}  // namespace ocslab::forwarding
