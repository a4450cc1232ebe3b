// The per-layer breakdown of a timeline (docs/experiments.md, `breakdown.csv`): one row per
// reconfiguration x host x interface with the first edge of each layer and the durations
// derived from them.
#pragma once

#include <array>
#include <cstdint>
#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

#include "ocslab/analysis/timeline.h"

namespace ocslab::analysis {

enum class Status { kOk, kFailed, kUnaffected, kIncomplete };
const char* status_name(Status s);

// The edge times of a row, in breakdown.csv's column order.
enum Edge : int {
  kIssued,
  kAcked,
  kLightLost,
  kLightBack,
  kFirmwareDown,
  kFirmwareUp,
  kCarrierDown,
  kCarrierUp,
  kRdmaStalled,
  kRdmaResumed,
  kEdgeCount
};
const std::array<const char*, kEdgeCount>& edge_columns();  // "issued_ns", ...

// The derived durations, in breakdown.csv's column order.
enum Duration : int {
  kControl,
  kSwitching,
  kDark,
  kFirmware,
  kCarrier,
  kKernel,
  kRdma,
  kOutage,
  kTotal,
  kDurationCount
};
const std::array<const char*, kDurationCount>& duration_columns();  // "control_ms", ...

struct BreakdownRow {
  std::string run;
  int iteration = 0;
  std::string mapping;
  std::string host;
  std::string interface;
  Status status = Status::kOk;
  std::array<std::optional<int64_t>, kEdgeCount> edges;

  // ns, empty when either end is missing.
  std::optional<int64_t> duration_ns(Duration d) const;
};

struct BreakdownOptions {
  double dark_dbm = -30;  // rx_power_dbm below this counts as dark
};

struct Breakdown {
  std::vector<BreakdownRow> rows;  // by run, iteration, host, interface
  size_t iterations = 0;
  // How the timeline was cut into reconfigurations: "iteration column", "ocs commands" or
  // "layer edges".
  std::string iterations_from;
};

Breakdown compute_breakdown(const Timeline& timeline, const BreakdownOptions& options = {});

// All breakdown.csv columns, in order.
std::vector<std::string> breakdown_columns();
// A duration in ms as written to breakdown.csv: exact to the nanosecond ("12.000345").
std::string format_ms(int64_t ns);
void write_breakdown_csv(const Breakdown& b, std::ostream& out);

}  // namespace ocslab::analysis
