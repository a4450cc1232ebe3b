#include "ocslab/analysis/survival.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <ostream>
#include <tuple>
#include <type_traits>

#include "ocslab/analysis/qp_timers.h"
#include "ocslab/analysis/timeline.h"
#include "ocslab/common/csv_reader.h"
#include "ocslab/common/csv_writer.h"
#include "ocslab/common/error.h"

namespace fs = std::filesystem;

namespace ocslab::analysis {

namespace {

constexpr size_t kMaxLine = size_t{1} << 20;  // a timeline row is far shorter
constexpr size_t kReadChunk = size_t{1} << 20;
constexpr int kMaxHz = 100000;
constexpr int64_t kNsPerS = 1'000'000'000;
constexpr int64_t kNever = std::numeric_limits<int64_t>::max();
constexpr std::string_view kOutagePrefix = "outage-";

double ns_to_ms(int64_t ns) { return static_cast<double>(ns) / 1e6; }

// "t12r2" -> (12, 2); nullopt unless it is exactly t<digits>r<digits>.
std::optional<std::pair<int, int>> timer_suffix(std::string_view s) {
  if (s.size() < 4 || s[0] != 't') return std::nullopt;
  auto r = s.find('r');
  if (r == std::string_view::npos || r < 2 || r + 1 >= s.size()) return std::nullopt;
  int timeout = 0, retry = 0;
  auto a = std::from_chars(s.data() + 1, s.data() + r, timeout);
  auto b = std::from_chars(s.data() + r + 1, s.data() + s.size(), retry);
  if (a.ec != std::errc() || a.ptr != s.data() + r || b.ec != std::errc() || b.ptr != s.data() + s.size())
    return std::nullopt;
  if (s[1] == '-' || s[r + 1] == '-') return std::nullopt;
  return std::pair{timeout, retry};
}

enum class ProbeSignal { kStalled, kResumed, kError, kRecreated };

struct ProbeEvent {
  int64_t t = 0;
  ProbeSignal signal = ProbeSignal::kStalled;
  uint32_t line = 0;
};

struct Probe {
  SurvivalSubject subject;
  std::vector<ProbeEvent> events;
};

struct Command {
  int iteration = 0;
  double planned_ms = 0;
  int64_t t = 0;
  std::string subject;
  std::optional<bool> applied;  // the ack's value, when there is one
  uint32_t line = 0;
};

struct Light {
  int64_t t = 0;
  bool on = false;
  uint32_t line = 0;
};

// (run, host, subject or interface)
using StreamKey = std::tuple<std::string, std::string, std::string>;
using StreamView = std::tuple<std::string_view, std::string_view, std::string_view>;
// Orders keys and finds them by views (clang's tuple will not compare string with string_view).
struct StreamLess {
  using is_transparent = void;
  static StreamView view(const StreamKey& k) { return {std::get<0>(k), std::get<1>(k), std::get<2>(k)}; }
  static StreamView view(const StreamView& v) { return v; }
  template <class A, class B>
  bool operator()(const A& a, const B& b) const {
    return view(a) < view(b);
  }
};

// A stall: from the last good completion to the resume (or the next stall, or never).
struct Gap {
  int64_t start = 0, end = kNever;
  std::optional<int64_t> resumed;
};

// Keeps the rows the survival analysis reads; everything else is skipped unsplit.
class Collector {
 public:
  Collector(std::string name, SurvivalOptions options) : name_(std::move(name)), options_(options) {}

  void line(std::string_view text, uint32_t lineno) {
    if (!text.empty() && text.back() == '\r') text.remove_suffix(1);
    if (lineno == 1) return header(text);
    if (text.empty()) return;
    // Only ocs, emulator and survival-probe rows matter: a row naming none of them is skipped
    // before it is split (the bulk of a timeline: other probes' samples).
    if (text.find(":t") == std::string_view::npos && text.find("ocs") == std::string_view::npos &&
        text.find("emulator") == std::string_view::npos)
      return;
    split(text);
    if (fields_.size() != ncols_)
      throw ConfigError(fmt::format("{}:{}: {} field(s), the header has {}", name_, lineno, fields_.size(), ncols_));
    const std::string_view source = fields_[c_source_];
    if (source == "ocs") return ocs_row(lineno);
    if (source == "emulator") return light_row(lineno);
    if (source == "rdma") return rdma_row(lineno);
  }

