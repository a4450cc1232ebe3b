#include "ocslab/forwarding/fabric.h"

#include <fmt/format.h>

#include <cctype>
#include <map>
#include <queue>
#include <set>

#include "fabric_yaml.h"
#include "ocslab/common/config.h"

namespace ocslab::forwarding {

std::optional<Ipv4Prefix> parse_ipv4_prefix(const std::string& text) {
  Ipv4Prefix out;
  std::string addr = text;
  if (auto slash = text.find('/'); slash != std::string::npos) {
    addr = text.substr(0, slash);
    std::string len = text.substr(slash + 1);
    if (len.empty() || len.size() > 2) return std::nullopt;
    for (char c : len)
      if (!std::isdigit(static_cast<unsigned char>(c))) return std::nullopt;
    out.prefix_len = std::stoi(len);
    if (out.prefix_len > 32) return std::nullopt;
  }
  uint32_t value = 0;
  int parts = 0;
  size_t i = 0;
  while (parts < 4) {
    size_t start = i;
    while (i < addr.size() && std::isdigit(static_cast<unsigned char>(addr[i]))) ++i;
    if (i == start || i - start > 3) return std::nullopt;
    int octet = std::stoi(addr.substr(start, i - start));
    if (octet > 255) return std::nullopt;
    value = (value << 8) | static_cast<uint32_t>(octet);
    ++parts;
    if (parts < 4) {
      if (i >= addr.size() || addr[i] != '.') return std::nullopt;
      ++i;
    }
  }
  if (i != addr.size()) return std::nullopt;
  out.addr = value;
  return out;
}

std::string format_ipv4(uint32_t a) {
  return fmt::format("{}.{}.{}.{}", a >> 24, (a >> 16) & 0xff, (a >> 8) & 0xff, a & 0xff);
}

std::optional<std::string> normalize_mac(const std::string& text) {
  if (text.size() != 17) return std::nullopt;
  std::string out = text;
  for (size_t i = 0; i < out.size(); ++i) {
    if (i % 3 == 2) {
      if (out[i] != ':') return std::nullopt;
    } else {
      if (!std::isxdigit(static_cast<unsigned char>(out[i]))) return std::nullopt;
      out[i] = static_cast<char>(std::tolower(static_cast<unsigned char>(out[i])));
    }
  }
  return out;
}

std::string to_string(const PortRef& p) { return p.host + ":" + p.port; }

const Host* Fabric::find_host(const std::string& name) const {
  for (const auto& h : hosts)
    if (h.name == name) return &h;
  return nullptr;
}

const Port* Fabric::find_port(const PortRef& ref) const {
  const Host* h = find_host(ref.host);
  if (!h) return nullptr;
  for (const auto& p : h->ports)
    if (p.name == ref.port) return &p;
  return nullptr;
}

std::optional<size_t> Fabric::circuit_of(const PortRef& ref) const {
  for (size_t i = 0; i < circuits.size(); ++i)
    if (circuits[i].a == ref || circuits[i].b == ref) return i;
  return std::nullopt;
}

namespace detail {

void fail(const Where& where, const std::string& message) {
  throw ConfigError(where.empty() ? message : where + ": " + message);
}

std::string at(const Where& where) { return where.empty() ? "" : " (" + where + ")"; }

}  // namespace detail

using detail::at;
using detail::fail;

void validate_hosts(const std::vector<Host>& hosts) {
  if (hosts.empty()) fail("", "fabric has no hosts");
  std::map<std::string, const Host*> host_names;
  std::map<std::string, std::string> macs;  // mac -> "h:p ifN" + where
  std::map<uint32_t, std::string> ips;      // address -> owner
  for (const auto& h : hosts) {
    if (h.name.empty()) fail(h.where, "host without a name");
    if (!host_names.emplace(h.name, &h).second)
      fail(h.where, fmt::format("host '{}' defined twice{}", h.name, at(host_names[h.name]->where)));
    std::set<std::string> port_names;
    for (const auto& p : h.ports) {
      std::string ref = h.name + ":" + p.name;
      if (p.name.empty()) fail(p.where, fmt::format("port of host '{}' without a name", h.name));
      if (!port_names.insert(p.name).second) fail(p.where, fmt::format("port '{}' defined twice", ref));
      if (!p.if2) fail(p.where, fmt::format("port '{}' has no if2 (the relay function needs one)", ref));
      auto add_mac = [&](const std::string& mac, const std::string& what, const Where& where) {
        std::string owner = fmt::format("{} {}{}", ref, what, at(where));
        auto [it, fresh] = macs.emplace(mac, owner);
        if (!fresh) fail(where, fmt::format("MAC {} of {} {} already used by {}", mac, ref, what, it->second));
      };
      add_mac(p.if1.mac, "if1", p.if1.where);
      add_mac(p.if2->mac, "if2", p.if2->where);
      auto [it, fresh] = ips.emplace(p.if1.ip.addr, ref + " if1" + at(p.if1.where));
      if (!fresh)
        fail(p.if1.where,
             fmt::format("IP {} of {} if1 already used by {}", format_ipv4(p.if1.ip.addr), ref, it->second));
    }
  }
}

void validate(const Fabric& fabric) {
  validate_hosts(fabric.hosts);
  std::map<PortRef, const Circuit*> used;
  for (const auto& c : fabric.circuits) {
    for (const PortRef* end : {&c.a, &c.b}) {
      if (!fabric.find_host(end->host))
        fail(c.where, fmt::format("circuit {} <-> {}: unknown host '{}'", to_string(c.a), to_string(c.b), end->host));
      if (!fabric.find_port(*end))
        fail(c.where, fmt::format("circuit {} <-> {}: host '{}' has no port '{}'", to_string(c.a), to_string(c.b),
                                  end->host, end->port));
    }
    if (c.a.host == c.b.host)
      fail(c.where, fmt::format("circuit {} <-> {} loops back to host '{}'", to_string(c.a), to_string(c.b), c.a.host));
    for (const PortRef* end : {&c.a, &c.b}) {
      auto [it, fresh] = used.emplace(*end, &c);
      if (!fresh)
        fail(c.where, fmt::format("port {} is in two circuits: {} <-> {} and {} <-> {}{}", to_string(*end),
                                  to_string(it->second->a), to_string(it->second->b), to_string(c.a), to_string(c.b),
                                  at(it->second->where)));
    }
  }
  // Reachability from the first host, over the circuits.
  std::set<std::string> seen{fabric.hosts.front().name};
  std::queue<std::string> todo;
  todo.push(fabric.hosts.front().name);
  while (!todo.empty()) {
    std::string h = todo.front();
    todo.pop();
    for (const auto& c : fabric.circuits) {
      for (auto [from, to] : {std::pair{&c.a, &c.b}, std::pair{&c.b, &c.a}}) {
        if (from->host == h && seen.insert(to->host).second) todo.push(to->host);
      }
    }
  }
  for (const auto& h : fabric.hosts)
    if (!seen.count(h.name))
      fail(h.where,
           fmt::format("host '{}' is unreachable from '{}' over the circuits", h.name, fabric.hosts.front().name));
}

namespace detail {

Where where_of(const YamlDoc& doc, const YAML::Node& n) {
  if (!n.IsDefined() || n.Mark().is_null()) return doc.origin;
  return fmt::format("{}:{}:{}", doc.origin, n.Mark().line + 1, n.Mark().column + 1);
}

std::string mac_of(const YamlDoc& doc, const YAML::Node& n) {
  auto mac = normalize_mac(as_string(doc, n));
  if (!mac) throw config_error(doc, n, "expected a MAC address like 02:00:00:00:00:01, got '" + n.Scalar() + "'");
  return *mac;
}

PortRef port_ref_of(const YamlDoc& doc, const YAML::Node& n, const std::string& text) {
  auto colon = text.find(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == text.size() ||
      text.find(':', colon + 1) != std::string::npos)
    throw config_error(doc, n, "expected 'host:port', got '" + text + "'");
  return PortRef{text.substr(0, colon), text.substr(colon + 1)};
}

std::string trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t");
  if (b == std::string::npos) return "";
  size_t e = s.find_last_not_of(" \t");
  return s.substr(b, e - b + 1);
}

std::vector<Host> parse_hosts(const YamlDoc& doc) {
  std::vector<Host> out;
  const YAML::Node hosts = require(doc, doc.root, "hosts");
  if (!hosts.IsSequence()) throw config_error(doc, hosts, "'hosts' must be a list");
  for (const auto& hn : hosts) {
    only_keys(doc, hn, {"name", "ports"});
    Host h;
    h.where = where_of(doc, hn);
    h.name = as_string(doc, require(doc, hn, "name"));
    const YAML::Node ports = require(doc, hn, "ports");
    if (!ports.IsSequence()) throw config_error(doc, ports, "'ports' must be a list");
    for (const auto& pn : ports) {
      only_keys(doc, pn, {"name", "if1", "if2"});
      Port p;
      p.where = where_of(doc, pn);
      p.name = as_string(doc, require(doc, pn, "name"));
      const YAML::Node i1 = require(doc, pn, "if1");
      only_keys(doc, i1, {"name", "ip", "mac", "rdma"});
      p.if1.where = where_of(doc, i1);
      p.if1.name = as_string(doc, require(doc, i1, "name"));
      const YAML::Node ipn = require(doc, i1, "ip");
      auto ip = parse_ipv4_prefix(as_string(doc, ipn));
      if (!ip || ipn.Scalar().find('/') == std::string::npos)
        throw config_error(doc, ipn,
                           "expected an IPv4 address with prefix like 10.0.0.1/24, got '" + ipn.Scalar() + "'");
      p.if1.ip = *ip;
      p.if1.mac = mac_of(doc, require(doc, i1, "mac"));
      if (i1["rdma"].IsDefined()) p.if1.rdma = as_string(doc, i1["rdma"]);
      if (const YAML::Node i2 = pn["if2"]; i2.IsDefined() && !i2.IsNull()) {
        only_keys(doc, i2, {"name", "mac"});
        If2 two;
        two.where = where_of(doc, i2);
        two.name = as_string(doc, require(doc, i2, "name"));
        two.mac = mac_of(doc, require(doc, i2, "mac"));
        p.if2 = two;
      }
      h.ports.push_back(std::move(p));
    }
    out.push_back(std::move(h));
  }
  return out;
}

}  // namespace detail

