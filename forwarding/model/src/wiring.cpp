#include "ocslab/forwarding/wiring.h"

#include <fmt/format.h>

#include <cctype>
#include <map>
#include <set>

#include "fabric_yaml.h"
#include "ocslab/common/config.h"

namespace ocslab::forwarding {

const Cable* Wiring::by_port(const PortRef& ref) const {
  for (const auto& c : cables)
    if (c.port == ref) return &c;
  return nullptr;
}

const Cable* Wiring::by_tx(OcsPort ingress) const {
  for (const auto& c : cables)
    if (c.tx == ingress) return &c;
  return nullptr;
}

const Cable* Wiring::by_rx(OcsPort egress) const {
  for (const auto& c : cables)
    if (c.rx == egress) return &c;
  return nullptr;
}

namespace {

using detail::at;
using detail::fail;

std::string circuit_name(const OcsCircuit& c) { return fmt::format("circuit {}-{}", c.ingress, c.egress); }

}  // namespace

namespace {

// Derived circuits are written as "host:port <-> host:port": names must read back.
void check_circuit_name(const Where& where, const std::string& what, const std::string& name) {
  bool bad = name.find(':') != std::string::npos || name.find("<->") != std::string::npos;
  for (char ch : name) bad = bad || std::isspace(static_cast<unsigned char>(ch));
  if (bad)
    fail(where, fmt::format("{} name '{}' cannot be written in a circuit 'host:port <-> host:port' (no ':', "
                            "'<->' or white space)",
                            what, name));
}

}  // namespace

void validate_wiring(const Wiring& wiring) {
  validate_hosts(wiring.hosts);
  for (const auto& h : wiring.hosts) {
    check_circuit_name(h.where, "host", h.name);
    for (const auto& p : h.ports) check_circuit_name(p.where, "port", p.name);
  }
  std::map<PortRef, const Cable*> cabled;
  std::map<OcsPort, std::pair<const Cable*, const char*>> ocs_ports;  // port -> cable, "tx"/"rx"
  for (const auto& c : wiring.cables) {
    const Host* h = nullptr;
    for (const auto& host : wiring.hosts)
      if (host.name == c.port.host) h = &host;
    if (!h) fail(c.where, fmt::format("cable for unknown host '{}'", c.port.host));
    bool has_port = false;
    for (const auto& p : h->ports) has_port = has_port || p.name == c.port.port;
    if (!has_port)
      fail(c.where, fmt::format("cable for unknown port: host '{}' has no port '{}'", h->name, c.port.port));
    auto [it, fresh] = cabled.emplace(c.port, &c);
    if (!fresh) fail(c.where, fmt::format("port {} is cabled twice{}", to_string(c.port), at(it->second->where)));
    for (auto [port, role] : {std::pair{c.tx, "tx"}, std::pair{c.rx, "rx"}}) {
      if (port < 1) fail(c.where, fmt::format("{} {}: OCS ports are numbered from 1", to_string(c.port), role));
      auto [o, free] = ocs_ports.emplace(port, std::pair{&c, role});
      if (!free)
        fail(c.where,
             fmt::format("OCS port {} is wired twice: {} of {} and {} of {}{}", port, o->second.second,
                         to_string(o->second.first->port), role, to_string(c.port), at(o->second.first->where)));
    }
  }
}

void check_wiring_ports(const Wiring& wiring, int ingress, int egress, const std::string& switch_name) {
  for (const auto& c : wiring.cables) {
    std::string layout = fmt::format("{} is {}x{}: ingress 1..{}, egress {}..{}", switch_name, ingress, egress, ingress,
                                     ingress + 1, ingress + egress);
    if (c.tx < 1 || c.tx > ingress)
      fail(c.where, fmt::format("{} tx {} is not an ingress port ({})", to_string(c.port), c.tx, layout));
    if (c.rx <= ingress || c.rx > ingress + egress)
      fail(c.where, fmt::format("{} rx {} is not an egress port ({})", to_string(c.port), c.rx, layout));
  }
}

namespace {

Wiring parse_wiring(const YamlDoc& doc) {
  Wiring w;
  only_keys(doc, doc.root, {"hosts", "cables"});
  w.hosts = detail::parse_hosts(doc);
  const YAML::Node cables = require(doc, doc.root, "cables");
  if (!cables.IsSequence())
    throw config_error(doc, cables, "'cables' must be a list of {host: H, port: P, tx: N, rx: M}");
  for (const auto& cn : cables) {
    if (!cn.IsMap()) throw config_error(doc, cn, "expected a cable as {host: H, port: P, tx: N, rx: M}");
    only_keys(doc, cn, {"host", "port", "tx", "rx"});
    Cable c;
    c.where = detail::where_of(doc, cn);
    c.port.host = as_string(doc, require(doc, cn, "host"));
    c.port.port = as_string(doc, require(doc, cn, "port"));
    for (auto [key, out] : {std::pair{"tx", &c.tx}, std::pair{"rx", &c.rx}}) {
      const YAML::Node n = require(doc, cn, key);
      long long v = as_int(doc, n);
      if (v < 1 || v > 1000000) throw config_error(doc, n, fmt::format("'{}' must be an OCS port number >= 1", key));
      *out = static_cast<OcsPort>(v);
    }
    w.cables.push_back(std::move(c));
  }
  validate_wiring(w);
  return w;
}

}  // namespace

Wiring load_wiring_file(const std::string& path) { return parse_wiring(load_yaml_file(path)); }
Wiring load_wiring_string(const std::string& text, const std::string& origin) {
  return parse_wiring(load_yaml_string(text, origin));
}

DerivedFabric derive_fabric(const Wiring& wiring, const std::vector<OcsCircuit>& circuits) {
  DerivedFabric out;
  out.fabric.hosts = wiring.hosts;
  // Each switch port carries at most one circuit: the reverse direction is found by ingress.
  std::map<OcsPort, const OcsCircuit*> by_ingress, by_egress;
  for (const auto& c : circuits) {
    for (auto [map, port, role] :
         {std::tuple{&by_ingress, c.ingress, "ingress"}, std::tuple{&by_egress, c.egress, "egress"}}) {
      auto [it, fresh] = map->emplace(port, &c);
      if (!fresh)
        fail(c.where, fmt::format("{}: {} {} is also in circuit {}-{}{}", circuit_name(c), role, port,
                                  it->second->ingress, it->second->egress, at(it->second->where)));
    }
  }
  // Every circuit that touches the wiring must connect two wired ports of different hosts.
  std::map<PortRef, std::pair<PortRef, const OcsCircuit*>> sends_to;  // port -> (port it reaches, circuit)
  for (const auto& c : circuits) {
    // A port wired the other way round (a mapping written egress-ingress) is not "unwired".
    if (const Cable* rx = wiring.by_rx(c.ingress))
      fail(c.where, fmt::format("{}: ingress {} is wired as the rx of {}{}: light enters the switch at a tx port "
                                "and leaves at an rx port",
                                circuit_name(c), c.ingress, to_string(rx->port), at(rx->where)));
    if (const Cable* tx = wiring.by_tx(c.egress))
      fail(c.where, fmt::format("{}: egress {} is wired as the tx of {}{}: light enters the switch at a tx port "
                                "and leaves at an rx port",
                                circuit_name(c), c.egress, to_string(tx->port), at(tx->where)));
    const Cable* from = wiring.by_tx(c.ingress);
    const Cable* to = wiring.by_rx(c.egress);
    if (!from && !to) {
      out.ignored.push_back(c);
      continue;
    }
    if (!to)
      fail(c.where, fmt::format("{}: egress {} is not in the wiring, but ingress {} is the tx of {}{}: forwarding "
                                "needs circuits between wired ports",
                                circuit_name(c), c.egress, c.ingress, to_string(from->port), at(from->where)));
    if (!from)
      fail(c.where, fmt::format("{}: ingress {} is not in the wiring, but egress {} is the rx of {}{}: forwarding "
                                "needs circuits between wired ports",
                                circuit_name(c), c.ingress, c.egress, to_string(to->port), at(to->where)));
    if (from->port.host == to->port.host)
      fail(c.where, fmt::format("{} connects {} to {}: both on host '{}'", circuit_name(c), to_string(from->port),
                                to_string(to->port), from->port.host));
    sends_to.emplace(from->port, std::pair{to->port, &c});
  }
  // Both directions: a.tx -> b.rx needs b.tx -> a.rx.
  for (const auto& c : circuits) {
    const Cable* from = wiring.by_tx(c.ingress);
    if (!from) continue;  // ignored above
    const Cable* to = wiring.by_rx(c.egress);
    auto back = sends_to.find(to->port);
    std::string carries =
        fmt::format("{} carries {} -> {}", circuit_name(c), to_string(from->port), to_string(to->port));
    if (back == sends_to.end())
      fail(c.where, fmt::format("{}, but {}'s tx (ingress {}) is in no circuit: forwarding needs both directions "
                                "(add circuit {}-{})",
                                carries, to_string(to->port), to->tx, to->tx, from->rx));
    if (back->second.first != from->port)
      fail(c.where,
           fmt::format("{}, but {}'s tx goes to {} by circuit {}-{}{}, not back to {}: forwarding needs both "
                       "directions on one pair of ports",
                       carries, to_string(to->port), to_string(back->second.first), back->second.second->ingress,
                       back->second.second->egress, at(back->second.second->where), to_string(from->port)));
  }
  // One circuit per link, in the wiring's host and port order: a derived file reads like a
  // hand-written one and does not change when the switch lists its circuits in another order.
  std::set<PortRef> done;
  for (const auto& h : wiring.hosts) {
    for (const auto& p : h.ports) {
      PortRef a{h.name, p.name};
      auto it = sends_to.find(a);
      if (it == sends_to.end() || done.count(a)) continue;
      const PortRef& b = it->second.first;
      done.insert(a);
      done.insert(b);
      out.fabric.circuits.push_back(Circuit{a, b, it->second.second->where});
    }
  }
  validate(out.fabric);
  return out;
}

}  // namespace ocslab::forwarding
