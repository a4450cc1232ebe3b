// Running a phase-workload experiment: per phase mode, the embedded controller + orchestrator
// over the spec's switch, the ranks (SSH or one mpirun / srun command), their files fetched,
// the per-step figures and the merged timeline.
#include "ocslab/runner/phase_workload.h"

#include <fmt/format.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <numeric>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <ostream>
#include <set>
#include <sstream>
#include <thread>
#include <tuple>

#include "ocslab/analysis/breakdown.h"
#include "ocslab/analysis/summary.h"
#include "ocslab/analysis/timeline.h"
#include "ocslab/common/clock.h"
#include "ocslab/common/csv_reader.h"
#include "ocslab/common/csv_writer.h"
#include "ocslab/common/file.h"
#include "ocslab/common/in_parallel.h"
#include "ocslab/common/process.h"
#include "ocslab/common/secret.h"
#include "ocslab/ocsctl/driver.h"
#include "ocslab/ocsctl/ssh_session.h"
#include "ocslab/ocsctl/switch_url.h"
#include "ocslab/phase/orchestrator.h"
#include "ocslab/phase/port_watch.h"
#include "ocslab/runner/experiment_spec.h"
#include "ocslab/runner/experiment_type.h"
#include "ocslab/runner/host_capture.h"
#include "ocslab/runner/host_prep.h"
#include "ocslab/runner/idle_windows.h"
#include "ocslab/runner/job_launcher.h"
#include "ocslab/runner/job_localisation.h"
#include "ocslab/runner/phase_faults.h"
#include "ocslab/runner/remote_kill.h"
#include "ocslab/runner/remote_dir.h"
#include "ocslab/runner/run_context.h"
#include "ocslab/runner/runner.h"
#include "ocslab/runner/target.h"
#include "ocslab/vlab/lab_timing.h"
#include "ocslab/workloads/shim_hooks.h"

namespace ocslab::runner {

namespace fs = std::filesystem;
using json = nlohmann::json;

// ---------------------------------------------------------------- per-step figures

namespace {
// The step of a shim group's seq-th op (seq counts the group's ops over the steps, from 1);
// -1 for a group the schedule's step does not have or a seq below 1.
class StepOfSeq {
 public:
  explicit StepOfSeq(const workloads::Schedule& s) {
    for (const auto& op : s.step) ++per_step_[workloads::shim_group(s, op)];
  }
  int operator()(const std::string& group, int64_t seq) const {
    auto it = per_step_.find(group);
    if (it == per_step_.end() || seq < 1) return -1;
    return static_cast<int>((seq - 1) / it->second);
  }

