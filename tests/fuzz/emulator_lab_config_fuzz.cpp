// The emulator's lab file is user input (`ocsctl emulate LAB.yaml`), and "everything is
// validated before anything starts" (lab_config.h): any bytes must give an ocslab::Error naming
// the input, or a config the emulator can run as is: a switch of at least 1x1, NICs with
// unique names transmitting into ingress ports and receiving from egress ports, each port
// once, distinct listen ports, every delay a finite non-negative number of ms that the
// emulator's nanosecond timers can hold (sampling it is not UB), and a --dry-run summary
// naming every NIC.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <random>
#include <set>
#include <string>

#include "ocslab/common/config.h"
#include "ocslab/common/error.h"
#include "emulator_checks.h"
#include "ocslab/emulator/lab_config.h"

namespace emu = ocslab::emu;

using emu_fuzz::check_delay;
using emu_fuzz::check_link;
using emu_fuzz::schedulable_ms;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 8192) return 0;  // bigger files only make each run slower, not different
  std::string text(reinterpret_cast<const char*>(data), size);
  emu::EmulatorConfig cfg;
  try {
    cfg = emu::parse_emulator_config(ocslab::load_yaml_string(text, "fuzz-lab.yaml"));
  } catch (const ocslab::Error&) {
    return 0;  // refused with a message; YAML::Exception or anything else escaping is a bug
  }
  const int in_ports = cfg.sw.ingress_ports, out_ports = cfg.sw.egress_ports;
  if (in_ports < 1 || out_ports < 1 || static_cast<long long>(in_ports) + out_ports > 100000) __builtin_trap();
  std::mt19937_64 rng(cfg.sw.seed);
  check_delay(cfg.sw.switching, rng);
  // A link rate the data plane's set_rate_gbps takes as is: 0 (no cap) or within its bounds.
  if (cfg.link_gbps != 0 && !(cfg.link_gbps >= emu::kMinLinkGbps && cfg.link_gbps <= emu::kMaxLinkGbps))
    __builtin_trap();

  std::set<int> listen_ports;
  for (const auto* a :
       {&cfg.control.tl1, &cfg.control.tl1_ssh, &cfg.control.netconf, &cfg.control.scpi, &cfg.control.events}) {
    if (!*a) continue;
    if ((*a)->host.empty() || (*a)->port < 0 || (*a)->port > 65535) __builtin_trap();
    if ((*a)->port != 0 && !listen_ports.insert((*a)->port).second) __builtin_trap();
  }

  std::set<std::string> names;
  std::set<int> tx_used, rx_used, udp_used;
  for (const auto& n : cfg.nics) {
    const auto& a = n.attachment;
    if (!names.insert(a.name).second) __builtin_trap();
    if (a.tx_port < 1 || a.tx_port > in_ports) __builtin_trap();
    if (a.rx_port <= in_ports || a.rx_port > in_ports + out_ports) __builtin_trap();
    if (!tx_used.insert(a.tx_port).second || !rx_used.insert(a.rx_port).second) __builtin_trap();
    if (a.kind == emu::NicAttachment::Kind::kTap) {
      if (a.tap_name.size() > 15 || !a.qmp_socket.empty()) __builtin_trap();
    } else {
      if (a.listen.port < 1 || a.listen.port > 65535 || a.peer.port < 1 || a.peer.port > 65535) __builtin_trap();
      if (!udp_used.insert(a.listen.port).second) __builtin_trap();
    }
    auto power = cfg.sw.source_power_by_port.find(a.tx_port);
    if (power == cfg.sw.source_power_by_port.end()) __builtin_trap();
    if (power->second != n.tx_power_dbm && !(std::isnan(power->second) && std::isnan(n.tx_power_dbm))) __builtin_trap();
    check_link(n.link, rng);
  }
  if (cfg.sw.source_power_by_port.size() != cfg.nics.size()) __builtin_trap();

  // The --dry-run summary names every NIC.
  std::string summary = cfg.describe();
  for (const auto& n : cfg.nics) {
    if (summary.find(n.attachment.name) == std::string::npos) __builtin_trap();
  }
  return 0;
}
