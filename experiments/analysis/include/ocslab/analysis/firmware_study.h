// The firmware link-up study (docs/experiments.md, "The firmware link-up study"): a
// reconfig-latency run swept over NIC link models and dwell times (meta.json's
// `firmware_sweep`, written by `ocslab run` for a spec with `sweep: {nic_model, dwell_s}`). Per
// sweep point: how long the NIC firmware took from light back to link up, how often the link
// did not come up before the next reconfiguration moved its circuit again, and the
// reconfiguration interval the point actually ran at, from the timeline's light and link rows
// (a virtual lab's emulator, or the switch's power monitor and the firmware probe). Written as
// firmware_study.csv; `ocslab plot` draws firmware_study.png from it.
#pragma once

#include <cstddef>
#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "ocslab/analysis/timeline.h"

namespace ocslab::analysis {

// What the Opus testbed measured on a ConnectX-6 Dx (docs/protocols.md#switching-and-link-up-times):
// firmware link-up about 6 s with auto-negotiation, about 3 s without, up to about 10 s under
// rapid successive reconfigurations.
inline constexpr double kOpusAutonegMs = 6000;
inline constexpr double kOpusNoAutonegMs = 3000;
inline constexpr double kOpusRapidMaxMs = 10000;
// The Opus figure for a NIC model of the emulator's presets (cx6dx-autoneg: 6 s,
// cx6dx-no-autoneg: 3 s); none for any other model.
std::optional<double> opus_reference_ms(const std::string& nic_model);

// One point of the sweep: its model, dwell and reconfigurations (iterations first..last).
struct FirmwarePoint {
  std::string nic_model;
  double dwell_s = 0;
  int first_iteration = 0, last_iteration = 0;
  std::optional<double> model_up_mean_ms;  // the model's firmware link-up mean (none: the lab's own)
};

// The points of meta.json's `firmware_sweep` (empty: the run has none). Throws ConfigError naming
// `path` when the section is malformed.
std::vector<FirmwarePoint> firmware_points_from_meta(const nlohmann::json& meta, const std::string& path);

struct FirmwarePointStats {
  FirmwarePoint point;
  size_t reconfigurations = 0;       // of the point's iterations, those with a command in the timeline
  std::optional<double> interval_s;  // median from one command of the point to the next
  size_t rows = 0;                   // host/interface rows whose light came back (a circuit that moved or came up)
  size_t up = 0;                     // ... and whose link then came up (firmware_ms)
  size_t not_up = 0;                 // ... and whose link stayed down until the next reconfiguration
  std::optional<double> min_ms, median_ms, p90_ms, max_ms, mean_ms;  // firmware_ms over the `up` rows
  std::optional<double> opus_ms;                                     // opus_reference_ms
};

// Over a timeline with an iteration column (a results folder's); without one, every count is 0.
std::vector<FirmwarePointStats> firmware_study(const Timeline& tl, const std::vector<FirmwarePoint>& points);

const std::vector<std::string>& firmware_study_columns();
void write_firmware_study_csv(const std::vector<FirmwarePointStats>& stats, std::ostream& out);
// The summary's lines: one per point, then the Opus figures beside them.
std::string firmware_study_text(const std::vector<FirmwarePointStats>& stats);

}  // namespace ocslab::analysis