  Survival finish();

 private:
  void header(std::string_view text) {
    std::vector<std::string> h = split_csv_line(text);
    ncols_ = h.size();
    auto col = [&](const char* n, bool required) -> int {
      for (size_t i = 0; i < h.size(); ++i)
        if (h[i] == n) return static_cast<int>(i);
      if (required) {
        std::string all;
        for (const auto& c : h) all += (all.empty() ? "" : ",") + c;
        throw ConfigError(fmt::format("{}:1: missing column '{}' (header: {})", name_, n, all));
      }
      return -1;
    };
    c_t_ = col("t_ns", true);
    c_host_ = col("host", true);
    c_source_ = col("source", true);
    c_subject_ = col("subject", true);
    c_signal_ = col("signal", true);
    c_value_ = col("value", true);
    c_run_ = col("run", false);
    c_iter_ = col("iteration", false);
    has_header_ = true;
  }

  template <class T>
  T number(int column, const char* what, uint32_t lineno) const {
    const std::string_view s = fields_[column];
    T v{};
    auto r = std::from_chars(s.data(), s.data() + s.size(), v);
    if (s.empty() || r.ec != std::errc() || r.ptr != s.data() + s.size())
      throw ConfigError(fmt::format("{}:{}: bad number '{}' in column {}", name_, lineno, s, what));
    if constexpr (std::is_floating_point_v<T>) {
      if (!std::isfinite(v))
        throw ConfigError(fmt::format("{}:{}: bad number '{}' in column {}", name_, lineno, s, what));
    }
    return v;
  }

  std::string_view run() const { return c_run_ >= 0 ? fields_[c_run_] : std::string_view(); }

  // The row's fields as views: of the line itself when it has no quote (the bulk, without an
  // allocation per field), else of split_csv_line's unquoted copies.
  void split(std::string_view text) {
    fields_.clear();
    if (text.find('"') == std::string_view::npos) {
      for (size_t from = 0;;) {
        size_t comma = text.find(',', from);
        fields_.push_back(text.substr(from, comma == std::string_view::npos ? comma : comma - from));
        if (comma == std::string_view::npos) return;
        from = comma + 1;
      }
    }
    owned_ = split_csv_line(text);
    for (const auto& f : owned_) fields_.push_back(f);
  }

  void ocs_row(uint32_t lineno) {
    const std::string_view signal = fields_[c_signal_];
    const std::string_view subject = fields_[c_subject_];
    if ((signal != "command" && signal != "ack") || subject.substr(0, kOutagePrefix.size()) != kOutagePrefix) return;
    std::string_view ms(subject);
    ms.remove_prefix(kOutagePrefix.size());
    double planned = -1;
    auto r = std::from_chars(ms.data(), ms.data() + ms.size(), planned);
    if (ms.size() < 3 || r.ec != std::errc() || std::string_view(r.ptr, ms.data() + ms.size() - r.ptr) != "ms" ||
        !(planned > 0) || !std::isfinite(planned))
      throw ConfigError(
          fmt::format("{}:{}: outage subject '{}' is not outage-<positive length>ms", name_, lineno, subject));
    std::vector<Command>& cmds = commands_[std::string(run())];
    const int64_t t = number<int64_t>(c_t_, "t_ns", lineno);
    const double value = number<double>(c_value_, "value", lineno);
    if (signal == "ack") {
      for (auto it = cmds.rbegin(); it != cmds.rend(); ++it)
        if (it->subject == subject) {
          if (!it->applied) it->applied = value != 0;
          break;
        }
      return;
    }
    Command c{c_iter_ >= 0 ? number<int>(c_iter_, "iteration", lineno) : static_cast<int>(cmds.size()) + 1,
              planned,
              t,
              std::string(subject),
              std::nullopt,
              lineno};
    for (const auto& other : cmds)
      if (other.iteration == c.iteration)
        throw ConfigError(fmt::format("{}:{}: a second outage in iteration {} (the first at line {})", name_, lineno,
                                      c.iteration, other.line));
    cmds.push_back(std::move(c));
  }

