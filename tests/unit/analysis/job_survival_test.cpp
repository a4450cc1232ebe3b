// The job-survival analysis (job_survival.h) on hand-laid runs: each outcome, the stall and the
// resume against hand-computed values, and the per-setting matrix and verdict.
#include <catch2/catch.hpp>

#include <sstream>
#include <string>
#include <vector>

#include "ocslab/analysis/job_survival.h"

namespace job_survival_test {

using namespace ocslab::analysis;
using Catch::Matchers::Contains;

namespace {

constexpr int64_t kMs = 1'000'000;

// Ranks 0 and 1, steps 0..4, op 0 of each step 40 ms long starting every 100 ms; the op of
// step `slow` lasts `slow_ms` instead.
std::vector<JobOp> ops(int slow, int64_t slow_ms) {
  std::vector<JobOp> v;
  for (int rank = 0; rank < 2; ++rank) {
    for (int step = 0; step < 5; ++step) {
      const int64_t start = step * 100 * kMs;
      v.push_back({rank, step, 0, start, start + (step == slow ? slow_ms : 40) * kMs});
    }
  }
  return v;
}

JobRun run(const std::string& name, int timeout, int retry, double outage_ms) {
  JobRun r;
  r.run = name;
  r.setting = "timeout" + std::to_string(timeout) + ".retry_cnt" + std::to_string(retry);
  r.timeout = timeout;
  r.retry_cnt = retry;
  r.outage_ms = outage_ms;
  return r;
}

}  // namespace

TEST_CASE("job survival: a run that rode through the outage, its stall and its resume", "[analysis][survival]") {
  // Step 2's op starts at 200 ms; the light goes at 210 ms and comes back at 240 ms; the op
  // ends at 200 + 95 = 295 ms: 55 ms more than the 40 ms of the same op in the other steps.
  JobRun r = run("a", 14, 2, 30);
  r.dark_ns = 210 * kMs;
  r.light_ns = 240 * kMs;
  r.ops = ops(2, 95);
  auto row = job_survival_row(r, true);
  CHECK(row.outcome == Outcome::kSurvived);
  REQUIRE(row.stall_ms);
  CHECK(*row.stall_ms == Approx(55));
  REQUIRE(row.resume_after_light_ms);
  CHECK(*row.resume_after_light_ms == Approx(55));  // 295 - 240
  REQUIRE(row.dark_ms);
  CHECK(*row.dark_ms == Approx(30));
  CHECK(row.predicted_survive == true);  // 30 ms < 2 x 67.1 ms
  CHECK(row.softroce_survive == true);   // 30 ms < 2 x 64 ms
}

TEST_CASE("job survival: errored, untouched, not injected", "[analysis][survival]") {
  JobRun e = run("b", 14, 2, 600);
  e.dark_ns = 210 * kMs;
  e.light_ns = 810 * kMs;
  e.finished = false;
  e.failed_ns = 420 * kMs;
  e.failure = "rank 2: work completion: transport retry counter exceeded";
  auto row = job_survival_row(e, true);
  CHECK(row.outcome == Outcome::kErrored);
  REQUIRE(row.error_after_ms);
  CHECK(*row.error_after_ms == Approx(210));
  CHECK(row.predicted_survive == false);  // 600 ms > 134.2 ms
  CHECK(row.failure == e.failure);

  // A rank that failed before the light went out did not fail of the outage.
  JobRun early = e;
  early.failed_ns = 100 * kMs;
  CHECK(job_survival_row(early, true).outcome == Outcome::kNotApplied);

  // The light went out and came back between two ops: nothing was in flight.
  JobRun u = run("c", 14, 2, 30);
  u.dark_ns = 50 * kMs;
  u.light_ns = 80 * kMs;
  u.ops = ops(-1, 0);
  CHECK(job_survival_row(u, true).outcome == Outcome::kUntouched);

  JobRun n = run("d", 14, 2, 30);  // the fault was never injected (the ranks ended first)
  n.ops = ops(-1, 0);
  CHECK(job_survival_row(n, true).outcome == Outcome::kNotApplied);

  // Without NCCL_IB_TIMEOUT / NCCL_IB_RETRY_CNT in the point there is nothing to predict.
  JobRun plain = u;
  plain.timeout.reset();
  auto p = job_survival_row(plain, false);
  CHECK_FALSE(p.predicted_survive);
  CHECK_FALSE(p.softroce_survive);
}

TEST_CASE("job survival: the matrix per setting and its verdict", "[analysis][survival]") {
  std::vector<JobRun> runs;
  auto add = [&](int timeout, double ms, bool ok) {
    JobRun r = run("r" + std::to_string(runs.size()), timeout, 2, ms);
    r.dark_ns = 210 * kMs;
    r.light_ns = r.dark_ns + static_cast<int64_t>(ms) * kMs;
    if (ok) {
      r.ops = ops(2, 95 + static_cast<int64_t>(ms));
    } else {
      r.finished = false;
      r.failed_ns = r.dark_ns + 300 * kMs;
    }
    runs.push_back(r);
  };
  add(14, 30, true);
  add(14, 600, false);
  add(17, 30, true);
  add(17, 600, true);
  add(14, 30, true);
  auto s = job_survival(runs, true);
  CHECK(s.grid == std::vector<double>{30, 600});
  REQUIRE(s.settings.size() == 2);
  const auto& t14 = s.settings[0];
  CHECK(t14.timeout == 14);
  CHECK(t14.points[0].survived == 2);
  CHECK(t14.points[1].errored == 1);
  CHECK(t14.longest_survived_ms == 30);
  CHECK(t14.shortest_errored_ms == 600);
  CHECK(t14.verdict == Verdict::kAgrees);  // 134.2 ms lies between 30 and 600
  const auto& t17 = s.settings[1];
  CHECK(t17.longest_survived_ms == 600);
  CHECK_FALSE(t17.shortest_errored_ms);
  CHECK(t17.verdict == Verdict::kAgrees);  // 1073.7 ms: beyond the grid, nothing errored
  const std::string text = job_survival_summary(s);
  CHECK_THAT(text, Contains("job survival 5 run(s) through outages of 30, 600 ms: 4 survived, 1 errored"));
  CHECK_THAT(text, Contains("t14 r2: survives <= 30 ms, errors >= 600 ms; predicted 134.218 ms (Soft-RoCE 128.000 ms "
                            "at HZ=250): agrees"));
  CHECK_THAT(text, Contains("disagreements: none"));
  std::ostringstream csv, matrix;
  write_job_survival_csv(s, csv);
  write_job_survival_matrix_csv(s, matrix);
  CHECK_THAT(csv.str(), Contains("r1,timeout14.retry_cnt2,14,2,600,600.000,errored,300.000,,,0,0,"));
  CHECK_THAT(matrix.str(), Contains("14,2,600,0,1,0,0,134.218,128.000"));

  // A setting that errored where the arithmetic says it survives, more than one grid step off,
  // is named.
  runs.clear();
  add(17, 30, true);
  add(17, 100, false);
  add(17, 200, false);
  add(17, 600, false);
  s = job_survival(runs, false);
  CHECK_THAT(job_survival_summary(s), Contains("disagreements: t17 r2"));
  CHECK_THAT(job_survival_summary(s), !Contains("Soft-RoCE"));  // hardware: the arithmetic only
}

}  // namespace job_survival_test