 private:
  std::map<std::string, int> per_step_;
};

// Per rank, the ops of one step it takes part in (a step's op rows from that rank).
std::vector<int> ops_per_step_of_ranks(const workloads::Schedule& s) {
  std::vector<int> out(static_cast<size_t>(s.ranks), 0);
  for (const auto& op : s.step) {
    for (int r = 0; r < s.ranks; ++r) out[static_cast<size_t>(r)] += s.involves(op, r) ? 1 : 0;
  }
  return out;
}

}  // namespace

std::vector<StepFigures> step_figures(const workloads::Schedule& s, const std::string& mode,
                                      const std::vector<workloads::OpRecord>& rows,
                                      const std::vector<phase::ControllerEvent>& events) {
  // rank -> step -> its rows in op order
  std::map<int, std::map<int, std::vector<const workloads::OpRecord*>>> by_rank;
  int last_step = -1;
  std::map<int, bool> warm;
  for (const auto& r : rows) {
    by_rank[r.rank][r.step].push_back(&r);
    last_step = std::max(last_step, r.step);
    warm[r.step] = r.warmup;
  }
  for (auto& [rank, steps] : by_rank) {
    for (auto& [st, v] : steps) {
      std::sort(v.begin(), v.end(), [](auto* a, auto* b) { return a->index < b->index; });
    }
  }
  // A reconfiguration served (group, seq): the group's seq-th op counted over the steps.
  const StepOfSeq step_of(s);
  std::map<int, std::set<std::pair<std::string, int64_t>>> reconf, asked;
  for (const auto& e : events) {
    const bool start = e.kind == phase::ControllerEvent::Kind::kReconfigStart && e.value == 1;
    const bool request = e.kind == phase::ControllerEvent::Kind::kRequest;
    if (!start && !request) continue;
    const int st = step_of(e.group, e.seq);
    if (st < 0) continue;
    (start ? reconf : asked)[st].insert({e.group, e.seq});
  }

  std::vector<StepFigures> out;
  for (int st = 0; st <= last_step; ++st) {
    StepFigures f;
    f.mode = mode;
    f.step = st;
    f.warmup = warm[st];
    f.step_ms = -1;
    std::set<int> reconfigured;
    for (auto& [rank, steps] : by_rank) {
      auto it = steps.find(st);
      if (it == steps.end() || it->second.empty()) continue;
      const auto& v = it->second;
      f.rows += static_cast<int>(v.size());
      double comm = 0, wait = 0;
      for (auto* r : v) {
        comm += static_cast<double>(r->duration_ns) / 1e6;
        wait += static_cast<double>(r->wait_ns) / 1e6;
        if (r->reconfigured) reconfigured.insert(r->index);
      }
      auto end_of = [](const workloads::OpRecord* r) {
        // end of the post hook: the pre hook took start - wait_start, the rest of wait_ns is the post hook's
        int64_t post = std::max<int64_t>(0, r->wait_ns - (r->start_ns - r->wait_start_ns));
        return r->end_ns + post;
      };
      int64_t begin = v.front()->wait_start_ns;
      if (auto prev = steps.find(st - 1); prev != steps.end() && !prev->second.empty())
        begin = end_of(prev->second.back());
      double step_ms = static_cast<double>(end_of(v.back()) - begin) / 1e6;
      f.max_wait_ms = std::max(f.max_wait_ms, wait);
      if (step_ms > f.step_ms) {
        f.step_ms = step_ms;
        f.rank = rank;
        f.comm_ms = comm;
        f.wait_ms = wait;
        f.compute_ms = std::max(0.0, step_ms - comm - wait);
      }
    }
    if (f.step_ms < 0) f.step_ms = 0;
    f.reconfigured_ops = static_cast<int>(reconfigured.size());
    f.reconfigurations = static_cast<int>(reconf[st].size());
    f.barriers = static_cast<int>(asked[st].size());
    out.push_back(f);
  }
  return out;
}

const std::vector<std::string>& step_csv_columns() {
  static const std::vector<std::string> c = {"mode",
                                             "step",
                                             "warmup",
                                             "rank",
                                             "step_ms",
                                             "compute_ms",
                                             "comm_ms",
                                             "wait_ms",
                                             "max_wait_ms",
                                             "reconfigurations",
                                             "reconfigured_ops",
                                             "rows",
                                             "switching_ms",
                                             "repetition",
                                             "barriers",
                                             "relative_to_native"};
  return c;
}

namespace {
std::string ms_or_empty(double v) { return v < 0 ? std::string() : fmt::format("{:.3f}", v); }
}  // namespace

std::vector<std::string> step_csv_fields(const StepFigures& f) {
  return {f.mode,
          std::to_string(f.step),
          f.warmup ? "1" : "0",
          std::to_string(f.rank),
          fmt::format("{:.3f}", f.step_ms),
          fmt::format("{:.3f}", f.compute_ms),
          fmt::format("{:.3f}", f.comm_ms),
          fmt::format("{:.3f}", f.wait_ms),
          fmt::format("{:.3f}", f.max_wait_ms),
          std::to_string(f.reconfigurations),
          std::to_string(f.reconfigured_ops),
          std::to_string(f.rows),
          ms_or_empty(f.switching_ms),
          std::to_string(f.repetition),
          std::to_string(f.barriers),
          f.relative > 0 ? fmt::format("{:.4f}", f.relative) : std::string()};
}

void set_relative_to_native(std::vector<StepFigures>& figures) {
  double sum = 0;
  int n = 0;
  for (const auto& f : figures) {
    if (f.mode != "native" || f.warmup) continue;
    sum += f.step_ms;
    ++n;
  }
  if (n == 0 || sum <= 0) return;
  const double native = sum / n;
  for (auto& f : figures) f.relative = f.step_ms / native;
}

std::vector<SweepPoint> sweep_points(const std::vector<StepFigures>& figures) {
  std::vector<SweepPoint> out;
  std::map<std::tuple<std::string, double, int>, std::vector<const StepFigures*>> runs;
  std::vector<std::tuple<std::string, double, int>> order;
  for (const auto& f : figures) {
    auto key = std::make_tuple(f.mode, f.switching_ms, f.repetition);
    if (!runs.count(key)) order.push_back(key);
    auto& v = runs[key];
    if (!f.warmup) v.push_back(&f);
  }
  double native_sum = 0;
  int native_n = 0;
  for (const auto& f : figures) {
    if (f.mode == "native" && !f.warmup) {
      native_sum += f.step_ms;
      ++native_n;
    }
  }
  const double native = native_n > 0 ? native_sum / native_n : 0;
  for (const auto& key : order) {
    const auto& v = runs[key];
    SweepPoint p;
    std::tie(p.mode, p.switching_ms, p.repetition) = key;
    p.steps = static_cast<int>(v.size());
    if (v.empty()) {
      out.push_back(p);
      continue;
    }
    double reconf = 0, wait = 0, barriers = 0;
    for (auto* f : v) {
      p.step_ms += f->step_ms;
      reconf += f->reconfigurations;
      wait += f->wait_ms;
      barriers += f->barriers;
    }
    const double n = static_cast<double>(v.size());
    p.step_ms /= n;
    double var = 0;
    for (auto* f : v) var += (f->step_ms - p.step_ms) * (f->step_ms - p.step_ms);
    p.step_ms_sd = v.size() > 1 ? std::sqrt(var / (n - 1)) : 0;
    p.reconfigs_per_step = reconf / n;
    p.wait_ms = wait / n;
    p.barriers_per_step = barriers / n;
    if (native > 0) {
      p.relative = p.step_ms / native;
      if (p.mode != "native" && p.switching_ms >= 0) p.estimate_ms = native + p.reconfigs_per_step * p.switching_ms;
    }
    out.push_back(p);
  }
  return out;
}

const std::vector<std::string>& sweep_csv_columns() {
  static const std::vector<std::string> c = {"mode",    "switching_ms",      "repetition",         "steps",
                                             "step_ms", "step_ms_sd",        "relative_to_native", "reconfigs_per_step",
                                             "wait_ms", "barriers_per_step", "estimate_ms"};
  return c;
}

std::vector<std::string> sweep_csv_fields(const SweepPoint& p) {
  return {p.mode,
          ms_or_empty(p.switching_ms),
          std::to_string(p.repetition),
          std::to_string(p.steps),
          fmt::format("{:.3f}", p.step_ms),
          fmt::format("{:.3f}", p.step_ms_sd),
          p.relative > 0 ? fmt::format("{:.4f}", p.relative) : std::string(),
          fmt::format("{:.3f}", p.reconfigs_per_step),
          fmt::format("{:.3f}", p.wait_ms),
          fmt::format("{:.3f}", p.barriers_per_step),
          ms_or_empty(p.estimate_ms)};
}

std::optional<SweepSlope> sweep_slope(const std::vector<SweepPoint>& points, const std::string& mode) {
  std::vector<const SweepPoint*> v;
  std::set<double> xs;
  for (const auto& p : points) {
    if (p.mode != mode || p.switching_ms < 0 || p.steps == 0) continue;
    v.push_back(&p);
    xs.insert(p.switching_ms);
  }
  if (xs.size() < 2) return std::nullopt;
  double mx = 0, my = 0, mr = 0;
  for (auto* p : v) {
    mx += p->switching_ms;
    my += p->step_ms;
    mr += p->reconfigs_per_step;
  }
  const double n = static_cast<double>(v.size());
  mx /= n;
  my /= n;
  double sxy = 0, sxx = 0;
  for (auto* p : v) {
    sxy += (p->switching_ms - mx) * (p->step_ms - my);
    sxx += (p->switching_ms - mx) * (p->switching_ms - mx);
  }
  return SweepSlope{sxy / sxx, mr / n};
}

void print_overhead(std::ostream& out, const std::vector<SweepPoint>& points) {
  // Per mode: the lowest switching time it ran at (0 ms in a sweep that has it), over repetitions.
  std::vector<std::string> order;
  std::map<std::string, double> lowest;
  for (const auto& p : points) {
    if (p.steps == 0) continue;
    if (!lowest.count(p.mode)) {
      order.push_back(p.mode);
      lowest[p.mode] = p.switching_ms;
    }
    lowest[p.mode] = std::min(lowest[p.mode], p.switching_ms);
  }
  const bool native = lowest.count("native") > 0;
  out << "# control-plane overhead (mean over measured steps and repetitions)\n";
  for (const auto& mode : order) {
    double step = 0, wait = 0, barriers = 0, reconf = 0, rel = 0;
    int n = 0;
    for (const auto& p : points) {
      if (p.mode != mode || p.switching_ms != lowest[mode] || p.steps == 0) continue;
      step += p.step_ms;
      wait += p.wait_ms;
      barriers += p.barriers_per_step;
      reconf += p.reconfigs_per_step;
      rel += p.relative;
      ++n;
    }
    if (n == 0) continue;
    std::string at = mode == "native"   ? std::string("static fabric")
                     : lowest[mode] < 0 ? std::string("the switch's own switching time")
                                        : fmt::format("{:g} ms switching", lowest[mode]);
    std::string vs = native && mode != "native"
                         ? fmt::format(", x{:.3f} native ({:+.2f}% overhead)", rel / n, (rel / n - 1) * 100)
                         : std::string();
    out << fmt::format(
        "# {:<13} at {}: step {:.2f} ms{}, fabric wait {:.2f} ms, {:.2f} reconfigurations and {:.2f} "
        "controller barriers per step\n",
        mode, at, step / n, vs, wait / n, reconf / n, barriers / n);
  }
  for (const auto& mode : order) {
    if (auto s = sweep_slope(points, mode); s && mode != "native") {
      out << fmt::format(
          "# {:<13} sweep slope: {:.3f} ms of step time per ms of switching; {:.2f} reconfigurations "
          "per step (x{:.2f})\n",
          mode, s->slope, s->reconfigs_per_step, s->reconfigs_per_step > 0 ? s->slope / s->reconfigs_per_step : 0.0);
    }
  }
}

namespace {
// "on-demand", or "on-demand 25ms r2" for a sweep point / repetition.
std::string run_label(const StepFigures& f) {
  std::string l = f.mode;
  if (f.switching_ms >= 0) l += fmt::format(" {:g}ms", f.switching_ms);
  if (f.repetition > 1 || f.switching_ms >= 0) l += fmt::format(" r{}", f.repetition);
  return l;
}
}  // namespace

void print_step_table(std::ostream& out, const std::vector<StepFigures>& figures) {
  out << fmt::format("{:<22} {:>4} {:>6} {:>4} {:>10} {:>10} {:>10} {:>10} {:>9} {:>8} {:>7} {:>5}\n", "mode", "step",
                     "warmup", "rank", "step_ms", "compute_ms", "comm_ms", "wait_ms", "reconfigs", "barriers", "native",
                     "rows");
  for (const auto& f : figures) {
    out << fmt::format("{:<22} {:>4} {:>6} {:>4} {:>10.2f} {:>10.2f} {:>10.2f} {:>10.2f} {:>9} {:>8} {:>7} {:>5}\n",
                       run_label(f), f.step, f.warmup ? "yes" : "", f.rank, f.step_ms, f.compute_ms, f.comm_ms,
                       f.wait_ms, f.reconfigurations, f.barriers,
                       f.relative > 0 ? fmt::format("x{:.3f}", f.relative) : std::string(), f.rows);
  }
  struct Mean {
    double step = 0, wait = 0, reconf = 0;
    int n = 0;
  };
  std::vector<std::string> order;
  std::map<std::string, Mean> means;
  for (const auto& f : figures) {
    const std::string label = run_label(f);
    if (!means.count(label)) order.push_back(label);
    auto& m = means[label];
    if (f.warmup) continue;
    m.step += f.step_ms;
    m.wait += f.wait_ms;
    m.reconf += f.reconfigurations;
    ++m.n;
  }
  out << "# mean over measured steps\n";
  for (const auto& label : order) {
    const auto& m = means[label];
    if (m.n == 0) continue;
    out << fmt::format("# {:<13} step {:.2f} ms, fabric wait {:.2f} ms, {:.2f} reconfigurations per step ({} steps)\n",
                       label, m.step / m.n, m.wait / m.n, m.reconf / m.n, m.n);
  }
  if (means.count("on-demand") && means.count("provisioning") && means["on-demand"].n > 0 &&
      means["provisioning"].n > 0) {
    const auto& a = means["on-demand"];
    const auto& b = means["provisioning"];
    double wa = a.wait / a.n, wb = b.wait / b.n;
    out << fmt::format("# provisioning vs on-demand: fabric wait x{:.2f} ({:+.2f} ms per step), step time x{:.2f}\n",
                       wa > 0 ? wb / wa : 0.0, wb - wa, a.step > 0 ? (b.step / b.n) / (a.step / a.n) : 0.0);
  }
  print_overhead(out, sweep_points(figures));
}

// ---------------------------------------------------------------- running

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

// The line of a failed rank's output that says why: its program's own "<name>: ..." message
// (the usage text may follow it), else the last line.
std::string why_it_failed(const std::string& text, const std::string& program) {
  const std::string prefix = fs::path(program).filename().string() + ":";
  std::istringstream in(text);
  std::string line, last, own;
  while (std::getline(in, line)) {
    if (line.empty() || line.rfind("ocslab-rank-pid ", 0) == 0) continue;
    last = line;
    if (line.rfind(prefix, 0) == 0) own = line;
  }
  return own.empty() ? last : own;
}

// A host's clock minus the runner's, from `date +%s%N` over SSH: the reading is taken to be
// at the middle of the round trip; the shortest of a few round trips is kept.
struct ClockOffset {
  int64_t offset_ns = 0;
  int64_t uncertainty_ns = -1;  // half the round trip; -1: not measured
  std::string error;
  std::string by = "ssh";  // "agent": the probes' agent's clock estimate replaced it
};

ClockOffset measure_offset(const ocs::SshOptions& ssh) {
  ClockOffset best;
  try {
    ocs::SshSession s(ssh);
    for (int i = 0; i < 5; ++i) {
      int64_t t0 = realtime_ns();
      auto r = s.exec("date +%s%N", std::chrono::seconds(10));
      int64_t t1 = realtime_ns();
      int64_t remote = std::stoll(r.out);
      int64_t half = (t1 - t0) / 2;
      if (best.uncertainty_ns < 0 || half < best.uncertainty_ns) {
        best.uncertainty_ns = half;
        best.offset_ns = remote - (t0 + half);
      }
    }
  } catch (const std::exception& e) {
    best.error = e.what();
    best.uncertainty_ns = -1;
  }
  return best;
}

// workload.rxe and workload.pin_neighbours: done on the ranks' hosts before the first mode,
// undone (only what was added) when the run ends however it ends (HostPrep, host_prep.h).
void prepare_hosts(HostPrep& prep, const PhaseWorkloadSpec& pw, const std::function<void(const std::string&)>& log) {
  std::set<size_t> used;
  std::set<NicRef> nics;
  for (const auto& r : pw.ranks) {
    used.insert(r.host);
    nics.insert({r.host, r.nic});
  }
  prep.add_rxe({used.begin(), used.end()}, pw.rxe, log);
  if (!pw.pin_neighbours) return;
  // Every rank's data NIC with every other: any two ranks may share a circuit.
  std::vector<std::pair<NicRef, NicRef>> pairs;
  for (auto a = nics.begin(); a != nics.end(); ++a)
    for (auto b = std::next(a); b != nics.end(); ++b) pairs.emplace_back(*a, *b);
  prep.pin_neighbours(pairs, log);
}

const char* kRankFiles[] = {"ops-rank{}.csv", "timeline-rank{}.csv", "shim-rank{}.csv", "phase-table-rank{}.csv"};

// One phase mode's run: where its files go, what went wrong, when it ran.
struct ModeRun {
  std::string mode;
  std::string label;         // the folder's name: the mode, "-<ms>ms" per sweep point, "-r<k>" per repetition
  double switching_ms = -1;  // the sweep point (-1: the switch's own timing)
  int repetition = 1;
  size_t first_reconfig = 0;   // index of its first reconfiguration in the run's record
  size_t placement_added = 0;  // circuits its placement made (the switch's state from the previous run)
  std::string dir;             // <results>/<label>
  RankLaunch launch;
  std::mutex mu;  // problems, while the ranks' threads run
  std::vector<std::string> problems;
  int64_t started_ns = 0, ended_ns = 0;
  std::string job_id;  // mpirun / srun: the launcher's job (Slurm's allocation, Open MPI's job)
  // ssh launcher: each rank's pid on its host while the ranks run (null otherwise).
  const std::vector<std::atomic<long long>>* pids = nullptr;
  std::vector<RankEnd> ends;            // ssh launcher: how each rank ended (under mu)
  std::vector<Sample> fault_rows;       // the injected faults' timeline rows
  nlohmann::json faults = nlohmann::json::array();  // meta.json's record of them
  void problem(std::string p) {
    std::lock_guard lock(mu);
    problems.push_back(std::move(p));
  }
};

// The ranks' samples of a mode, from the files they left in its folder, and their op rows.
struct ModeRows {
  std::vector<workloads::OpRecord> rows;
  std::vector<Sample> samples;
};

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

// One reconfiguration the controller made, with the op that asked for it.
struct PhaseReconfig {
  std::string label, mode;  // the run (ModeRun::label) and its mode
  std::string rail;         // the rail the orchestrator reprogrammed
  double switching_ms = -1;
  int repetition = 1;
  std::string from, to;  // topo_ids
  int64_t issued_ns = 0, acked_ns = 0;
  size_t added = 0, removed = 0;
  std::vector<ocs::Port> ports;  // every port a command named
  std::string group;             // the op's shim group and sequence number (controller events)
  int64_t seq = -1;
  int step = -1;
};

// A virtual lab's emulated switching time, set per sweep point through the lab's timing control
// (`ocslab vlab timing`) and put back as it was when the run ends. A real switch, or a sweep
// with injected delays, is left alone (the controller injects the time instead).
class LabSwitching {
 public:
  LabSwitching(const Target& target, const PhaseWorkloadSpec& pw, const RunContext& ctx)
      : target_(target), ctx_(ctx), active_(target.is_vlab() && !pw.inject_delay && !pw.sweep_switching_ms.empty()) {
    if (active_) original_ = vlab::lab_timing(target_.lab.dir);
  }
  ~LabSwitching() {
    if (!active_ || !changed_) return;
    try {
      vlab::LabTiming t;
      const auto& d = original_.switching;
      switch (d.kind) {
        case emu::Distribution::Kind::kFixed:
          t.switching_ms = fmt::format("{}", d.a_ms);
          break;
        case emu::Distribution::Kind::kUniform:
          t.switching_ms = fmt::format("{{uniform: [{}, {}]}}", d.a_ms, d.b_ms);
          break;
        case emu::Distribution::Kind::kNormal:
          t.switching_ms = fmt::format("{{normal: {{mean: {}, sd: {}, floor: {}}}}}", d.a_ms, d.b_ms, d.floor_ms);
          break;
      }
      vlab::set_lab_timing(target_.lab.dir, t, std::chrono::seconds(10));
      ctx_.log("virtual lab switching time put back to " + d.to_string());
    } catch (const std::exception& e) {
      ctx_.log(std::string("could not put the virtual lab's switching time back: ") + e.what());
    }
  }
  LabSwitching(const LabSwitching&) = delete;
  LabSwitching& operator=(const LabSwitching&) = delete;

