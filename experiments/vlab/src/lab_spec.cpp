#include "ocslab/vlab/lab_spec.h"

#include <arpa/inet.h>
#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <regex>

#include "ocslab/common/text.h"

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

}  // namespace

namespace {

// One reading of a lab file: the names, addresses and ports seen so far (each may be used once)
// and the steps that read its hosts, their NICs and its links.
class LabSpecParser {
 public:
  LabSpecParser(const YamlDoc& doc, LabSpec& lab)
      : doc_(doc),
        lab_(lab),
        sw_(lab.emulator.sw),
        layout_(fmt::format("(switch is {}x{}: ingress 1..{}, egress {}..{})", sw_.ingress_ports, sw_.egress_ports,
                            sw_.ingress_ports, sw_.ingress_ports + 1, sw_.ingress_ports + sw_.egress_ports)) {
    if (doc.root["nic_model"]) default_link_ = emu::parse_nic_link(doc, doc.root["nic_model"], default_preset_);
  }

  void parse_hosts(const YAML::Node& hosts) {
    if (!hosts.IsSequence() || hosts.size() == 0) throw config_error(doc_, hosts, "'hosts' must be a non-empty list");
    for (const auto& h : hosts) parse_host(h);
  }

  void parse_links(const YAML::Node& links) {
    if (!links || links.IsNull()) return;
    if (!links.IsSequence()) throw config_error(doc_, links, "'links' must be a list of 'HOST:NIC <-> HOST:NIC'");
    std::map<std::string, YAML::Node> linked;
    for (const auto& l : links) {
      std::string a, b;
      if (l.IsSequence() && l.size() == 2) {
        a = as_string(doc_, l[0]);
        b = as_string(doc_, l[1]);
      } else {
        std::string text = as_string(doc_, l);
        auto arrow = text.find("<->");
        if (arrow == std::string::npos) throw config_error(doc_, l, "'" + text + "': expected 'HOST:NIC <-> HOST:NIC'");
        a = std::string(trim_blanks(text.substr(0, arrow)));
        b = std::string(trim_blanks(text.substr(arrow + 3)));
      }
      LinkSpec link{parse_nic_ref(doc_, l, a, lab_), parse_nic_ref(doc_, l, b, lab_)};
      if (link.a.host == link.b.host && link.a.nic == link.b.nic)
        throw config_error(doc_, l, "a link needs two different NICs");
      once(linked, a, l, "NIC");
      once(linked, b, l, "NIC");
      lab_.links.push_back(link);
    }
  }

 private:
  void once(std::map<std::string, YAML::Node>& seen, const std::string& key, const YAML::Node& n,
            const std::string& what) const {
    auto [it, fresh] = seen.emplace(key, n);
    if (!fresh)
      throw config_error(doc_, n,
                         fmt::format("{} {} used twice (also at line {})", what, key, it->second.Mark().line + 1));
  }

  void port_once(std::map<ocs::Port, YAML::Node>& seen, ocs::Port p, const YAML::Node& n) const {
    auto [it, fresh] = seen.emplace(p, n);
    if (!fresh)
      throw config_error(doc_, n, fmt::format("port {} used twice (also at line {})", p, it->second.Mark().line + 1));
  }

  // An integer key of a host in [lo, hi]; `fallback` when absent.
  int host_size(const YAML::Node& h, const char* key, long long lo, long long hi, const char* range, int fallback) {
    if (!h[key]) return fallback;
    long long v = as_int(doc_, h[key]);
    if (v < lo || v > hi) throw config_error(doc_, h[key], fmt::format("{} must be {}", key, range));
    return static_cast<int>(v);
  }

  void parse_host(const YAML::Node& h) {
    only_keys(doc_, h, {"name", "cpus", "memory_mb", "tcg_cache_mb", "nics"});
    HostSpec host;
    host.name = as_string(doc_, require(doc_, h, "name"));
    if (!valid_name(host.name, 20)) {
      throw config_error(doc_, h["name"],
                         "host name '" + host.name + "' must be lower-case letters, digits and '-' (at most 20)");
    }
    once(host_names_, host.name, h["name"], "host name");
    host.cpus = host_size(h, "cpus", 1, 16, "1..16", host.cpus);
    host.memory_mb = host_size(h, "memory_mb", 256, 16384, "256..16384", host.memory_mb);
    host.tcg_cache_mb = host_size(h, "tcg_cache_mb", 32, 1024, "32..1024 (MiB)", host.tcg_cache_mb);
    const YAML::Node nics = require(doc_, h, "nics");
    if (!nics.IsSequence() || nics.size() == 0)
      throw config_error(doc_, nics, host.name + ": 'nics' must be a non-empty list");
    std::map<std::string, YAML::Node> nic_names;
    for (const auto& n : nics) host.nics.push_back(parse_nic(n, host, nic_names));
    check_standby_names(doc_, nics, host);
    lab_.hosts.push_back(std::move(host));
  }

