// Idle windows between a group's communication phases (idle_windows.h).
#include "ocslab/runner/idle_windows.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <ostream>
#include <tuple>

#include "ocslab/common/csv_writer.h"
#include "ocslab/common/error.h"
#include "ocslab/workloads/shim_hooks.h"

namespace ocslab::runner {

// Named, not anonymous: the library is compiled as a unity build.
namespace idle_windows_detail {

// One gap of one rank: between two consecutive ops of a group in the rank's order.
struct Gap {
  std::string group;
  int from_step = 0, from_op = 0, to_step = 0, to_op = 0;
  int rank = 0;
  int64_t gap_ns = 0;
  bool boundary = false;  // another group's op ran between them on this rank
};

// Every rank's gaps, in (rank, step, index) order of the op that ends them. A job without a
// schedule (a torch job) has rows whose step and index are the rank's learned step: their
// group and kind name the op's shim group and the management ops.
std::vector<Gap> gaps(const workloads::Schedule& s, const std::vector<workloads::OpRecord>& rows) {
  const bool learned = s.step.empty();
  std::vector<std::string> group_of(s.step.size());
  std::vector<bool> mgmt(s.step.size());
  for (size_t i = 0; i < s.step.size(); ++i) {
    group_of[i] = workloads::shim_group(s, s.step[i]);
    mgmt[i] = s.group_of(s.step[i]).kind == "world";
  }
  std::map<int, std::vector<const workloads::OpRecord*>> by_rank;
  for (const auto& r : rows) {
    if (r.warmup) continue;
    if (learned) {
      if (r.kind != "world") by_rank[r.rank].push_back(&r);
      continue;
    }
    if (r.index < 0 || static_cast<size_t>(r.index) >= s.step.size())
      throw Error(fmt::format("{}: rank {} step {}: op index {} is not an op of the schedule ({} ops)", s.origin,
                              r.rank, r.step, r.index, s.step.size()));
    if (mgmt[static_cast<size_t>(r.index)]) continue;
    by_rank[r.rank].push_back(&r);
  }
  std::vector<Gap> out;
  for (auto& [rank, v] : by_rank) {
    std::stable_sort(v.begin(), v.end(),
                     [](auto* a, auto* b) { return std::tie(a->step, a->index) < std::tie(b->step, b->index); });
    std::map<std::string, size_t> last;  // group -> position of its latest op in v
    for (size_t p = 0; p < v.size(); ++p) {
      const auto& g = learned ? v[p]->group : group_of[static_cast<size_t>(v[p]->index)];
      auto it = last.find(g);
      if (it != last.end()) {
        const auto* prev = v[it->second];
        Gap gap;
        gap.group = g;
        gap.from_step = prev->step;
        gap.from_op = prev->index;
        gap.to_step = v[p]->step;
        gap.to_op = v[p]->index;
        gap.rank = rank;
        gap.gap_ns = v[p]->wait_start_ns - prev->end_ns;
        gap.boundary = it->second + 1 != p;
        out.push_back(gap);
      }
      last[g] = p;
    }
  }
  return out;
}

IdleWindow window_of(const std::string& mode, const Gap& g, double switching_ms) {
  IdleWindow w;
  w.mode = mode;
  w.rank = g.rank;
  w.group = g.group;
  w.from_step = g.from_step;
  w.from_op = g.from_op;
  w.step = g.to_step;
  w.to_op = g.to_op;
  w.window_ms = static_cast<double>(g.gap_ns) / 1e6;
  w.hides_switch = w.window_ms > switching_ms;
  return w;
}

double percentile(const std::vector<double>& sorted, double p) {
  if (sorted.empty()) return 0;
  double pos = (static_cast<double>(sorted.size()) - 1) * p / 100.0;
  auto lo = static_cast<size_t>(std::floor(pos));
  size_t hi = std::min(lo + 1, sorted.size() - 1);
  return sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - static_cast<double>(lo));
}

}  // namespace idle_windows_detail

std::vector<IdleWindow> rank_idle_windows(const workloads::Schedule& s, const std::string& mode,
                                          const std::vector<workloads::OpRecord>& rows, double switching_ms) {
  std::vector<IdleWindow> out;
  for (const auto& g : idle_windows_detail::gaps(s, rows)) {
    if (g.boundary) out.push_back(idle_windows_detail::window_of(mode, g, switching_ms));
  }
  return out;
}

