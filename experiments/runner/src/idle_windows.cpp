// Idle windows between a group's communication phases (idle_windows.h).
#include "ocslab/runner/idle_windows.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <climits>
#include <cstdlib>
#include <fstream>
#include <cmath>
#include <map>
#include <ostream>
#include <tuple>

#include "ocslab/common/csv_reader.h"
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

std::vector<PhaseWindow> phase_windows(const workloads::Schedule& s, const std::string& mode,
                                       const std::vector<workloads::OpRecord>& rows, const std::vector<bool>& starts,
                                       double switching_ms) {
  if (s.step.empty()) return {};
  if (starts.size() != s.step.size())
    throw Error(fmt::format("{}: phase starts for {} ops, the step has {}", s.origin, starts.size(), s.step.size()));
  // Op rows by (step, index), management ops and the warm-up left out.
  std::map<std::pair<int, int>, std::vector<const workloads::OpRecord*>> by_op;
  for (const auto& r : rows) {
    if (r.warmup) continue;
    if (r.index < 0 || static_cast<size_t>(r.index) >= s.step.size())
      throw Error(fmt::format("{}: rank {} step {}: op index {} is not an op of the schedule ({} ops)", s.origin,
                              r.rank, r.step, r.index, s.step.size()));
    if (s.group_of(s.step[static_cast<size_t>(r.index)]).kind == "world") continue;
    by_op[{r.step, r.index}].push_back(&r);
  }
  struct Phase {
    std::pair<int, int> first, last;
    std::map<int, const workloads::OpRecord*> first_of_rank;  // each rank's first op row in it
    int64_t latest_end = INT64_MIN;
  };
  std::vector<Phase> phases;
  for (const auto& [key, v] : by_op) {  // (step, index) order
    if (phases.empty() || starts[static_cast<size_t>(key.second)]) phases.push_back({key, key, {}, INT64_MIN});
    Phase& p = phases.back();
    p.last = key;
    for (const auto* r : v) {
      p.first_of_rank.try_emplace(r->rank, r);
      p.latest_end = std::max(p.latest_end, r->end_ns);
    }
  }
  std::vector<PhaseWindow> out;
  for (size_t k = 1; k < phases.size(); ++k) {
    const Phase& from = phases[k - 1];
    const Phase& to = phases[k];
    if (!starts[static_cast<size_t>(to.first.second)]) continue;  // cut by missing rows, not by a phase
    PhaseWindow w;
    w.mode = mode;
    w.from_step = from.last.first;
    w.from_op = from.last.second;
    w.step = to.first.first;
    w.to_op = to.first.second;
    const auto& op = s.step[static_cast<size_t>(w.to_op)];
    w.next_group = workloads::shim_group(s, op);
    w.next_type = std::string(workloads::op_name(op.type));
    w.next_bytes = op.bytes;
    int64_t latest_start = INT64_MIN;
    for (const auto& [rank, r] : to.first_of_rank) {
      if (r->wait_start_ns > latest_start) {
        latest_start = r->wait_start_ns;
        w.rank = rank;
      }
    }
    w.members = static_cast<int>(to.first_of_rank.size());
    w.window_ms = static_cast<double>(latest_start - from.latest_end) / 1e6;
    w.hides_switch = w.window_ms > switching_ms;
    out.push_back(w);
  }
  return out;
}

std::vector<TypeSlack> slack_per_type(const std::vector<PhaseWindow>& windows) {
  std::map<std::pair<std::string, std::string>, std::vector<double>> ms;
  std::map<std::pair<std::string, std::string>, int> hiding;
  for (const auto& w : windows) {
    ms[{w.mode, w.next_type}].push_back(w.window_ms);
    hiding[{w.mode, w.next_type}] += w.hides_switch ? 1 : 0;
  }
  std::vector<TypeSlack> out;
  for (auto& [key, v] : ms) {
    std::sort(v.begin(), v.end());
    out.push_back({key.first, key.second, static_cast<int>(v.size()), hiding[key], v.front(),
                   idle_windows_detail::percentile(v, 50)});
  }
  return out;
}

phase::PhaseWindows windows_table(const workloads::Schedule& s, const std::vector<IdleWindow>& windows) {
  if (s.step.empty()) throw ConfigError("a safe-window table from windows needs a schedule's step");
  if (windows.empty()) throw ConfigError("no group window was measured: nothing to predict the windows from");
  std::map<int, std::vector<double>> at;  // to_op -> window_ms
  for (const auto& w : windows) at[w.to_op].push_back(w.window_ms);
  phase::PhaseWindows t;
  for (size_t i = 0; i < s.step.size(); ++i) {
    const auto& op = s.step[i];
    phase::OpWindow o;
    o.index = static_cast<int>(i);
    o.group = workloads::shim_group(s, op);
    o.type = std::string(workloads::op_name(op.type));
    o.bytes = op.bytes;
    auto it = at.find(static_cast<int>(i));
    if (it != at.end()) {
      auto v = it->second;
      std::sort(v.begin(), v.end());
      o.idle_us = std::max<int64_t>(0, std::llround(idle_windows_detail::percentile(v, 50) * 1000));
    }
    t.ops.push_back(o);
  }
  return t;
}