  void set(double ms) {
    if (!active_ || ms == current_) return;
    vlab::LabTiming t;
    t.switching_ms = fmt::format("{}", ms);
    auto now = vlab::set_lab_timing(target_.lab.dir, t, std::chrono::seconds(10));
    changed_ = true;
    current_ = ms;
    ctx_.log("virtual lab switching time now " + now.switching.to_string());
  }

 private:
  const Target& target_;
  const RunContext& ctx_;
  const bool active_;
  bool changed_ = false;
  double current_ = -1;
  vlab::TimingState original_;
};

// One run of the type: the steps of run(), in order, over the state they share.
class PhaseWorkloadRun {
 public:
  PhaseWorkloadRun(Target& target, const RunContext& ctx, RunResult& result)
      : target_(target), spec_(target.spec), pw_(*target.spec.phase_workload), ctx_(ctx), result_(result) {}

  void run() {
    folder_ = fs::absolute(result_.folder).string();
    schedule_text_ = read_file_or_empty(pw_.schedule_path);
    write_text(folder_ + "/schedule.yaml", schedule_text_);
    token_ = random_token();  // this run's controller secret: the ranks get it over SSH
    program_ = install_program();
    rails_ = pw_.rail_list();
    for (const auto& r : rails_) rail_slots_.push_back(PhaseWorkloadSpec::slots_of(r, spec_.hosts));
    for (const auto& r : pw_.ranks) used_hosts_.insert(r.host);
    measure_offsets();
    // The launcher first: an allocation Slurm refuses (or a name mpirun could not resolve) ends
    // the run before any host was prepared, and a refusal costs no host preparation and undo.
    if (pw_.launcher != Launcher::kSsh) prepare_job_launcher();
    std::optional<HostPrep> prep;  // undone when the run ends, however it ends
    if (pw_.pin_neighbours || !pw_.rxe.empty()) {
      prepare_hosts(prep.emplace(spec_), pw_, ctx_.logger());
      host_preparation_ = prep->record();
    }
    if (!spec_.probes.empty() || spec_.rdma.enabled) {
      capture_ = std::make_unique<HostCapture>(target_, ctx_, folder_, result_.run_id);
      capture_->start();
      // The agents' clock estimates replace the SSH round-trip ones for the rank samples: the
      // ranks' lanes then line up with the probes' to the estimate's uncertainty.
      for (const auto& [host, c] : capture_->clock_estimates()) {
        auto it = offsets_.find(host);
        if (it == offsets_.end()) continue;
        it->second.offset_ns = c.offset_ns;
        it->second.uncertainty_ns = c.uncertainty_ns;
        it->second.error.clear();
        it->second.by = "agent";
      }
    }
    {
      LabSwitching switching(target_, pw_, ctx_);  // a virtual lab's switching time, put back at the end
      const auto runs = plan();
      for (size_t i = 0; i < runs.size(); ++i) {
        if (ctx_.interrupted()) break;
        if (runs[i].switching_ms >= 0) switching.set(runs[i].switching_ms);
        ctx_.log(fmt::format("[{}/{}] {}", i + 1, runs.size(), runs[i].label));
        run_mode(runs[i]);
        if (capture_) {
          for (const auto& u : capture_->unhealthy()) note_host_problem(u);
        }
      }
    }
    result_.interrupted = ctx_.interrupted();
    set_relative_to_native(result_.steps);
    if (capture_) finish_capture();
    result_.samples += timeline_rows_;
    write_step_files();
    write_text(folder_ + "/meta.json", meta().dump(2) + "\n");
  }

 private:
  int ranks() const { return pw_.schedule.ranks; }

