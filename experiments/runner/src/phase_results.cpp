// The results writer of a phase-workload run (phase_results.h).
#include "ocslab/runner/phase_results.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <sstream>

#include "ocslab/analysis/job_survival.h"
#include "ocslab/analysis/summary.h"
#include "ocslab/analysis/timeline.h"
#include "ocslab/common/csv_reader.h"
#include "ocslab/common/csv_writer.h"
#include "ocslab/common/file.h"
#include "ocslab/phase/phase_profiler.h"
#include "ocslab/phase/policy.h"
#include "ocslab/runner/experiment_spec.h"
#include "ocslab/runner/experiment_type.h"
#include "ocslab/runner/host_capture.h"
#include "ocslab/runner/job_localisation.h"
#include "ocslab/runner/merge.h"
#include "ocslab/runner/run_context.h"
#include "ocslab/runner/run_types.h"
#include "ocslab/vlab/lab_timing.h"

namespace ocslab::runner {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

// The tidy Sample rows of a rank's timeline-rank<R>.csv or shim-rank<R>.csv.
std::vector<Sample> read_samples(const std::string& path, std::vector<std::string>& problems) {
  std::vector<Sample> out;
  std::ifstream in(path);
  if (!in) return out;
  std::string line;
  std::getline(in, line);
  int n = 1;
  while (std::getline(in, line)) {
    ++n;
    if (line.empty()) continue;
    auto f = split_csv_line(line);
    if (f.size() < 7) {
      problems.push_back(fmt::format("{}:{}: {} field(s), want 7", path, n, f.size()));
      continue;
    }
    try {
      out.push_back(Sample{std::stoll(f[0]), 0, f[1], f[2], f[3], f[4], std::stod(f[5]), f[6]});
    } catch (const std::exception&) {
      problems.push_back(fmt::format("{}:{}: bad number", path, n));
    }
  }
  return out;
}

// The timeline samples of the controller's events (runner clock).
std::vector<Sample> controller_samples(const std::vector<phase::ControllerEvent>& events) {
  std::vector<Sample> out;
  for (const auto& e : events) {
    std::string subject = e.group.empty() ? e.rail : e.group + "#" + std::to_string(e.seq);
    if (e.kind == phase::ControllerEvent::Kind::kReconfigStart ||
        e.kind == phase::ControllerEvent::Kind::kReconfigEnd) {
      subject = e.rail + " " + subject;
    }
    out.push_back(Sample{e.real_ns, 0, e.rank >= 0 ? fmt::format("rank{}", e.rank) : "controller", "controller",
                         subject, std::string(phase::to_string(e.kind)), e.value, ""});
  }
  return out;
}

// A rank's learned step as its phases-rank<R>.csv holds it (the safe-window table's columns):
// the kind is the type's, the idle time whole microseconds.
phase::LearnedPhases learned_of(const phase::PhaseWindows& w) {
  phase::LearnedPhases l;
  for (const auto& op : w.ops) {
    l.table.ops.push_back({op.index, op.group, op.type, op.bytes});
    l.kinds.push_back(phase::kind_of_type(op.type));
    l.idle_ns.push_back(op.idle_us * 1000);
  }
  return l;
}

}  // namespace

void PhaseResults::finish(HostCapture* capture, const RunFacts& facts) {
  set_relative_to_native(result_.steps);
  if (capture) finish_capture(*capture);
  result_.samples += timeline_rows_;
  write_step_files();
  write_text(folder_ + "/meta.json", meta(facts).dump(2) + "\n");
}

// The switching time a run's idle windows are held against: its sweep point, else the virtual
// lab's emulated time, else the median command time of its own reconfigurations (0: none).
double PhaseResults::switching_of(const ModeRun& m, size_t first_reconfig) const {
  if (m.point.switching_ms >= 0) return m.point.switching_ms;
  if (target_.is_vlab()) {
    try {
      return vlab::lab_timing(target_.lab.dir).switching.mean_ms();
    } catch (const std::exception&) {
    }
  }
  return rails_.median_command_ms(first_reconfig).value_or(0);
}

