#include "ocslab/runner/forwarding_spec.h"

#include <fmt/format.h>

#include <algorithm>
#include <set>

#include "ocslab/common/ifname.h"
#include "ocslab/runner/experiment_spec.h"
#include "ocslab/vlab/lab_spec.h"

namespace ocslab::runner {

namespace fw = ocslab::forwarding;

namespace {

std::string position(const YamlDoc& doc, const YAML::Node& n) {
  auto m = n.Mark();
  return fmt::format("{}:{}:{}", doc.origin, m.line + 1, m.column + 1);
}

// The NICs some mapping links, per host index: only those become forwarding ports.
std::vector<std::set<std::string>> linked_nics(const ExperimentSpec& spec) {
  std::vector<std::set<std::string>> out(spec.hosts.size());
  for (const auto& m : spec.mappings)
    for (const auto& l : m.links) {
      out[l.a_host].insert(l.a_nic);
      out[l.b_host].insert(l.b_nic);
    }
  return out;
}

If2Mode parse_mode(const YamlDoc& doc, const YAML::Node& n) {
  std::string s = as_string(doc, n);
  if (s == "macvlan") return If2Mode::kMacvlan;
  if (s == "device") return If2Mode::kDevice;
  throw config_error(doc, n,
                     "if2 must be macvlan (ocslab makes it over the NIC) or device (an existing NPAR "
                     "partition / VF named per NIC), got '" +
                         s + "'");
}

}  // namespace

namespace {

// Defaults from the virtual-lab file: the lab configures addresses, RDMA and (if2: true) the
// if2 macvlan itself, which is then an existing device to ocslab. Real hosts: the linked NICs.
void default_nics(const ExperimentSpec& spec, const std::vector<std::set<std::string>>& linked, ForwardingSpec& f) {
  if (!spec.vlab.empty()) {
    vlab::LabSpec lab = vlab::load_lab_spec(spec.vlab);
    for (size_t h = 0; h < spec.hosts.size(); ++h) {
      const auto& lh = lab.hosts[lab.host_index(spec.hosts[h].name)];
      bool any_if2 = false;
      for (const auto& n : lh.nics) {
        if (!linked[h].count(n.name)) continue;
        ForwardingNic x;
        x.nic = n.name;
        x.ip = n.ip;
        x.mac = n.mac;
        x.rdma = n.rdma ? n.rdma_device() : "";
        x.if2 = n.if2_name();
        x.if2_mac = n.if2_mac;
        x.where = spec.vlab;
        any_if2 = any_if2 || n.if2;
        f.hosts[h].nics.push_back(x);
      }
      f.hosts[h].if2 = any_if2 ? If2Mode::kDevice : If2Mode::kMacvlan;
    }
  } else {
    for (size_t h = 0; h < spec.hosts.size(); ++h)
      for (const auto& n : spec.hosts[h].nics)
        if (linked[h].count(n.name))
          f.hosts[h].nics.push_back(ForwardingNic{n.name, "", "", "", n.name + "v", "", f.where});
  }
}

void parse_routes(const YamlDoc& doc, const YAML::Node& r, const ExperimentSpec& spec, ForwardingSpec& f) {
  if (!r.IsMap()) throw config_error(doc, r, "routes must be a map {balance, traffic, ring}");
  only_keys(doc, r, {"balance", "traffic", "ring"});
  if (r["balance"]) f.balance = as_bool(doc, r["balance"]);
  if (r["traffic"]) {
    f.traffic = as_string(doc, r["traffic"]);
    if (f.traffic != "all-to-all" && f.traffic != "ring")
      throw config_error(doc, r["traffic"], "traffic must be all-to-all or ring, got '" + f.traffic + "'");
  }
  if (const auto& ring = r["ring"]) {
    if (!ring.IsSequence()) throw config_error(doc, ring, "ring must be a list of host names");
    std::set<std::string> seen;
    for (const auto& x : ring) {
      std::string name = as_string(doc, x);
      try {
        spec.host_index(name);
      } catch (const Error&) {
        throw config_error(doc, x, "unknown host '" + name + "' in ring");
      }
      if (!seen.insert(name).second) throw config_error(doc, x, "host '" + name + "' twice in ring");
      f.ring.push_back(name);
    }
    if (f.ring.size() != spec.hosts.size())
      throw config_error(doc, ring, fmt::format("ring must list all {} hosts once", spec.hosts.size()));
  }
}

VerifyWhen parse_verify(const YamlDoc& doc, const YAML::Node& v) {
  std::string s = as_string(doc, v);
  if (s == "true" || s == "first") return VerifyWhen::kFirst;
  if (s == "every") return VerifyWhen::kEvery;
  if (s == "false") return VerifyWhen::kNever;
  throw config_error(doc, v,
                     "verify must be true (after the first apply), every (after every apply) or false, got '" + s + "'");
}

void parse_ping(const YamlDoc& doc, const YAML::Node& p, ForwardingSpec& f) {
  if (!p.IsMap()) throw config_error(doc, p, "ping must be a map {count, timeout_s, port}");
  only_keys(doc, p, {"count", "timeout_s", "port"});
  if (p["count"]) {
    long long c = as_int(doc, p["count"]);
    if (c < 1 || c > 100000) throw config_error(doc, p["count"], "count must be in [1, 100000]");
    f.ping_count = static_cast<int>(c);
  }
  if (p["timeout_s"]) {
    f.ping_timeout_s = as_double(doc, p["timeout_s"]);
    if (!(f.ping_timeout_s >= 1 && f.ping_timeout_s <= 600))
      throw config_error(doc, p["timeout_s"], "timeout_s must be in [1, 600]");
  }
  if (p["port"]) {
    long long port = as_int(doc, p["port"]);
    if (port < 1024 || port > 65000) throw config_error(doc, p["port"], "port must be in [1024, 65000]");
    f.ping_port = static_cast<int>(port);
  }
}

// reroute_on_dark, make_before_break, verify_change: how forwarding follows the fabric.
void parse_follow(const YamlDoc& doc, const YAML::Node& node, const ExperimentSpec& spec, ForwardingSpec& f) {
  if (const auto& r = node["reroute_on_dark"]) {
    f.reroute_on_dark = as_bool(doc, r);
    // The dark circuits are read from the switch's power monitors (runner/ocs_power_monitor.h)
    // and the hosts' carrier probes.
    const bool carrier =
        std::any_of(spec.probes.begin(), spec.probes.end(), [](const ProbeSpec& p) { return p.name == "carrier"; });
    if (f.reroute_on_dark && spec.power_monitor_ms <= 0 && !carrier)
      throw config_error(doc, r,
                         "reroute_on_dark needs switch.power_monitor or the carrier probe (the runner learns which "
                         "circuits are dark from them): add switch: {power_monitor: {interval_ms: 20}}");
  }
  if (node["make_before_break"]) f.make_before_break = as_bool(doc, node["make_before_break"]);
  if (node["verify_change"]) f.verify_change = as_bool(doc, node["verify_change"]);
}

// forwarding.hosts.H.nics.NIC: overrides of one NIC's addresses and if2.
void parse_nic(const YamlDoc& doc, const YAML::Node& key, const YAML::Node& v, const ExperimentSpec& spec, size_t h,
               const std::string& name, ForwardingSpec& f) {
  std::string nic = as_string(doc, key);
  if (!spec.hosts[h].nic(nic)) throw config_error(doc, key, "host '" + name + "' has no data NIC '" + nic + "'");
  ForwardingNic* x = nullptr;
  for (auto& n : f.hosts[h].nics)
    if (n.nic == nic) x = &n;
  if (!x) {
    // A NIC no mapping links: nothing to forward over; accepted so one section serves
    // several specs of a lab.
    f.hosts[h].nics.push_back(ForwardingNic{nic, "", "", "", nic + "v", "", ""});
    x = &f.hosts[h].nics.back();
  }
  x->where = position(doc, key);
  if (!v.IsMap()) throw config_error(doc, v, "NIC '" + nic + "' must be a map {ip, mac, rdma, if2, if2_mac}");
  only_keys(doc, v, {"ip", "mac", "rdma", "if2", "if2_mac"});
  if (v["ip"]) {
    x->ip = as_string(doc, v["ip"]);
    if (!fw::parse_ipv4_prefix(x->ip)) throw config_error(doc, v["ip"], "'" + x->ip + "' is not an IPv4 address/prefix");
  }
  for (auto [k, dst] : {std::pair<const char*, std::string*>{"mac", &x->mac}, {"if2_mac", &x->if2_mac}}) {
    if (!v[k]) continue;
    auto m = fw::normalize_mac(as_string(doc, v[k]));
    if (!m) throw config_error(doc, v[k], "'" + as_string(doc, v[k]) + "' is not a MAC address");
    *dst = *m;
  }
  if (v["rdma"]) x->rdma = as_string(doc, v["rdma"]);
  if (v["if2"]) x->if2 = as_string(doc, v["if2"]);
}

void parse_hosts(const YamlDoc& doc, const YAML::Node& hosts, const ExperimentSpec& spec, ForwardingSpec& f) {
  if (!hosts.IsMap()) throw config_error(doc, hosts, "hosts must map host names to {if2, nics}");
  for (const auto& kv : hosts) {
    std::string name = as_string(doc, kv.first);
    size_t h = 0;
    try {
      h = spec.host_index(name);
    } catch (const Error&) {
      throw config_error(doc, kv.first, "unknown host '" + name + "' (not in the lab)");
    }
    const auto& hn = kv.second;
    if (!hn.IsMap()) throw config_error(doc, hn, "host '" + name + "' must be a map {if2, nics}");
    only_keys(doc, hn, {"if2", "nics"});
    if (hn["if2"]) f.hosts[h].if2 = parse_mode(doc, hn["if2"]);
    if (const auto& nics = hn["nics"]) {
      if (!nics.IsMap()) throw config_error(doc, nics, "nics must map NIC names to {ip, mac, rdma, if2, if2_mac}");
      for (const auto& nk : nics) parse_nic(doc, nk.first, nk.second, spec, h, name, f);
    }
  }
}

// Every linked NIC needs if1's address and MAC and if2's name and MAC.
void check_complete(const ExperimentSpec& spec, const std::vector<std::set<std::string>>& linked,
                    const ForwardingSpec& f) {
  for (size_t h = 0; h < spec.hosts.size(); ++h)
    for (const auto& n : f.hosts[h].nics) {
      if (!linked[h].count(n.nic)) continue;
      std::string what;
      if (n.ip.empty())
        what = "ip";
      else if (n.mac.empty())
        what = "mac";
      else if (n.if2.empty())
        what = "if2";
      else if (n.if2_mac.empty())
        what = "if2_mac";
      if (!what.empty())
        throw ConfigError(fmt::format(
            "{}: forwarding: {}:{} is linked by a mapping but has no {} (give it under "
            "forwarding.hosts.{}.nics.{})",
            n.where.empty() ? f.where : n.where, spec.hosts[h].name, n.nic, what, spec.hosts[h].name, n.nic));
      // A default if2 name (the NIC's name + "v") can be one byte too long for the kernel.
      if (auto why = spec_ifname_problem(n.if2); !why.empty())
        throw ConfigError(fmt::format(
            "{}: forwarding: {}:{}: if2 '{}' is not an interface name ({}; name it under "
            "forwarding.hosts.{}.nics.{}.if2)",
            n.where.empty() ? f.where : n.where, spec.hosts[h].name, n.nic, n.if2, why, spec.hosts[h].name, n.nic));
    }
}

}  // namespace

ForwardingSpec parse_forwarding_spec(const YamlDoc& doc, const YAML::Node& node, const ExperimentSpec& spec) {
  if (!node.IsMap()) throw config_error(doc, node, "forwarding must be a map (if2, routes, verify, hosts, ...)");
  only_keys(doc, node,
            {"if2", "routes", "verify", "relay", "every_nic", "state_dir", "ping", "hosts", "reroute_on_dark",
             "make_before_break", "verify_change"});
  ForwardingSpec f;
  f.enabled = true;
  f.where = position(doc, node);
  f.hosts.resize(spec.hosts.size());
  auto linked = linked_nics(spec);
  default_nics(spec, linked, f);
  if (node["if2"]) {
    If2Mode m = parse_mode(doc, node["if2"]);
    for (auto& h : f.hosts) h.if2 = m;
  }
  if (const auto& r = node["routes"]) parse_routes(doc, r, spec, f);
  if (const auto& v = node["verify"]) f.verify = parse_verify(doc, v);
  if (node["relay"]) f.relay = as_bool(doc, node["relay"]);
  if (node["every_nic"]) f.every_nic = as_bool(doc, node["every_nic"]);
  parse_follow(doc, node, spec, f);
  if (node["state_dir"]) {
    f.state_dir = as_string(doc, node["state_dir"]);
    if (f.state_dir.empty() || f.state_dir[0] != '/')
      throw config_error(doc, node["state_dir"], "state_dir must be an absolute path on the hosts");
  }
  if (const auto& p = node["ping"]) parse_ping(doc, p, f);
  if (const auto& hosts = node["hosts"]) parse_hosts(doc, hosts, spec, f);
  check_complete(spec, linked, f);
  return f;
}

fw::Fabric fabric_for(const ExperimentSpec& spec, const Mapping& mapping) {
  const ForwardingSpec& f = spec.forwarding;
  if (!f.enabled) throw Error(spec.origin + ": the spec has no forwarding section");
  fw::Fabric fabric;
  for (size_t h = 0; h < spec.hosts.size(); ++h) {
    fw::Host host;
    host.name = spec.hosts[h].name;
    host.where = f.where;
    for (const auto& n : f.hosts[h].nics) {
      if (n.ip.empty()) continue;  // a NIC no mapping links and the section did not address
      fw::Port p;
      p.name = n.nic;
      p.where = n.where;
      p.if1.name = n.nic;
      auto ip = fw::parse_ipv4_prefix(n.ip);
      if (!ip) throw ConfigError(fmt::format("{}: '{}' is not an IPv4 address/prefix", n.where, n.ip));
      p.if1.ip = *ip;
      p.if1.mac = n.mac;
      p.if1.rdma = n.rdma;
      p.if1.where = n.where;
      p.if2 = fw::If2{n.if2, n.if2_mac, n.where};
      host.ports.push_back(std::move(p));
    }
    fabric.hosts.push_back(std::move(host));
  }
  for (const auto& l : mapping.links) {
    fabric.circuits.push_back(fw::Circuit{{spec.hosts[l.a_host].name, l.a_nic},
                                          {spec.hosts[l.b_host].name, l.b_nic},
                                          fmt::format("mapping '{}'", mapping.name)});
  }
  try {
    fw::validate(fabric);
  } catch (const ConfigError& e) {
    throw ConfigError(fmt::format("{}: forwarding over mapping '{}': {}", spec.origin, mapping.name, e.what()));
  }
  return fabric;
}

fw::RouteOptions route_options(const ExperimentSpec& spec, const fw::Fabric& fabric) {
  fw::RouteOptions o;
  o.balance = spec.forwarding.balance;
  if (spec.forwarding.traffic == "ring")
    o.traffic = fw::ring(fabric, 1.0, spec.forwarding.ring);
  else
    o.traffic = fw::all_to_all(fabric);
  return o;
}

}  // namespace ocslab::runner