std::vector<IdleWindow> read_group_windows(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw ConfigError(fmt::format("{}: cannot open", path));
  std::string line;
  int lineno = 1;
  if (!std::getline(in, line)) throw ConfigError(fmt::format("{}:1: empty, want windows.csv's header", path));
  std::map<std::string, size_t> col;
  const auto header = split_csv_line(line);
  for (size_t i = 0; i < header.size(); ++i) col[header[i]] = i;
  for (const char* c : {"mode", "group", "to_op", "window_ms"}) {
    if (!col.count(c)) throw ConfigError(fmt::format("{}:1: no column '{}' (not a windows.csv)", path, c));
  }
  const bool kinds = col.count("kind") > 0;
  std::vector<IdleWindow> all;
  std::string first, native;
  while (std::getline(in, line)) {
    ++lineno;
    if (line.empty()) continue;
    const auto f = split_csv_line(line);
    if (f.size() != header.size())
      throw ConfigError(fmt::format("{}:{}: {} fields, the header has {}", path, lineno, f.size(), header.size()));
    if (kinds && f[col["kind"]] != "group") continue;
    IdleWindow w;
    w.mode = f[col["mode"]];
    w.group = f[col["group"]];
    const std::string& op = f[col["to_op"]];
    const std::string& ms = f[col["window_ms"]];
    auto [end, ec] = std::from_chars(op.data(), op.data() + op.size(), w.to_op);
    if (ec != std::errc() || end != op.data() + op.size() || w.to_op < 0)
      throw ConfigError(fmt::format("{}:{}: to_op is not an op index: '{}'", path, lineno, op));
    char* stop = nullptr;
    w.window_ms = std::strtod(ms.c_str(), &stop);
    if (ms.empty() || *stop != '\0' || !std::isfinite(w.window_ms))
      throw ConfigError(fmt::format("{}:{}: window_ms is not a number: '{}'", path, lineno, ms));
    if (first.empty()) first = w.mode;
    if (native.empty() && (w.mode == "native" || w.mode.rfind("native-", 0) == 0)) native = w.mode;
    all.push_back(std::move(w));
  }
  const std::string& keep = native.empty() ? first : native;
  std::erase_if(all, [&](const IdleWindow& w) { return w.mode != keep; });
  return all;
}

void write_phase_table(const std::string& path, const phase::PhaseWindows& table) {
  CsvWriter w(path);
  w.header({"index", "group", "type", "bytes", "idle_us"});
  for (const auto& o : table.ops) {
    w.row({std::to_string(o.index), o.group, o.type, std::to_string(o.bytes), std::to_string(o.idle_us)});
  }
  w.close();
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
  static const std::vector<std::string> c = {"mode",         "group",        "rank",  "members",   "from_step",
                                             "from_op",      "step",         "to_op", "window_ms", "switching_ms",
                                             "hides_switch", "kind",         "next_type", "next_bytes"};
  return c;
}

namespace idle_windows_detail {

// One windows.csv row: the window's columns, then its kind and the op that ends it.
std::vector<std::string> csv_row(const IdleWindow& w, double switching_ms, const char* kind, std::string type,
                                 std::string bytes) {
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
          w.hides_switch ? "1" : "0",
          kind,
          std::move(type),
          std::move(bytes)};
}

}  // namespace idle_windows_detail

std::vector<std::string> window_csv_fields(const IdleWindow& w, double switching_ms, const workloads::Schedule* s) {
  // The op that ends the window, when the schedule is known (a torch job's rows name no op).
  if (!s || w.to_op < 0 || static_cast<size_t>(w.to_op) >= s->step.size())
    return idle_windows_detail::csv_row(w, switching_ms, "group", {}, {});
  const auto& op = s->step[static_cast<size_t>(w.to_op)];
  return idle_windows_detail::csv_row(w, switching_ms, "group", std::string(workloads::op_name(op.type)),
                                      std::to_string(op.bytes));
}

std::vector<std::string> window_csv_fields(const PhaseWindow& p, double switching_ms) {
  IdleWindow w;  // the same columns: group is the next phase's first group
  w.mode = p.mode;
  w.group = p.next_group;
  w.rank = p.rank;
  w.members = p.members;
  w.from_step = p.from_step;
  w.from_op = p.from_op;
  w.step = p.step;
  w.to_op = p.to_op;
  w.window_ms = p.window_ms;
  w.hides_switch = p.hides_switch;
  return idle_windows_detail::csv_row(w, switching_ms, "phase", p.next_type, std::to_string(p.next_bytes));
}

void write_windows_csv(const std::string& path, const std::vector<IdleWindow>& windows, double switching_ms) {
  CsvWriter w(path);
  w.header(window_csv_columns());
  for (const auto& x : windows) w.row(window_csv_fields(x, switching_ms));
  w.close();
}

void print_window_summary(std::ostream& out, const std::vector<WindowSummary>& summaries,
                          const std::vector<PhaseWindow>& phases) {
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
  if (phases.empty()) return;
  // Phase to phase (Opus's T_window) and OrchestrRL's slack per op type, per mode.
  out << fmt::format("\n{:<13} {:<13} {:>7} {:>7} {:>9} {:>9}\n", "mode", "next op", "windows", "hide", "min_ms",
                     "p50_ms");
  for (const auto& t : slack_per_type(phases)) {
    out << fmt::format("{:<13} {:<13} {:>7} {:>6.0f}% {:>9.2f} {:>9.2f}\n", t.mode, t.type, t.windows,
                       t.windows ? 100.0 * t.hiding / t.windows : 0.0, t.min_ms, t.p50_ms);
  }
  out << "# phase to phase: the next phase's latest start (pre-hook entry of each rank's first op in it)\n"
         "# minus the phase's latest end, over every rank (one clock); by the type of the next phase's first op\n";
}

}  // namespace ocslab::runner