// Idle windows of the run's groups (idle_windows.h), for windows.csv and the summary.
void PhaseResults::add_windows(const ModeRun& m, const std::vector<workloads::OpRecord>& rows) {
  // Cut between the schedule's ops, or for a torch job between the ops of its ranks' learned
  // steps (the steps and indexes of their rows).
  try {
    const double sw = switching_of(m, m.first_reconfig);
    auto w = idle_windows(pw_.schedule, m.label, rows, sw);
    window_summaries_.push_back(summarize_windows(m.label, sw, w, rows));
    for (auto& x : w) windows_.push_back({std::move(x), sw});
    // Phase to phase: across ranks, so on one clock (each host's offset subtracted).
    std::vector<workloads::OpRecord> on_runner_clock = rows;
    for (auto& r : on_runner_clock) {
      const int64_t off = offset_of(r.host);
      r.wait_start_ns -= off;
      r.start_ns -= off;
      r.end_ns -= off;
    }
    for (auto& x : phase_windows(pw_.schedule, m.label, on_runner_clock, phase_starts(pw_), sw))
      phase_windows_.push_back({std::move(x), sw});
  } catch (const std::exception& e) {
    result_.problems.push_back(m.label + ": idle windows: " + e.what());
  }
}

// after a mode: the controller's events, the ranks' rows, figures, the mode's timeline

StepOfSeq PhaseResults::finish_mode(ModeRun& m, const std::vector<phase::ControllerEvent>& events, bool fallback) {
  if (m.point.mode != "native") phase::write_events_csv(m.dir + "/controller-events.csv", events);
  ModeRows got = read_rank_files(m);
  write_learned_phases(m);
  auto figures = step_figures(pw_.schedule, m.point.mode, got.rows, events);
  drop_incomplete_steps(m, figures);
  for (auto& f : figures) {
    f.switching_ms = m.point.switching_ms;
    f.link_gbps = m.point.link_gbps;
    f.repetition = m.point.repetition;
  }
  add_windows(m, got.rows);
  result_.steps.insert(result_.steps.end(), figures.begin(), figures.end());
  for (auto& smp : got.samples) smp.t_ns -= offset_of(smp.host);
  auto ctl_samples = controller_samples(events);
  got.samples.insert(got.samples.end(), ctl_samples.begin(), ctl_samples.end());
  got.samples.insert(got.samples.end(), m.fault_rows.begin(), m.fault_rows.end());
  std::stable_sort(got.samples.begin(), got.samples.end(),
                   [](const Sample& a, const Sample& b) { return a.t_ns < b.t_ns; });
  write_mode_timeline(m, got);
  timeline_rows_ += got.samples.size();
  const json stopped = job_record(m, events, got.rows);
  // A job that failed through an outage of a survival sweep is that point's measurement.
  const bool measured = add_job_run(m, got.rows, stopped);
  for (const auto& p : m.problems) ctx_.log((measured ? "through the outage: " : "problem: ") + p);
  if (!measured) result_.problems.insert(result_.problems.end(), m.problems.begin(), m.problems.end());
  int reconfigs = 0;
  for (const auto& f : figures) reconfigs += f.reconfigurations;
  const auto declined = std::count_if(events.begin(), events.end(), [](const phase::ControllerEvent& e) {
    return e.kind == phase::ControllerEvent::Kind::kDeclined;
  });
  if (pw_.policy == phase::Policy::kSafeWindow && m.point.mode != "native")
    ctx_.log(fmt::format("{}: policy safe-window declined {} reconfigurations", m.label, declined));
  const MaskRecord masks = mask_record(m.label, m.started_ns, events);
  for (const auto& line : masks.lines) {
    if (!line.masked) result_.problems.push_back(line.text);
    ctx_.log(line.text);
    mask_lines_ += line.text + "\n";
  }
  meta_modes_.push_back({{"mode", m.point.mode},
                         {"label", m.label},
                         {"switching_ms", m.point.switching_ms < 0 ? json(nullptr) : json(m.point.switching_ms)},
                         {"repetition", m.point.repetition},
                         {"link_gbps", m.point.link_gbps < 0 ? json(nullptr) : json(m.point.link_gbps)},
                         {"placement_circuits_added", m.placement_added},
                         {"topology", m.point.mode == "native" ? pw_.native.str() : pw_.initial.str()},
                         {"controller", m.point.mode == "native" ? std::string() : m.launch.controller},
                         {"started", m.started_ns},
                         {"finished", m.ended_ns},
                         {"rows", got.rows.size()},
                         {"timeline_rows", got.samples.size()},
                         {"reconfigurations", reconfigs},
                         {"declined", declined},
                         {"masks", masks.record},
                         {"faults", m.faults},
                         {"job_stopped", stopped},
                         {"fallback", fallback},
                         {"job_id", m.job_id.empty() ? json(nullptr) : json(m.job_id)},
                         {"problems", m.problems}});
  ctx_.log(fmt::format("{}: {} row(s) from {} rank(s), {} reconfiguration(s) in {:.1f} s", m.label, got.rows.size(),
                       pw_.schedule.ranks, reconfigs, static_cast<double>(m.ended_ns - m.started_ns) / 1e9));
  return StepOfSeq(pw_.schedule, got.rows);
}

