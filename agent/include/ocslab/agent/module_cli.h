// `ocslab-agent module IF [--json]`: a transceiver's identity and DDM, like `ethtool -m`, read
// through the Rx power probe's EEPROM reader and decoders (probes/module_info.h).
#pragma once

#include <functional>
#include <ostream>
#include <string>
#include <vector>

#include "ocslab/probes/module_info.h"

namespace ocslab::agent {

// What the command reads through: the real ethtool reader and sysfs driver lookup by default;
// tests pass a reader that replays spec-built images.
struct ModuleSource {
  probes::EepromReader* reader = nullptr;  // null: an EthtoolEepromReader
  std::function<std::string(const std::string&)> driver_of = probes::interface_driver;
};

// args: after "module". Exit codes (docs/exit-codes.md): 0 printed; 1 bad command line; 2 no such
// interface; 3 the NIC has no module EEPROM access (lo, veth, virtio); 8 no module plugged in.
// With --json the output, the refusals included, is one JSON object on stdout.
int run_module_cli(const std::vector<std::string>& args, std::ostream& out, std::ostream& err,
                   const ModuleSource& source = {});

// The text and JSON forms of a decoded module, for the command and its tests.
void print_module_text(std::ostream& out, const probes::ModuleInfo& info);
std::string module_json(const probes::ModuleInfo& info);

}  // namespace ocslab::agent
