#include "ocslab/analysis/job_survival.h"

#include <fmt/format.h>

#include <algorithm>
#include <climits>
#include <map>
#include <ostream>
#include <tuple>
#include <utility>

#include "ocslab/analysis/qp_timers.h"
#include "ocslab/common/csv_writer.h"

namespace ocslab::analysis {

namespace {

double ms_between(int64_t from_ns, int64_t to_ns) { return static_cast<double>(to_ns - from_ns) / 1e6; }

std::string opt_text(const std::optional<double>& v) { return v ? fmt::format("{:.3f}", *v) : std::string(); }
std::string opt_int(const std::optional<int>& v) { return v ? std::to_string(*v) : std::string(); }
std::string opt_bool(const std::optional<bool>& v) { return v ? (*v ? "1" : "0") : std::string(); }

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// The ops in flight while the light was out: started before it came back, ended after it went.
bool through(const JobOp& op, int64_t dark_ns, int64_t light_ns) { return op.start_ns < light_ns && op.end_ns > dark_ns; }

}  // namespace

JobSurvivalRow job_survival_row(const JobRun& run, bool softroce, int hz) {
  JobSurvivalRow row;
  row.run = run.run;
  row.setting = run.setting;
  row.timeout = run.timeout;
  row.retry_cnt = run.retry_cnt;
  row.outage_ms = run.outage_ms;
  row.failure = run.failure;
  if (run.timeout && run.retry_cnt) {
    const auto planned_ns = static_cast<int64_t>(run.outage_ms * 1e6);
    row.predicted_survive = survives_outage(*run.timeout, *run.retry_cnt, planned_ns);
    if (softroce) {
      const auto bound = softroce_survivable_outage_ns(*run.timeout, *run.retry_cnt, hz);
      row.softroce_survive = !bound || planned_ns <= *bound;
    }
  }
  if (!run.dark_ns) {
    row.outcome = Outcome::kNotApplied;
    return row;
  }
  // An outage still in force when the job ended counts to the job's end.
  const int64_t light_ns = run.light_ns ? run.light_ns : INT64_MAX;
  if (run.light_ns) row.dark_ms = ms_between(run.dark_ns, run.light_ns);
  if (!run.finished) {
    // A rank failed. Before the outage began, it is not the outage's doing: not applied.
    if (run.failed_ns && run.failed_ns < run.dark_ns) {
      row.outcome = Outcome::kNotApplied;
      return row;
    }
    row.outcome = Outcome::kErrored;
    if (run.failed_ns) row.error_after_ms = ms_between(run.dark_ns, run.failed_ns);
    return row;
  }
  // Every rank finished: the outage touched the job when an op was in flight through it.
  std::map<std::pair<int, int>, std::vector<double>> others;  // (rank, index) -> durations outside it
  std::vector<const JobOp*> in;
  for (const auto& op : run.ops) {
    if (through(op, run.dark_ns, light_ns)) {
      in.push_back(&op);
    } else {
      others[{op.rank, op.index}].push_back(ms_between(op.start_ns, op.end_ns));
    }
  }
  if (in.empty()) {
    row.outcome = Outcome::kUntouched;
    return row;
  }
  row.outcome = Outcome::kSurvived;
  double stall = 0;
  int64_t last_end = 0;
  for (const JobOp* op : in) {
    const double d = ms_between(op->start_ns, op->end_ns);
    auto it = others.find({op->rank, op->index});
    stall = std::max(stall, it == others.end() || it->second.empty() ? d : d - median(it->second));
    last_end = std::max(last_end, op->end_ns);
  }
  row.stall_ms = stall;
  if (run.light_ns) row.resume_after_light_ms = ms_between(run.light_ns, last_end);
  return row;
}

JobSurvival job_survival(const std::vector<JobRun>& runs, bool softroce, int hz) {
  JobSurvival s;
  s.softroce = softroce;
  s.hz = hz;
  for (const auto& r : runs) {
    s.rows.push_back(job_survival_row(r, softroce, hz));
    if (std::find(s.grid.begin(), s.grid.end(), r.outage_ms) == s.grid.end()) s.grid.push_back(r.outage_ms);
  }
  std::sort(s.grid.begin(), s.grid.end());
  std::map<std::pair<int, int>, SurvivalSetting> settings;
  for (const auto& row : s.rows) {
    if (!row.timeout || !row.retry_cnt || row.outcome == Outcome::kNotApplied) continue;
    auto [it, first] = settings.try_emplace({*row.timeout, *row.retry_cnt});
    SurvivalSetting& set = it->second;
    if (first) {
      set.timeout = *row.timeout;
      set.retry_cnt = *row.retry_cnt;
      for (double ms : s.grid) set.points.push_back({ms, 0, 0, 0, 0});
    }
    const auto p = std::lower_bound(s.grid.begin(), s.grid.end(), row.outage_ms) - s.grid.begin();
    count_outcome(set.points[static_cast<size_t>(p)], row.outcome);
  }
  for (auto& [key, set] : settings) {
    judge_setting(set, s.grid, hz);
    s.settings.push_back(std::move(set));
  }
  return s;
}

void write_job_survival_csv(const JobSurvival& s, std::ostream& out) {
  CsvWriter w(out, "job_survival.csv");
  w.header({"run", "setting", "timeout", "retry_cnt", "outage_ms", "dark_ms", "outcome", "error_after_ms", "stall_ms",
            "resume_after_light_ms", "predicted_survive", "softroce_survive", "failure"});
  for (const auto& r : s.rows) {
    w.row({r.run, r.setting, opt_int(r.timeout), opt_int(r.retry_cnt), fmt::format("{}", r.outage_ms),
           opt_text(r.dark_ms), outcome_name(r.outcome), opt_text(r.error_after_ms), opt_text(r.stall_ms),
           opt_text(r.resume_after_light_ms), opt_bool(r.predicted_survive), opt_bool(r.softroce_survive),
           r.failure});
  }
  w.flush();
}

void write_job_survival_matrix_csv(const JobSurvival& s, std::ostream& out) {
  CsvWriter w(out, "job_survival_matrix.csv");
  w.header({"timeout", "retry_cnt", "outage_ms", "survived", "errored", "stalled", "untouched", "predicted_boundary_ms",
            "softroce_boundary_ms"});
  for (const auto& set : s.settings) {
    for (const auto& p : set.points) {
      w.row({std::to_string(set.timeout), std::to_string(set.retry_cnt), fmt::format("{}", p.outage_ms),
             std::to_string(p.survived), std::to_string(p.errored), std::to_string(p.stalled),
             std::to_string(p.untouched), opt_text(set.predicted_ms),
             s.softroce ? opt_text(set.softroce_ms) : std::string()});
    }
  }
  w.flush();
}

std::string job_survival_summary(const JobSurvival& s) {
  std::map<Outcome, size_t> counts;
  for (const auto& r : s.rows) ++counts[r.outcome];
  std::string grid;
  for (double ms : s.grid) grid += (grid.empty() ? "" : ", ") + fmt::format("{}", ms);
  std::string out = fmt::format(
      "job survival {} run(s) through outages of {} ms: {} survived, {} errored, {} untouched, {} not injected\n",
      s.rows.size(), grid.empty() ? "no" : grid, counts[Outcome::kSurvived], counts[Outcome::kErrored],
      counts[Outcome::kUntouched], counts[Outcome::kNotApplied]);
  std::string disagree;
  for (const auto& set : s.settings) {
    out += survival_setting_line(set, s.hz, s.softroce) + "\n";
    const bool off = set.verdict == Verdict::kDisagrees && (!s.softroce || set.softroce_verdict == Verdict::kDisagrees);
    if (off) disagree += (disagree.empty() ? "" : ", ") + set.label();
  }
  // Runs whose setting the arithmetic cannot judge (no timeout / retry count in sweep.env).
  for (const auto& r : s.rows) {
    if (r.timeout && r.retry_cnt) continue;
    out += fmt::format("{}: {} ms outage: {}", r.run, r.outage_ms, outcome_name(r.outcome));
    if (r.error_after_ms) out += fmt::format(", failed {:.0f} ms after it began", *r.error_after_ms);
    if (r.stall_ms) out += fmt::format(", stalled {:.0f} ms", *r.stall_ms);
    out += "\n";
  }
  if (!s.settings.empty()) out += fmt::format("disagreements: {}\n", disagree.empty() ? "none" : disagree);
  return out;
}

}  // namespace ocslab::analysis