  // Every (mode, sweep point, repetition) in run order: per switching time, each repetition
  // runs the modes in the spec's order; native (which never switches) runs at the first point only.
  struct PlannedRun {
    std::string mode, label;
    double switching_ms = -1;
    int repetition = 1;
  };
  std::vector<PlannedRun> plan() const {
    const bool swept = !pw_.sweep_switching_ms.empty();
    const std::vector<double> points = swept ? pw_.sweep_switching_ms : std::vector<double>{-1};
    std::vector<PlannedRun> out;
    for (size_t pi = 0; pi < points.size(); ++pi) {
      for (int rep = 1; rep <= pw_.repetitions; ++rep) {
        for (const auto& mode : pw_.modes) {
          if (mode == "native" && pi > 0) continue;
          PlannedRun r{mode, mode, mode == "native" ? -1.0 : points[pi], rep};
          if (r.switching_ms >= 0) r.label += fmt::format("-{:g}ms", r.switching_ms);
          if (swept || pw_.repetitions > 1) r.label += fmt::format("-r{}", rep);
          out.push_back(r);
        }
      }
    }
    return out;
  }

  void note_host_problem(const std::string& p) {
    if (!host_problems_.insert(p).second) return;
    result_.problems.push_back("probes: " + p);
    ctx_.log("problem: probes: " + p);
  }
  const HostEntry& host_of_rank(int r) const { return spec_.hosts[pw_.ranks[static_cast<size_t>(r)].host]; }

  // The program the ranks run: in a virtual lab this build's copy, installed where guests see it.
  std::string install_program() const {
    if (!target_.is_vlab() || pw_.program.find('/') != std::string::npos) return pw_.program;
    return install_binary(exe_dir(ctx_.options().self_exe) + "/" + pw_.program, target_.bin_dir(), pw_.program);
  }

  // Rank samples carry their host's clock: measured once per host, subtracted in the timelines
  // (the step figures only ever subtract times of one rank and do not need it).
  void measure_offsets() {
    if (pw_.launcher != Launcher::kSsh) return;
    for (size_t h : used_hosts_) offsets_[spec_.hosts[h].name] = measure_offset(ssh_options(spec_.hosts[h]));
  }

  // A fresh control plane per mode: the fabric starts from the same initial topology.
  // Native mode keeps the rails on pw_.native for the whole run; the others start from the
  // initial topology and let the controller move them. One orchestrator per rail, each with its
  // own driver session; the job on the ranks' slots, the spares' slots left free for a rank
  // whose port fails.
  std::vector<std::shared_ptr<phase::Orchestrator>> open_rails(ModeRun& m) {
    SwitchAccess sw = target_.switch_access();
    const phase::TopoId& topo = m.mode == "native" ? pw_.native : pw_.initial;
    const int64_t t0 = realtime_ns();
    std::vector<std::shared_ptr<phase::Orchestrator>> rails;
    bool changed = false;
    m.placement_added = 0;
    for (size_t k = 0; k < rails_.size(); ++k) {
      const auto& slots = rail_slots_[k];
      auto rail = std::make_shared<phase::Orchestrator>(rails_[k].name, slots, ocs::make_driver(sw.url, sw.options));
      // A failed port's rank takes a spare on its own host first (a standby NIC it can follow).
      std::vector<std::string> hosts;
      for (const auto* list : {&rails_[k].nics, &rails_[k].spares}) {
        for (const auto& p : *list) hosts.push_back(spec_.hosts[p.host].name);
      }
      rail->set_slot_hosts(std::move(hosts));
      auto placed = rail->add_job(pw_.layout, topo,
                                  std::vector<phase::Slot>(slots.begin(), slots.begin() + static_cast<long>(ranks())));
      m.placement_added += placed.added.size();
      changed = changed || placed.changed();
      ctx_.log(fmt::format("{}: job {} wired as {} on rail {} ({} circuit(s) made, {} removed)", m.label,
                           pw_.layout.job, topo.str(), rails_[k].name, placed.added.size(), placed.removed.size()));
      rails.push_back(std::move(rail));
    }
    // Circuits the placement made: their links need the switch's and the NICs' time to come up
    // before the ranks use them (the settle time of a reconfiguration experiment).
    if (changed && capture_) {
      capture_->control(Sample{t0, 0, "switch", "ocs", m.label + " setup " + topo.str(), "setup", 1, ""});
    }
    if (changed) std::this_thread::sleep_for(std::chrono::milliseconds(pw_.settle_ms));
    return rails;
  }

  // A reconfiguration the controller's rail made (on its worker thread): recorded for the
  // breakdown and, with probes, as the switch command / ack rows of the timeline.
  void record_reconfig(const ModeRun& m, const phase::ReconfigReport& r) {
    if (!r.changed()) return;
    PhaseReconfig rec;
    rec.label = m.label;
    rec.mode = m.mode;
    rec.rail = r.rail;
    rec.switching_ms = m.switching_ms;
    rec.repetition = m.repetition;
    rec.from = r.from;
    rec.to = r.to;
    rec.issued_ns = r.started.realtime_ns;
    for (const auto& c : r.calls) {
      if (c.op != "list" && c.op != "info") {
        rec.issued_ns = c.issued.realtime_ns;
        break;
      }
    }
    rec.acked_ns = r.finished.realtime_ns;
    rec.added = r.added.size();
    rec.removed = r.removed.size();
    rec.ports = r.ports_touched;
    if (capture_) {
      const std::string subject = m.label + " " + (rails_.size() > 1 ? r.rail + " " : std::string()) + r.to;
      capture_->control(Sample{rec.issued_ns, 0, "switch", "ocs", subject, "command", 1, ""});
      capture_->control(Sample{rec.acked_ns, 0, "switch", "ocs", subject, "ack", 1, "bool"});
    }
    std::lock_guard lock(reconfig_mu_);
    reconfigs_.push_back(std::move(rec));
  }

  phase::ControllerOptions controller_options(std::vector<std::shared_ptr<phase::Orchestrator>> rails,
                                              const ModeRun& m) {
    phase::ControllerOptions co;
    co.listen_host = pw_.listen_host;
    co.listen_port = pw_.listen_port;
    co.token = token_;
    co.layout = pw_.layout;
    co.rails = std::move(rails);
    co.ack_timeout = std::chrono::milliseconds(pw_.ack_timeout_ms);
    co.max_retries = pw_.max_retries;
    co.policy = pw_.policy;
    co.windows = pw_.windows;
    co.switch_time = std::chrono::microseconds(static_cast<int64_t>(pw_.switch_time_ms * 1000));
    if (pw_.inject_delay && m.switching_ms > 0) {
      co.injected_switch_time = std::chrono::microseconds(static_cast<int64_t>(m.switching_ms * 1000));
      // The injected time comes on top of every attempt: the ack timeout must leave room for it.
      co.ack_timeout += std::chrono::milliseconds(static_cast<int64_t>(m.switching_ms) + 1);
    }
    co.on_reprogram = [this, &m](const phase::ReconfigReport& r) { record_reconfig(m, r); };
    return co;
  }

  RankLaunch launch_settings(const std::string& mode, int controller_port) const {
    const HostEntry& host0 = host_of_rank(0);
    RankLaunch l;
    l.program = program_;
    l.controller = fmt::format("{}:{}", pw_.controller_host, controller_port);
    l.job = pw_.layout.job;
    l.mode = mode;
    l.rendezvous = fmt::format("{}:{}", host0.mgmt.empty() ? host0.ssh_host : host0.mgmt, pw_.rendezvous_port);
    return l;
  }

  std::chrono::seconds wait_limit() const { return std::chrono::seconds(pw_.timeout_s + 60); }