// A run whose ranks failed leaves the ops they finished (collbench writes each as it
// completes), but the step they failed in, and any step a killed rank's rows are missing from,
// is not a step of the job: its figures would be a part of one. Those steps are left out of
// the figures, said once.
void PhaseResults::drop_incomplete_steps(ModeRun& m, std::vector<StepFigures>& figures) const {
  const auto per_rank = ops_per_step_of_ranks(pw_.schedule);
  const int per_step = std::accumulate(per_rank.begin(), per_rank.end(), 0);
  std::string dropped;
  size_t n = 0;
  std::erase_if(figures, [&](const StepFigures& f) {
    if (f.rows >= per_step) return false;
    dropped += fmt::format("{}{} ({} of {} op rows)", dropped.empty() ? "" : ", ", f.step, f.rows, per_step);
    ++n;
    return true;
  });
  if (n > 0) ctx_.log(fmt::format("{}: step(s) {} incomplete: left out of the step figures", m.label, dropped));
}

// When ranks failed: the rank that stopped first, when, how, the step it was in (localise_job),
// for meta.json's `job_stopped` (null when every rank finished), summary.txt and the log.
json PhaseResults::job_record(const ModeRun& m, const std::vector<phase::ControllerEvent>& events,
                              const std::vector<workloads::OpRecord>& rows) {
  StepOfSeq step_of(pw_.schedule);
  std::vector<std::pair<int, int>> rank_steps;
  for (const auto& row : rows) rank_steps.emplace_back(row.rank, row.step);
  auto loc = localise_job(
      events, m.ends, [&](const std::string& g, int64_t seq) { return step_of(g, seq); }, m.started_ns,
      rows_step_of(rank_steps, ops_per_step_of_ranks(pw_.schedule)));
  if (!loc) return nullptr;
  ctx_.log(fmt::format("fault: {}: {}", m.label, loc->verdict));
  job_lines_ += fmt::format("{}: {}\n", m.label, loc->verdict);
  for (const auto& e : loc->evidence) job_lines_ += "  " + e + "\n";
  return {{"rank", loc->rank},
          {"host", loc->host},
          {"step", loc->step < 0 ? json(nullptr) : json(loc->step)},
          {"stopped_ns", loc->stopped_ns},
          {"how", loc->how},
          {"failed_ranks", loc->failed},
          {"verdict", loc->verdict},
          {"evidence", loc->evidence}};
}

