// Value types shared by every OCS driver, the emulator and the CLI: ports, circuits,
// switch identity, power readings and the per-call timing record.
#pragma once

#include <compare>
#include <cstdint>
#include <string>
#include <vector>

#include "ocslab/common/clock.h"

namespace ocslab::ocs {

// A switch port number as the switch numbers it (Polatis: ingress 1..N, egress N+1..N+M).
using Port = int;

// A unidirectional optical circuit from an ingress port to an egress port.
struct Circuit {
  Port ingress = 0;
  Port egress = 0;
  auto operator<=>(const Circuit&) const = default;
};

std::string to_string(const Circuit& c);  // "1-33"

struct SwitchInfo {
  std::string vendor;
  std::string model;
  std::string serial;
  std::string version;
  int ingress_ports = 0;  // N of an N x M switch
  int egress_ports = 0;   // M
  Port first_egress() const { return ingress_ports + 1; }
  bool is_ingress(Port p) const { return p >= 1 && p <= ingress_ports; }
  bool is_egress(Port p) const { return p > ingress_ports && p <= ingress_ports + egress_ports; }
  bool valid_port(Port p) const { return p >= 1 && p <= ingress_ports + egress_ports; }
};

// Optical power measured at a port monitor. The switch's own floor value (e.g. -60 dBm)
// is passed through unchanged for dark ports.
struct PortPower {
  Port port = 0;
  double dbm = 0;
};

// One request/response exchange with the switch, stamped on both clocks: `issued` right
// before the request's first byte is written, `acked` right after its completion arrives.
struct CallTiming {
  std::string op;       // connect, disconnect, list, power, info, reconfigure, ...
  std::string command;  // the protocol request as sent (secrets never appear here)
  Timestamp issued;
  Timestamp acked;
  bool ok = false;
  std::string error;  // empty when ok
  double latency_ms() const { return elapsed_ms(issued, acked); }
};

}  // namespace ocslab::ocs
