// Timestamps taken on both clocks at once: CLOCK_REALTIME to merge timelines across hosts,
// CLOCK_MONOTONIC to compute durations that must not jump with NTP corrections.
#pragma once

#include <time.h>

#include <chrono>
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

// now() from one clock read instead of two, for stamps taken on every request (the OCS
// drivers' timing records): CLOCK_MONOTONIC is read, and CLOCK_REALTIME is that plus the
// offset between the two clocks, measured again whenever it is older than `refresh`. NTP's
// slewing changes both clocks alike, so the offset only moves when the wall clock is stepped
// (settimeofday, a leap second); a stamp then shows the old wall time for at most `refresh`.
// Not thread-safe: one per thread or per object whose calls are serialised.
class PairedClock {
 public:
  explicit PairedClock(std::chrono::nanoseconds refresh = std::chrono::milliseconds(20)) : refresh_ns_(refresh.count()) {}

  Timestamp now() {
    timespec ts{};
    clock_gettime(CLOCK_MONOTONIC, &ts);
    const int64_t mono = int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
    if (mono - calibrated_at_ns_ >= refresh_ns_ || !calibrated_) calibrate(mono);
    return Timestamp{mono + offset_ns_, mono};
  }
  // Measures the offset again at the next now() (after a reconnect, for instance).
  void invalidate() { calibrated_ = false; }
  int64_t offset_ns() const { return offset_ns_; }
  uint64_t calibrations() const { return calibrations_; }  // offset measurements so far

 private:
  void calibrate(int64_t mono_before);

  int64_t refresh_ns_;
  int64_t offset_ns_ = 0;         // realtime - monotonic
  int64_t calibrated_at_ns_ = 0;  // monotonic
  bool calibrated_ = false;
  uint64_t calibrations_ = 0;
};

}  // namespace ocslab