namespace {

using detail::port_ref_of;
using detail::trim;
using detail::where_of;

Fabric parse_fabric(const YamlDoc& doc) {
  Fabric f;
  only_keys(doc, doc.root, {"hosts", "circuits"});
  f.hosts = detail::parse_hosts(doc);
  if (const YAML::Node cs = doc.root["circuits"]; cs.IsDefined() && !cs.IsNull()) {
    if (!cs.IsSequence()) throw config_error(doc, cs, "'circuits' must be a list of 'h1:p0 <-> h2:p1'");
    for (const auto& cn : cs) {
      std::string text = as_string(doc, cn);
      auto arrow = text.find("<->");
      if (arrow == std::string::npos) throw config_error(doc, cn, "expected 'h1:p0 <-> h2:p1', got '" + text + "'");
      Circuit c;
      c.where = where_of(doc, cn);
      c.a = port_ref_of(doc, cn, trim(text.substr(0, arrow)));
      c.b = port_ref_of(doc, cn, trim(text.substr(arrow + 3)));
      f.circuits.push_back(std::move(c));
    }
  }
  validate(f);
  return f;
}

}  // namespace

Fabric load_fabric_file(const std::string& path) { return parse_fabric(load_yaml_file(path)); }
Fabric load_fabric_string(const std::string& text, const std::string& origin) {
  return parse_fabric(load_yaml_string(text, origin));
}

std::vector<MacvlanSpec> if2_macvlans(const Fabric& fabric, const std::string& host) {
  const Host* h = fabric.find_host(host);
  if (!h) throw Error("if2: no host '" + host + "' in the fabric");
  std::vector<MacvlanSpec> out;
  for (const auto& p : h->ports) {
    if (!p.if2) continue;
    out.push_back({p.if2->name, p.if1.name, p.if2->mac});
  }
  return out;
}

}  // namespace ocslab::forwarding
