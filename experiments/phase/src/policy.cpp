#include "ocslab/phase/policy.h"

#include <fmt/format.h>

#include <algorithm>
#include <fstream>

#include "ocslab/common/error.h"

namespace ocslab::phase {

std::string_view to_string(Policy p) {
  switch (p) {
    case Policy::kOnRequest:
      return "on-request";
    case Policy::kSafeWindow:
      return "safe-window";
    case Policy::kGreedy:
      return "greedy";
  }
  return "?";
}

std::optional<Policy> parse_policy(std::string_view name) {
  for (auto p : {Policy::kOnRequest, Policy::kSafeWindow, Policy::kGreedy}) {
    if (name == to_string(p)) return p;
  }
  return std::nullopt;
}

std::string policy_names() { return "on-request, safe-window, greedy"; }

namespace {

// A non-negative decimal integer filling the whole field.
bool parse_count(const std::string& s, uint64_t& out) {
  if (s.empty() || s.size() > 19) return false;
  uint64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + static_cast<uint64_t>(c - '0');
  }
  out = v;
  return true;
}

}  // namespace

PhaseWindows PhaseWindows::load(const std::string& path) {
  static constexpr std::string_view kHeader = "index,group,type,bytes,idle_us";
  std::ifstream in(path);
  if (!in) throw ConfigError(fmt::format("{}: cannot open the phase table", path));
  PhaseWindows t;
  std::string line;
  int lineno = 0;
  bool header = false;
  while (std::getline(in, line)) {
    ++lineno;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty() || line[0] == '#') continue;
    if (!header) {
      if (line != kHeader)
        throw ConfigError(fmt::format("{}:{}:1: header must be '{}', got '{}'", path, lineno, kHeader, line));
      header = true;
      continue;
    }
    std::vector<std::string> f;
    std::vector<size_t> col;  // 1-based column of each field
    size_t start = 0;
    for (;;) {
      auto comma = line.find(',', start);
      f.push_back(line.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
      col.push_back(start + 1);
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
    if (f.size() != 5)
      throw ConfigError(fmt::format("{}:{}:1: expected 5 fields ({}), got {}", path, lineno, kHeader, f.size()));
    static constexpr const char* kNames[] = {"index", "group", "type", "bytes", "idle_us"};
    uint64_t v[5] = {};
    for (size_t i : {size_t{0}, size_t{3}, size_t{4}}) {
      if (!parse_count(f[i], v[i]) || (i != 3 && v[i] > 1'000'000'000'000ULL)) {
        throw ConfigError(fmt::format("{}:{}:{}: {} must be a non-negative integer, got '{}'", path, lineno, col[i],
                                      kNames[i], f[i]));
      }
    }
    if (f[1].empty()) throw ConfigError(fmt::format("{}:{}:{}: empty group", path, lineno, col[1]));
    if (v[0] != t.ops.size()) {
      throw ConfigError(
          fmt::format("{}:{}:{}: op index {} out of order (expected {})", path, lineno, col[0], v[0], t.ops.size()));
    }
    t.ops.push_back({static_cast<int>(v[0]), f[1], f[2], v[3], static_cast<int64_t>(v[4])});
  }
  if (t.ops.empty()) throw ConfigError(fmt::format("{}:{}:1: the phase table has no ops", path, std::max(lineno, 1)));
  return t;
}

const OpWindow* PhaseWindows::find(std::string_view group, int64_t seq) const {
  if (seq < 1) return nullptr;
  std::vector<const OpWindow*> rows;
  for (const auto& w : ops) {
    if (w.group == group) rows.push_back(&w);
  }
  if (rows.empty()) return nullptr;
  return rows[static_cast<size_t>((seq - 1) % static_cast<int64_t>(rows.size()))];
}

WindowDecision decide_safe_window(const PhaseWindows& table, std::string_view group, int64_t seq,
                                  std::chrono::microseconds switch_time) {
  WindowDecision d;
  const OpWindow* w = table.find(group, seq);
  if (!w) {
    d.why = fmt::format("{}#{}: the phase table has no op of group {}: no prediction, reconfigure", group, seq, group);
    return d;
  }
  d.idle_us = w->idle_us;
  d.reconfigure = w->idle_us > switch_time.count();
  d.why = fmt::format("{}#{} (op {} of the step): idle window {} us {} switch time {} us", group, seq, w->index,
                      w->idle_us, d.reconfigure ? ">" : "<=", switch_time.count());
  return d;
}

GreedyAllocation allocate_greedy(std::vector<Demand> demands, int ranks) {
  for (const auto& d : demands) {
    for (int r : {d.src, d.dst}) {
      if (r < 0 || r >= ranks)
        throw TopologyError(fmt::format("demand {}->{}: rank {} is outside 0..{}", d.src, d.dst, r, ranks - 1));
    }
    if (d.src == d.dst) throw TopologyError(fmt::format("demand {}->{}: a rank cannot send to itself", d.src, d.dst));
  }
  std::stable_sort(demands.begin(), demands.end(), [](const Demand& a, const Demand& b) {
    if (a.bytes != b.bytes) return a.bytes > b.bytes;
    if (a.src != b.src) return a.src < b.src;
    return a.dst < b.dst;
  });
  std::vector<bool> tx(static_cast<size_t>(ranks), false), rx(static_cast<size_t>(ranks), false);
  GreedyAllocation out;
  for (const auto& d : demands) {
    auto s = static_cast<size_t>(d.src), t = static_cast<size_t>(d.dst);
    if (tx[s] || rx[t]) {
      out.dropped.push_back(d);
      continue;
    }
    tx[s] = rx[t] = true;
    out.granted.push_back(d);
  }
  return out;
}

}  // namespace ocslab::phase
