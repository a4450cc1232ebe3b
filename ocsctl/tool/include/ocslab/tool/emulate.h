// `ocsctl emulate`: runs the OCS emulator from a lab file and/or flags until Ctrl-C, and
// reports where each protocol listens (stderr, and a JSON ready file for scripts).
#pragma once

#include <atomic>
#include <iosfwd>
#include <optional>
#include <string>

namespace ocslab::tool {

struct EmulateOptions {
  std::string lab_file;  // empty: flags only
  std::optional<std::string> preset, size, tl1, tl1_ssh, netconf, scpi, events, ground_truth, switching_ms;
  std::optional<long long> seed;
  bool dry_run = false;
  std::string ready_file;  // JSON with the bound ports, written once every listener is up
};

// Returns an ocsctl exit code. Stops when *stop becomes true.
int run_emulate(const EmulateOptions& options, std::ostream& out, std::ostream& err, const std::atomic<bool>& stop);

}  // namespace ocslab::tool
