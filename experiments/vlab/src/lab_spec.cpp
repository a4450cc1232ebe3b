#include "ocslab/vlab/lab_spec.h"

#include <arpa/inet.h>
#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <regex>

namespace ocslab::vlab {

namespace {

bool valid_mac(const std::string& m) {
  static const std::regex re("^[0-9a-f]{2}(:[0-9a-f]{2}){5}$");
  return std::regex_match(m, re);
}

std::string lower(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string parse_mac(const YamlDoc& doc, const YAML::Node& n) {
  std::string m = lower(as_string(doc, n));
  if (!valid_mac(m)) throw config_error(doc, n, "'" + m + "' is not a MAC address (xx:xx:xx:xx:xx:xx)");
  if (std::stoi(m.substr(0, 2), nullptr, 16) & 1) throw config_error(doc, n, m + " is a multicast MAC address");
  return m;
}

// The text goes verbatim into the guest's `ip addr add`, so the prefix must be plain decimal:
// no blank (the shell splits it off), no sign, and no leading zero (iproute2 reads "/024" as
// octal, a /20).
std::string parse_cidr(const YamlDoc& doc, const YAML::Node& n) {
  std::string text = as_string(doc, n);
  auto slash = text.find('/');
  in_addr a{};
  int prefix = -1;
  if (slash != std::string::npos) {
    std::string p = text.substr(slash + 1);
    if (!p.empty() && p.size() <= 2 && p[0] != '0' && p.find_first_not_of("0123456789") == std::string::npos) {
      prefix = std::stoi(p);
    }
  }
  if (slash == std::string::npos || inet_pton(AF_INET, text.substr(0, slash).c_str(), &a) != 1 || prefix < 1 ||
      prefix > 32) {
    throw config_error(doc, n,
                       "'" + text +
                           "' is not an IPv4 address with a prefix (e.g. 10.10.0.1/24; prefix 1..32 in "
                           "decimal without sign, blank or leading zero)");
  }
  return text;
}

bool valid_name(const std::string& s, size_t max) {
  static const std::regex re("^[a-z][a-z0-9-]*$");
  return !s.empty() && s.size() <= max && std::regex_match(s, re);
}

// `standby_for: NAME`: this NIC backs up the host's NIC NAME, declared before it, in a bond that
// keeps NAME's address and Soft-RoCE device (lab_spec.h).
void parse_standby(const YamlDoc& doc, const YAML::Node& n, const HostSpec& host, DataNicSpec& nic) {
  for (const char* key : {"ip", "rdma", "if2", "if2_mac"}) {
    if (n[key]) {
      throw config_error(doc, n[key],
                         fmt::format("{}:{} is a standby NIC: it takes its primary's address and Soft-RoCE device, so "
                                     "'{}' belongs on the primary",
                                     host.name, nic.name, key));
    }
  }
  nic.standby_for = as_string(doc, n["standby_for"]);
  nic.rdma = false;
  auto primary = std::find_if(host.nics.begin(), host.nics.end(),
                              [&](const DataNicSpec& p) { return p.name == nic.standby_for; });
  if (primary == host.nics.end()) {
    throw config_error(doc, n["standby_for"],
                       fmt::format("{}:{}: standby_for '{}' is not a NIC of {} listed before it", host.name, nic.name,
                                   nic.standby_for, host.name));
  }
  if (!primary->standby_for.empty()) {
    throw config_error(doc, n["standby_for"],
                       fmt::format("{}:{}: {} is itself a standby (of {})", host.name, nic.name, primary->name,
                                   primary->standby_for));
  }
  if (primary->if2) {
    throw config_error(doc, n["standby_for"],
                       fmt::format("{}:{}: {} has a macvlan (if2), which a bond cannot carry here", host.name,
                                   nic.name, primary->name));
  }
  for (const auto& other : host.nics) {
    if (other.standby_for == nic.standby_for) {
      throw config_error(doc, n["standby_for"],
                         fmt::format("{}:{}: {} has a standby already ({})", host.name, nic.name, nic.standby_for,
                                     other.name));
    }
  }
}

// A bonded primary's own interface is "<name>p" in the guest: no NIC of the host may be called so.
void check_standby_names(const YamlDoc& doc, const YAML::Node& nics, const HostSpec& host) {
  for (const auto& s : host.nics) {
    if (s.standby_for.empty()) continue;
    const std::string inner = s.standby_for + "p";
    for (size_t i = 0; i < host.nics.size(); ++i) {
      if (host.nics[i].name == inner) {
        throw config_error(doc, nics[i]["name"],
                           fmt::format("{}:{}: the name is taken by {}'s own interface in its bond with standby {}",
                                       host.name, inner, s.standby_for, s.name));
      }
    }
  }
}

// "h1:eth1"
NicRef parse_nic_ref(const YamlDoc& doc, const YAML::Node& node, const std::string& text, const LabSpec& lab) {
  auto colon = text.find(':');
  if (colon == std::string::npos) throw config_error(doc, node, "'" + text + "': expected HOST:NIC (e.g. h1:eth1)");
  std::string host = text.substr(0, colon), nic = text.substr(colon + 1);
  for (size_t h = 0; h < lab.hosts.size(); ++h) {
    if (lab.hosts[h].name != host) continue;
    for (size_t i = 0; i < lab.hosts[h].nics.size(); ++i) {
      if (lab.hosts[h].nics[i].name == nic) return NicRef{h, i};
    }
    throw config_error(doc, node, "host '" + host + "' has no data NIC '" + nic + "'");
  }
  throw config_error(doc, node, "unknown host '" + host + "' in link '" + text + "'");
}

std::string trim(const std::string& s) {
  auto b = s.find_first_not_of(" \t");
  auto e = s.find_last_not_of(" \t");
  return b == std::string::npos ? std::string() : s.substr(b, e - b + 1);
}

}  // namespace

LabSpec parse_lab_spec(const YamlDoc& doc) {
  const YAML::Node& root = doc.root;
  if (!root.IsMap()) throw config_error(doc, root, "expected a mapping with 'switch', 'hosts' and 'links'");
  // No ground_truth key: the lab always records it in its run folder (ground-truth.csv).
  only_keys(doc, root, {"name", "switch", "nic_model", "hosts", "links", "slurm"});
  LabSpec lab;
  lab.origin = doc.origin;
  lab.emulator = emu::parse_emulator_config(doc);  // switch, nic_model, ground_truth
  lab.name = root["name"] ? as_string(doc, root["name"]) : std::filesystem::path(doc.origin).stem().string();
  if (!valid_name(lab.name, 40)) {
    throw config_error(doc, root["name"] ? root["name"] : root,
                       "lab name '" + lab.name + "' must be lower-case letters, digits and '-' (at most 40)");
  }
  if (root["slurm"]) lab.slurm = as_bool(doc, root["slurm"]);
  const auto& sw = lab.emulator.sw;

  const YAML::Node hosts = require(doc, root, "hosts");
  if (!hosts.IsSequence() || hosts.size() == 0) throw config_error(doc, hosts, "'hosts' must be a non-empty list");
  std::map<std::string, YAML::Node> host_names, macs, ips, emulator_names;
  std::map<ocs::Port, YAML::Node> tx_used, rx_used;
  auto once = [&](std::map<std::string, YAML::Node>& seen, const std::string& key, const YAML::Node& n,
                  const std::string& what) {
    auto [it, fresh] = seen.emplace(key, n);
    if (!fresh)
      throw config_error(doc, n,
                         fmt::format("{} {} used twice (also at line {})", what, key, it->second.Mark().line + 1));
  };
  auto port_once = [&](std::map<ocs::Port, YAML::Node>& seen, ocs::Port p, const YAML::Node& n) {
    auto [it, fresh] = seen.emplace(p, n);
    if (!fresh)
      throw config_error(doc, n, fmt::format("port {} used twice (also at line {})", p, it->second.Mark().line + 1));
  };
  const std::string layout =
      fmt::format("(switch is {}x{}: ingress 1..{}, egress {}..{})", sw.ingress_ports, sw.egress_ports,
                  sw.ingress_ports, sw.ingress_ports + 1, sw.ingress_ports + sw.egress_ports);
  std::string default_preset = "ideal";
  emu::NicLinkParams default_link = emu::NicLinkParams::preset("ideal");
  if (root["nic_model"]) default_link = emu::parse_nic_link(doc, root["nic_model"], default_preset);

  for (const auto& h : hosts) {
    only_keys(doc, h, {"name", "cpus", "memory_mb", "tcg_cache_mb", "nics"});
    HostSpec host;
    host.name = as_string(doc, require(doc, h, "name"));
    if (!valid_name(host.name, 20)) {
      throw config_error(doc, h["name"],
                         "host name '" + host.name + "' must be lower-case letters, digits and '-' (at most 20)");
    }
    once(host_names, host.name, h["name"], "host name");
    if (h["cpus"]) {
      long long c = as_int(doc, h["cpus"]);
      if (c < 1 || c > 16) throw config_error(doc, h["cpus"], "cpus must be 1..16");
      host.cpus = static_cast<int>(c);
    }
    if (h["memory_mb"]) {
      long long m = as_int(doc, h["memory_mb"]);
      if (m < 256 || m > 16384) throw config_error(doc, h["memory_mb"], "memory_mb must be 256..16384");
      host.memory_mb = static_cast<int>(m);
    }
    if (h["tcg_cache_mb"]) {
      long long m = as_int(doc, h["tcg_cache_mb"]);
      if (m < 32 || m > 1024) throw config_error(doc, h["tcg_cache_mb"], "tcg_cache_mb must be 32..1024 (MiB)");
      host.tcg_cache_mb = static_cast<int>(m);
    }
    const YAML::Node nics = require(doc, h, "nics");
    if (!nics.IsSequence() || nics.size() == 0)
      throw config_error(doc, nics, host.name + ": 'nics' must be a non-empty list");
    std::map<std::string, YAML::Node> nic_names;
    for (const auto& n : nics) {
      only_keys(doc, n, {"name", "mac", "ip", "tx_port", "rx_port", "rdma", "if2", "if2_mac", "model", "standby_for"});
      DataNicSpec nic;
      nic.name = as_string(doc, require(doc, n, "name"));
      if (!valid_name(nic.name, 14) || nic.name == "eth0" || nic.name == "lo") {
        throw config_error(doc, n["name"],
                           "NIC name '" + nic.name +
                               "' must be lower-case letters and digits, at most 14, not eth0 (management) or lo");
      }
      once(nic_names, nic.name, n["name"], host.name + ": NIC name");
      // The emulator knows each NIC as "<host>-<nic>", and both may contain '-': h-x's y and
      // h's x-y would be one NIC to it (its own lab file refuses duplicate names).
      if (auto [it, fresh] = emulator_names.emplace(host.name + "-" + nic.name, n["name"]); !fresh) {
        throw config_error(doc, n["name"],
                           fmt::format("{}:{} has the emulator NIC name {}-{} of the NIC at line {}; rename a host "
                                       "or NIC",
                                       host.name, nic.name, host.name, nic.name, it->second.Mark().line + 1));
      }
      size_t hi = lab.hosts.size() + 1, ni = host.nics.size() + 1;
      nic.mac = n["mac"] ? parse_mac(doc, n["mac"]) : fmt::format("52:54:00:6c:{:02x}:{:02x}", hi, ni);
      once(macs, nic.mac, n["mac"] ? n["mac"] : n, "MAC");
      if (n["standby_for"]) {
        parse_standby(doc, n, host, nic);
      } else {
        nic.ip = parse_cidr(doc, require(doc, n, "ip"));
        once(ips, nic.address(), n["ip"], "address");
      }
      // Range-checked as written, before narrowing to a port: 4294967297 is not port 1.
      const long long tx = as_int(doc, require(doc, n, "tx_port"));
      const long long rx = as_int(doc, require(doc, n, "rx_port"));
      if (tx < 1 || tx > sw.ingress_ports) {
        throw config_error(doc, n["tx_port"],
                           fmt::format("{}:{}: tx_port {} is not an ingress port {}", host.name, nic.name, tx, layout));
      }
      if (rx <= sw.ingress_ports || rx > static_cast<long long>(sw.ingress_ports) + sw.egress_ports) {
        throw config_error(doc, n["rx_port"],
                           fmt::format("{}:{}: rx_port {} is not an egress port {}", host.name, nic.name, rx, layout));
      }
      nic.tx_port = static_cast<ocs::Port>(tx);
      nic.rx_port = static_cast<ocs::Port>(rx);
      port_once(tx_used, nic.tx_port, n["tx_port"]);
      port_once(rx_used, nic.rx_port, n["rx_port"]);
      if (n["rdma"]) nic.rdma = as_bool(doc, n["rdma"]);
      if (n["if2"]) nic.if2 = as_bool(doc, n["if2"]);
      if (n["if2_mac"] && !nic.if2) throw config_error(doc, n["if2_mac"], "'if2_mac' needs 'if2: true'");
      if (nic.if2) {
        nic.if2_mac = n["if2_mac"] ? parse_mac(doc, n["if2_mac"]) : fmt::format("52:54:00:6d:{:02x}:{:02x}", hi, ni);
        once(macs, nic.if2_mac, n["if2_mac"] ? n["if2_mac"] : n, "MAC");
      }
      nic.link = default_link;
      nic.link_preset = default_preset;
      if (n["model"]) nic.link = emu::parse_nic_link(doc, n["model"], nic.link_preset);
      host.nics.push_back(std::move(nic));
    }
    check_standby_names(doc, nics, host);
    lab.hosts.push_back(std::move(host));
  }

  const YAML::Node links = root["links"];
  if (links && !links.IsNull()) {
    if (!links.IsSequence()) throw config_error(doc, links, "'links' must be a list of 'HOST:NIC <-> HOST:NIC'");
    std::map<std::string, YAML::Node> linked;
    for (const auto& l : links) {
      std::string a, b;
      if (l.IsSequence() && l.size() == 2) {
        a = as_string(doc, l[0]);
        b = as_string(doc, l[1]);
      } else {
        std::string text = as_string(doc, l);
        auto arrow = text.find("<->");
        if (arrow == std::string::npos) throw config_error(doc, l, "'" + text + "': expected 'HOST:NIC <-> HOST:NIC'");
        a = trim(text.substr(0, arrow));
        b = trim(text.substr(arrow + 3));
      }
      LinkSpec link{parse_nic_ref(doc, l, a, lab), parse_nic_ref(doc, l, b, lab)};
      if (link.a.host == link.b.host && link.a.nic == link.b.nic)
        throw config_error(doc, l, "a link needs two different NICs");
      once(linked, a, l, "NIC");
      once(linked, b, l, "NIC");
      lab.links.push_back(link);
    }
  }
  return lab;
}

LabSpec load_lab_spec(const std::string& path) { return parse_lab_spec(load_yaml_file(path)); }

std::vector<ocs::Circuit> LabSpec::initial_circuits() const {
  std::vector<ocs::Circuit> out;
  for (const auto& l : links) {
    out.push_back({nic(l.a).tx_port, nic(l.b).rx_port});
    out.push_back({nic(l.b).tx_port, nic(l.a).rx_port});
  }
  return out;
}

bool LabSpec::linked_at_start(NicRef r) const {
  for (const auto& l : links) {
    if ((l.a.host == r.host && l.a.nic == r.nic) || (l.b.host == r.host && l.b.nic == r.nic)) return true;
  }
  return false;
}

size_t LabSpec::host_index(const std::string& name) const {
  for (size_t i = 0; i < hosts.size(); ++i) {
    if (hosts[i].name == name) return i;
  }
  std::string known;
  for (const auto& h : hosts) known += (known.empty() ? "" : ", ") + h.name;
  throw Error("lab " + this->name + " has no host '" + name + "' (hosts: " + known + ")");
}

}  // namespace ocslab::vlab