  void light_row(uint32_t lineno) {
    if (fields_[c_signal_] != "light") return;
    auto& v = lights_[{std::string(run()), std::string(fields_[c_host_]), std::string(fields_[c_subject_])}];
    v.push_back({number<int64_t>(c_t_, "t_ns", lineno), number<double>(c_value_, "value", lineno) != 0, lineno});
  }

  void rdma_row(uint32_t lineno) {
    const std::string_view subject = fields_[c_subject_], host = fields_[c_host_];
    auto it = probes_.find(StreamView{run(), host, subject});  // no allocation for a known probe
    if (it == probes_.end()) {
      std::optional<SurvivalSubject> s;
      try {
        s = parse_survival_subject(subject);
      } catch (const Error& e) {
        throw ConfigError(fmt::format("{}:{}: {}", name_, lineno, e.what()));
      }
      if (!s) return;
      it =
          probes_
              .emplace(StreamKey{std::string(run()), std::string(host), std::string(subject)}, Probe{std::move(*s), {}})
              .first;
    }
    const std::string_view signal = fields_[c_signal_];
    ProbeSignal sig;
    if (signal == "stalled")
      sig = ProbeSignal::kStalled;
    else if (signal == "resumed")
      sig = ProbeSignal::kResumed;
    else if (signal == "qp_error")
      sig = ProbeSignal::kError;
    else if (signal == "qp_recreated")
      sig = ProbeSignal::kRecreated;
    else
      return;
    it->second.events.push_back({number<int64_t>(c_t_, "t_ns", lineno), sig, lineno});
  }

  void row_for(Survival& s, const std::string& run, const std::vector<Command>& cmds, size_t k, const StreamKey& key,
               Probe& probe, const std::vector<Gap>& gaps);