// A run with an outage of a planned length (sweep.outage_ms, port-dark for_ms, circuit-cut):
// its point of the job-survival matrix (job_survival.h). Returns whether the job failed after
// the outage began, so that its ranks' failures are the measurement, not the run's problems.
bool PhaseResults::add_job_run(const ModeRun& m, const std::vector<workloads::OpRecord>& rows, const json& stopped) {
  const json* outage = nullptr;
  for (const auto& f : m.faults) {
    const std::string kind = f.value("kind", "");
    if ((kind == kCircuitCut || kind == kPortDark) && f.value("for_ms", 0.0) > 0) {
      outage = &f;
      break;
    }
  }
  if (!outage) return false;
  analysis::JobRun run;
  run.run = m.label;
  run.setting = env_label(m.point.env);
  auto number = [](const std::string& v) {
    int n = 0;
    auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
    return ec == std::errc() && end == v.data() + v.size() ? std::optional<int>(n) : std::nullopt;
  };
  for (const auto& [k, v] : m.point.env) {
    if (k == kEnvIbTimeout) run.timeout = number(v);
    if (k == kEnvIbRetryCnt) run.retry_cnt = number(v);
  }
  run.outage_ms = outage->value("for_ms", 0.0);
  run.dark_ns = outage->value("held_ns", int64_t{0});
  run.light_ns = outage->value("released_ns", int64_t{0});
  if (run.light_ns > m.ended_ns && m.ended_ns > 0) run.light_ns = 0;  // still dark when the job ended
  const bool failed_end = std::any_of(m.ends.begin(), m.ends.end(), [](const RankEnd& e) { return e.exit_status != 0; });
  run.finished = stopped.is_null() && !failed_end && (!m.ends.empty() || m.problems.empty());
  if (!run.finished) {
    run.failed_ns = stopped.is_null() ? m.ended_ns : stopped.value("stopped_ns", m.ended_ns);
    const int rank = stopped.is_null() ? -1 : stopped.value("rank", -1);
    for (const auto& e : m.ends) {
      if (e.rank == rank || (rank < 0 && e.exit_status != 0)) {
        run.failure = e.message;
        break;
      }
    }
    if (run.failure.empty() && !m.problems.empty()) run.failure = m.problems.front();
  }
  for (const auto& r : rows) {
    const int64_t off = offset_of(r.host);
    run.ops.push_back({r.rank, r.step, r.index, r.start_ns - off, r.end_ns - off});
  }
  const auto row = analysis::job_survival_row(run, target_.is_vlab());
  ctx_.log(fmt::format("{}: {} ms outage: {}{}", m.label, run.outage_ms, analysis::outcome_name(row.outcome),
                       row.error_after_ms ? fmt::format(" (failed {:.0f} ms after it began)", *row.error_after_ms)
                                          : std::string()));
  job_runs_.push_back(std::move(run));
  return row.outcome == analysis::Outcome::kErrored;
}

// A host's clock minus the runner's where it was measured (ssh launcher), else 0.
int64_t PhaseResults::offset_of(const std::string& host) const {
  auto it = offsets_.find(host);
  return it != offsets_.end() && it->second.uncertainty_ns >= 0 ? it->second.offset_ns : 0;
}

PhaseResults::ModeRows PhaseResults::read_rank_files(ModeRun& m) const {
  ModeRows got;
  for (int r = 0; r < pw_.schedule.ranks; ++r) {
    std::string ops = fmt::format("{}/ops-rank{}.csv", m.dir, r);
    if (!fs::exists(ops)) {
      m.problems.push_back(fmt::format("{}: rank {} wrote no rows", m.label, r));
      continue;
    }
    try {
      auto v = workloads::parse_op_csv(read_file_or_empty(ops), ops);
      got.rows.insert(got.rows.end(), v.begin(), v.end());
    } catch (const std::exception& e) {
      m.problems.push_back(e.what());
    }
    for (const char* f : {"timeline-rank{}.csv", "shim-rank{}.csv"}) {
      auto v = read_samples(m.dir + "/" + fmt::format(fmt::runtime(f), r), m.problems);
      got.samples.insert(got.samples.end(), v.begin(), v.end());
    }
  }
  return got;
}

// A torch job's step is learned by each rank's phase profiler, which the backend writes as
// phases-rank<R>.csv at exit; the job's table is their merge, the mode's phases.csv. A rank
// without one (its op stream did not repeat) leaves no table: a warning in summary.txt, not a
// failure (the rows are still the job's, all in step 0).
void PhaseResults::write_learned_phases(const ModeRun& m) {
  if (pw_.framework != Framework::kTorch) return;
  std::vector<phase::LearnedPhases> ranks;
  std::string missing, line;
  try {
    for (int r = 0; r < pw_.schedule.ranks; ++r) {
      const auto path = fmt::format("{}/phases-rank{}.csv", m.dir, r);
      if (fs::exists(path)) {
        ranks.push_back(learned_of(phase::PhaseWindows::load(path)));
      } else {
        missing += fmt::format("{}{}", missing.empty() ? "" : ", ", r);
      }
    }
    if (!missing.empty()) {
      line = fmt::format(
          "{}: warning: no phases.csv: rank(s) {} learned no step (the op stream did not repeat; "
          "each rank's log says why)",
          m.label, missing);
    } else {
      const auto job = phase::merge_ranks(ranks);
      phase::write_phases_csv(job, m.dir + "/phases.csv");
      line = fmt::format("{}: phases.csv: {} op(s) per step in {} phase(s), {} pipeline transfer(s)", m.label,
                         job.table.ops.size(), job.phases.size(), job.pipeline_sends.size());
    }
  } catch (const std::exception& e) {
    line = fmt::format("{}: warning: no phases.csv: {}", m.label, e.what());
  }
  ctx_.log(line);
  learned_lines_ += line + "\n";
}

