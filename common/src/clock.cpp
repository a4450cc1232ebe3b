#include "ocslab/common/clock.h"

#include <time.h>

namespace ocslab {

namespace {
int64_t read_clock(clockid_t id) {
  timespec ts{};
  clock_gettime(id, &ts);
  return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}
}  // namespace

int64_t realtime_ns() { return read_clock(CLOCK_REALTIME); }
int64_t monotonic_ns() { return read_clock(CLOCK_MONOTONIC); }

Timestamp now() {
  // Monotonic read on both sides of the realtime read keeps the pair within one call's cost.
  Timestamp t;
  t.monotonic_ns = monotonic_ns();
  t.realtime_ns = realtime_ns();
  return t;
}

void PairedClock::calibrate(int64_t mono_before) {
  // The realtime read lies between the two monotonic ones: the offset is accurate to half
  // their distance (tens of ns), far below what a request takes.
  const int64_t real = realtime_ns();
  const int64_t mono_after = monotonic_ns();
  offset_ns_ = real - (mono_before + (mono_after - mono_before) / 2);
  calibrated_at_ns_ = mono_after;
  calibrated_ = true;
  ++calibrations_;
}

double elapsed_ms(const Timestamp& from, const Timestamp& to) {
  return static_cast<double>(to.monotonic_ns - from.monotonic_ns) / 1e6;
}

}  // namespace ocslab
