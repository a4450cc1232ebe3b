#include "ocslab/vlab/lab_timing.h"

#include <signal.h>
#include <unistd.h>

#include <fmt/format.h>

#include <cerrno>
#include <thread>

#include "ocslab/common/error.h"
#include "ocslab/common/file.h"
#include "ocslab/common/process.h"
#include "ocslab/emulator/lab_config.h"
#include "ocslab/vlab/lab_control.h"

using namespace std::chrono_literals;

namespace ocslab::vlab {

namespace {

constexpr size_t kMaxTimingFile = 64 * 1024;

// One option's value as YAML, checked by the lab file's own parser for that key. The parser
// names its input "--option:1:1"; the user typed the option, so the message names it and the
// value instead.
template <class Check>
YAML::Node checked_value(const std::string& option, const std::string& value, Check check) {
  try {
    YamlDoc doc = load_yaml_string(value, option);
    check(doc, doc.root);
    return doc.root;
  } catch (const Error& e) {
    std::string msg = e.what();
    auto colon = msg.rfind(option, 0) == 0 ? msg.find(": ") : std::string::npos;
    if (colon != std::string::npos) msg = msg.substr(colon + 2);
    throw ConfigError(option + " '" + value + "': " + msg);
  }
}

YAML::Node delay_node(const std::string& option, const std::string& value) {
  auto node =
      checked_value(option, value, [](const YamlDoc& d, const YAML::Node& n) { emu::delay_ms_from_yaml(d, n); });
  node.SetStyle(YAML::EmitterStyle::Flow);
  return node;
}

YAML::Node distribution_node(const std::string& option, const std::string& value) {
  auto node =
      checked_value(option, value, [](const YamlDoc& d, const YAML::Node& n) { emu::Distribution::from_yaml(d, n); });
  node.SetStyle(YAML::EmitterStyle::Flow);
  return node;
}

YAML::Node preset_node(const std::string& option, const std::string& value, bool nic) {
  return checked_value(option, value, [nic](const YamlDoc&, const YAML::Node& n) {
    if (!n.IsScalar()) throw Error("expected a preset name");
    if (nic) {
      emu::NicLinkParams::preset(n.Scalar());
    } else {
      emu::SwitchParams::preset(n.Scalar());
    }
  });
}

YAML::Node nic_model_node(const LabTiming& t) {
  if (t.nic_link) {
    if (t.nic_model || t.los_ms || t.firmware_up_ms) {
      throw ConfigError("nic_link replaces --nic-model, --los-ms and --firmware-up-ms: give one or the other");
    }
    auto node = checked_value("nic_link", *t.nic_link, [](const YamlDoc& d, const YAML::Node& n) {
      std::string preset;
      emu::parse_nic_link(d, n, preset);
    });
    node.SetStyle(YAML::EmitterStyle::Flow);
    return node;
  }
  YAML::Node preset;
  if (t.nic_model) preset = preset_node("--nic-model", *t.nic_model, true);
  if (!t.los_ms && !t.firmware_up_ms) return preset;
  YAML::Node m;
  if (t.nic_model) m["preset"] = preset;
  if (t.los_ms) m["los_ms"] = delay_node("--los-ms", *t.los_ms);
  if (t.firmware_up_ms) m["firmware_up_ms"] = distribution_node("--firmware-up-ms", *t.firmware_up_ms);
  return m;
}

LabState running_lab(const std::string& lab_dir) {
  LabState s = lab_status(lab_dir);
  if (s.phase != "running") {
    throw Error(fmt::format("lab {} is not running ({}{})", s.name, s.phase, s.error.empty() ? "" : ": " + s.error));
  }
  return s;
}

// Atomic: a supervisor reading on an early SIGHUP sees the old file or the new one, never half.
void write_timing_file(const std::string& path, const std::string& text) { write_private_file(path, text); }

// The file as text; a symlink, a non-file or an oversized file is refused.
std::string read_timing_file(const std::string& path) {
  auto text = read_checked_file(path, "", kMaxTimingFile, FileAccess::kAny);
  if (!text) throw Error("cannot open " + path + ": no such file");
  return *text;
}

// The lab's HOST:NIC for an emulator NIC name (HOST-NIC); the name itself if none matches.
std::string lab_nic_name(const LabState& lab, const std::string& emulator_name) {
  for (const auto& h : lab.hosts) {
    for (const auto& n : h.nics) {
      if (h.name + "-" + n.name == emulator_name) return h.name + ":" + n.name;
    }
  }
  return emulator_name;
}

void record_applied(TimingState& t, const emu::TimingUpdate& u, const LabState& lab) {
  if (u.hold_down) {
    t.held_down.clear();
    for (const auto& name : *u.hold_down) t.held_down.push_back(lab_nic_name(lab, name));
  }
  if (u.dark_ports) t.dark_ports.assign(u.dark_ports->begin(), u.dark_ports->end());
  if (u.switching) {
    t.switch_preset = u.switch_preset;
    t.switching = *u.switching;
  }
  if (u.link_gbps) t.link_gbps = *u.link_gbps;
  if (u.nic_link) {
    t.nic_model = u.nic_preset;
    t.los_ms = u.nic_link->los_ms;
    t.firmware_up = u.nic_link->firmware_up;
    t.rapid_window_ms = u.nic_link->rapid_window_ms;
    t.rapid_extra = u.nic_link->rapid_extra;
    t.max_up_ms = u.nic_link->max_up_ms;
  }
}

}  // namespace

bool LabTiming::empty() const {
  return !switch_preset && !switching_ms && !nic_model && !los_ms && !firmware_up_ms && !nic_link && !hold_down &&
         !dark_ports && !unreachable_ms && !dark_spell_ms && !link_gbps;
}

std::string emulator_nic_name(const LabState& lab, const std::string& host_nic) {
  std::string known;
  for (const auto& h : lab.hosts) {
    for (const auto& n : h.nics) {
      if (h.name + ":" + n.name == host_nic) return h.name + "-" + n.name;
      known += (known.empty() ? "" : ", ") + h.name + ":" + n.name;
    }
  }
  throw ConfigError(
      fmt::format("lab {} has no data NIC '{}' (NICs: {})", lab.name, host_nic, known.empty() ? "none" : known));
}

std::string timing_yaml(const LabTiming& t, const LabState& lab) {
  if (!t.hold_down) return timing_yaml(t);
  LabTiming named = t;
  named.hold_down->clear();
  for (const auto& nic : *t.hold_down) {
    try {
      named.hold_down->push_back(emulator_nic_name(lab, nic));
    } catch (const ConfigError& e) {
      throw ConfigError(std::string("hold_down: ") + e.what());
    }
  }
  return timing_yaml(named);
}

std::string timing_yaml(const LabTiming& t) {
  YAML::Node root(YAML::NodeType::Map);
  if (t.switch_preset || t.switching_ms) {
    YAML::Node sw;
    if (t.switch_preset) sw["preset"] = preset_node("--preset", *t.switch_preset, false);
    if (t.switching_ms) sw["switching_ms"] = distribution_node("--switching-ms", *t.switching_ms);
    root["switch"] = sw;
  }
  if (t.nic_model || t.los_ms || t.firmware_up_ms || t.nic_link) root["nic_model"] = nic_model_node(t);
  if (t.hold_down) {
    YAML::Node held(YAML::NodeType::Sequence);
    for (const auto& nic : *t.hold_down) held.push_back(nic);
    held.SetStyle(YAML::EmitterStyle::Flow);
    root["hold_down"] = held;
  }
  if (t.unreachable_ms) {
    root["unreachable_ms"] = checked_value("--unreachable-ms", *t.unreachable_ms, [](const YamlDoc& d, const YAML::Node& n) {
      double ms = 0;
      if (!n.IsScalar() || !YAML::convert<double>::decode(n, ms) || !(ms > 0)) {
        throw config_error(d, n, "expected milliseconds above 0");
      }
    });
  }
  if (t.dark_spell_ms) {
    if (t.dark_spell_ports.empty()) throw ConfigError("--dark-for: name the ports with --dark-port");
    YAML::Node spell(YAML::NodeType::Map);
    YAML::Node ports(YAML::NodeType::Sequence);
    for (int p : t.dark_spell_ports) ports.push_back(p);
    ports.SetStyle(YAML::EmitterStyle::Flow);
    spell["ports"] = ports;
    spell["ms"] = checked_value("--dark-for", *t.dark_spell_ms, [](const YamlDoc& d, const YAML::Node& n) {
      double ms = 0;
      if (!n.IsScalar() || !YAML::convert<double>::decode(n, ms) || !(ms > 0) || ms > 600'000) {
        throw config_error(d, n, "expected milliseconds above 0, at most 600000");
      }
    });
    spell.SetStyle(YAML::EmitterStyle::Flow);
    root["dark_spell"] = spell;
  } else if (!t.dark_spell_ports.empty()) {
    throw ConfigError("dark spell ports without --dark-for MS");
  }
  if (t.link_gbps) {
    root["link_gbps"] = checked_value("--link-gbps", *t.link_gbps, [](const YamlDoc& d, const YAML::Node& n) {
      emu::parse_link_gbps(d, n, "link_gbps");
    });
  }
  if (t.dark_ports) {
    YAML::Node dark(YAML::NodeType::Sequence);
    for (int p : *t.dark_ports) dark.push_back(p);
    dark.SetStyle(YAML::EmitterStyle::Flow);
    root["dark_ports"] = dark;
  }
  YAML::Emitter out;
  out << root;
  std::string text = std::string("# written by `ocslab vlab timing`\n") + out.c_str() + "\n";
  emu::parse_timing_update(load_yaml_string(text, "timing.yaml"));  // what the supervisor will read
  return text;
}

TimingState lab_timing(const std::string& lab_dir) { return running_lab(lab_dir).timing; }

TimingState set_lab_timing(const std::string& lab_dir, const LabTiming& t, std::chrono::milliseconds wait) {
  timing_yaml(t);  // a bad value is refused before the lab is looked at
  LabState s = running_lab(lab_dir);
  std::string text = timing_yaml(t, s);
  write_timing_file(s.timing_file(), text);
  const uint64_t before = s.timing.generation;
  if (::kill(s.supervisor_pid, SIGHUP) != 0) {
    int err = errno;
    throw SystemError(fmt::format("lab {}: cannot signal its supervisor (pid {})", s.name, s.supervisor_pid), err);
  }
  auto deadline = std::chrono::steady_clock::now() + wait;
  for (;;) {
    LabState now = LabState::load(lab_dir);
    if (now.timing.generation > before) {
      if (!now.timing.error.empty()) throw Error("lab " + now.name + " refused the timing: " + now.timing.error);
      return now.timing;
    }
    if (!process_alive(s.supervisor_pid)) throw Error("lab " + s.name + " is not running (its supervisor is gone)");
    if (std::chrono::steady_clock::now() > deadline) {
      throw Error(fmt::format("lab {} did not apply the timing within {} ms (supervisor pid {}, log {}/supervisor.log)",
                              s.name, wait.count(), s.supervisor_pid, lab_dir));
    }
    std::this_thread::sleep_for(20ms);  // state.json is a file: there is no event to wait on
  }
}

void reload_lab_timing(LabState& lab, emu::Emulator& emulator) {
  ++lab.timing.generation;
  try {
    const std::string path = lab.timing_file();
    emu::TimingUpdate u = emu::parse_timing_update(load_yaml_string(read_timing_file(path), path), emulator.config());
    emulator.retime(u);
    record_applied(lab.timing, u, lab);
    lab.timing.error.clear();
  } catch (const std::exception& e) {
    lab.timing.error = e.what();
  }
}

TimingState initial_timing(const emu::EmulatorConfig& config) {
  TimingState t;
  t.switch_preset = config.preset;
  t.switching = config.sw.switching;
  t.link_gbps = config.link_gbps;
  if (config.nics.empty()) return t;
  const emu::NicConfig& first = config.nics.front();
  t.nic_model = first.link_preset;
  t.los_ms = first.link.los_ms;
  t.firmware_up = first.link.firmware_up;
  t.rapid_window_ms = first.link.rapid_window_ms;
  t.rapid_extra = first.link.rapid_extra;
  t.max_up_ms = first.link.max_up_ms;
  for (const auto& n : config.nics) {
    bool same = n.link_preset == first.link_preset && n.link.los_ms == first.link.los_ms &&
                n.link.firmware_up.to_string() == first.link.firmware_up.to_string();
    if (!same) t.nic_model = "mixed";
  }
  return t;
}

}  // namespace ocslab::vlab
