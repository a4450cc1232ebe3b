// Where a phase workload's job stopped, over synthetic controller events and rank ends whose
// every time is known.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "ocslab/runner/job_localisation.h"

using namespace ocslab;
using namespace ocslab::runner;
using Kind = phase::ControllerEvent::Kind;

namespace {

constexpr int64_t kT0 = 1'764'000'000'000'000'000;
constexpr int64_t kMs = 1'000'000;

phase::ControllerEvent ev(Kind k, int rank, int64_t t_ms, const std::string& group = "", int64_t seq = -1) {
  phase::ControllerEvent e;
  e.kind = k;
  e.rank = rank;
  e.real_ns = kT0 + t_ms * kMs;
  e.group = group;
  e.seq = seq;
  return e;
}

// Two ops of group "dp" per step: seq 1, 2 are step 0, 3, 4 step 1, ...
int step_of(const std::string& g, int64_t seq) { return g == "dp" && seq >= 1 ? static_cast<int>((seq - 1) / 2) : -1; }

}  // namespace

TEST_CASE("job localisation: the rank that stopped first, its step and how; the others after it", "[runner][faults]") {
  std::vector<phase::ControllerEvent> events;
  for (int r = 0; r < 4; ++r) {
    for (int seq = 1; seq <= 7; ++seq) events.push_back(ev(Kind::kRequest, r, seq * 100, "dp", seq));  // step 3 reached
  }
  // Rank 2's connection closes first (killed), the others' 40..60 ms later.
  events.push_back(ev(Kind::kDisconnect, 2, 1000));
  events.push_back(ev(Kind::kDisconnect, 0, 1040));
  events.push_back(ev(Kind::kDisconnect, 3, 1060));
  std::vector<RankEnd> ends = {{0, "h1", 2, "rank 2 of the group is disconnected", kT0 + 1100 * kMs},
                               {1, "h2", 2, "rank 2 of the group is disconnected", kT0 + 1090 * kMs},
                               {2, "h3", -1, "", kT0 + 1200 * kMs},  // its session reports later than it died
                               {3, "h4", 2, "", kT0 + 1150 * kMs}};
  auto l = localise_job(events, ends, step_of, kT0);
  REQUIRE(l);
  CHECK(l->rank == 2);
  CHECK(l->host == "h3");
  CHECK(l->step == 3);
  CHECK(l->stopped_ns == kT0 + 1000 * kMs);  // its disconnect, not its session's end
  CHECK(l->how == "was killed by a signal");
  CHECK(l->failed == 4);
  CHECK(l->verdict ==
        "step 3 did not complete: rank 2 on h3 stopped first (was killed by a signal) at +1.000 s; 3 other rank(s) "
        "stopped after it, the first 40.0 ms later");
  REQUIRE(l->evidence.size() == 4);
  CHECK(
      l->evidence[0] ==
      "rank 2 on h3 was killed by a signal at +0.0 ms (its controller connection closed then), last request in step 3");
  CHECK(l->evidence[1] ==
        "rank 0 on h1 exited with status 2 at +40.0 ms (its controller connection closed then), last request in step "
        "3: rank 2 of the group is disconnected");
  CHECK(l->evidence[2] ==
        "rank 3 on h4 exited with status 2 at +60.0 ms (its controller connection closed then), "
        "last request in step 3");
  // Rank 1 said bye: only its session's end places it.
  CHECK(l->evidence[3] ==
        "rank 1 on h2 exited with status 2 at +90.0 ms, last request in step 3: rank 2 of the group "
        "is disconnected");
}

