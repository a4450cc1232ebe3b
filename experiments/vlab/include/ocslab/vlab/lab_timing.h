// Changing the timing of a running virtual lab without rebooting it: the switch's switching
// time, every NIC's link model, the rate of every lit circuit, which NICs' links are held down (fault injection: the
// emulated firmware never raises a held link) and which switch ports are dark (fault
// injection: a failed port, its shutter closed). The caller writes <lab>/timing.yaml (the lab
// file's `switch: {preset, switching_ms}` and `nic_model` syntax, and `hold_down: [emulator NIC
// names]`, `dark_ports: [switch ports]`) and sends the supervisor SIGHUP; the supervisor applies it to its emulator and
// records the outcome in state.json (timing_generation, timing_error, timing). `ocslab vlab
// timing` is the command line of it; the runner's fault injection uses set_lab_timing.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

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
  // A whole NIC link model in the lab file's `nic_model` syntax (a preset name, or YAML flow
  // {preset, los_ms, firmware_up_ms, rapid_window_ms, rapid_extra_ms, max_up_ms}), instead of
  // nic_model / los_ms / firmware_up_ms: the runner's firmware sweep (experiment_spec.h).
  std::optional<std::string> nic_link;
  // The full set of NICs held down from now on, as the lab names them (HOST:NIC); the others
  // are released, an empty set releases all. Absent: the holds stay as they are.
  std::optional<std::vector<std::string>> hold_down;
  // The full set of switch ports dark from now on (shutters closed); those darkened before and
  // not listed are lit again, an empty set lights all. Absent: as they are.
  std::optional<std::vector<int>> dark_ports;
  std::optional<std::string> unreachable_ms;  // --unreachable-ms: the switch unreachable this long from now
  // A dark spell (--dark-for MS with --dark-port): these ports dark for exactly dark_spell_ms from
  // now, lit again by the emulator itself (an outage of an exact length). Both or neither.
  std::vector<int> dark_spell_ports;
  std::optional<std::string> dark_spell_ms;
  // --link-gbps: every lit circuit's rate from now on, Gbit/s (0: no cap), as the lab file's link_gbps.
  std::optional<std::string> link_gbps;
  bool empty() const;
};

// The timing.yaml text for t. Checks every value on its own first and throws ConfigError
// naming the option and its value ("--switching-ms '-5': a delay cannot be negative").
// hold_down is written as given (the emulator's names, HOST-NIC); use the overload with the
// lab to have its HOST:NIC names checked and translated.
std::string timing_yaml(const LabTiming& t);
// The same for `lab`: each hold_down NIC must be one of its data NICs (HOST:NIC), else
// ConfigError "hold_down: lab NAME has no NIC 'h9:eth1' (NICs: ...)".
std::string timing_yaml(const LabTiming& t, const LabState& lab);

// The emulator's name of the lab's data NIC "HOST:NIC" (HOST-NIC). Throws ConfigError naming
// it and the lab's NICs when the lab has no such NIC.
std::string emulator_nic_name(const LabState& lab, const std::string& host_nic);

// The timing of the running lab in lab_dir (state.json). Throws Error naming the lab when it
// is not running.
TimingState lab_timing(const std::string& lab_dir);

// Writes <lab_dir>/timing.yaml (0600, temp file + rename; timing_yaml(t, lab)), sends SIGHUP to the supervisor and
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
