// The emulator's lab file: one switch (model, size, timing, listeners), the host NICs wired
// to it (which ports their fibres use, how they attach) and their link model. The virtual
// lab's file extends this one with hosts. Everything is validated before anything starts;
// every error names file:line:col.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ocslab/emulator/data_plane.h"
#include "ocslab/emulator/nic_link_model.h"
#include "ocslab/emulator/switch_model.h"

namespace ocslab::emu {

struct ListenAddress {
  std::string host = "127.0.0.1";
  int port = 0;  // 0: any free port (the emulator reports which)
  std::string to_string() const { return host + ":" + std::to_string(port); }
};

struct ControlPlaneConfig {
  std::optional<ListenAddress> tl1;      // TL1 over raw TCP
  std::optional<ListenAddress> tl1_ssh;  // TL1 over SSH (shell channel)
  std::optional<ListenAddress> netconf;  // NETCONF over SSH (subsystem netconf)
  std::optional<ListenAddress> scpi;     // SCPI over TCP
  std::optional<ListenAddress> events;   // ground truth, live, as JSON lines over TCP
  std::string user = "admin";
  std::string password = "root";
  bool prompt = false;      // TL1: send "<" after each reply
  bool autonomous = false;  // TL1: REPT messages on light / switching events
  std::string netconf_revision = "2018-01-09";
  std::string host_key;  // SSH host key file; empty: generated for this run
};

// The switch's login, one check for every way in: the SSH password callback (tl1+ssh,
// NETCONF) and TL1's ACT-USER. Compared in constant time for the client's guess, so timing
// does not reveal how much of the password was right.
bool login_matches(const ControlPlaneConfig& config, std::string_view user, std::string_view password);

struct NicConfig {
  NicAttachment attachment;
  NicLinkParams link;
  std::string link_preset;  // name, or "custom"
  double tx_power_dbm = 0;
};

struct EmulatorConfig {
  std::string origin;  // file the config came from
  std::string preset;
  SwitchParams sw;
  ControlPlaneConfig control;
  std::vector<NicConfig> nics;
  std::string ground_truth_csv;  // empty: not written
  // link_gbps: every lit circuit's rate on the wire (the data plane's token bucket), Gbit/s;
  // 0: no cap (frames pass as fast as the emulator forwards them).
  double link_gbps = 0;

  // Human-readable wiring summary (what `ocsctl emulate --dry-run` prints).
  std::string describe() const;
};

// Throws ConfigError "file:line:col: ..." for every problem: unknown preset or key, bad size,
// a port used twice or out of range, an ingress used as receive fibre, a UDP NIC without a
// QMP socket, duplicate NIC names or listen ports.
EmulatorConfig load_emulator_config(const std::string& path);
// A NIC link model: a preset name, or {preset, los_ms, firmware_up_ms, rapid_window_ms,
// rapid_extra_ms}. Sets preset_name ("custom" when only numbers are given).
NicLinkParams parse_nic_link(const YamlDoc& doc, const YAML::Node& node, std::string& preset_name);
EmulatorConfig parse_emulator_config(const YamlDoc& doc);
// A link rate in Gbit/s: 0 (no cap) or kMinLinkGbps..kMaxLinkGbps; otherwise ConfigError at the
// node, naming `key` ("link_gbps: ...", "sweep.link_gbps: ...").
double parse_link_gbps(const YamlDoc& doc, const YAML::Node& node, const std::string& key);

// A new timing for a running emulator: the switch's switching time, every NIC's link model,
// which NICs are held down (fault injection, NicLinkModel::set_held_down) and which switch
// ports are dark (fault injection: their shutters closed), each optional (absent: unchanged).
// A dark spell: the ports' shutters close now and the emulator opens them again exactly `ms`
// later on its own clock (an outage of an exact length, not one timed by a client's round trips).
struct DarkSpell {
  std::vector<Port> ports;
  double ms = 0;
};

struct TimingUpdate {
  std::optional<Distribution> switching;
  std::string switch_preset;  // the preset the switching time came from; "custom" for switching_ms alone
  std::optional<NicLinkParams> nic_link;
  std::string nic_preset;  // as parse_nic_link names it
  // The full set of NICs held down from now on, by emulator NIC name: every other NIC is
  // released; an empty list releases all.
  std::optional<std::vector<std::string>> hold_down;
  // The full set of switch ports dark from now on (a failed port: its shutter closed, no light
  // passes it either way); ports this channel darkened before and not listed are lit again,
  // shutters closed over the control plane are left alone. An empty list lights all again.
  std::optional<std::vector<Port>> dark_ports;
  // The switch's control plane is unreachable for this many ms from now (fault injection:
  // ControlPlane::silence); a one-off, not a state.
  std::optional<double> unreachable_ms;
  // A one-off: these ports dark for exactly this long from now (Emulator::retime refuses a port
  // that is already dark, by this channel, a spell or the control plane).
  std::optional<DarkSpell> dark_spell;
  // Every lit circuit's rate from now on (Gbit/s, 0: no cap), as the lab file's link_gbps.
  std::optional<double> link_gbps;
  bool empty() const {
    return !switching && !nic_link && !hold_down && !dark_ports && !unreachable_ms && !dark_spell && !link_gbps;
  }
};

// A timing file: {switch: {preset: NAME, switching_ms: DIST}, nic_model: MODEL, hold_down:
// [NIC, ...], dark_ports: [PORT, ...], unreachable_ms: MS, dark_spell: {ports: [PORT, ...], ms: MS},
// link_gbps: GBPS}, all optional, the first two in exactly the lab file's
// syntax (switching_ms wins over the preset's time). Throws ConfigError "file:line:col: ..." like the lab file's parser
// (a NIC named twice in hold_down included).
TimingUpdate parse_timing_update(const YamlDoc& doc);
// The same, and a hold_down NIC that `config` does not have, or a dark port its switch does
// not have, is refused, naming it and what there is.
TimingUpdate parse_timing_update(const YamlDoc& doc, const EmulatorConfig& config);

}  // namespace ocslab::emu
