#include "ocslab/probes/outage_tracker.h"

namespace ocslab::probes {

std::optional<Timestamp> OutageTracker::reference() const {
  if (last_good_) return last_good_;
  if (had_setup_error_) return started_;
  return first_attempt_;
}

bool OutageTracker::outage_noticed(int64_t monotonic_ns) {
  if (noticed_) return false;
  auto ref = reference();
  if (!ref || !longer_than_outage(*ref, monotonic_ns)) return false;
  noticed_ = true;
  return true;
}

std::optional<Resume> OutageTracker::good_completion(Timestamp t) {
  std::optional<Resume> resume;
  auto ref = reference();
  if (ref && longer_than_outage(*ref, t.monotonic_ns)) {
    resume = Resume{*ref, t, static_cast<double>(t.monotonic_ns - ref->monotonic_ns) / 1e6};
  }
  last_good_ = t;
  noticed_ = false;
  return resume;
}

std::optional<Timestamp> OutageTracker::open_outage(Timestamp t) const {
  if (last_good_ && longer_than_outage(*last_good_, t.monotonic_ns)) return last_good_;
  return std::nullopt;
}

}  // namespace ocslab::probes