TEST_CASE("job localisation: nothing when every rank finished; a launcher's job from the disconnects alone",
          "[runner][faults]") {
  std::vector<phase::ControllerEvent> events = {ev(Kind::kRequest, 0, 10, "dp", 1), ev(Kind::kRequest, 1, 10, "dp", 1)};
  std::vector<RankEnd> ok = {{0, "h1", 0, "", kT0}, {1, "h2", 0, "", kT0}};
  CHECK_FALSE(localise_job(events, ok, step_of, kT0));
  CHECK_FALSE(localise_job(events, {}, step_of, kT0));

  // mpirun / srun: no rank ends; rank 1's connection closed in step 0, rank 0's later.
  events.push_back(ev(Kind::kDisconnect, 1, 500));
  events.push_back(ev(Kind::kDisconnect, 0, 520));
  auto l = localise_job(events, {}, step_of, kT0);
  REQUIRE(l);
  CHECK(l->rank == 1);
  CHECK(l->host.empty());
  CHECK(l->step == 0);
  CHECK(l->how == "disconnected");
  CHECK(l->verdict ==
        "step 0 did not complete: rank 1 stopped first (disconnected) at +0.500 s; 1 other rank(s) stopped after it, "
        "the first 20.0 ms later");

  // Native mode: no controller; a rank that failed before any request: "the job".
  std::vector<RankEnd> ends = {{0, "h1", 0, "", kT0 + 900 * kMs}, {1, "h2", 1, "bad flag", kT0 + 300 * kMs}};
  auto n = localise_job({}, ends, step_of, kT0);
  REQUIRE(n);
  CHECK(n->rank == 1);
  CHECK(n->step == -1);
  CHECK(n->failed == 1);
  CHECK(n->verdict == "the job did not complete: rank 1 on h2 stopped first (exited with status 1) at +0.300 s");
  CHECK(n->evidence == std::vector<std::string>{"rank 1 on h2 exited with status 1 at +0.0 ms: bad flag"});
}

TEST_CASE("job localisation: a rank that finished a step's ops and stopped before its next request was in the next step",
          "[runner][faults]") {
  // Steps of two dp ops. Rank 2 asked for step 3's ops (seq 7, 8) and finished them (its rows),
  // then was killed in step 4's compute, before step 4's first request; rank 0 got to step 4.
  std::vector<phase::ControllerEvent> events;
  for (int seq = 1; seq <= 8; ++seq) events.push_back(ev(Kind::kRequest, 2, seq * 100, "dp", seq));
  for (int seq = 1; seq <= 9; ++seq) events.push_back(ev(Kind::kRequest, 0, seq * 100, "dp", seq));
  events.push_back(ev(Kind::kDisconnect, 2, 1000));
  std::vector<RankEnd> ends = {{0, "h1", 2, "rank 2 of the group is disconnected", kT0 + 1100 * kMs},
                               {2, "h3", -1, "", kT0 + 1200 * kMs}};
  std::vector<std::pair<int, int>> rows;
  for (int step = 0; step <= 3; ++step) {
    rows.emplace_back(2, step);
    rows.emplace_back(2, step);
    rows.emplace_back(0, step);
    rows.emplace_back(0, step);
  }
  rows.emplace_back(0, 4);  // rank 0: one of step 4's two ops
  const auto row_steps = rows_step_of(rows, {2, 2, 2});
  CHECK(row_steps == std::map<int, int>{{0, 4}, {2, 4}});

  auto without = localise_job(events, ends, step_of, kT0);  // the requests alone
  REQUIRE(without);
  CHECK(without->step == 3);
  auto l = localise_job(events, ends, step_of, kT0, row_steps);
  REQUIRE(l);
  CHECK(l->rank == 2);
  CHECK(l->step == 4);
  CHECK(l->verdict.rfind("step 4 did not complete: rank 2 on h3 stopped first (was killed by a signal)", 0) == 0);
  REQUIRE(l->evidence.size() == 2);
  CHECK(l->evidence[0] ==
        "rank 2 on h3 was killed by a signal at +0.0 ms (its controller connection closed then), every op through "
        "step 3 finished");
  CHECK(l->evidence[1] ==
        "rank 0 on h1 exited with status 2 at +100.0 ms, last request in step 4: rank 2 of the group is disconnected");

  // Rows behind the requests change nothing (a rank asks for an op before it finishes it).
  CHECK(localise_job(events, ends, step_of, kT0, {{2, 3}})->step == 3);
  // Native mode: no requests, the rows alone place the rank; a rank in no op or out of range is absent.
  auto n = localise_job({}, {{1, "h2", -1, "", kT0 + 300 * kMs}}, step_of, kT0, {{1, 2}});
  REQUIRE(n);
  CHECK(n->step == 2);
  CHECK(n->evidence == std::vector<std::string>{"rank 1 on h2 was killed by a signal at +0.0 ms, in step 2 by its op rows"});
  CHECK(rows_step_of({{0, 0}, {1, 0}, {5, 0}, {-1, 0}}, {1, 0}) == std::map<int, int>{{0, 1}});
  // A gap: step 1's rows missing, step 2's there: the rank is placed at the first unfinished step.
  CHECK(rows_step_of({{0, 0}, {0, 2}}, {1}) == std::map<int, int>{{0, 1}});
}
