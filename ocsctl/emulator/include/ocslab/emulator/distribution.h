// Delay distributions for the emulator's models (mirror switching time, NIC firmware
// link-up): fixed, uniform and normal-with-floor, sampled from a seeded generator so a run
// can be reproduced.
#pragma once

#include <chrono>
#include <random>
#include <string>

#include "ocslab/common/config.h"

namespace ocslab::emu {

struct Distribution {
  enum class Kind { kFixed, kUniform, kNormal };
  Kind kind = Kind::kFixed;
  double a_ms = 0;      // fixed: value; uniform: low; normal: mean
  double b_ms = 0;      // uniform: high; normal: standard deviation
  double floor_ms = 0;  // normal: samples below this are clamped to it

  static Distribution fixed(double ms) { return {Kind::kFixed, ms, 0, 0}; }
  static Distribution uniform(double lo, double hi) { return {Kind::kUniform, lo, hi, 0}; }
  static Distribution normal(double mean, double sd, double floor) { return {Kind::kNormal, mean, sd, floor}; }

  double sample_ms(std::mt19937_64& rng) const;
  std::chrono::nanoseconds sample(std::mt19937_64& rng) const;
  double mean_ms() const;
  std::string to_string() const;  // "fixed 25 ms", "uniform 10..20 ms", "normal 3000 sd 400 floor 2000 ms"
  // The YAML flow form from_yaml reads back to the same distribution: "25",
  // "{uniform: [10, 20]}", "{normal: {mean: 3000, sd: 400, floor: 2000}}".
  std::string to_yaml() const;

  // YAML forms: a number (fixed ms), or {fixed: MS} | {uniform: [LO, HI]} |
  // {normal: {mean: MS, sd: MS, floor: MS}}. Errors name file:line:col.
  static Distribution from_yaml(const YamlDoc& doc, const YAML::Node& node);
};

// The longest delay a lab file may give (about 11.6 days): far beyond any switch or NIC, and
// far inside the nanosecond timers' int64 range, so no draw or sum of draws overflows one.
inline constexpr double kMaxDelayMs = 1e9;

// One delay in milliseconds from YAML: a finite number in 0..kMaxDelayMs (NaN, .inf and
// negative values are refused). Errors name file:line:col.
double delay_ms_from_yaml(const YamlDoc& doc, const YAML::Node& node);

}  // namespace ocslab::emu
