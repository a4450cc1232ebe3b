// The one record type that flows end to end (docs/architecture.md): a probe reading, an
// emulator ground-truth event or a control span boundary, stamped on the producing host.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ocslab {

struct Sample {
  int64_t t_ns = 0;         // CLOCK_REALTIME of the producing host, ns
  int64_t mono_ns = 0;      // CLOCK_MONOTONIC of the producing host, ns (not in the tidy CSV)
  std::string host;         // host name as in the lab / inventory
  std::string source;       // probe or component: carrier, rx_power, ocs, emulator, ...
  std::string subject;      // interface, port, QP, ...
  std::string signal;       // what was measured: carrier, power_dbm, command, ...
  double value = 0;         // numeric value (1/0 for states and events)
  std::string unit;         // unit of value: dBm, bool, ms, ...
};

// Column names of the tidy CSV, in order (run and iteration are added by the runner).
const std::vector<std::string>& sample_csv_columns();
std::vector<std::string> sample_csv_fields(const Sample& s);

}  // namespace ocslab
