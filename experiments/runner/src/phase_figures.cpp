// The per-step figures of a phase-workload run (phase_figures.h).
#include "ocslab/runner/phase_figures.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <ostream>
#include <set>
#include <tuple>

#include "ocslab/workloads/shim_hooks.h"

namespace ocslab::runner {

StepOfSeq::StepOfSeq(const workloads::Schedule& s) {
  for (const auto& op : s.step) ++per_step_[workloads::shim_group(s, op)];
}

StepOfSeq::StepOfSeq(const workloads::Schedule& s, const std::vector<workloads::OpRecord>& rows) : StepOfSeq(s) {
  if (!s.step.empty()) return;
  std::map<int, std::vector<const workloads::OpRecord*>> by_rank;
  for (const auto& r : rows) by_rank[r.rank].push_back(&r);
  for (auto& [rank, v] : by_rank) {
    std::sort(v.begin(), v.end(), [](auto* a, auto* b) { return a->seq < b->seq; });
    std::map<std::string, int64_t> seq;
    for (auto* r : v) of_rows_.try_emplace({r->group, ++seq[r->group]}, r->step);
  }
}

int StepOfSeq::operator()(const std::string& group, int64_t seq) const {
  if (!of_rows_.empty()) {
    auto at = of_rows_.find({group, seq});
    return at == of_rows_.end() ? -1 : at->second;
  }
  auto it = per_step_.find(group);
  if (it == per_step_.end() || seq < 1) return -1;
  return static_cast<int>((seq - 1) / it->second);
}

std::vector<int> ops_per_step_of_ranks(const workloads::Schedule& s) {
  std::vector<int> out(static_cast<size_t>(s.ranks), 0);
  for (const auto& op : s.step) {
    for (int r = 0; r < s.ranks; ++r) out[static_cast<size_t>(r)] += s.involves(op, r) ? 1 : 0;
  }
  return out;
}

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
  const StepOfSeq step_of(s, rows);
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
      double comm = 0, wait = 0, bytes = 0;
      for (auto* r : v) {
        bytes += static_cast<double>(r->bytes);
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
        f.algbw_gbps = comm > 0 ? bytes * 8 / (comm * 1e6) : 0;  // bits per ms / 1e6 = Gbit/s
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
                                             "relative_to_native",
                                             "link_gbps",
                                             "algbw_gbps"};
  return c;
}

std::string ms_or_empty(double v) { return v < 0 ? std::string() : fmt::format("{:.3f}", v); }

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
          f.relative > 0 ? fmt::format("{:.4f}", f.relative) : std::string(),
          f.link_gbps > 0 ? fmt::format("{:g}", f.link_gbps) : std::string(),
          fmt::format("{:.4f}", f.algbw_gbps)};
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
  std::map<std::tuple<std::string, double, double, int>, std::vector<const StepFigures*>> runs;
  std::vector<std::tuple<std::string, double, double, int>> order;
  for (const auto& f : figures) {
    auto key = std::make_tuple(f.mode, f.switching_ms, f.link_gbps, f.repetition);
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
    std::tie(p.mode, p.switching_ms, p.link_gbps, p.repetition) = key;
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
      p.algbw_gbps += f->algbw_gbps;
    }
    const double n = static_cast<double>(v.size());
    p.step_ms /= n;
    p.algbw_gbps /= n;
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
  static const std::vector<std::string> c = {
      "mode",        "switching_ms",       "repetition",         "steps",   "step_ms",
      "step_ms_sd",  "relative_to_native", "reconfigs_per_step", "wait_ms", "barriers_per_step",
      "estimate_ms", "link_gbps",          "algbw_gbps"};
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
          ms_or_empty(p.estimate_ms),
          p.link_gbps > 0 ? fmt::format("{:g}", p.link_gbps) : std::string(),
          fmt::format("{:.4f}", p.algbw_gbps)};
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

}  // namespace ocslab::runner