// iteration = the step: it starts at the earliest pre hook of its first op on any rank.
void PhaseResults::write_mode_timeline(const ModeRun& m, const ModeRows& got) const {
  std::map<int, int64_t> step_start;
  for (const auto& r : got.rows) {
    int64_t t = r.wait_start_ns - offset_of(r.host);
    auto it = step_start.find(r.step);
    if (it == step_start.end() || t < it->second) step_start[r.step] = t;
  }
  std::vector<int64_t> starts;
  for (const auto& [st, t] : step_start) starts.push_back(t);
  // iteration_of counts from 1 after the first start; steps count from 0.
  write_timeline(m.dir + "/timeline.csv", got.samples, result_.run_id + "/" + m.label,
                 [&](int64_t t) { return std::max(0, iteration_of(t, starts, 0) - 1); });
}

// the run's files

// The switch as the spec (or the lab) names it.
std::string PhaseResults::switch_text() const {
  return spec_.switch_url.empty() ? target_.lab.switch_url() : spec_.switch_url;
}

void PhaseResults::write_step_files() {
  CsvWriter w(folder_ + "/phase-steps.csv");
  w.header(step_csv_columns());
  for (const auto& f : result_.steps) w.row(step_csv_fields(f));
  w.flush();
  const auto points = sweep_points(result_.steps);
  if (!pw_.sweep_switching_ms.empty() || !pw_.sweep_link_gbps.empty() || pw_.repetitions > 1) {
    CsvWriter sw(folder_ + "/sweep.csv");
    sw.header(sweep_csv_columns());
    for (const auto& p : points) sw.row(sweep_csv_fields(p));
    sw.flush();
  }
  std::ostringstream table;
  print_step_table(table, result_.steps);
  write_text(folder_ + "/phase-summary.txt", table.str());
  std::ostringstream windows;
  if (!window_summaries_.empty()) {
    CsvWriter wc(folder_ + "/windows.csv");
    wc.header(window_csv_columns());
    for (const auto& [w, sw] : windows_) wc.row(window_csv_fields(w, sw, &pw_.schedule));
    for (const auto& [w, sw] : phase_windows_) wc.row(window_csv_fields(w, sw));
    wc.flush();
    std::vector<PhaseWindow> phases;
    for (const auto& pw : phase_windows_) phases.push_back(pw.first);
    print_window_summary(windows, window_summaries_, phases);
    write_text(folder_ + "/windows-summary.txt", windows.str());
  }
  const std::string masks = mask_lines_.empty() ? std::string() : "\nFailed ports (phase.detect, phase.detect_nic):\n" + mask_lines_;
  const std::string stopped = job_lines_.empty() ? std::string() : "\nWhere the job stopped:\n" + job_lines_;
  const std::string learned = learned_lines_.empty() ? std::string() : "\nLearned phase tables:\n" + learned_lines_;
  std::string survival;
  if (!job_runs_.empty()) {
    const auto js = analysis::job_survival(job_runs_, target_.is_vlab());
    std::ostringstream rows, matrix;
    analysis::write_job_survival_csv(js, rows);
    analysis::write_job_survival_matrix_csv(js, matrix);
    write_text(folder_ + "/job_survival.csv", rows.str());
    write_text(folder_ + "/job_survival_matrix.csv", matrix.str());
    survival = "\nQueue-pair settings through the outages (job_survival.csv):\n" + analysis::job_survival_summary(js);
    ctx_.log(survival.substr(1));
  }
  write_text(folder_ + "/summary.txt",
             table.str() + "\n" + windows.str() + masks + stopped + learned + survival + breakdown_summary_);
}

// probes: the capture's timeline, one breakdown row per reconfiguration x host x NIC