  void run_mode(const PlannedRun& run) {
    ModeRun m;
    m.mode = run.mode;
    m.label = run.label;
    m.switching_ms = run.switching_ms;
    m.repetition = run.repetition;
    m.dir = folder_ + "/" + m.label;
    fs::create_directories(m.dir);
    const size_t first_reconfig = reconfig_count();
    m.first_reconfig = first_reconfig;
    auto rails = open_rails(m);
    // faults: injected in this run of the job at their step or time (phase_faults.h).
    // rank-killed: a session to each such rank's host opened now, so the kill lands at its step
    // (remote_kill.h); before `faults`, whose thread uses them, so destroyed after it.
    std::map<int, std::unique_ptr<RemoteKiller>> killers;
    for (const auto& f : spec_.faults) {
      if (f.kind == kRankKilled && !killers.count(f.rank))
        killers[f.rank] = std::make_unique<RemoteKiller>(ssh_options(host_of_rank(f.rank)));
    }
    std::unique_ptr<PhaseFaults> faults;
    if (!spec_.faults.empty()) {
      faults = std::make_unique<PhaseFaults>(
          spec_, target_.is_vlab() ? target_.lab.dir : std::string(),
          [step_of = StepOfSeq(pw_.schedule)](const phase::ControllerEvent& e) { return step_of(e.group, e.seq); },
          [this, label = m.label](const std::string& line) { ctx_.log(label + ": " + line); }, m.dir + "/faults.json",
          [this, &m, &killers](const FaultSpec& f) { kill_rank(m, f.rank, *killers.at(f.rank)); });
    }
    std::optional<phase::Controller> ctl;  // none in native mode: the fabric stays as wired
    if (m.mode != "native") {
      auto co = controller_options(rails, m);
      if (faults) co.on_event = [p = faults.get()](const phase::ControllerEvent& e) { p->on_event(e); };
      ctl.emplace(std::move(co));
      ctl->start();
    }
    // phase.detect: each rail's circuits watched through the switch's power monitors (a driver
    // session per rail); a failed port is masked by the controller onto a spare slot.
    std::vector<std::unique_ptr<phase::PortWatch>> watches;
    if (ctl && pw_.detect) {
      SwitchAccess sw = target_.switch_access();
      phase::Controller* c = &*ctl;
      for (const auto& rail : rails) {
        watches.push_back(std::make_unique<phase::PortWatch>(
            rail, ocs::make_driver(sw.url, sw.options),
            [c](const phase::PortFailure& f) { c->port_failed(f.rail, f.port, f.evidence, f.seen_mono_ns); },
            *pw_.detect));
        watches.back()->start();
      }
    }
    m.launch = launch_settings(m.mode, ctl ? ctl->port() : 0);
    m.started_ns = realtime_ns();
    if (faults) faults->start();
    if (pw_.launcher == Launcher::kSsh) {
      run_over_ssh(m);
    } else {
      run_job_launcher(m);
    }
    m.ended_ns = realtime_ns();
    if (faults) {
      for (auto& p : faults->stop()) m.problem(m.label + ": " + p);
      for (auto& p : faults->release()) m.problem(m.label + ": " + p);
      m.fault_rows = faults->rows();
      m.faults = faults->record();
    }
    std::vector<phase::ControllerEvent> events;
    for (auto& w : watches) w->stop();
    if (ctl) {
      ctl->stop();
      events = ctl->events();
      const auto masks = port_masks(events);
      for (const auto& p : ctl->problems()) {
        if (!recovered_port_note(masks, p)) m.problems.push_back(m.label + ": controller: " + p);
      }
      if (ctl->in_fallback()) m.problems.push_back(m.label + ": the controller fell back to the giant ring");
    }
    join_reconfigs(first_reconfig, events);
    finish_mode(m, events, ctl && ctl->in_fallback());
  }

  // The switching time a run's idle windows are held against: its sweep point, else the virtual
  // lab's emulated time, else the median command time of its own reconfigurations (0: none).
  double switching_of(const ModeRun& m, size_t first_reconfig) {
    if (m.switching_ms >= 0) return m.switching_ms;
    if (target_.is_vlab()) {
      try {
        return vlab::lab_timing(target_.lab.dir).switching.mean_ms();
      } catch (const std::exception&) {
      }
    }
    std::vector<double> ms;
    {
      std::lock_guard lock(reconfig_mu_);
      for (size_t i = first_reconfig; i < reconfigs_.size(); ++i)
        ms.push_back(static_cast<double>(reconfigs_[i].acked_ns - reconfigs_[i].issued_ns) / 1e6);
    }
    if (ms.empty()) return 0;
    std::sort(ms.begin(), ms.end());
    return ms[ms.size() / 2];
  }

  // Idle windows of the run's groups (idle_windows.h), for windows.csv and the summary.
  void add_windows(const ModeRun& m, const std::vector<workloads::OpRecord>& rows) {
    try {
      const double sw = switching_of(m, m.first_reconfig);
      auto w = idle_windows(pw_.schedule, m.label, rows, sw);
      window_summaries_.push_back(summarize_windows(m.label, sw, w, rows));
      for (auto& x : w) windows_.push_back({std::move(x), sw});
    } catch (const std::exception& e) {
      result_.problems.push_back(m.label + ": idle windows: " + e.what());
    }
  }

  size_t reconfig_count() {
    std::lock_guard lock(reconfig_mu_);
    return reconfigs_.size();
  }

  // Each reconfiguration of the mode to the op that asked for it: the controller's latest
  // reconfig_start on the rail before the command, whose (group, seq) gives the step.
  void join_reconfigs(size_t first, const std::vector<phase::ControllerEvent>& events) {
    const StepOfSeq step_of(pw_.schedule);
    std::lock_guard lock(reconfig_mu_);
    for (size_t i = first; i < reconfigs_.size(); ++i) {
      auto& r = reconfigs_[i];
      const phase::ControllerEvent* best = nullptr;
      for (const auto& e : events) {
        if (e.kind != phase::ControllerEvent::Kind::kReconfigStart || e.real_ns > r.issued_ns) continue;
        if (!best || e.real_ns >= best->real_ns) best = &e;
      }
      if (!best) continue;
      r.group = best->group;
      r.seq = best->seq;
      r.step = step_of(best->group, best->seq);
    }
  }

  // ---- the ssh launcher: one SSH session per rank, the ranks' files fetched afterwards

