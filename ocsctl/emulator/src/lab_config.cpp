#include "ocslab/emulator/lab_config.h"

#include "ocslab/common/secret.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <map>
#include <set>
#include <string_view>

namespace ocslab::emu {

bool login_matches(const ControlPlaneConfig& config, std::string_view user, std::string_view password) {
  // Both compared always: no early exit on a wrong user name.
  bool user_ok = constant_time_equal(user, config.user);
  bool password_ok = constant_time_equal(password, config.password);
  return user_ok && password_ok;
}

namespace {

ListenAddress parse_listen(const YamlDoc& doc, const YAML::Node& n) {
  std::string text = as_string(doc, n);
  ListenAddress a;
  auto colon = text.rfind(':');
  std::string port_text = colon == std::string::npos ? text : text.substr(colon + 1);
  if (colon != std::string::npos) a.host = text.substr(0, colon);
  int port = -1;
  auto [p, ec] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
  if (ec != std::errc() || p != port_text.data() + port_text.size() || port < 0 || port > 65535) {
    throw config_error(doc, n, "expected HOST:PORT or PORT (0 = any free port), got '" + text + "'");
  }
  if (a.host.empty()) throw config_error(doc, n, "empty host in '" + text + "'");
  a.port = port;
  return a;
}

UdpEndpoint parse_endpoint(const YamlDoc& doc, const YAML::Node& n) {
  ListenAddress a = parse_listen(doc, n);
  if (a.port == 0) throw config_error(doc, n, "a UDP endpoint needs an explicit port");
  return UdpEndpoint{a.host, a.port};
}

Port as_port(const YamlDoc& doc, const YAML::Node& n) {
  long long v = as_int(doc, n);
  if (v < 1 || v > 100000) throw config_error(doc, n, fmt::format("port {} is out of range", v));
  return static_cast<Port>(v);
}

// The switch preset named at `node` (the whole switch section's defaults), errors at `where`
// when node is absent.
SwitchParams switch_preset(const YamlDoc& doc, const YAML::Node& node, const YAML::Node& where,
                           std::string& preset_name) {
  preset_name = node ? as_string(doc, node) : "polatis-6000";
  try {
    return SwitchParams::preset(preset_name);
  } catch (const Error& e) {
    throw config_error(doc, node ? node : where, e.what());
  }
}

}  // namespace

NicLinkParams parse_nic_link(const YamlDoc& doc, const YAML::Node& n, std::string& preset_name) {
  if (n.IsScalar()) {
    preset_name = n.Scalar();
    try {
      return NicLinkParams::preset(preset_name);
    } catch (const Error& e) {
      throw config_error(doc, n, e.what());
    }
  }
  only_keys(doc, n, {"preset", "los_ms", "firmware_up_ms", "rapid_window_ms", "rapid_extra_ms", "max_up_ms"});
  NicLinkParams p;
  preset_name = "custom";
  if (n["preset"]) {
    preset_name = as_string(doc, n["preset"]);
    try {
      p = NicLinkParams::preset(preset_name);
    } catch (const Error& e) {
      throw config_error(doc, n["preset"], e.what());
    }
  }
  // Delays like the distributions' (finite, non-negative, bounded): the NIC model sets its
  // timers with them.
  if (n["los_ms"]) p.los_ms = delay_ms_from_yaml(doc, n["los_ms"]);
  if (n["firmware_up_ms"]) p.firmware_up = Distribution::from_yaml(doc, n["firmware_up_ms"]);
  if (n["rapid_window_ms"]) p.rapid_window_ms = delay_ms_from_yaml(doc, n["rapid_window_ms"]);
  if (n["rapid_extra_ms"]) p.rapid_extra = Distribution::from_yaml(doc, n["rapid_extra_ms"]);
  // The cap a faster model needs too: the presets' 10 s would never bind one scaled to 1 s.
  if (n["max_up_ms"]) p.max_up_ms = delay_ms_from_yaml(doc, n["max_up_ms"]);
  return p;
}

namespace {

// `size: NxM`: the switch's ingress and egress port counts.
void parse_switch_size(const YamlDoc& doc, const YAML::Node& node, SwitchParams& sw) {
  // Exactly "NxM": sscanf("%d%c%d") took trailing text, and its n + m overflowed int for
  // sizes like 2147483647x1 (undefined behaviour).
  std::string size = as_string(doc, node);
  auto x = size.find_first_of("xX");
  auto number = [](std::string_view t, long long& v) {
    auto [p, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
    return ec == std::errc() && p == t.data() + t.size();
  };
  long long n = 0, m = 0;
  if (x == std::string::npos || !number(std::string_view(size).substr(0, x), n) ||
      !number(std::string_view(size).substr(x + 1), m) || n < 1 || m < 1 || n > 100000 || m > 100000 ||
      n + m > 100000) {
    throw config_error(doc, node, "size must be NxM with N + M at most 100000 (e.g. 32x32), got '" + size + "'");
  }
  sw.ingress_ports = static_cast<int>(n);
  sw.egress_ports = static_cast<int>(m);
}

// The switch's model: its preset and the keys that override it.
void parse_switch_model(const YamlDoc& doc, const YAML::Node& sw, EmulatorConfig& cfg) {
  cfg.sw = switch_preset(doc, sw["preset"], sw, cfg.preset);
  if (sw["name"]) cfg.sw.name = as_string(doc, sw["name"]);
  if (sw["size"]) parse_switch_size(doc, sw["size"], cfg.sw);
  if (sw["switching_ms"]) cfg.sw.switching = Distribution::from_yaml(doc, sw["switching_ms"]);
  if (sw["ack"]) {
    std::string ack = as_string(doc, sw["ack"]);
    if (ack != "after-settle" && ack != "before-settle") {
      throw config_error(doc, sw["ack"], "ack must be after-settle or before-settle");
    }
    cfg.sw.ack_after_settle = ack == "after-settle";
  }
  if (sw["blocking"]) cfg.sw.blocking = as_bool(doc, sw["blocking"]);
  if (sw["replace_patched"]) cfg.sw.replace_patched = as_bool(doc, sw["replace_patched"]);
  if (sw["insertion_loss_db"]) cfg.sw.insertion_loss_db = as_double(doc, sw["insertion_loss_db"]);
  if (sw["dark_floor_dbm"]) cfg.sw.dark_floor_dbm = as_double(doc, sw["dark_floor_dbm"]);
  if (sw["seed"]) cfg.sw.seed = static_cast<uint64_t>(as_int(doc, sw["seed"]));
  if (sw["identity"]) {
    const YAML::Node& id = sw["identity"];
    only_keys(doc, id, {"vendor", "model", "serial", "version"});
    if (id["vendor"]) cfg.sw.vendor = as_string(doc, id["vendor"]);
    if (id["model"]) cfg.sw.model = as_string(doc, id["model"]);
    if (id["serial"]) cfg.sw.serial = as_string(doc, id["serial"]);
    if (id["version"]) cfg.sw.version = as_string(doc, id["version"]);
  }
}

// The switch's control plane: where its protocols listen and how a session logs in.
void parse_control_plane(const YamlDoc& doc, const YAML::Node& sw, ControlPlaneConfig& cp) {
  if (sw["listen"]) {
    const YAML::Node& l = sw["listen"];
    only_keys(doc, l, {"tl1", "tl1_ssh", "netconf", "scpi", "events"});
    std::map<int, YAML::Node> used;
    auto take = [&](const char* key, std::optional<ListenAddress>& slot) {
      if (!l[key]) return;
      slot = parse_listen(doc, l[key]);
      if (slot->port != 0) {
        auto [it, fresh] = used.emplace(slot->port, l[key]);
        if (!fresh) throw config_error(doc, l[key], fmt::format("listen port {} used twice", slot->port));
      }
    };
    take("tl1", cp.tl1);
    take("tl1_ssh", cp.tl1_ssh);
    take("netconf", cp.netconf);
    take("scpi", cp.scpi);
    take("events", cp.events);
  }
  if (sw["user"]) cp.user = as_string(doc, sw["user"]);
  if (sw["password"]) cp.password = as_string(doc, sw["password"]);
  if (sw["prompt"]) cp.prompt = as_bool(doc, sw["prompt"]);
  if (sw["autonomous"]) cp.autonomous = as_bool(doc, sw["autonomous"]);
  if (sw["netconf_revision"]) cp.netconf_revision = as_string(doc, sw["netconf_revision"]);
  if (sw["host_key"]) cp.host_key = as_string(doc, sw["host_key"]);
}

// What the NICs of one file must not share: names, switch ports, UDP ports.
struct NicsSeen {
  std::map<std::string, YAML::Node> names;
  std::map<Port, YAML::Node> tx, rx;
  std::map<int, YAML::Node> udp;
};

// A NIC's two switch ports: an ingress and an egress port of the switch, each used once.
void parse_nic_ports(const YamlDoc& doc, const YAML::Node& n, const SwitchParams& sw, NicAttachment& a,
                     NicsSeen& seen) {
  a.tx_port = as_port(doc, require(doc, n, "tx_port"));
  a.rx_port = as_port(doc, require(doc, n, "rx_port"));
  const std::string layout =
      fmt::format("(switch is {}x{}: ingress 1..{}, egress {}..{})", sw.ingress_ports, sw.egress_ports,
                  sw.ingress_ports, sw.ingress_ports + 1, sw.ingress_ports + sw.egress_ports);
  if (a.tx_port > sw.ingress_ports) {
    throw config_error(doc, n["tx_port"],
                       fmt::format("{}: tx_port {} is not an ingress port {}", a.name, a.tx_port, layout));
  }
  if (a.rx_port <= sw.ingress_ports || a.rx_port > sw.ingress_ports + sw.egress_ports) {
    throw config_error(doc, n["rx_port"],
                       fmt::format("{}: rx_port {} is not an egress port {}", a.name, a.rx_port, layout));
  }
  if (auto [it, fresh] = seen.tx.emplace(a.tx_port, n); !fresh) {
    throw config_error(
        doc, n["tx_port"],
        fmt::format("port {} used twice (also by the NIC at line {})", a.tx_port, it->second.Mark().line + 1));
  }
  if (auto [it, fresh] = seen.rx.emplace(a.rx_port, n); !fresh) {
    throw config_error(
        doc, n["rx_port"],
        fmt::format("port {} used twice (also by the NIC at line {})", a.rx_port, it->second.Mark().line + 1));
  }
}

// How a NIC reaches the emulator: a TAP device, or a UDP socket pair of a QEMU guest.
void parse_attachment(const YamlDoc& doc, const YAML::Node& n, NicAttachment& a, NicsSeen& seen) {
  bool tap = static_cast<bool>(n["tap"]), udp = static_cast<bool>(n["udp"]);
  if (tap == udp) throw config_error(doc, n, a.name + ": give exactly one of 'tap' and 'udp'");
  if (tap) {
    const YAML::Node& t = n["tap"];
    only_keys(doc, t, {"name", "netns"});
    a.kind = NicAttachment::Kind::kTap;
    a.tap_name = as_string(doc, require(doc, t, "name"));
    if (a.tap_name.size() > 15) throw config_error(doc, t["name"], "interface names are at most 15 characters");
    if (t["netns"]) a.netns = as_string(doc, t["netns"]);
    if (n["qmp"]) throw config_error(doc, n["qmp"], a.name + ": 'qmp' only applies to UDP (QEMU) NICs");
    return;
  }
  const YAML::Node& u = n["udp"];
  only_keys(doc, u, {"listen", "peer"});
  a.kind = NicAttachment::Kind::kUdp;
  a.listen = parse_endpoint(doc, require(doc, u, "listen"));
  a.peer = parse_endpoint(doc, require(doc, u, "peer"));
  if (auto [it, fresh] = seen.udp.emplace(a.listen.port, u["listen"]); !fresh) {
    throw config_error(doc, u["listen"], fmt::format("UDP port {} used twice", a.listen.port));
  }
  if (!n["qmp"])
    throw config_error(doc, n, a.name + ": a UDP (QEMU) NIC needs 'qmp: {socket: PATH, netdev: ID}' to drive its link");
  const YAML::Node& q = n["qmp"];
  only_keys(doc, q, {"socket", "netdev"});
  a.qmp_socket = as_string(doc, require(doc, q, "socket"));
  a.qmp_netdev = as_string(doc, require(doc, q, "netdev"));
}

// `default_link`: the file's nic_model (its preset's name in `default_preset`), for a NIC without
// a model of its own.
void parse_nics(const YamlDoc& doc, const YAML::Node& nics, const NicLinkParams& default_link,
                const std::string& default_preset, EmulatorConfig& cfg) {
  if (!nics || nics.IsNull()) return;
  if (!nics.IsSequence()) throw config_error(doc, nics, "'nics' must be a list");
  NicsSeen seen;
  for (const auto& n : nics) {
    only_keys(doc, n, {"name", "tx_port", "rx_port", "tx_power_dbm", "model", "tap", "udp", "qmp"});
    NicConfig nic;
    NicAttachment& a = nic.attachment;
    a.name = as_string(doc, require(doc, n, "name"));
    if (!seen.names.emplace(a.name, n).second)
      throw config_error(doc, n["name"], "NIC name '" + a.name + "' used twice");
    parse_nic_ports(doc, n, cfg.sw, a, seen);
    if (n["tx_power_dbm"]) nic.tx_power_dbm = as_double(doc, n["tx_power_dbm"]);
    nic.link = default_link;
    nic.link_preset = default_preset;
    if (n["model"]) nic.link = parse_nic_link(doc, n["model"], nic.link_preset);
    parse_attachment(doc, n, a, seen);
    cfg.sw.source_power_by_port[a.tx_port] = nic.tx_power_dbm;
    cfg.nics.push_back(std::move(nic));
  }
}

}  // namespace

double parse_link_gbps(const YamlDoc& doc, const YAML::Node& node, const std::string& key) {
  double gbps = -1;
  if (!node.IsScalar() || !YAML::convert<double>::decode(node, gbps) || !std::isfinite(gbps) ||
      (gbps != 0 && (gbps < kMinLinkGbps || gbps > kMaxLinkGbps))) {
    throw config_error(doc, node,
                       fmt::format("{}: expected a link rate in Gbit/s, {:g}..{:g} (0: no cap), got '{}'", key,
                                   kMinLinkGbps, kMaxLinkGbps, node.IsScalar() ? node.Scalar() : std::string("?")));
  }
  return gbps;
}

EmulatorConfig parse_emulator_config(const YamlDoc& doc) {
  EmulatorConfig cfg;
  cfg.origin = doc.origin;
  const YAML::Node& root = doc.root;
  if (!root.IsMap()) throw config_error(doc, root, "expected a mapping with 'switch' and 'nics'");
  // Other keys (hosts, links, ...) belong to the virtual lab's extension of this file.
  const YAML::Node sw = require(doc, root, "switch");
  only_keys(doc, sw,
            {"name", "preset", "size", "switching_ms", "ack", "blocking", "replace_patched", "insertion_loss_db",
             "dark_floor_dbm", "seed", "identity", "listen", "user", "password", "prompt", "autonomous",
             "netconf_revision", "host_key"});
  parse_switch_model(doc, sw, cfg);
  parse_control_plane(doc, sw, cfg.control);
  std::string default_preset = "ideal";
  NicLinkParams default_link = NicLinkParams::preset("ideal");
  if (root["nic_model"]) default_link = parse_nic_link(doc, root["nic_model"], default_preset);
  if (root["ground_truth"]) cfg.ground_truth_csv = as_string(doc, root["ground_truth"]);
  if (root["link_gbps"]) cfg.link_gbps = parse_link_gbps(doc, root["link_gbps"], "link_gbps");
  parse_nics(doc, root["nics"], default_link, default_preset, cfg);
  return cfg;
}

namespace {

// hold_down: a list of NIC names, each once; `known` (when given) are the NICs there are.
std::vector<std::string> parse_hold_down(const YamlDoc& doc, const YAML::Node& node,
                                         const std::vector<std::string>* known) {
  if (node.IsNull()) return {};
  if (!node.IsSequence()) throw config_error(doc, node, "hold_down: expected a list of NIC names (e.g. [h1-eth1])");
  std::vector<std::string> out;
  for (const auto& n : node) {
    if (!n.IsScalar()) throw config_error(doc, n, "hold_down: expected a NIC name");
    std::string name = n.Scalar();
    if (std::find(out.begin(), out.end(), name) != out.end()) {
      throw config_error(doc, n, "hold_down: NIC '" + name + "' named twice");
    }
    if (known && std::find(known->begin(), known->end(), name) == known->end()) {
      std::string names;
      for (const auto& k : *known) names += (names.empty() ? "" : ", ") + k;
      throw config_error(doc, n,
                         "hold_down: unknown NIC '" + name + "' (NICs: " + (names.empty() ? "none" : names) + ")");
    }
    out.push_back(name);
  }
  return out;
}

// An unreachable spell longer than an hour is a mistake, not a fault to inject.
constexpr double kMaxUnreachableMs = 3'600'000;

// dark_ports: a list of switch ports, each once; `total` (when not 0) is how many the switch has.
std::vector<Port> parse_dark_ports(const YamlDoc& doc, const YAML::Node& node, int total,
                                   const std::string& key = "dark_ports") {
  if (node.IsNull()) return {};
  if (!node.IsSequence()) throw config_error(doc, node, key + ": expected a list of switch ports (e.g. [3, 19])");
  std::vector<Port> out;
  for (const auto& n : node) {
    int port = 0;
    if (!n.IsScalar() || !YAML::convert<int>::decode(n, port) || port < 1) {
      throw config_error(doc, n, key + ": expected a switch port number (1 or more)");
    }
    if (std::find(out.begin(), out.end(), port) != out.end()) {
      throw config_error(doc, n, fmt::format("{}: port {} named twice", key, port));
    }
    if (total > 0 && port > total) {
      throw config_error(doc, n, fmt::format("{}: the switch has no port {} (ports 1..{})", key, port, total));
    }
    out.push_back(port);
  }
  return out;
}

// A dark spell longer than ten minutes is a dark port, not an outage to time.
constexpr double kMaxDarkSpellMs = 600'000;

// dark_spell: {ports: [PORT, ...], ms: MS}: at least one port; ms above 0, at most kMaxDarkSpellMs.
DarkSpell parse_dark_spell(const YamlDoc& doc, const YAML::Node& node, int total) {
  if (!node.IsMap()) throw config_error(doc, node, "dark_spell: expected {ports: [PORT, ...], ms: MS}");
  only_keys(doc, node, {"ports", "ms"});
  if (!node["ports"]) throw config_error(doc, node, "dark_spell: 'ports' is required");
  if (!node["ms"]) throw config_error(doc, node, "dark_spell: 'ms' is required");
  DarkSpell spell;
  spell.ports = parse_dark_ports(doc, node["ports"], total, "dark_spell: ports");
  if (spell.ports.empty()) throw config_error(doc, node["ports"], "dark_spell: name at least one port");
  const YAML::Node n = node["ms"];
  double ms = -1;
  if (!n.IsScalar() || !YAML::convert<double>::decode(n, ms) || !std::isfinite(ms) || ms <= 0 || ms > kMaxDarkSpellMs) {
    throw config_error(doc, n,
                       fmt::format("dark_spell: ms: expected milliseconds above 0, at most {:.0f}", kMaxDarkSpellMs));
  }
  spell.ms = ms;
  return spell;
}

TimingUpdate parse_timing(const YamlDoc& doc, const std::vector<std::string>* known_nics, int total_ports) {
  const YAML::Node& root = doc.root;
  TimingUpdate u;
  if (!root.IsDefined() || root.IsNull()) return u;
  if (!root.IsMap()) {
    throw config_error(
        doc, root,
        "expected a mapping with 'switch', 'nic_model', 'hold_down', 'dark_ports', 'unreachable_ms', 'dark_spell' "
        "and/or 'link_gbps'");
  }
  only_keys(doc, root, {"switch", "nic_model", "hold_down", "dark_ports", "unreachable_ms", "dark_spell", "link_gbps"});
  if (const YAML::Node sw = root["switch"]) {
    if (!sw.IsMap()) throw config_error(doc, sw, "expected a mapping with 'preset' and/or 'switching_ms'");
    only_keys(doc, sw, {"preset", "switching_ms"});
    u.switch_preset = "custom";
    if (sw["preset"]) u.switching = switch_preset(doc, sw["preset"], sw, u.switch_preset).switching;
    if (sw["switching_ms"]) u.switching = Distribution::from_yaml(doc, sw["switching_ms"]);
    if (!u.switching) throw config_error(doc, sw, "give 'preset' and/or 'switching_ms'");
  }
  if (root["nic_model"]) u.nic_link = parse_nic_link(doc, root["nic_model"], u.nic_preset);
  if (root["hold_down"]) u.hold_down = parse_hold_down(doc, root["hold_down"], known_nics);
  if (root["dark_ports"]) u.dark_ports = parse_dark_ports(doc, root["dark_ports"], total_ports);
  if (const YAML::Node n = root["unreachable_ms"]) {
    double ms = -1;
    if (!n.IsScalar() || !YAML::convert<double>::decode(n, ms) || !std::isfinite(ms) || ms <= 0 ||
        ms > kMaxUnreachableMs) {
      throw config_error(
          doc, n, fmt::format("unreachable_ms: expected milliseconds above 0, at most {:.0f}", kMaxUnreachableMs));
    }
    u.unreachable_ms = ms;
  }
  if (const YAML::Node n = root["dark_spell"]) u.dark_spell = parse_dark_spell(doc, n, total_ports);
  if (const YAML::Node n = root["link_gbps"]) u.link_gbps = parse_link_gbps(doc, n, "link_gbps");
  return u;
}

}  // namespace

TimingUpdate parse_timing_update(const YamlDoc& doc) { return parse_timing(doc, nullptr, 0); }

TimingUpdate parse_timing_update(const YamlDoc& doc, const EmulatorConfig& config) {
  std::vector<std::string> names;
  for (const auto& n : config.nics) names.push_back(n.attachment.name);
  return parse_timing(doc, &names, config.sw.ingress_ports + config.sw.egress_ports);
}

EmulatorConfig load_emulator_config(const std::string& path) { return parse_emulator_config(load_yaml_file(path)); }

std::string EmulatorConfig::describe() const {
  std::string out = fmt::format("switch {}: {} preset, {}x{} (ingress 1..{}, egress {}..{}), switching {}, ack {}\n",
                                sw.name, preset, sw.ingress_ports, sw.egress_ports, sw.ingress_ports,
                                sw.ingress_ports + 1, sw.ingress_ports + sw.egress_ports, sw.switching.to_string(),
                                sw.ack_after_settle ? "after settle" : "before settle");
  auto l = [&](const char* what, const std::optional<ListenAddress>& a) {
    if (a) out += fmt::format("  {:<8} {}\n", what, a->to_string());
  };
  l("tl1", control.tl1);
  l("tl1+ssh", control.tl1_ssh);
  l("netconf", control.netconf);
  l("scpi", control.scpi);
  l("events", control.events);
  out += fmt::format("{} NIC(s):\n", nics.size());
  for (const auto& n : nics) {
    const auto& a = n.attachment;
    std::string att = a.kind == NicAttachment::Kind::kTap
                          ? "tap " + a.tap_name + (a.netns.empty() ? "" : " in netns " + a.netns)
                          : fmt::format("udp {}:{} <-> {}:{}, qmp {} netdev {}", a.listen.host, a.listen.port,
                                        a.peer.host, a.peer.port, a.qmp_socket, a.qmp_netdev);
    out += fmt::format("  {:<12} tx->{:<4} rx<-{:<4} link {} (up {})  {}\n", a.name, a.tx_port, a.rx_port,
                       n.link_preset, n.link.firmware_up.to_string(), att);
  }
  if (link_gbps > 0) out += fmt::format("every lit circuit capped at {:g} Gbit/s\n", link_gbps);
  if (!ground_truth_csv.empty()) out += "ground truth -> " + ground_truth_csv + "\n";
  return out;
}

}  // namespace ocslab::emu