  std::string name_;
  SurvivalOptions options_;
  bool has_header_ = false;
  size_t ncols_ = 0;
  int c_t_ = -1, c_host_ = -1, c_source_ = -1, c_subject_ = -1, c_signal_ = -1, c_value_ = -1, c_run_ = -1,
      c_iter_ = -1;
  std::vector<std::string_view> fields_;
  std::vector<std::string> owned_;                        // a quoted row's fields
  std::map<std::string, std::vector<Command>> commands_;  // per run, in file order
  std::map<StreamKey, std::vector<Light>> lights_;        // (run, host, interface)
  std::map<StreamKey, Probe, StreamLess> probes_;         // (run, host, subject)
};

// The probe's stalls, from its events sorted by time.
std::vector<Gap> gaps_of(const std::vector<ProbeEvent>& events) {
  std::vector<Gap> gaps;
  bool open = false;
  for (const auto& e : events) {
    if (e.signal == ProbeSignal::kStalled) {
      if (open) gaps.back().end = e.t;  // a stall without its resume ends where the next begins
      gaps.push_back({e.t, kNever, std::nullopt});
      open = true;
    } else if (e.signal == ProbeSignal::kResumed && open) {
      gaps.back().end = e.t;
      gaps.back().resumed = e.t;
      open = false;
    }
  }
  return gaps;
}

// The NIC's dark window in [from, to): the first light 0 and the first light 1 after it.
struct Dark {
  std::optional<int64_t> lost, back;
};
Dark dark_window(const std::vector<Light>* lights, int64_t from, int64_t to) {
  Dark d;
  if (!lights) return d;
  for (const auto& l : *lights) {
    if (!d.lost) {
      if (!l.on && l.t >= from && l.t < to) d.lost = l.t;
    } else if (l.on && l.t >= *d.lost) {
      d.back = l.t;
      break;
    }
  }
  return d;
}

void Collector::row_for(Survival& s, const std::string& run, const std::vector<Command>& cmds, size_t k,
                        const StreamKey& key, Probe& probe, const std::vector<Gap>& gaps) {
  const Command& c = cmds[k];
  const int64_t next = k + 1 < cmds.size() ? cmds[k + 1].t : kNever;
  const SurvivalSubject& ss = probe.subject;
  auto lights = lights_.find({run, std::get<1>(key), ss.interface});
  const Dark dark = dark_window(lights == lights_.end() ? nullptr : &lights->second, c.t, next);
  const auto planned_ns = static_cast<int64_t>(std::llround(c.planned_ms * 1e6));

  SurvivalRow r;
  r.run = run;
  r.iteration = c.iteration;
  r.outage_ms = c.planned_ms;
  if (dark.lost && dark.back) r.dark_ms = ns_to_ms(*dark.back - *dark.lost);
  r.host = std::get<1>(key);
  r.interface = ss.interface;
  r.peer = ss.peer;
  r.device = ss.device;
  r.timeout = ss.timeout;
  r.retry_cnt = ss.retry_cnt;
  r.predicted_survive = survives_outage(ss.timeout, ss.retry_cnt, planned_ns);
  auto soft = softroce_survivable_outage_ns(ss.timeout, ss.retry_cnt, options_.hz);
  r.softroce_survive = !soft || planned_ns <= *soft;
  if (c.applied == std::optional<bool>(false)) {
    r.outcome = Outcome::kNotApplied;
    s.rows.push_back(std::move(r));
    return;
  }
  // The outage this probe's NIC saw: its dark window, or without light rows the planned length
  // from the command. A stall belongs to the outage when its gap overlaps that window.
  const int64_t a = dark.lost ? *dark.lost : c.t;
  const int64_t b = dark.lost ? (dark.back ? *dark.back : next) : c.t + planned_ns;
  const Gap* gap = nullptr;
  for (const auto& g : gaps)
    if (g.start <= b && g.end >= a) {
      gap = &g;
      break;
    }
  const ProbeEvent* error = nullptr;
  for (const auto& e : probe.events)
    if (e.signal == ProbeSignal::kError && e.t >= c.t && e.t < next) {
      error = &e;
      break;
    }
  if (error) {
    r.outcome = Outcome::kErrored;
    if (dark.lost) r.error_after_ms = ns_to_ms(error->t - *dark.lost);
    for (const auto& e : probe.events)
      if ((e.signal == ProbeSignal::kRecreated || e.signal == ProbeSignal::kResumed) && e.t > error->t) {
        if (dark.back) r.recreated_after_light_ms = ns_to_ms(e.t - *dark.back);
        break;
      }
  } else if (gap && gap->resumed) {
    r.outcome = Outcome::kSurvived;
    if (dark.back) r.resume_after_light_ms = ns_to_ms(*gap->resumed - *dark.back);
  } else {
    r.outcome = gap ? Outcome::kStalled : Outcome::kUntouched;
  }
  s.rows.push_back(std::move(r));
}

// The outcome of a queue pair from its ends' rows: an RC responder has no retransmission timer
// and never errors on a dark link, its queue pair is re-created when the requester's errors, so
// the pair errored when either end did; else stalled (one end never resumed), else survived,
// else untouched.
Outcome pair_outcome(Outcome a, Outcome b) {
  for (Outcome o : {Outcome::kErrored, Outcome::kStalled, Outcome::kSurvived}) {
    if (a == o || b == o) return o;
  }
  return Outcome::kUntouched;
}

void fill_matrix(Survival& s) {
  std::map<std::pair<int, int>, SurvivalSetting> settings;
  // Per outage and setting, each queue pair once: its two ends' rows (host -> peer and peer ->
  // host) are one pair; a row whose other end has no stream counts alone.
  using PairKey = std::tuple<std::string, int, int, int, std::string, std::string>;
  std::map<PairKey, std::pair<double, Outcome>> pairs;
  for (const auto& r : s.rows) {
    auto [it, fresh] = settings.try_emplace({r.timeout, r.retry_cnt});
    SurvivalSetting& set = it->second;
    if (fresh) {
      set.timeout = r.timeout;
      set.retry_cnt = r.retry_cnt;
      for (double ms : s.grid) set.points.push_back({ms, 0, 0, 0, 0});
    }
    if (r.outcome == Outcome::kNotApplied) continue;
    PairKey key{r.run, r.iteration, r.timeout, r.retry_cnt, std::min(r.host, r.peer), std::max(r.host, r.peer)};
    auto [p, first] = pairs.try_emplace(key, r.outage_ms, r.outcome);
    if (!first) p->second.second = pair_outcome(p->second.second, r.outcome);
  }
  for (const auto& [key, v] : pairs) {
    SurvivalSetting& set = settings.at({std::get<2>(key), std::get<3>(key)});
    auto p = std::lower_bound(s.grid.begin(), s.grid.end(), v.first) - s.grid.begin();
    count_outcome(set.points[static_cast<size_t>(p)], v.second);
  }
  for (auto& [key, set] : settings) {
    judge_setting(set, s.grid, s.hz);
    s.settings.push_back(std::move(set));
  }
}

Survival Collector::finish() {
  if (!has_header_) throw ConfigError(fmt::format("{}:1: empty file, no header", name_));
  Survival s;
  s.path = name_;
  s.hz = options_.hz;
  s.probes = probes_.size();
  for (auto& [key, lights] : lights_)
    std::stable_sort(lights.begin(), lights.end(), [](const Light& x, const Light& y) { return x.t < y.t; });
  std::map<const Probe*, std::vector<Gap>> gaps;
  for (auto& [key, probe] : probes_) {
    std::stable_sort(probe.events.begin(), probe.events.end(),
                     [](const ProbeEvent& x, const ProbeEvent& y) { return x.t < y.t; });
    gaps[&probe] = gaps_of(probe.events);
  }
  for (auto& [run, cmds] : commands_) {
    std::stable_sort(cmds.begin(), cmds.end(), [](const Command& x, const Command& y) { return x.t < y.t; });
    for (const auto& c : cmds) {
      s.grid.push_back(c.planned_ms);
      ++s.outages;
      if (c.applied == std::optional<bool>(false)) ++s.not_applied;
    }
  }
  std::sort(s.grid.begin(), s.grid.end());
  s.grid.erase(std::unique(s.grid.begin(), s.grid.end()), s.grid.end());
  for (auto& entry : commands_) {  // not a structured binding: the lambda below captures it
    const std::string& run = entry.first;
    const std::vector<Command>& cmds = entry.second;
    std::vector<size_t> order(cmds.size());
    for (size_t k = 0; k < order.size(); ++k) order[k] = k;
    std::stable_sort(order.begin(), order.end(),
                     [&](size_t x, size_t y) { return cmds[x].iteration < cmds[y].iteration; });
    for (size_t k : order)
      for (auto& [key, probe] : probes_)
        if (std::get<0>(key) == run) row_for(s, run, cmds, k, key, probe, gaps[&probe]);
  }
  fill_matrix(s);
  return s;
}

// Feeds text to the collector line by line, numbering from 1.
void feed_text(Collector& c, std::string_view text, const std::string& name) {
  uint32_t lineno = 0;
  while (!text.empty()) {
    size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    if (line.size() > kMaxLine)
      throw ConfigError(fmt::format("{}:{}: a line longer than {} bytes", name, lineno + 1, kMaxLine));
    c.line(line, ++lineno);
    if (nl == std::string_view::npos) break;
    text.remove_prefix(nl + 1);
  }
}

std::string ms_text(double ms) { return fmt::format("{}", ms); }
std::string opt_ms(const std::optional<double>& v) { return v ? fmt::format("{:.3f}", *v) : std::string(); }
std::string bound_text(const std::optional<double>& v) { return v ? fmt::format("{:.3f} ms", *v) : "unbounded"; }

}  // namespace

std::optional<int64_t> softroce_survivable_outage_ns(int timeout, int retry_cnt, int hz) {
  if (hz < 1 || hz > kMaxHz) throw Error(fmt::format("hz must be in [1, {}], got {}", kMaxHz, hz));
  auto bound = survivable_outage_ns(timeout, retry_cnt);  // checks both ranges
  if (!bound || retry_cnt == kMaxQpRetryCnt) return std::nullopt;
  const int64_t t_ns = *ack_timeout_ns(timeout);
  const int64_t jiffies = std::max<int64_t>(1, t_ns * hz / kNsPerS);  // nsecs_to_jiffies: rounds down
  return retry_cnt * (jiffies * kNsPerS / hz);
}

std::optional<SurvivalSubject> parse_survival_subject(std::string_view subject) {
  auto colon = subject.rfind(':');
  if (colon == std::string_view::npos) return std::nullopt;
  auto timers = timer_suffix(subject.substr(colon + 1));
  if (!timers) return std::nullopt;
  auto [timeout, retry] = *timers;
  if (timeout < 0 || timeout > kMaxQpTimeout || retry < 0 || retry > kMaxQpRetryCnt)
    throw Error(fmt::format("survival probe '{}': timeout must be in [0, {}] and retry_cnt in [0, {}]", subject,
                            kMaxQpTimeout, kMaxQpRetryCnt));
  std::string_view base = subject.substr(0, colon);
  SurvivalSubject s;
  s.interface = std::string(interface_of(base));
  s.peer = std::string(peer_of(base));
  std::string_view dev = base.substr(0, base.find('@'));
  auto slash = dev.rfind('/');
  s.device = slash == std::string_view::npos ? std::string() : std::string(dev.substr(0, slash));
  s.timeout = timeout;
  s.retry_cnt = retry;
  return s;
}

const char* outcome_name(Outcome o) {
  switch (o) {
    case Outcome::kSurvived:
      return "survived";
    case Outcome::kErrored:
      return "errored";
    case Outcome::kStalled:
      return "stalled";
    case Outcome::kUntouched:
      return "untouched";
    case Outcome::kNotApplied:
      return "not_applied";
  }
  return "?";
}

const char* verdict_name(Verdict v) {
  switch (v) {
    case Verdict::kAgrees:
      return "agrees";
    case Verdict::kDisagrees:
      return "disagrees";
    case Verdict::kUndetermined:
      return "undetermined";
    case Verdict::kNotMonotone:
      return "not monotone";
  }
  return "?";
}

void count_outcome(SurvivalPoint& pt, Outcome o) {
  if (o == Outcome::kSurvived) ++pt.survived;
  if (o == Outcome::kErrored) ++pt.errored;
  if (o == Outcome::kStalled) ++pt.stalled;
  if (o == Outcome::kUntouched) ++pt.untouched;
}

void judge_setting(SurvivalSetting& set, const std::vector<double>& grid, int hz) {
  for (const auto& pt : set.points) {
    if (pt.total() && pt.survived + pt.untouched == pt.total()) set.longest_survived_ms = pt.outage_ms;
    if (pt.errored && !set.shortest_errored_ms) set.shortest_errored_ms = pt.outage_ms;
  }
  if (auto p = survivable_outage_ns(set.timeout, set.retry_cnt)) set.predicted_ms = ns_to_ms(*p);
  if (auto p = softroce_survivable_outage_ns(set.timeout, set.retry_cnt, hz)) set.softroce_ms = ns_to_ms(*p);
  set.verdict = judge_boundary(grid, set.longest_survived_ms, set.shortest_errored_ms, set.predicted_ms);
  set.softroce_verdict = judge_boundary(grid, set.longest_survived_ms, set.shortest_errored_ms, set.softroce_ms);
}

std::string SurvivalSetting::label() const { return fmt::format("t{} r{}", timeout, retry_cnt); }

Verdict judge_boundary(const std::vector<double>& grid, std::optional<double> longest_survived_ms,
                       std::optional<double> shortest_errored_ms, std::optional<double> predicted_ms) {
  if (!longest_survived_ms && !shortest_errored_ms) return Verdict::kUndetermined;
  if (longest_survived_ms && shortest_errored_ms && *longest_survived_ms > *shortest_errored_ms)
    return Verdict::kNotMonotone;
  if (!predicted_ms) return shortest_errored_ms ? Verdict::kDisagrees : Verdict::kAgrees;
  auto index = [&](double ms) {
    return static_cast<size_t>(std::lower_bound(grid.begin(), grid.end(), ms) - grid.begin());
  };
  // [longest survived, shortest errored], widened to the grid length on either side of it.
  double lo = -std::numeric_limits<double>::infinity(), hi = std::numeric_limits<double>::infinity();
  if (longest_survived_ms) {
    size_t i = index(*longest_survived_ms);
    lo = i > 0 ? grid[i - 1] : lo;
  }
  if (shortest_errored_ms) {
    size_t i = index(*shortest_errored_ms);
    hi = i + 1 < grid.size() ? grid[i + 1] : hi;
  }
  return lo <= *predicted_ms && *predicted_ms <= hi ? Verdict::kAgrees : Verdict::kDisagrees;
}

Survival parse_survival(std::string_view text, const std::string& name, const SurvivalOptions& options) {
  Collector c(name, options);
  feed_text(c, text, name);
  return c.finish();
}

Survival read_survival(const std::string& path, const SurvivalOptions& options) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) throw ConfigError(fmt::format("{}: is a folder, not a timeline file", path));
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ConfigError(fmt::format("{}: cannot open: {}", path, std::strerror(errno)));
  Collector c(path, options);
  std::string buffer, chunk(kReadChunk, '\0');
  uint32_t lineno = 0;
  while (in) {
    in.read(chunk.data(), static_cast<std::streamsize>(chunk.size()));
    buffer.append(chunk.data(), static_cast<size_t>(in.gcount()));
    size_t from = 0;
    for (size_t nl; (nl = buffer.find('\n', from)) != std::string::npos; from = nl + 1)
      c.line(std::string_view(buffer).substr(from, nl - from), ++lineno);
    buffer.erase(0, from);
    if (buffer.size() > kMaxLine)
      throw ConfigError(fmt::format("{}:{}: a line longer than {} bytes", path, lineno + 1, kMaxLine));
  }
  if (in.bad()) throw Error(fmt::format("{}: read failed", path));
  if (!buffer.empty()) c.line(buffer, ++lineno);
  return c.finish();
}

