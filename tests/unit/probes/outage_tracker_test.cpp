// The RDMA probe's outage logic (outage_tracker.h) driven with timestamps of the test's own: a
// 1 ms probe interval and outage factor 5, so a gap of more than 5 ms is an outage.
#include <catch2/catch.hpp>

#include "ocslab/probes/outage_tracker.h"

// This file's helpers in a namespace of its own: the unity build compiles it together with
// the other tests of its binary.
namespace outage_tracker_test {

using ocslab::Timestamp;
using ocslab::probes::OutageTracker;

namespace {
constexpr int64_t kMs = 1'000'000;
// Realtime and monotonic apart by a fixed offset, so a mix-up of the two shows.
Timestamp at(int64_t ms) { return {1'700'000'000'000 * kMs + ms * kMs, ms * kMs}; }
}  // namespace

TEST_CASE("outage tracker: gaps up to the threshold are traffic, a longer one is a resume", "[probes][outage]") {
  OutageTracker t(at(0), 5.0 * kMs);
  t.attempted(at(1));
  CHECK_FALSE(t.good_completion(at(2)));
  CHECK_FALSE(t.good_completion(at(7)));  // 5 ms: not more than the threshold
  auto r = t.good_completion(at(20));     // 13 ms
  REQUIRE(r);
  CHECK(r->stalled_at.monotonic_ns == at(7).monotonic_ns);
  CHECK(r->stalled_at.realtime_ns == at(7).realtime_ns);
  CHECK(r->resumed_at.monotonic_ns == at(20).monotonic_ns);
  CHECK(r->gap_ms == Approx(13.0));
  REQUIRE(t.last_good());
  CHECK(t.last_good()->monotonic_ns == at(20).monotonic_ns);
  CHECK_FALSE(t.good_completion(at(21)));
}

TEST_CASE("outage tracker: before the first good completion the gap runs from the first attempt", "[probes][outage]") {
  OutageTracker t(at(0), 5.0 * kMs);
  CHECK_FALSE(t.outage_noticed(at(100).monotonic_ns));  // nothing attempted: nothing to measure from
  t.attempted(at(100));
  t.attempted(at(150));  // only the first attempt counts
  CHECK_FALSE(t.outage_noticed(at(104).monotonic_ns));
  auto r = t.good_completion(at(130));  // a dark link at start: its first traffic is a resume
  REQUIRE(r);
  CHECK(r->stalled_at.monotonic_ns == at(100).monotonic_ns);
  CHECK(r->gap_ms == Approx(30.0));
}

TEST_CASE("outage tracker: a failed pairing measures from the probe's start", "[probes][outage]") {
  OutageTracker t(at(0), 5.0 * kMs);
  t.setup_failed();
  t.attempted(at(50));
  auto r = t.good_completion(at(60));
  REQUIRE(r);
  CHECK(r->stalled_at.monotonic_ns == at(0).monotonic_ns);
  CHECK(r->gap_ms == Approx(60.0));
}

TEST_CASE("outage tracker: an outage is noticed once, and again only after traffic resumed", "[probes][outage]") {
  OutageTracker t(at(0), 5.0 * kMs);
  t.attempted(at(0));
  CHECK_FALSE(t.good_completion(at(1)));
  CHECK_FALSE(t.outage_noticed(at(6).monotonic_ns));  // 5 ms: not yet
  CHECK(t.outage_noticed(at(7).monotonic_ns));        // the moment to read the counters
  CHECK_FALSE(t.outage_noticed(at(8).monotonic_ns));  // once per outage
  CHECK_FALSE(t.outage_noticed(at(500).monotonic_ns));
  REQUIRE(t.good_completion(at(600)));
  CHECK_FALSE(t.outage_noticed(at(602).monotonic_ns));
  CHECK(t.outage_noticed(at(700).monotonic_ns));  // the next outage
}

TEST_CASE("outage tracker: an outage still open when the probe stops", "[probes][outage]") {
  OutageTracker t(at(0), 5.0 * kMs);
  CHECK_FALSE(t.open_outage(at(100)));  // no good completion: no known start
  t.attempted(at(0));
  t.good_completion(at(10));
  CHECK_FALSE(t.open_outage(at(15)));
  auto since = t.open_outage(at(40));
  REQUIRE(since);
  CHECK(since->monotonic_ns == at(10).monotonic_ns);
}

}  // namespace outage_tracker_test