void PhaseResults::finish_capture(HostCapture& capture) {
  std::vector<PhaseReconfig> recs = rails_.reconfigs();
  std::stable_sort(recs.begin(), recs.end(), [](const auto& a, const auto& b) { return a.issued_ns < b.issued_ns; });
  // Reconfiguration i's rows start 200 ms before its command, as in a reconfiguration
  // experiment, but never before the previous command's ack: phase reconfigurations can follow
  // each other within 200 ms, and each must keep its own command and ack.
  std::vector<int64_t> starts;
  for (size_t i = 0; i < recs.size(); ++i) {
    int64_t start = recs[i].issued_ns - 200'000'000;
    if (i > 0) start = std::max(start, std::min(recs[i - 1].acked_ns + 1, recs[i].issued_ns));
    starts.push_back(start);
  }
  const std::string timeline = folder_ + "/timeline.csv";
  auto out = capture.finish(timeline, result_.run_id, [&](int64_t t) {
    return static_cast<int>(std::upper_bound(starts.begin(), starts.end(), t) - starts.begin());
  });
  for (const auto& p : out.problems) {
    result_.problems.push_back(p);
    ctx_.log("problem: " + p);
  }
  result_.samples += out.rows;
  capture_meta_ = json::array();
  for (const auto& h : out.hosts) {
    capture_meta_.push_back({{"name", h.name},
                             {"agent_pid", h.hello.pid},
                             {"samples", h.samples},
                             {"last_seq", h.last_seq},
                             {"lost", h.lost},
                             {"sessions_resumed", h.resumed},
                             {"clock_offset_ns", h.clock_before.offset_ns},
                             {"errors", h.errors}});
  }
  for (const auto& r : recs) {
    ReconfigRecord rr;
    rr.iteration = static_cast<int>(result_.reconfigurations.size()) + 1;
    rr.mapping = r.label + " " + (rails_.rails().size() > 1 ? r.rail + " " : std::string()) + r.to;
    rr.issued_ns = r.issued_ns;
    rr.acked_ns = r.acked_ns;
    rr.ok = true;
    rr.added = r.added;
    rr.removed = r.removed;
    result_.reconfigurations.push_back(rr);
  }
  try {
    auto tl = analysis::read_timeline(timeline);
    auto b = only_touched(analysis::compute_breakdown(tl), recs);
    write_phase_breakdown(b, recs);
    analysis::SummaryContext sc;
    sc.timeline = timeline;
    sc.timeline_rows = tl.rows;
    sc.kept_rows = tl.events.size();
    breakdown_summary_ = "\n# per-layer breakdown of every reconfiguration the controller made (breakdown.csv)\n" +
                         analysis::summary_text(b, analysis::summarize(b), sc);
    ctx_.log(fmt::format("breakdown: {} row(s) for {} reconfiguration(s)", b.rows.size(), recs.size()));
  } catch (const std::exception& e) {
    result_.problems.push_back(std::string("breakdown: ") + e.what());
    ctx_.log(std::string("problem: breakdown: ") + e.what());
  }
}

// A reconfiguration's rows are the host NICs whose ports its commands named: the others did
// not move for it (their edges in its window belong to a neighbouring reconfiguration).
analysis::Breakdown PhaseResults::only_touched(analysis::Breakdown b, const std::vector<PhaseReconfig>& recs) const {
  std::vector<analysis::BreakdownRow> kept;
  for (auto& row : b.rows) {
    const size_t i = static_cast<size_t>(std::max(1, row.iteration) - 1);
    if (i >= recs.size()) continue;
    const auto& ports = recs[i].ports;
    bool touched = false;
    for (const auto& h : spec_.hosts) {
      if (h.name != row.host) continue;
      for (const auto& n : h.nics) {
        if (n.name != row.interface) continue;
        touched = std::find(ports.begin(), ports.end(), n.tx_port) != ports.end() ||
                  std::find(ports.begin(), ports.end(), n.rx_port) != ports.end();
      }
    }
    if (touched) kept.push_back(std::move(row));
  }
  b.rows = std::move(kept);
  return b;
}

