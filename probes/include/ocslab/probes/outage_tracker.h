// The RDMA probe's outage logic without verbs, sockets or threads: when traffic counts as
// stalled, when a good completion is a resume, and when the counters should be read because an
// outage was just noticed. Kept apart so unit tests can drive it with timestamps of their own.
#pragma once

#include <cstdint>
#include <optional>

#include "ocslab/common/clock.h"

namespace ocslab::probes {

// A resume: the last good completion before the gap (or the start the gap is measured from) and
// the good completion that ended it.
struct Resume {
  Timestamp stalled_at;
  Timestamp resumed_at;
  double gap_ms = 0;
};

class OutageTracker {
 public:
  // An outage is a gap between good completions longer than outage_ns. Before the first good
  // completion the gap is measured from `started` when pairing failed at first (peer dark or
  // unreachable), else from the first attempt (the first SEND, or the server's first pairing):
  // a queue pair whose link is dark when the probe starts reports its first traffic as a
  // resume, like any other.
  OutageTracker(Timestamp started, double outage_ns) : started_(started), outage_ns_(outage_ns) {}

  // Pairing or posting failed (the probe retries).
  void setup_failed() { had_setup_error_ = true; }
  // The first SEND was posted, or the server paired for the first time; later calls are ignored.
  void attempted(Timestamp t) {
    if (!first_attempt_) first_attempt_ = t;
  }

  // True once per outage, at the first check after the gap passed outage_ns: the moment to read
  // the counters, before retransmissions pile up, so that what moved during the outage is told
  // apart from what moved before.
  bool outage_noticed(int64_t monotonic_ns);

  // A good completion at t: the resume when it ends an outage.
  std::optional<Resume> good_completion(Timestamp t);

  // The probe stops at t: the start of an outage still going on (its end is not known).
  std::optional<Timestamp> open_outage(Timestamp t) const;

  const std::optional<Timestamp>& last_good() const { return last_good_; }

 private:
  // What the current gap is measured from; nullopt before anything was attempted.
  std::optional<Timestamp> reference() const;
  bool longer_than_outage(const Timestamp& from, int64_t to_monotonic_ns) const {
    return static_cast<double>(to_monotonic_ns - from.monotonic_ns) > outage_ns_;
  }

  Timestamp started_;
  double outage_ns_;
  std::optional<Timestamp> first_attempt_;
  std::optional<Timestamp> last_good_;
  bool had_setup_error_ = false;
  bool noticed_ = false;  // outage_noticed() said so for the current gap
};

}  // namespace ocslab::probes