  void run_over_ssh(ModeRun& m) {
    const std::map<size_t, std::string> remote = make_remote_dirs(m.label);
    ctx_.log(fmt::format("{}: starting {} rank(s) over SSH, controller {}", m.label, ranks(), m.launch.controller));
    // Each rank's pid on its host (its first output line), so Ctrl-C can end exactly it.
    std::vector<std::atomic<long long>> pids(static_cast<size_t>(ranks()));
    std::atomic<int> running{ranks()};
    m.pids = &pids;
    std::vector<std::thread> threads;
    for (int r = 0; r < ranks(); ++r) {
      threads.emplace_back([&, r] {
        run_rank(m, r, pids[static_cast<size_t>(r)], remote.at(host_index(r)));
        --running;
      });
    }
    while (running > 0) {
      if (ctx_.interrupted()) {
        stop_ranks(pids);
        m.problem(m.label + ": interrupted: the ranks were stopped");
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    for (auto& t : threads) t.join();
    m.pids = nullptr;
    remove_on_hosts(m, remote, fetch_rank_files(m, remote));
  }

  // rank-killed: SIGKILL to the rank's process over the session opened for it before the ranks
  // started, only while it is still the program the runner started there (its /proc/PID/comm).
  void kill_rank(const ModeRun& m, int r, RemoteKiller& killer) const {
    const long long pid = m.pids ? (*m.pids)[static_cast<size_t>(r)].load() : 0;
    const std::string program = fs::path(rank_argv(pw_, spec_.hosts, r, m.launch).front()).filename().string();
    killer.kill(pid, program, fmt::format("rank {} on {}", r, host_of_rank(r).name));
  }


  size_t host_index(int r) const { return pw_.ranks[static_cast<size_t>(r)].host; }

  // A folder per host made by mktemp -d there (a new name, the SSH user's own, mode 0700), with
  // the schedule in it: real hosts need not share a file system.
  std::map<size_t, std::string> make_remote_dirs(const std::string& mode) const {
    const std::string prefix = remote_dir_prefix(result_.run_id, mode);
    std::map<size_t, std::string> dirs, errors;
    std::mutex mu;
    const std::vector<size_t> hosts(used_hosts_.begin(), used_hosts_.end());
    in_parallel(hosts.size(), [&](size_t i) {
      const size_t h = hosts[i];
      std::string dir;
      try {
        ocs::SshSession s(ssh_options(spec_.hosts[h]));
        dir = make_remote_dir(s, prefix, "schedule.yaml", schedule_text_);
        write_token(s, dir);
        std::lock_guard lock(mu);
        dirs[h] = dir;
      } catch (const std::exception& e) {
        std::lock_guard lock(mu);
        if (!dir.empty()) dirs[h] = dir;  // made, its token not written: removed below with the others
        errors[h] = fmt::format("{}: cannot make the ranks' folder: {}", spec_.hosts[h].name, e.what());
      }
    });
    if (!errors.empty()) {
      for (const auto& [made, dir] : dirs) remove_quietly(made, dir);  // only the schedule's copies
      throw Error(errors.begin()->second);  // the first host's, in spec order
    }
    return dirs;
  }

  // The controller's token into the host's (mktemp'd, private) folder: a new 0600 file renamed
  // into place. The token travels on the session's stdin, never in a command line.
  void write_token(ocs::SshSession& s, const std::string& dir) const {
    auto r = s.exec(fmt::format("umask 077 && t=$(mktemp {0}/.controller.token.XXXXXX) && cat > \"$t\" && "
                                "mv -f \"$t\" {0}/controller.token",
                                shell_quote(dir)),
                    std::chrono::seconds(30), token_ + "\n");
    if (r.exit_status != 0) throw Error(fmt::format("cannot write {}/controller.token: {}", dir, r.err));
  }

  // Rank r over its own SSH session until it exits; its output goes to rank<r>.log.
  void run_rank(ModeRun& m, int r, std::atomic<long long>& pid, const std::string& remote) const {
    const HostEntry& h = host_of_rank(r);
    RankLaunch launch = m.launch;
    launch.output_dir = remote;
    launch.schedule = remote + "/schedule.yaml";
    launch.token_file = remote + "/controller.token";
    std::string cmd = shell_join(rank_argv(pw_, spec_.hosts, r, launch));
    std::string text = "$ " + cmd + "\n";
    std::string head;
    try {
      ocs::SshSession s(ssh_options(h));
      auto res = s.exec("echo ocslab-rank-pid $$; exec " + cmd, wait_limit(), {}, [&](std::string_view chunk) {
        if (head.find('\n') != std::string::npos) return;
        head.append(chunk);
        auto nl = head.find('\n');
        if (nl == std::string::npos || head.rfind("ocslab-rank-pid ", 0) != 0) return;
        pid = std::atoll(head.substr(16, nl - 16).c_str());
      });
      text += res.out + res.err + fmt::format("# exit status {}\n", res.exit_status);
      std::string last;
      if (res.exit_status != 0) last = why_it_failed(res.err.empty() ? res.out : res.err, m.launch.program);
      {
        std::lock_guard lock(m.mu);
        m.ends.push_back({r, h.name, res.exit_status, last, realtime_ns()});
      }
      if (res.exit_status != 0) {
        m.problem(fmt::format("{}: rank {} on {} {}: {}", m.label, r, h.name,
                              res.exit_status < 0 ? std::string("was killed by a signal")
                                                  : fmt::format("exited with status {}", res.exit_status),
                              last.empty() ? "(no output)" : last));
      }
    } catch (const std::exception& e) {
      text += std::string("# ") + e.what() + "\n";
      {
        std::lock_guard lock(m.mu);
        m.ends.push_back({r, h.name, 255, e.what(), realtime_ns()});  // as ssh's own failure status
      }
      m.problem(fmt::format("{}: rank {} on {}: {}", m.label, r, h.name, e.what()));
    }
    try {
      write_text(fmt::format("{}/rank{}.log", m.dir, r), text);
    } catch (const std::exception& e) {
      m.problem(fmt::format("{}: rank {}: {}", m.label, r, e.what()));
    }
  }

  // Ctrl-C: SIGTERM to every rank by its pid, over a session of its own; the rows the ranks
  // wrote before are still fetched.
  void stop_ranks(const std::vector<std::atomic<long long>>& pids) const {
    for (int r = 0; r < ranks(); ++r) {
      long long pid = pids[static_cast<size_t>(r)];
      if (pid <= 0) continue;
      try {
        ocs::SshSession s(ssh_options(host_of_rank(r)));
        s.exec(fmt::format("kill -TERM {} 2>/dev/null; true", pid), std::chrono::seconds(10));
      } catch (const std::exception& e) {
        spdlog::warn("could not stop rank {}: {}", r, e.what());
      }
    }
  }

  // Every rank's files back over SSH, each verified (written, fsynced, its size equal to the
  // host's). Returns the hosts whose folder must stay: a file there was not verified.
  std::set<size_t> fetch_rank_files(ModeRun& m, const std::map<size_t, std::string>& remote) const {
    std::set<size_t> keep;
    std::mutex mu;
    // Every rank's files at once (each rank's own names, into the mode's folder).
    in_parallel(static_cast<size_t>(ranks()), [&](size_t i) {
      const int r = static_cast<int>(i);
      const HostEntry& h = host_of_rank(r);
      std::vector<std::string> names;
      for (const char* pattern : kRankFiles) names.push_back(fmt::format(fmt::runtime(pattern), r));
      try {
        ocs::SshSession s(ssh_options(h));
        auto got = fetch_verified(s, remote.at(host_index(r)), names, m.dir);
        for (const auto& p : got.problems) m.problem(fmt::format("{}: rank {} on {}: {}", m.label, r, h.name, p));
        if (!got.verified()) {
          std::lock_guard lock(mu);
          keep.insert(host_index(r));
        }
      } catch (const std::exception& e) {
        m.problem(fmt::format("{}: fetching rank {}'s files from {}: {}", m.label, r, h.name, e.what()));
        std::lock_guard lock(mu);
        keep.insert(host_index(r));
      }
    });
    return keep;
  }

  // Each host's folder is removed once all its files were verified; otherwise it stays, named.
  void remove_on_hosts(ModeRun& m, const std::map<size_t, std::string>& remote, const std::set<size_t>& keep) const {
    std::vector<std::pair<size_t, std::string>> gone;
    for (const auto& [h, dir] : remote) {
      if (keep.count(h)) {
        m.problem(fmt::format("{}: kept {} on {}: not every rank file in it was copied and verified", m.label, dir,
                              spec_.hosts[h].name));
      } else {
        gone.emplace_back(h, dir);
      }
    }
    in_parallel(gone.size(), [&](size_t i) { remove_quietly(gone[i].first, gone[i].second); });
  }

  void remove_quietly(size_t h, const std::string& dir) const {
    try {
      ocs::SshSession s(ssh_options(spec_.hosts[h]));
      remove_remote_dir(s, dir);
    } catch (const std::exception& e) {
      spdlog::warn("could not remove {} on {}: {}", dir, spec_.hosts[h].name, e.what());
    }
  }

  // ---- mpirun / srun: one command for the whole job, run here or on launcher.host; the
  // launcher reaches the nodes itself and the ranks write into a folder every node shares.

  // Before the first mode: where the launcher runs, the shared folder (a virtual lab's own
  // when the spec names none), the runner's own launcher arguments and, for srun, the job's
  // Slurm allocation. Throws before any rank starts when Slurm refuses the allocation.
  void prepare_job_launcher() {
    if (!pw_.launcher_host.empty()) {
      for (const auto& h : spec_.hosts) {
        if (h.name == pw_.launcher_host) launcher_place_ = {h.name, ssh_options(h)};
      }
    }
    shared_root_ = pw_.shared_dir;
    if (shared_root_.empty() && target_.is_vlab()) shared_root_ = target_.lab.shared_dir();
    if (!shared_root_.empty()) {
      // A new folder per run (mkdtemp: never an earlier run's, whose rank files a rank that
      // writes nothing would otherwise pass off as its own; never removed by the runner).
      fs::create_directories(shared_root_);
      std::string tmpl = shared_root_ + "/" + result_.run_id + ".XXXXXX";
      if (!::mkdtemp(tmpl.data())) throw SystemError("mkdtemp " + tmpl, errno);
      shared_root_ = tmpl;
    }
    if (pw_.launcher == Launcher::kMpirun) {
      if (!pw_.launcher_host.empty()) check_names_resolve();
      launcher_extra_ = {"--display-map"};  // its "Data for JOB [N,1]" is the job id meta.json records
      if (target_.is_vlab()) add_vlab_mpirun_args();
    }
    if (pw_.launcher == Launcher::kSrun) {
      const auto runs = static_cast<int64_t>(plan().size());
      const int minutes = static_cast<int>((runs * wait_limit().count() + 59) / 60) + 1;
      auto argv = salloc_argv(pw_, spec_.hosts, "ocslab-" + result_.run_id, minutes);
      if (pw_.launcher_program.find('/') != std::string::npos)  // salloc next to the srun the spec names
        argv[0] = (fs::path(pw_.launcher_program).parent_path() / "salloc").string();
      ctx_.log(fmt::format("srun launcher: {} on {}", shell_join(argv), launcher_place_.where()));
      allocation_.emplace(launcher_place_, argv, folder_ + "/salloc.log");
      ctx_.log(fmt::format("srun launcher: Slurm job {} allocated ({} minute(s) at most; released at the end)",
                           allocation_->job_id(), minutes));
    }
  }

  // mpirun on a lab host names the others by their inventory names: each must resolve there
  // (getent, as mpirun's ssh will), else the job's host list cannot be used. Before any rank.
  void check_names_resolve() {
    std::vector<std::string> names;
    for (size_t h : used_hosts_) names.push_back(spec_.hosts[h].name);
    ocs::SshSession s(*launcher_place_.ssh);
    auto r = s.exec("getent hosts " + shell_join(names), std::chrono::seconds(30));
    std::set<std::string> found;
    std::istringstream in(r.out);
    for (std::string line; std::getline(in, line);) {
      std::istringstream words(line);
      std::string w;
      words >> w;  // the address
      while (words >> w) found.insert(w);
    }
    std::string missing;
    for (const auto& n : names) {
      if (!found.count(n)) missing += (missing.empty() ? "" : ", ") + n;
    }
    if (!missing.empty()) {
      throw Error(
          fmt::format("mpirun launcher: on {} (launcher.host) these hosts of the placement do not resolve "
                      "(getent hosts): {}; mpirun -H names them so: add them to its /etc/hosts or DNS",
                      launcher_place_.where(), missing));
    }
  }

  // In a virtual lab mpirun runs as root in a guest and reaches the others over the management
  // LAN (every guest's eth0 has the same QEMU user-network address) with the lab's key,
  // checking the hosts' keys against a known_hosts file written for the guests' names.
  void add_vlab_mpirun_args() {
    std::string known;
    for (const auto& h : target_.lab.hosts) {
      std::string pub = read_file_or_empty(target_.lab.host_dir(h.name) + "/ssh_host_ed25519_key.pub");
      std::istringstream in(pub);
      std::string type, key;
      in >> type >> key;
      known += fmt::format("{},{} {} {}\n", h.name, h.lan_ip.substr(0, h.lan_ip.find('/')), type, key);
    }
    const std::string known_file = (shared_root_.empty() ? folder_ : shared_root_) + "/known_hosts";
    write_text(known_file, known);
    launcher_extra_.insert(
        launcher_extra_.end(),
        {"--allow-run-as-root", "--mca", "plm_rsh_args",
         fmt::format("-i {} -o UserKnownHostsFile={} -o StrictHostKeyChecking=yes -o LogLevel=ERROR",
                     target_.lab.client_key(), known_file),
         "--mca", "oob_tcp_if_include", "lan0", "--mca", "btl_tcp_if_include", "lan0", "--mca", "routed", "direct"});
  }

  void run_job_launcher(ModeRun& m) {
    const bool shared_given = !shared_root_.empty();
    std::string shared = shared_given ? shared_root_ + "/" + m.label : m.dir;
    fs::create_directories(shared);
    m.launch.output_dir = shared;
    m.launch.schedule = shared_given ? shared + "/schedule.yaml" : folder_ + "/schedule.yaml";
    if (shared_given) write_text(m.launch.schedule, schedule_text_);
    m.launch.launcher_args = launcher_extra_;
    if (allocation_) m.launch.job_id = allocation_->job_id();
    // The ranks read the token from the shared folder: a new 0600 file, removed after the job.
    m.launch.token_file = shared + "/controller.token";
    write_secret_file(m.launch.token_file, token_);
    struct RemoveToken {
      std::string path;
      ~RemoveToken() {
        std::error_code ec;
        fs::remove(path, ec);
      }
    } remove_token{m.launch.token_file};
    auto argv = launcher_argv(pw_, spec_.hosts, m.launch);
    const std::string log = m.dir + "/launcher.log";
    write_text(log, "$ " + shell_join(argv) + "\n");
    ctx_.log(fmt::format("{}: {} on {}", m.label, shell_join(argv), launcher_place_.where()));
    try {
      auto o = run_launcher_command(launcher_place_, argv, log, wait_limit(), ctx_.options().interrupted);
      m.job_id = allocation_ ? allocation_->job_id() : mpirun_job_id(o.output);
      if (o.timed_out || ctx_.interrupted()) {
        m.problem(
            fmt::format("{}: {} stopped ({})", m.label, argv[0], ctx_.interrupted() ? "interrupted" : "timed out"));
      } else if (o.exit_status != 0) {
        m.problem(fmt::format("{}: {} on {} exited with status {} (see {})", m.label, argv[0], launcher_place_.where(),
                              o.exit_status, log));
      }
    } catch (const std::exception& e) {
      m.problem(fmt::format("{}: {} on {}: {}", m.label, argv[0], launcher_place_.where(), e.what()));
    }
    if (!shared_given) return;
    for (int r = 0; r < ranks(); ++r) {
      for (const char* pattern : kRankFiles) {
        std::string name = fmt::format(fmt::runtime(pattern), r);
        std::error_code ec;
        if (fs::exists(shared + "/" + name))
          fs::copy_file(shared + "/" + name, m.dir + "/" + name, fs::copy_options::overwrite_existing, ec);
      }
    }
  }

  // ---- after a mode: the controller's events, the ranks' rows, figures, the mode's timeline

  void finish_mode(ModeRun& m, const std::vector<phase::ControllerEvent>& events, bool fallback) {
    if (m.mode != "native") phase::write_events_csv(m.dir + "/controller-events.csv", events);
    ModeRows got = read_rank_files(m);
    auto figures = step_figures(pw_.schedule, m.mode, got.rows, events);
    drop_incomplete_steps(m, figures);
    for (auto& f : figures) {
      f.switching_ms = m.switching_ms;
      f.repetition = m.repetition;
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
    for (const auto& p : m.problems) ctx_.log("problem: " + p);
    result_.problems.insert(result_.problems.end(), m.problems.begin(), m.problems.end());
    int reconfigs = 0;
    for (const auto& f : figures) reconfigs += f.reconfigurations;
    const auto declined = std::count_if(events.begin(), events.end(), [](const phase::ControllerEvent& e) {
      return e.kind == phase::ControllerEvent::Kind::kDeclined;
    });
    if (pw_.policy == phase::Policy::kSafeWindow && m.mode != "native")
      ctx_.log(fmt::format("{}: policy safe-window declined {} reconfigurations", m.label, declined));
    const json masks = mask_record(m, events);
    const json stopped = job_record(m, events, got.rows);
    meta_modes_.push_back({{"mode", m.mode},
                           {"label", m.label},
                           {"switching_ms", m.switching_ms < 0 ? json(nullptr) : json(m.switching_ms)},
                           {"repetition", m.repetition},
                           {"placement_circuits_added", m.placement_added},
                           {"topology", m.mode == "native" ? pw_.native.str() : pw_.initial.str()},
                           {"controller", m.mode == "native" ? std::string() : m.launch.controller},
                           {"started", m.started_ns},
                           {"finished", m.ended_ns},
                           {"rows", got.rows.size()},
                           {"timeline_rows", got.samples.size()},
                           {"reconfigurations", reconfigs},
                           {"declined", declined},
                           {"masks", masks},
                           {"faults", m.faults},
                           {"job_stopped", stopped},
                           {"fallback", fallback},
                           {"job_id", m.job_id.empty() ? json(nullptr) : json(m.job_id)},
                           {"problems", m.problems}});
    ctx_.log(fmt::format("{}: {} row(s) from {} rank(s), {} reconfiguration(s) in {:.1f} s", m.label, got.rows.size(),
                         ranks(), reconfigs, static_cast<double>(m.ended_ns - m.started_ns) / 1e9));
  }

  // meta.json's phase.rails: per rail its name, each rank's NIC and slot, the spares.
  json rails_meta() const {
    json out = json::array();
    for (size_t k = 0; k < rails_.size(); ++k) {
      json nics = json::array(), spares = json::array();
      const auto& rail = rails_[k];
      for (size_t i = 0; i < rail.nics.size() + rail.spares.size(); ++i) {
        const RankPlacement& p = i < rail.nics.size() ? rail.nics[i] : rail.spares[i - rail.nics.size()];
        json e = {{"host", spec_.hosts[p.host].name},
                  {"nic", p.nic},
                  {"slot", fmt::format("{}-{}", rail_slots_[k][i].ingress, rail_slots_[k][i].egress)}};
        (i < rail.nics.size() ? nics : spares).push_back(e);
      }
      out.push_back({{"name", rail.name}, {"nics", nics}, {"spares", spares}});
    }
    return out;
  }

  // One failed port of a mode (phase.detect): its port_failed event and what the mask did.
  struct PortMask {
    std::string rail;
    int port = 0;
    int64_t reported_ns = 0;
    int64_t reported_mono_ns = 0;
    std::string evidence;
    bool answered = false;  // a masked event came for it
    bool masked = false;    // a rank moved, or the port was on no rank's slot (nothing to move)
    int rank = -1;          // the rank moved (-1: none)
    double recovery_ms = 0;
    // First dark reading -> the controller had the report (the detection); known when a rank
    // moved (the masked event's value counts from the first dark reading).
    std::optional<double> detect_ms;
    std::string move;  // the masked event's detail: the move, or why nothing moved
  };

  // The mode's failed ports from the controller's events: each port_failed with the masked
  // event that answered it (the next one on its rail).
  static std::vector<PortMask> port_masks(const std::vector<phase::ControllerEvent>& events) {
    std::vector<PortMask> out;
    for (const auto& e : events) {
      if (e.kind == phase::ControllerEvent::Kind::kPortFailed) {
        PortMask pm;
        pm.rail = e.rail;
        pm.port = static_cast<int>(e.value);
        pm.reported_ns = e.real_ns;
        pm.reported_mono_ns = e.mono_ns;
        pm.evidence = e.detail;
        out.push_back(std::move(pm));
      } else if (e.kind == phase::ControllerEvent::Kind::kMasked) {
        for (auto it = out.rbegin(); it != out.rend(); ++it) {
          if (it->rail != e.rail || it->answered) continue;
          it->answered = true;
          it->masked = e.rank >= 0 || e.detail.find(" masked; ") != std::string::npos;
          it->rank = e.rank;
          it->recovery_ms = e.rank >= 0 ? e.value : 0;
          if (e.rank >= 0) it->detect_ms = e.value - static_cast<double>(e.mono_ns - it->reported_mono_ns) / 1e6;
          it->move = e.detail;
          break;
        }
      }
    }
    return out;
  }

  // Whether a controller problem is the report of a port failure that was masked (its
  // port_failed and its masked notes): the run recovered from it, so it is listed under
  // summary.txt's failed ports (mask_record) and is not a problem of the run. A failure that
  // could not be masked stays a problem.
  static bool recovered_port_note(const std::vector<PortMask>& masks, const std::string& problem) {
    for (const auto& pm : masks) {
      if (!pm.masked) continue;
      for (const std::string& head : {fmt::format("rail {}: port {} failed: ", pm.rail, pm.port),
                                      fmt::format("rail {}: port {} masked; ", pm.rail, pm.port)}) {
        if (problem.rfind(head, 0) == 0) return true;
      }
    }
    return false;
  }

  // A run whose ranks failed leaves the ops they finished (collbench writes each as it
  // completes), but the step they failed in, and any step a killed rank's rows are missing from,
  // is not a step of the job: its figures would be a part of one. Those steps are left out of
  // the figures, said once.
  void drop_incomplete_steps(ModeRun& m, std::vector<StepFigures>& figures) const {
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
  json job_record(const ModeRun& m, const std::vector<phase::ControllerEvent>& events,
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

  // meta.json's masks of a mode and its lines of summary.txt: per failed port when it was
  // reported, the evidence, and what the mask did (the rank moved and its new slot, recovery =
  // first dark reading -> circuits re-made on the spare, or why nothing moved); a problem when
  // it could not be masked.
  json mask_record(const ModeRun& m, const std::vector<phase::ControllerEvent>& events) {
    json out = json::array();
    for (const auto& pm : port_masks(events)) {
      const bool moved = pm.rank >= 0;
      out.push_back({{"rail", pm.rail},
                     {"port", pm.port},
                     {"reported", pm.reported_ns},
                     {"evidence", pm.evidence},
                     {"masked", pm.masked},
                     {"rank", moved ? json(pm.rank) : json(nullptr)},
                     {"detect_ms", pm.detect_ms ? json(*pm.detect_ms) : json(nullptr)},
                     {"recovery_ms", moved ? json(pm.recovery_ms) : json(nullptr)},
                     {"move", pm.move}});
      const double at_s = static_cast<double>(pm.reported_ns - m.started_ns) / 1e9;
      std::string line = fmt::format("{}: rail {} port {} failed, reported at +{:.3f} s{} ({})", m.label, pm.rail,
                                     pm.port, at_s,
                                     pm.detect_ms ? fmt::format(", {:.1f} ms after its first dark reading", *pm.detect_ms)
                                                  : std::string(),
                                     pm.evidence);
      if (moved) {
        line += fmt::format("; masked: {}; recovered {:.1f} ms after the first dark reading", pm.move, pm.recovery_ms);
      } else if (pm.masked) {
        line += "; masked: " + pm.move;
      } else {
        line += "; not masked: " + (pm.move.empty() ? std::string("no answer from the rail") : pm.move);
        result_.problems.push_back(line);
      }
      ctx_.log(line);
      mask_lines_ += line + "\n";
    }
    return out;
  }

  // A host's clock minus the runner's where it was measured (ssh launcher), else 0.
  int64_t offset_of(const std::string& host) const {
    auto it = offsets_.find(host);
    return it != offsets_.end() && it->second.uncertainty_ns >= 0 ? it->second.offset_ns : 0;
  }

  ModeRows read_rank_files(ModeRun& m) const {
    ModeRows got;
    for (int r = 0; r < ranks(); ++r) {
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

  // iteration = the step: it starts at the earliest pre hook of its first op on any rank.
  void write_mode_timeline(const ModeRun& m, const ModeRows& got) const {
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

  // ---- the run's files

  // The switch as the spec (or the lab) names it.
  std::string switch_text() const { return spec_.switch_url.empty() ? target_.lab.switch_url() : spec_.switch_url; }

  void write_step_files() {
    CsvWriter w(folder_ + "/phase-steps.csv");
    w.header(step_csv_columns());
    for (const auto& f : result_.steps) w.row(step_csv_fields(f));
    w.flush();
    const auto points = sweep_points(result_.steps);
    if (!pw_.sweep_switching_ms.empty() || pw_.repetitions > 1) {
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
      for (const auto& [w, sw] : windows_) wc.row(window_csv_fields(w, sw));
      wc.flush();
      print_window_summary(windows, window_summaries_);
      write_text(folder_ + "/windows-summary.txt", windows.str());
    }
    const std::string masks = mask_lines_.empty() ? std::string() : "\nFailed ports (phase.detect):\n" + mask_lines_;
    const std::string stopped = job_lines_.empty() ? std::string() : "\nWhere the job stopped:\n" + job_lines_;
    write_text(folder_ + "/summary.txt", table.str() + "\n" + windows.str() + masks + stopped + breakdown_summary_);
  }

  // ---- probes: the capture's timeline, one breakdown row per reconfiguration x host x NIC

  void finish_capture() {
    std::vector<PhaseReconfig> recs;
    {
      std::lock_guard lock(reconfig_mu_);
      recs = reconfigs_;
    }
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
    auto out = capture_->finish(timeline, result_.run_id, [&](int64_t t) {
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
      rr.mapping = r.label + " " + (rails_.size() > 1 ? r.rail + " " : std::string()) + r.to;
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
  analysis::Breakdown only_touched(analysis::Breakdown b, const std::vector<PhaseReconfig>& recs) const {
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
  void write_phase_breakdown(const analysis::Breakdown& b, const std::vector<PhaseReconfig>& recs) {
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

  json meta() const {
    json meta;
    meta["run"] = result_.run_id;
    meta["type"] = kPhaseWorkload;
    meta["ocslab_version"] = ctx_.options().version;
    meta["spec"] = {{"file", fs::absolute(spec_.origin).string()},
                    {"name", spec_.name},
                    {"text", read_file_or_empty(spec_.origin)}};
    meta["workload"] = {{"program", program_},
                        {"schedule", pw_.schedule_path},
                        {"launcher", to_string(pw_.launcher)},
                        {"ranks", json::array()}};
    if (pw_.launcher != Launcher::kSsh) {
      // Where the one command ran, the Slurm allocation (srun) or Open MPI's job (mpirun) per mode.
      meta["workload"]["launcher_host"] = pw_.launcher_host.empty() ? json(nullptr) : json(pw_.launcher_host);
      meta["workload"]["shared_dir"] = shared_root_;
      if (allocation_) meta["workload"]["job_id"] = allocation_->job_id();
    }
    for (size_t r = 0; r < pw_.ranks.size(); ++r) {
      meta["workload"]["ranks"].push_back(
          {{"rank", r},
           {"host", spec_.hosts[pw_.ranks[r].host].name},
           {"nic", pw_.ranks[r].nic},
           {"slot", fmt::format("{}-{}", rail_slots_.front()[r].ingress, rail_slots_.front()[r].egress)}});
    }
    meta["phase"] = {{"job", pw_.layout.job},
                     {"pp", pw_.layout.pp},
                     {"digits", pw_.layout.describe_digits()},
                     {"initial", pw_.initial.str()},
                     {"rail", rails_.front().name},
                     {"rails", rails_meta()},
                     {"switch", switch_text()},
                     {"allow", spec_.allow.to_string()},
                     {"policy", phase::to_string(pw_.policy)}};
    if (pw_.policy == phase::Policy::kSafeWindow) {
      meta["phase"]["phase_table"] = pw_.phase_table;
      meta["phase"]["switch_time_ms"] = pw_.switch_time_ms;
    }
    meta["modes"] = meta_modes_;
    meta["native"] = {{"topology", pw_.native.str()}, {"unconnected_groups", pw_.native_unconnected}};
    meta["native"]["group_if"] = json::object();
    for (const auto& [g, nic] : pw_.native_group_if) meta["native"]["group_if"][g] = nic;
    meta["sweep"] = {{"switching_ms", pw_.sweep_switching_ms},
                     {"repetitions", pw_.repetitions},
                     {"how", pw_.sweep_switching_ms.empty() ? "none"
                             : pw_.inject_delay             ? "injected by the runner's controller"
                                                            : "the virtual lab's emulator timing"}};
    if (capture_) {
      meta["probes"] = {{"hosts", capture_meta_}, {"breakdown_rows", breakdown_rows_}};
    }
    {
      std::lock_guard lock(reconfig_mu_);
      meta["reconfigurations"] = reconfigs_.size();
    }
    meta["host_preparation"] = host_preparation_;  // Soft-RoCE devices added, neighbours pinned (undone after)
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

  Target& target_;
  const ExperimentSpec& spec_;
  const PhaseWorkloadSpec& pw_;
  const RunContext& ctx_;
  RunResult& result_;
  std::string folder_;         // absolute
  std::string schedule_text_;  // the schedule file, as the ranks get it
  std::string token_;          // the controllers' shared secret for this run
  std::string shared_root_;    // mpirun / srun: the folder the ranks write into (per mode below it)
  LauncherPlace launcher_place_;
  std::vector<std::string> launcher_extra_;    // the runner's own launcher arguments
  std::optional<SlurmAllocation> allocation_;  // srun: held from before the first mode to the end
  std::string program_;                        // as the ranks' hosts see it
  std::vector<RailSpec> rails_;
  std::vector<std::vector<phase::Slot>> rail_slots_;  // per rail: the ranks' slots, then the spares'
  std::set<size_t> used_hosts_;
  std::map<std::string, ClockOffset> offsets_;
  json meta_modes_ = json::array();
  json host_preparation_ = json::object();
  size_t timeline_rows_ = 0;
  std::unique_ptr<HostCapture> capture_;  // probes: (probes: in the spec) through every mode
  mutable std::mutex reconfig_mu_;        // reconfigs_: the rails' workers record into it
  std::vector<PhaseReconfig> reconfigs_;
  std::set<std::string> host_problems_;  // reported once each
  json capture_meta_ = nullptr;
  std::string mask_lines_;                              // summary.txt's failed ports (phase.detect), one line each
  std::string job_lines_;                               // summary.txt's "Where the job stopped", per failed run
  std::string breakdown_summary_;                       // summary.txt's per-layer part (probes only)
  std::vector<std::pair<IdleWindow, double>> windows_;  // every run's, with its switching time
  std::vector<WindowSummary> window_summaries_;
  size_t breakdown_rows_ = 0;
};

class PhaseWorkload final : public ExperimentType {
 public:
  void run(Target& target, const RunContext& ctx, RunResult& result) override {
    PhaseWorkloadRun(target, ctx, result).run();
  }
};

}  // namespace

std::unique_ptr<ExperimentType> make_phase_workload_experiment() { return std::make_unique<PhaseWorkload>(); }

}  // namespace ocslab::runner