// breakdown.csv's columns, then what joins each row to the op that caused it.
void PhaseResults::write_phase_breakdown(const analysis::Breakdown& b, const std::vector<PhaseReconfig>& recs) {
  std::ostringstream text;
  analysis::write_breakdown_csv(b, text);
  std::istringstream in(text.str());
  std::string line, out;
  std::getline(in, line);
  out = line +
        ",mode,label,switching_ms,repetition,step,group,seq,topo_from,topo_to,circuits_added,circuits_removed,rail\n";
  size_t k = 0;
  while (std::getline(in, line)) {
    const auto& row = b.rows.at(k++);
    const size_t i = static_cast<size_t>(std::max(1, row.iteration) - 1);
    if (i >= recs.size()) {
      out += line + ",,,,,,,,,,,,\n";
      continue;
    }
    const auto& r = recs[i];
    out += line + "," +
           fmt::format("{},{},{},{},{},{},{},{},{},{},{},{}\n", r.mode, r.label, ms_or_empty(r.switching_ms),
                       r.repetition, r.step, r.group, r.seq, r.from, r.to, r.added, r.removed, r.rail);
  }
  write_text(folder_ + "/breakdown.csv", out);
  breakdown_rows_ = b.rows.size();
}

json PhaseResults::meta(const RunFacts& facts) const {
  json meta;
  meta["run"] = result_.run_id;
  meta["type"] = kPhaseWorkload;
  meta["ocslab_version"] = ctx_.options().version;
  meta["spec"] = {
      {"file", fs::absolute(spec_.origin).string()}, {"name", spec_.name}, {"text", read_file_or_empty(spec_.origin)}};
  meta["workload"] = {{"program", facts.program},
                      {"schedule", pw_.schedule_path},
                      {"launcher", to_string(pw_.launcher)},
                      {"ranks", json::array()}};
  facts.launcher.describe(meta["workload"]);
  for (size_t r = 0; r < pw_.ranks.size(); ++r) {
    meta["workload"]["ranks"].push_back(
        {{"rank", r},
         {"host", spec_.hosts[pw_.ranks[r].host].name},
         {"nic", pw_.ranks[r].nic},
         {"slot", fmt::format("{}-{}", rails_.slots().front()[r].ingress, rails_.slots().front()[r].egress)}});
  }
  meta["phase"] = {{"job", pw_.layout.job},
                   {"pp", pw_.layout.pp},
                   {"digits", pw_.layout.describe_digits()},
                   {"initial", pw_.initial.str()},
                   {"rail", rails_.rails().front().name},
                   {"rails", rails_.meta()},
                   {"switch", switch_text()},
                   {"allow", spec_.allow.to_string()},
                   {"policy", phase::to_string(pw_.policy)}};
  if (pw_.policy == phase::Policy::kGreedy) meta["phase"]["allocator"] = phase::to_string(pw_.allocator);
  if (pw_.policy == phase::Policy::kSafeWindow) {
    meta["phase"]["phase_table"] = pw_.phase_table;
    meta["phase"]["switch_time_ms"] = pw_.switch_time_ms;
    if (!pw_.safe_window_from.empty()) meta["phase"]["safe_window_from"] = pw_.safe_window_from;
  }
  meta["modes"] = meta_modes_;
  meta["native"] = {{"topology", pw_.native.str()}, {"unconnected_groups", pw_.native_unconnected}};
  meta["native"]["group_if"] = json::object();
  for (const auto& [g, nic] : pw_.native_group_if) meta["native"]["group_if"][g] = nic;
  meta["sweep"] = {{"switching_ms", pw_.sweep_switching_ms},
                   {"link_gbps", pw_.sweep_link_gbps},
                   {"repetitions", pw_.repetitions},
                   {"how", pw_.sweep_switching_ms.empty() ? "none"
                           : pw_.inject_delay             ? "injected by the runner's controller"
                                                          : "the virtual lab's emulator timing"}};
  if (facts.probes) {
    meta["probes"] = {{"hosts", capture_meta_}, {"breakdown_rows", breakdown_rows_}};
  }
  meta["reconfigurations"] = rails_.reconfig_count();
  meta["host_preparation"] = facts.host_preparation;  // Soft-RoCE devices added, neighbours pinned (undone after)
  meta["problems"] = result_.problems;
  meta["clock_offsets"] = json::object();
  for (const auto& [h, o] : offsets_) {
    meta["clock_offsets"][h] =
        o.uncertainty_ns < 0 ? json{{"error", o.error}}
                             : json{{"offset_ns", o.offset_ns}, {"uncertainty_ns", o.uncertainty_ns}, {"by", o.by}};
  }
  meta["clocks"] =
      "timeline.csv: rank samples corrected by clock_offsets (ssh launcher); ops-rank and shim-rank files: the "
      "host's "
      "own clock";
  return meta;
}

}  // namespace ocslab::runner
