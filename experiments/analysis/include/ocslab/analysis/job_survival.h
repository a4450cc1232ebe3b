// Queue-pair settings through outages, under a job (docs/experiments.md "Queue-pair settings
// through outages, under a job"): a phase workload swept over environment variables (NCCL's
// NCCL_IB_TIMEOUT / NCCL_IB_RETRY_CNT, which ocslab-collbench-verbs reads too) and outage lengths,
// one run of the job per point, an outage (port-dark for_ms, circuit-cut) at a step of each run.
// Per run, what the job did: survived (every rank finished, the ops in flight through the outage
// resumed), errored (a rank failed after the outage began), untouched (no op of the job was in
// flight while the light was out), not injected; beside it the timer arithmetic's prediction
// (qp_timers.h). Per setting, the matrix and the verdict as the probes' survival analysis
// (survival.h) gives them.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

#include "ocslab/analysis/survival.h"

namespace ocslab::analysis {

// One op of one rank, on the runner's clock.
struct JobOp {
  int rank = 0;
  int step = 0;
  int index = 0;  // position in the step
  int64_t start_ns = 0, end_ns = 0;
};

// One run of the job (a sweep point x repetition), as the runner saw it.
struct JobRun {
  std::string run;      // the run's folder name
  std::string setting;  // the sweep.env point's label ("timeout14.retry_cnt2"; "" without)
  std::optional<int> timeout, retry_cnt;  // NCCL_IB_TIMEOUT / NCCL_IB_RETRY_CNT of the point, when set
  double outage_ms = 0;                   // planned
  int64_t dark_ns = 0, light_ns = 0;      // the outage's start and end (0: not injected / not ended)
  bool finished = true;                   // every rank ended with status 0
  int64_t failed_ns = 0;                  // the first failing rank's end (0: none, or not known)
  std::string failure;                    // its last words
  std::vector<JobOp> ops;
};

struct JobSurvivalRow {
  std::string run, setting;
  std::optional<int> timeout, retry_cnt;
  double outage_ms = 0;
  std::optional<double> dark_ms;  // light_ns - dark_ns
  Outcome outcome = Outcome::kUntouched;
  std::optional<double> error_after_ms;         // errored: the first failure - the outage's start
  std::optional<double> stall_ms;               // survived: the longest op through the outage minus
                                                // the median of the same op in the run's other steps
  std::optional<double> resume_after_light_ms;  // survived: the last op through the outage's end - light
  std::optional<bool> predicted_survive;        // survives_outage (timeout and retry_cnt known)
  std::optional<bool> softroce_survive;         // planned <= softroce_survivable_outage_ns
  std::string failure;
};

struct JobSurvival {
  bool softroce = false;  // the ranks ran on Soft-RoCE (a virtual lab): its bound is shown too
  int hz = kDefaultSoftRoceHz;
  std::vector<double> grid;  // planned lengths, ascending, unique
  std::vector<JobSurvivalRow> rows;
  // Per setting with both timeout and retry_cnt known: counts per grid length (one per run), the
  // boundary and the verdicts. `timeout` / `retry_cnt` as the probes' matrix.
  std::vector<SurvivalSetting> settings;
};

// One run's row (pure: the runner's clock throughout).
JobSurvivalRow job_survival_row(const JobRun& run, bool softroce, int hz = kDefaultSoftRoceHz);
// Rows and the per-setting matrix of a run's points.
JobSurvival job_survival(const std::vector<JobRun>& runs, bool softroce, int hz = kDefaultSoftRoceHz);

void write_job_survival_csv(const JobSurvival& s, std::ostream& out);  // job_survival.csv
// The same columns as survival_matrix.csv, so `ocslab plot` draws its heatmap alike.
void write_job_survival_matrix_csv(const JobSurvival& s, std::ostream& out);  // job_survival_matrix.csv
// One line per setting with a verdict, one per run otherwise, then the counts.
std::string job_survival_summary(const JobSurvival& s);

}  // namespace ocslab::analysis
