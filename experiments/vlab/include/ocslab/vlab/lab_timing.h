// Changing the timing of a running virtual lab without rebooting it: the switch's switching
// time and every NIC's link model. The caller writes <lab>/timing.yaml (the lab file's
// `switch: {preset, switching_ms}` and `nic_model` syntax) and sends the supervisor SIGHUP;
// the supervisor applies it to its emulator and records the outcome in state.json
// (timing_generation, timing_error, timing). `ocslab vlab timing` is the command line of it.
#pragma once

#include <chrono>
#include <optional>
#include <string>

#include "ocslab/emulator/emulator.h"
#include "ocslab/vlab/lab_state.h"

namespace ocslab::vlab {

// What to change; every field optional, each value as text in the lab file's syntax.
struct LabTiming {
  std::optional<std::string> switch_preset;   // --preset: a switch preset (its switching time)
  std::optional<std::string> switching_ms;    // --switching-ms: ms, or a distribution as YAML flow
  std::optional<std::string> nic_model;       // --nic-model: a NIC link preset
  std::optional<std::string> los_ms;          // --los-ms: ms
  std::optional<std::string> firmware_up_ms;  // --firmware-up-ms: as switching_ms
  bool empty() const;
};

// The timing.yaml text for t. Checks every value on its own first and throws ConfigError
// naming the option and its value ("--switching-ms '-5': a delay cannot be negative").
std::string timing_yaml(const LabTiming& t);

// The timing of the running lab in lab_dir (state.json). Throws Error naming the lab when it
// is not running.
TimingState lab_timing(const std::string& lab_dir);

// Writes <lab_dir>/timing.yaml (0600, temp file + rename), sends SIGHUP to the supervisor and
// waits up to `wait` for timing_generation to advance; returns the timing then in force.
// Throws ConfigError for a bad value (before the lab is touched), Error naming the lab when
// it is not running, when the supervisor refused the file (its timing_error) or did not
// answer within `wait`.
TimingState set_lab_timing(const std::string& lab_dir, const LabTiming& t, std::chrono::milliseconds wait);

// The supervisor's side of SIGHUP: reads <lab.dir>/timing.yaml (never through a symlink),
// applies it to the emulator and records the outcome in lab.timing; the generation advances
// either way. A bad file leaves the timing as it was and sets lab.timing.error. Does not save.
void reload_lab_timing(LabState& lab, emu::Emulator& emulator);

// The timing a lab file gives its emulator at boot.
TimingState initial_timing(const emu::EmulatorConfig& config);

}  // namespace ocslab::vlab
