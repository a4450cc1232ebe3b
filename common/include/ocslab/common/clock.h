// Timestamps taken on both clocks at once: CLOCK_REALTIME to merge timelines across hosts,
// CLOCK_MONOTONIC to compute durations that must not jump with NTP corrections.
#pragma once

#include <cstdint>

namespace ocslab {

struct Timestamp {
  int64_t realtime_ns = 0;
  int64_t monotonic_ns = 0;
};

int64_t realtime_ns();
int64_t monotonic_ns();
Timestamp now();

// Milliseconds between two timestamps, measured on the monotonic clock.
double elapsed_ms(const Timestamp& from, const Timestamp& to);

}  // namespace ocslab