void write_survival_csv(const Survival& s, std::ostream& out) {
  CsvWriter w(out, "survival.csv");
  w.header({"run", "iteration", "outage_ms", "dark_ms", "host", "interface", "peer", "timeout", "retry_cnt",
            "predicted", "predicted_softroce", "outcome", "error_after_ms", "resume_after_light_ms",
            "recreated_after_light_ms"});
  for (const auto& r : s.rows)
    w.row({r.run, std::to_string(r.iteration), ms_text(r.outage_ms), opt_ms(r.dark_ms), r.host, r.interface, r.peer,
           std::to_string(r.timeout), std::to_string(r.retry_cnt), r.predicted_survive ? "survive" : "error",
           r.softroce_survive ? "survive" : "error", outcome_name(r.outcome), opt_ms(r.error_after_ms),
           opt_ms(r.resume_after_light_ms), opt_ms(r.recreated_after_light_ms)});
  w.flush();
}

void write_survival_matrix_csv(const Survival& s, std::ostream& out) {
  CsvWriter w(out, "survival_matrix.csv");
  w.header({"timeout", "retry_cnt", "outage_ms", "survived", "errored", "stalled", "untouched", "predicted_boundary_ms",
            "softroce_boundary_ms"});
  for (const auto& set : s.settings)
    for (const auto& p : set.points)
      w.row({std::to_string(set.timeout), std::to_string(set.retry_cnt), ms_text(p.outage_ms),
             std::to_string(p.survived), std::to_string(p.errored), std::to_string(p.stalled),
             std::to_string(p.untouched), opt_ms(set.predicted_ms), opt_ms(set.softroce_ms)});
  w.flush();
}

