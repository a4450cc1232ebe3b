// A running virtual lab's timing file (<lab>/timing.yaml, read by its supervisor on SIGHUP and
// applied to the emulator: switching time, NIC link model, held NICs, dark ports): any bytes
// must give an ocslab::Error naming the input, or an update the emulator can apply as is: every
// delay a finite non-negative number of ms its timers can hold, every held NIC one of the
// emulator's and every dark port one of its switch's, each named once, and an unreachable
// spell above 0 and within an hour, and a link rate of 0 (no cap) or one the data plane takes.
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

namespace {

// The emulator the updates are for: a 4x4 switch (ports 1..8) with two NICs.
const emu::EmulatorConfig& config() {
  static const emu::EmulatorConfig cfg = emu::parse_emulator_config(ocslab::load_yaml_string(
      "switch: {size: 4x4}\nnics:\n  - {name: h1-eth1, tx_port: 1, rx_port: 5, tap: {name: t1}}\n"
      "  - {name: h2-eth1, tx_port: 2, rx_port: 6, tap: {name: t2}}\n",
      "lab.yaml"));
  return cfg;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 4096) return 0;
  std::string text(reinterpret_cast<const char*>(data), size);
  emu::TimingUpdate u;
  try {
    u = emu::parse_timing_update(ocslab::load_yaml_string(text, "timing.yaml"), config());
  } catch (const ocslab::Error&) {
    return 0;  // refused with a message; anything else escaping is a bug
  }
  std::mt19937_64 rng(1);
  if (u.switching) emu_fuzz::check_delay(*u.switching, rng);
  if (u.nic_link) emu_fuzz::check_link(*u.nic_link, rng);
  if (u.unreachable_ms && !(*u.unreachable_ms > 0 && *u.unreachable_ms <= 3'600'000)) __builtin_trap();
  if (u.link_gbps && *u.link_gbps != 0 && !(*u.link_gbps >= emu::kMinLinkGbps && *u.link_gbps <= emu::kMaxLinkGbps))
    __builtin_trap();
  std::set<std::string> held;
  for (const auto& name : u.hold_down.value_or(std::vector<std::string>{})) {
    if (name != "h1-eth1" && name != "h2-eth1") __builtin_trap();
    if (!held.insert(name).second) __builtin_trap();
  }
  std::set<int> dark;
  for (int p : u.dark_ports.value_or(std::vector<emu::Port>{})) {
    if (p < 1 || p > 8 || !dark.insert(p).second) __builtin_trap();
  }
  return 0;
}