  DataNicSpec parse_nic(const YAML::Node& n, const HostSpec& host, std::map<std::string, YAML::Node>& nic_names) {
    only_keys(doc_, n, {"name", "mac", "ip", "tx_port", "rx_port", "rdma", "if2", "if2_mac", "model", "standby_for"});
    DataNicSpec nic;
    nic.name = as_string(doc_, require(doc_, n, "name"));
    if (!valid_name(nic.name, 14) || nic.name == "eth0" || nic.name == "lo") {
      throw config_error(
          doc_, n["name"],
          "NIC name '" + nic.name + "' must be lower-case letters and digits, at most 14, not eth0 (management) or lo");
    }
    once(nic_names, nic.name, n["name"], host.name + ": NIC name");
    // The emulator knows each NIC as "<host>-<nic>", and both may contain '-': h-x's y and
    // h's x-y would be one NIC to it (its own lab file refuses duplicate names).
    if (auto [it, fresh] = emulator_names_.emplace(host.name + "-" + nic.name, n["name"]); !fresh) {
      throw config_error(doc_, n["name"],
                         fmt::format("{}:{} has the emulator NIC name {}-{} of the NIC at line {}; rename a host "
                                     "or NIC",
                                     host.name, nic.name, host.name, nic.name, it->second.Mark().line + 1));
    }
    size_t hi = lab_.hosts.size() + 1, ni = host.nics.size() + 1;
    nic.mac = n["mac"] ? parse_mac(doc_, n["mac"]) : fmt::format("52:54:00:6c:{:02x}:{:02x}", hi, ni);
    once(macs_, nic.mac, n["mac"] ? n["mac"] : n, "MAC");
    if (n["standby_for"]) {
      parse_standby(doc_, n, host, nic);
    } else {
      nic.ip = parse_cidr(doc_, require(doc_, n, "ip"));
      once(ips_, nic.address(), n["ip"], "address");
    }
    parse_nic_ports(n, host, nic);
    if (n["rdma"]) nic.rdma = as_bool(doc_, n["rdma"]);
    if (n["if2"]) nic.if2 = as_bool(doc_, n["if2"]);
    if (n["if2_mac"] && !nic.if2) throw config_error(doc_, n["if2_mac"], "'if2_mac' needs 'if2: true'");
    if (nic.if2) {
      nic.if2_mac = n["if2_mac"] ? parse_mac(doc_, n["if2_mac"]) : fmt::format("52:54:00:6d:{:02x}:{:02x}", hi, ni);
      once(macs_, nic.if2_mac, n["if2_mac"] ? n["if2_mac"] : n, "MAC");
    }
    nic.link = default_link_;
    nic.link_preset = default_preset_;
    if (n["model"]) nic.link = emu::parse_nic_link(doc_, n["model"], nic.link_preset);
    return nic;
  }

  void parse_nic_ports(const YAML::Node& n, const HostSpec& host, DataNicSpec& nic) {
    // Range-checked as written, before narrowing to a port: 4294967297 is not port 1.
    const long long tx = as_int(doc_, require(doc_, n, "tx_port"));
    const long long rx = as_int(doc_, require(doc_, n, "rx_port"));
    if (tx < 1 || tx > sw_.ingress_ports) {
      throw config_error(doc_, n["tx_port"],
                         fmt::format("{}:{}: tx_port {} is not an ingress port {}", host.name, nic.name, tx, layout_));
    }
    if (rx <= sw_.ingress_ports || rx > static_cast<long long>(sw_.ingress_ports) + sw_.egress_ports) {
      throw config_error(doc_, n["rx_port"],
                         fmt::format("{}:{}: rx_port {} is not an egress port {}", host.name, nic.name, rx, layout_));
    }
    nic.tx_port = static_cast<ocs::Port>(tx);
    nic.rx_port = static_cast<ocs::Port>(rx);
    port_once(tx_used_, nic.tx_port, n["tx_port"]);
    port_once(rx_used_, nic.rx_port, n["rx_port"]);
  }

  const YamlDoc& doc_;
  LabSpec& lab_;
  const emu::SwitchParams& sw_;
  const std::string layout_;  // the switch's ports, for the messages
  std::string default_preset_ = "ideal";
  emu::NicLinkParams default_link_ = emu::NicLinkParams::preset("ideal");
  std::map<std::string, YAML::Node> host_names_, macs_, ips_, emulator_names_;
  std::map<ocs::Port, YAML::Node> tx_used_, rx_used_;
};

}  // namespace

LabSpec parse_lab_spec(const YamlDoc& doc) {
  const YAML::Node& root = doc.root;
  if (!root.IsMap()) throw config_error(doc, root, "expected a mapping with 'switch', 'hosts' and 'links'");
  // No ground_truth key: the lab always records it in its run folder (ground-truth.csv).
  only_keys(doc, root, {"name", "switch", "nic_model", "link_gbps", "hosts", "links", "slurm"});
  LabSpec lab;
  lab.origin = doc.origin;
  lab.emulator = emu::parse_emulator_config(doc);  // switch, nic_model, link_gbps, ground_truth
  lab.name = root["name"] ? as_string(doc, root["name"]) : std::filesystem::path(doc.origin).stem().string();
  if (!valid_name(lab.name, 40)) {
    throw config_error(doc, root["name"] ? root["name"] : root,
                       "lab name '" + lab.name + "' must be lower-case letters, digits and '-' (at most 40)");
  }
  if (root["slurm"]) lab.slurm = as_bool(doc, root["slurm"]);
  const YAML::Node hosts = require(doc, root, "hosts");
  LabSpecParser parser(doc, lab);
  parser.parse_hosts(hosts);
  parser.parse_links(root["links"]);
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