std::vector<IdleWindow> idle_windows(const workloads::Schedule& s, const std::string& mode,
                                     const std::vector<workloads::OpRecord>& rows, double switching_ms) {
  using Key = std::tuple<int, int, std::string, int, int>;  // to_step, to_op, group, from_step, from_op
  struct Acc {
    idle_windows_detail::Gap min;
    int members = 0;
    bool boundary = false;
  };
  std::map<Key, Acc> by_key;
  for (const auto& g : idle_windows_detail::gaps(s, rows)) {
    auto& a = by_key[Key{g.to_step, g.to_op, g.group, g.from_step, g.from_op}];
    // gaps() yields ranks in ascending order: a strict < keeps the lowest rank on a tie
    if (a.members == 0 || g.gap_ns < a.min.gap_ns) a.min = g;
    ++a.members;
    a.boundary = a.boundary || g.boundary;
  }
  std::vector<IdleWindow> out;
  for (const auto& [key, a] : by_key) {
    if (!a.boundary) continue;
    IdleWindow w = idle_windows_detail::window_of(mode, a.min, switching_ms);
    w.members = a.members;
    out.push_back(w);
  }
  return out;
}

double hidden_threshold_ms(double switching_ms) { return std::max(1.0, 0.1 * switching_ms); }

WindowSummary summarize_windows(const std::string& mode, double switching_ms, const std::vector<IdleWindow>& windows,
                                const std::vector<workloads::OpRecord>& rows) {
  WindowSummary sum;
  sum.mode = mode;
  sum.switching_ms = switching_ms;
  std::vector<double> ms;
  for (const auto& w : windows) {
    ms.push_back(w.window_ms);
    sum.hiding += w.hides_switch ? 1 : 0;
  }
  std::sort(ms.begin(), ms.end());
  sum.windows = static_cast<int>(ms.size());
  if (sum.windows > 0) sum.hiding_fraction = static_cast<double>(sum.hiding) / sum.windows;
  sum.p50_ms = idle_windows_detail::percentile(ms, 50);
  sum.p90_ms = idle_windows_detail::percentile(ms, 90);
  sum.threshold_ms = hidden_threshold_ms(switching_ms);
  for (const auto& r : rows) {
    if (r.warmup || !r.reconfigured) continue;
    ++sum.reconfigured_ops;
    double pre_ms = static_cast<double>(r.start_ns - r.wait_start_ns) / 1e6;
    if (pre_ms < sum.threshold_ms) ++sum.hidden_reconfigs;
  }
  if (sum.reconfigured_ops > 0)
    sum.reconfig_hidden_fraction = static_cast<double>(sum.hidden_reconfigs) / sum.reconfigured_ops;
  return sum;
}

const std::vector<std::string>& window_csv_columns() {
  static const std::vector<std::string> c = {"mode", "group", "rank",      "members",      "from_step",   "from_op",
                                             "step", "to_op", "window_ms", "switching_ms", "hides_switch"};
  return c;
}

std::vector<std::string> window_csv_fields(const IdleWindow& w, double switching_ms) {
  return {w.mode,
          w.group,
          std::to_string(w.rank),
          std::to_string(w.members),
          std::to_string(w.from_step),
          std::to_string(w.from_op),
          std::to_string(w.step),
          std::to_string(w.to_op),
          fmt::format("{:.3f}", w.window_ms),
          fmt::format("{:.3f}", switching_ms),
          w.hides_switch ? "1" : "0"};
}

void write_windows_csv(const std::string& path, const std::vector<IdleWindow>& windows, double switching_ms) {
  CsvWriter w(path);
  w.header(window_csv_columns());
  for (const auto& x : windows) w.row(window_csv_fields(x, switching_ms));
  w.close();
}

void print_window_summary(std::ostream& out, const std::vector<WindowSummary>& summaries) {
  out << fmt::format("{:<13} {:>7} {:>7} {:>9} {:>9} {:>9} {:>9} {:>9}\n", "mode", "windows", "hide", "p50_ms",
                     "p90_ms", "switch_ms", "reconfigs", "hidden");
  for (const auto& s : summaries) {
    out << fmt::format("{:<13} {:>7} {:>6.0f}% {:>9.2f} {:>9.2f} {:>9.2f} {:>9} {:>8.0f}%\n", s.mode, s.windows,
                       100 * s.hiding_fraction, s.p50_ms, s.p90_ms, s.switching_ms, s.reconfigured_ops,
                       100 * s.reconfig_hidden_fraction);
  }
  out << "# windows: idle time of a group's circuits between two of its phases (min over its ranks); hide: the\n"
         "# share longer than the switching time; hidden: reconfigured op rows (measured steps) whose pre-hook\n"
         "# wait was below max(1 ms, 10% of the switching time)\n";
  for (const auto& s : summaries) {
    out << fmt::format("# {}: threshold {:.2f} ms, {} of {} reconfigured op rows hidden\n", s.mode, s.threshold_ms,
                       s.hidden_reconfigs, s.reconfigured_ops);
  }
}

}  // namespace ocslab::runner