std::string survival_setting_line(const SurvivalSetting& set, int hz, bool softroce) {
  std::string out = fmt::format(
      "{}: {}, {}; predicted {}", set.label(),
      set.longest_survived_ms ? "survives <= " + ms_text(*set.longest_survived_ms) + " ms"
                              : std::string("survives no length"),
      set.shortest_errored_ms ? "errors >= " + ms_text(*set.shortest_errored_ms) + " ms" : std::string("no errors"),
      bound_text(set.predicted_ms));
  if (softroce) out += fmt::format(" (Soft-RoCE {} at HZ={})", bound_text(set.softroce_ms), hz);
  out += fmt::format(": {}", verdict_name(set.verdict));
  if (softroce && set.softroce_verdict != set.verdict)
    out += fmt::format(" (Soft-RoCE: {})", verdict_name(set.softroce_verdict));
  return out;
}

std::string survival_summary(const Survival& s) {
  std::string grid;
  for (double ms : s.grid) grid += (grid.empty() ? "" : ", ") + ms_text(ms);
  std::string out = fmt::format("survival     {} outage(s) of {} ms; {} setting(s), {} probe(s), {} row(s)", s.outages,
                                grid.empty() ? "no" : grid, s.settings.size(), s.probes, s.rows.size());
  if (s.not_applied) out += fmt::format("; {} outage(s) not applied (ack 0), left out", s.not_applied);
  out += "\n";
  std::string disagree, soft_disagree, other;
  auto add = [](std::string& list, const std::string& label) { list += (list.empty() ? "" : ", ") + label; };
  for (const auto& set : s.settings) {
    size_t stalled = 0;
    for (const auto& p : set.points) stalled += p.stalled;
    out += survival_setting_line(set, s.hz, true);
    if (stalled) out += fmt::format("; {} row(s) stalled to the end", stalled);
    out += "\n";
    if (set.verdict == Verdict::kDisagrees) add(disagree, set.label());
    if (set.softroce_verdict == Verdict::kDisagrees) add(soft_disagree, set.label());
    if (set.verdict == Verdict::kUndetermined || set.verdict == Verdict::kNotMonotone)
      add(other, set.label() + " " + verdict_name(set.verdict));
  }
  out += fmt::format("disagreements: {} (Soft-RoCE bound: {})", disagree.empty() ? "none" : disagree,
                     soft_disagree.empty() ? "none" : soft_disagree);
  if (!other.empty()) out += "; not judged: " + other;
  return out + "\n";
}

std::optional<std::string> write_survival_files(const std::string& timeline_path, const std::string& out_dir,
                                                const SurvivalOptions& options) {
  Survival s = read_survival(timeline_path, options);
  if (s.probes == 0) return std::nullopt;
  auto write = [&](const std::string& name, void (*fill)(const Survival&, std::ostream&)) {
    std::string path = (fs::path(out_dir) / name).string();
    std::ofstream f(path, std::ios::trunc);
    if (!f) throw Error("cannot write '" + path + "'");
    fill(s, f);
    f.close();
    if (!f) throw Error("cannot write '" + path + "'");
  };
  write("survival.csv", write_survival_csv);
  write("survival_matrix.csv", write_survival_matrix_csv);
  return survival_summary(s);
}

std::optional<std::string> write_survival(const std::string& folder, const SurvivalOptions& options) {
  return write_survival_files((fs::path(folder) / "timeline.csv").string(), folder, options);
}

}  // namespace ocslab::analysis
