// What the emulator fuzz targets demand of every delay a parser accepts: a finite, non-negative
// number of ms its nanosecond timers can hold, and samples that are never negative.
#pragma once

#include <cmath>
#include <random>

#include "ocslab/emulator/distribution.h"
#include "ocslab/emulator/nic_link_model.h"

namespace emu_fuzz {

// int64 nanoseconds hold about 9.2e12 ms; a delay must stay well inside that.
inline bool schedulable_ms(double ms) { return std::isfinite(ms) && ms >= 0 && ms < 9e12; }

inline void check_delay(const ocslab::emu::Distribution& d, std::mt19937_64& rng) {
  if (!schedulable_ms(d.a_ms) || !schedulable_ms(d.b_ms) || !schedulable_ms(d.floor_ms)) __builtin_trap();
  for (int i = 0; i < 4; ++i) {
    if (d.sample(rng).count() < 0) __builtin_trap();
  }
}

inline void check_link(const ocslab::emu::NicLinkParams& p, std::mt19937_64& rng) {
  if (!schedulable_ms(p.los_ms) || !schedulable_ms(p.rapid_window_ms) || !schedulable_ms(p.max_up_ms)) __builtin_trap();
  check_delay(p.firmware_up, rng);
  check_delay(p.rapid_extra, rng);
}

}  // namespace emu_fuzz
