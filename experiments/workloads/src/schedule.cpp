#include "ocslab/workloads/schedule.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <fstream>
#include <map>
#include <numbers>
#include <set>
#include <sstream>

#include "ocslab/common/config.h"
#include "ocslab/common/error.h"
#include "ocslab/workloads/ring.h"

namespace ocslab::workloads {

namespace {

constexpr const char* kKinds[] = {"dp", "pp", "tp", "cp", "ep", "sp", "world"};
// Large enough for any real schedule, small enough that a typo cannot make a rank allocate
// terabytes or a world of millions.
constexpr long long kMaxRanks = 65536;
constexpr uint64_t kMaxBytes = 1ull << 34;  // 16 GiB per operation
constexpr long long kMaxSteps = 1'000'000;

int line_of(const YAML::Node& n) { return n.IsDefined() ? n.Mark().line + 1 : 0; }

std::string known_kinds() {
  std::string s;
  for (const char* k : kKinds) s += (s.empty() ? "" : ", ") + std::string(k);
  return s;
}

OpType parse_type(const YamlDoc& doc, const YAML::Node& n) {
  std::string t = as_string(doc, n);
  OpType o = OpType::kAllReduce;
  if (op_type_of(t, o)) return o;
  throw config_error(doc, n, "unknown op '" + t + "' (known: " + known_op_names() + ")");
}

int parse_rank(const YamlDoc& doc, const YAML::Node& n, const Schedule& s, const std::string& what) {
  long long r = as_int(doc, n);
  if (r < 0 || r >= s.ranks) {
    throw config_error(
        doc, n, fmt::format("{}: rank {} is outside the world of {} rank(s) (0..{})", what, r, s.ranks, s.ranks - 1));
  }
  return static_cast<int>(r);
}

uint64_t bytes_of(const YamlDoc& doc, const YAML::Node& n, const std::string& what) {
  std::string text = as_string(doc, n);
  try {
    return parse_bytes(text);
  } catch (const Error& e) {
    throw config_error(doc, n, what + ": " + e.what());
  }
}

// One compute time in milliseconds: a finite number in 0..kMaxComputeMs.
double compute_ms_of(const YamlDoc& doc, const YAML::Node& n, const std::string& what) {
  if (!n.IsScalar()) throw config_error(doc, n, what + ": expected a number of milliseconds, got a structure");
  double v = 0;
  try {
    v = n.as<double>();
  } catch (const YAML::Exception&) {
    throw config_error(doc, n, what + ": expected a number of milliseconds, got '" + n.Scalar() + "'");
  }
  if (std::isnan(v) || std::isinf(v)) throw config_error(doc, n, what + ": must be a finite number of milliseconds");
  if (v < 0) throw config_error(doc, n, fmt::format("{}: {} ms is negative (compute takes 0 ms or more)", what, v));
  if (v > kMaxComputeMs) {
    throw config_error(doc, n, fmt::format("{}: {} ms is over the limit of {} ms", what, v, kMaxComputeMs));
  }
  return v;
}

// compute_ms: MS | {fixed: MS} | {uniform: [LO, HI]} | {normal: {mean: MS, sd: MS, floor: MS}}
// (the emulator's timing syntax, ocsctl/emulator/distribution.h).
ComputeTime parse_compute(const YamlDoc& doc, const YAML::Node& n, const std::string& what) {
  ComputeTime c;
  c.line = line_of(n);
  if (n.IsScalar()) {
    c.kind = ComputeTime::Kind::kFixed;
    c.a_ms = compute_ms_of(doc, n, what);
    return c;
  }
  if (!n.IsMap() || n.size() != 1) {
    throw config_error(doc, n,
                       what +
                           ": expected milliseconds or one of {fixed: MS}, {uniform: [LO, HI]}, "
                           "{normal: {mean: MS, sd: MS, floor: MS}}");
  }
  auto kv = *n.begin();
  std::string kind = kv.first.Scalar();
  const YAML::Node v = kv.second;
  if (kind == "fixed") {
    c.kind = ComputeTime::Kind::kFixed;
    c.a_ms = compute_ms_of(doc, v, what);
  } else if (kind == "uniform") {
    if (!v.IsSequence() || v.size() != 2) throw config_error(doc, v, what + ": uniform needs [LO, HI]");
    c.kind = ComputeTime::Kind::kUniform;
    c.a_ms = compute_ms_of(doc, v[0], what);
    c.b_ms = compute_ms_of(doc, v[1], what);
    if (c.b_ms < c.a_ms) {
      throw config_error(doc, v, fmt::format("{}: uniform: HI {} is below LO {}", what, c.b_ms, c.a_ms));
    }
  } else if (kind == "normal") {
    if (!v.IsMap()) throw config_error(doc, v, what + ": normal needs {mean: MS, sd: MS, floor: MS}");
    for (const auto& f : v) {
      std::string k = f.first.Scalar();
      if (k != "mean" && k != "sd" && k != "floor") {
        throw config_error(doc, f.first, what + ": normal: unknown key '" + k + "' (mean, sd, floor)");
      }
    }
    c.kind = ComputeTime::Kind::kNormal;
    c.a_ms = compute_ms_of(doc, require(doc, v, "mean"), what);
    c.b_ms = v["sd"].IsDefined() ? compute_ms_of(doc, v["sd"], what) : 0;
    c.floor_ms = v["floor"].IsDefined() ? compute_ms_of(doc, v["floor"], what) : 0;
  } else {
    throw config_error(doc, kv.first, what + ": unknown distribution '" + kind + "' (fixed, uniform, normal)");
  }
  return c;
}

uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// A uniform double in [0, 1) from the top 53 bits.
double unit(uint64_t& state) { return static_cast<double>(splitmix64(state) >> 11) * 0x1.0p-53; }

Group parse_group(const YamlDoc& doc, const YAML::Node& n, const Schedule& s) {
  only_keys(doc, n, {"name", "kind", "ranks"});
  Group g;
  g.line = line_of(n);
  g.name = as_string(doc, require(doc, n, "name"));
  if (g.name.empty()) throw config_error(doc, n["name"], "empty group name");
  g.kind = as_string(doc, require(doc, n, "kind"));
  if (std::find(std::begin(kKinds), std::end(kKinds), g.kind) == std::end(kKinds)) {
    throw config_error(doc, n["kind"],
                       "group '" + g.name + "': unknown kind '" + g.kind + "' (known: " + known_kinds() + ")");
  }
  YAML::Node ranks = require(doc, n, "ranks");
  if (!ranks.IsSequence() || ranks.size() == 0) {
    throw config_error(doc, ranks, "group '" + g.name + "': ranks must be a non-empty list of ranks");
  }
  std::set<int> seen;
  for (const auto& r : ranks) {
    int rank = parse_rank(doc, r, s, "group '" + g.name + "'");
    if (!seen.insert(rank).second) {
      throw config_error(doc, r, fmt::format("group '{}': rank {} listed twice", g.name, rank));
    }
    g.ranks.push_back(rank);
  }
  return g;
}

// alltoallv's sizes: a list of n rows of n byte counts (group order; row i = what member i sends
// to each member). Each entry a multiple of 4, not negative; at least one nonzero. Sets op.sizes
// and op.bytes (the largest row or column sum: the busiest member's send or receive buffer).
void parse_sizes(const YamlDoc& doc, const YAML::Node& m, const std::string& what, const Group& g, Op& op) {
  const size_t n = g.ranks.size();
  if (!m.IsSequence() || m.size() != n) {
    throw config_error(doc, m,
                       fmt::format("{}: sizes must be a list of {} rows (one per member of the group, in its order), "
                                   "got {}",
                                   what, n, m.IsSequence() ? std::to_string(m.size()) + " row(s)" : "no list"));
  }
  op.sizes.assign(n * n, 0);
  std::vector<uint64_t> rows(n, 0), cols(n, 0);
  for (size_t i = 0; i < n; ++i) {
    const YAML::Node row = m[i];
    if (!row.IsSequence() || row.size() != n) {
      throw config_error(doc, row,
                         fmt::format("{}: sizes row {} (member rank {}) must list {} byte counts, got {}", what, i,
                                     g.ranks[i], n, row.IsSequence() ? std::to_string(row.size()) : "no list"));
    }
    for (size_t j = 0; j < n; ++j) {
      const YAML::Node e = row[j];
      std::string text = as_string(doc, e);
      if (!text.empty() && text[0] == '-') {
        throw config_error(doc, e,
                           fmt::format("{}: sizes[{}][{}] = {} is negative (bytes from rank {} to rank {})", what, i,
                                       j, text, g.ranks[i], g.ranks[j]));
      }
      uint64_t b = bytes_of(doc, e, what);
      if (b % sizeof(float) != 0 || b > kMaxBytes) {
        throw config_error(doc, e,
                           fmt::format("{}: sizes[{}][{}] = {} must be a multiple of 4 (4-byte floats) up to {}", what,
                                       i, j, b, kMaxBytes));
      }
      op.sizes[i * n + j] = b;
      rows[i] += b;
      cols[j] += b;
      if (rows[i] > kMaxBytes || cols[j] > kMaxBytes) {
        throw config_error(doc, e, fmt::format("{}: a member sends or receives more than {} bytes", what, kMaxBytes));
      }
    }
  }
  op.bytes = std::max(*std::max_element(rows.begin(), rows.end()), *std::max_element(cols.begin(), cols.end()));
  if (op.bytes == 0) throw config_error(doc, m, what + ": every size is 0 (the op would move no data)");
}

Op parse_op(const YamlDoc& doc, const YAML::Node& n, const Schedule& s) {
  only_keys(doc, n, {"group", "op", "bytes", "src", "dst", "sizes", "root", "compute_ms"});
  Op op;
  op.line = line_of(n);
  YAML::Node gn = require(doc, n, "group");
  std::string gname = as_string(doc, gn);
  auto it = std::find_if(s.groups.begin(), s.groups.end(), [&](const Group& g) { return g.name == gname; });
  if (it == s.groups.end()) {
    std::string names;
    for (const auto& g : s.groups) names += (names.empty() ? "" : ", ") + g.name;
    throw config_error(doc, gn, "unknown group '" + gname + "' (groups: " + names + ")");
  }
  op.group = static_cast<size_t>(it - s.groups.begin());
  const Group& g = *it;
  op.type = parse_type(doc, require(doc, n, "op"));
  std::string what = fmt::format("{} on group '{}'", op_name(op.type), g.name);
  size_t size = g.ranks.size();

  if (op.type == OpType::kBarrier) {
    if (n["bytes"].IsDefined() && bytes_of(doc, n["bytes"], what) != 0) {
      throw config_error(doc, n["bytes"], what + ": a barrier moves no data (leave bytes out)");
    }
  } else if (op.type == OpType::kAllToAllV) {
    if (n["bytes"].IsDefined()) {
      throw config_error(doc, n["bytes"], what + ": an alltoallv's sizes come from its matrix (leave bytes out)");
    }
    parse_sizes(doc, require(doc, n, "sizes"), what, g, op);
  } else {
    YAML::Node bn = require(doc, n, "bytes");
    op.bytes = bytes_of(doc, bn, what);
    if (op.bytes == 0 || op.bytes > kMaxBytes) {
      throw config_error(doc, bn,
                         fmt::format("{}: bytes must be between 4 and {} (got {})", what, kMaxBytes, op.bytes));
    }
    uint64_t unit = sizeof(float);
    if (op.type == OpType::kAllGather || op.type == OpType::kReduceScatter || op.type == OpType::kAllToAll) unit *= size;
    if (op.bytes % unit != 0) {
      throw config_error(doc, bn,
                         fmt::format("{}: bytes {} is not a multiple of {} (4-byte floats{})", what, op.bytes, unit,
                                     unit > 4 ? fmt::format(" x {} ranks", size) : ""));
    }
  }

  if (op.type == OpType::kSendRecv) {
    if (n["src"].IsDefined() != n["dst"].IsDefined()) {
      throw config_error(doc, n, what + ": give both src and dst, or neither (a 2-rank group's first sends)");
    }
    if (n["src"].IsDefined()) {
      op.src = parse_rank(doc, n["src"], s, what);
      op.dst = parse_rank(doc, n["dst"], s, what);
      if (g.index_of(op.src) < 0) {
        throw config_error(doc, n["src"], fmt::format("{}: src rank {} is not a member of the group", what, op.src));
      }
      if (g.index_of(op.dst) < 0) {
        throw config_error(doc, n["dst"], fmt::format("{}: dst rank {} is not a member of the group", what, op.dst));
      }
      if (op.src == op.dst)
        throw config_error(doc, n["dst"], fmt::format("{}: src and dst are both rank {}", what, op.src));
    } else {
      if (size != 2) {
        throw config_error(
            doc, n,
            fmt::format("{}: the group has {} ranks: say which sends (src) and which receives (dst)", what, size));
      }
      op.src = g.ranks[0];
      op.dst = g.ranks[1];
    }
  } else if (n["src"].IsDefined() || n["dst"].IsDefined()) {
    throw config_error(doc, n["src"].IsDefined() ? n["src"] : n["dst"], what + ": src/dst are for sendrecv only");
  }
  if (op.type != OpType::kAllToAllV && n["sizes"].IsDefined()) {
    throw config_error(doc, n["sizes"], what + ": sizes is for alltoallv only (the others take bytes)");
  }
  if (op.type == OpType::kBroadcast) {
    op.root = g.ranks.front();
    if (n["root"].IsDefined()) {
      op.root = parse_rank(doc, n["root"], s, what + ": root");
      if (g.index_of(op.root) < 0) {
        throw config_error(doc, n["root"], fmt::format("{}: root rank {} is not a member of the group", what, op.root));
      }
    }
  } else if (n["root"].IsDefined()) {
    throw config_error(doc, n["root"], what + ": root is for broadcast only");
  }
  if (n["compute_ms"].IsDefined()) op.compute = parse_compute(doc, n["compute_ms"], what + ": compute_ms");
  return op;
}

Schedule parse(const YamlDoc& doc) {
  const YAML::Node& root = doc.root;
  if (!root.IsMap()) throw config_error(doc, root, "a schedule is a mapping (name, ranks, steps, groups, step)");
  only_keys(doc, root, {"name", "ranks", "steps", "warmup", "groups", "step", "compute_ms", "seed"});
  Schedule s;
  s.origin = doc.origin;
  s.name = root["name"].IsDefined() ? as_string(doc, root["name"]) : "schedule";
  YAML::Node rn = require(doc, root, "ranks");
  long long ranks = as_int(doc, rn);
  if (ranks < 1 || ranks > kMaxRanks) throw config_error(doc, rn, fmt::format("ranks must be 1..{}", kMaxRanks));
  s.ranks = static_cast<int>(ranks);
  if (root["steps"].IsDefined()) {
    long long v = as_int(doc, root["steps"]);
    if (v < 1 || v > kMaxSteps) throw config_error(doc, root["steps"], fmt::format("steps must be 1..{}", kMaxSteps));
    s.steps = static_cast<int>(v);
  }
  if (root["warmup"].IsDefined()) {
    long long v = as_int(doc, root["warmup"]);
    if (v < 0 || v > kMaxSteps) throw config_error(doc, root["warmup"], fmt::format("warmup must be 0..{}", kMaxSteps));
    s.warmup = static_cast<int>(v);
  }
  if (root["compute_ms"].IsDefined()) s.step_compute = parse_compute(doc, root["compute_ms"], "compute_ms");
  if (root["seed"].IsDefined()) {
    long long v = as_int(doc, root["seed"]);
    if (v < 0) throw config_error(doc, root["seed"], "seed must be 0 or more");
    s.seed = static_cast<uint64_t>(v);
  }

  YAML::Node groups = require(doc, root, "groups");
  if (!groups.IsSequence() || groups.size() == 0) throw config_error(doc, groups, "groups must be a non-empty list");
  std::map<std::string, int> lines;
  for (const auto& gn : groups) {
    Group g = parse_group(doc, gn, s);
    auto [it, fresh] = lines.emplace(g.name, g.line);
    if (!fresh) {
      throw config_error(doc, gn["name"],
                         fmt::format("group '{}' defined twice (also at line {})", g.name, it->second));
    }
    s.groups.push_back(std::move(g));
  }

  YAML::Node step = require(doc, root, "step");
  if (!step.IsSequence() || step.size() == 0)
    throw config_error(doc, step, "step must be a non-empty list of collectives");
  for (const auto& on : step) s.step.push_back(parse_op(doc, on, s));
  return s;
}

}  // namespace

std::string_view op_name(OpType t) {
  switch (t) {
    case OpType::kAllReduce:
      return "allreduce";
    case OpType::kAllGather:
      return "allgather";
    case OpType::kReduceScatter:
      return "reducescatter";
    case OpType::kSendRecv:
      return "sendrecv";
    case OpType::kBarrier:
      return "barrier";
    case OpType::kAllToAll:
      return "alltoall";
    case OpType::kAllToAllV:
      return "alltoallv";
    case OpType::kBroadcast:
      return "broadcast";
  }
  return "?";
}

bool op_type_of(std::string_view name, OpType& out) {
  for (OpType o : kOpTypes) {
    if (name == op_name(o)) {
      out = o;
      return true;
    }
  }
  return false;
}

std::string known_op_names() {
  std::string s;
  for (OpType o : kOpTypes) s += (s.empty() ? "" : ", ") + std::string(op_name(o));
  return s;
}

int Group::index_of(int rank) const {
  auto it = std::find(ranks.begin(), ranks.end(), rank);
  return it == ranks.end() ? -1 : static_cast<int>(it - ranks.begin());
}

bool Schedule::involves(const Op& op, int rank) const {
  if (op.type == OpType::kSendRecv) return rank == op.src || rank == op.dst;
  return group_of(op).index_of(rank) >= 0;
}

bool Schedule::has_compute() const {
  if (step_compute.any()) return true;
  return std::any_of(step.begin(), step.end(), [](const Op& op) { return op.compute.any(); });
}

int64_t ComputeTime::draw_ns(uint64_t seed, int rank, int step, int index) const {
  double ms = 0;
  switch (kind) {
    case Kind::kNone:
      return 0;
    case Kind::kFixed:
      ms = a_ms;
      break;
    case Kind::kUniform:
    case Kind::kNormal: {
      // One stream per (seed, rank, step, index): each value stirred into the state.
      uint64_t state = seed;
      for (uint64_t v :
           {static_cast<uint64_t>(static_cast<uint32_t>(rank)), static_cast<uint64_t>(static_cast<uint32_t>(step)),
            static_cast<uint64_t>(static_cast<uint32_t>(index))}) {
        state ^= v;
        state = splitmix64(state);
      }
      if (kind == Kind::kUniform) {
        ms = a_ms + (b_ms - a_ms) * unit(state);
      } else {
        double u1 = 1.0 - unit(state);  // (0, 1]: log is finite
        double u2 = unit(state);
        double z = std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
        ms = std::max(floor_ms, a_ms + b_ms * z);
      }
      break;
    }
  }
  ms = std::clamp(ms, 0.0, kMaxComputeMs);
  return static_cast<int64_t>(std::llround(ms * 1e6));
}

std::string ComputeTime::to_string() const {
  switch (kind) {
    case Kind::kNone:
      return "none";
    case Kind::kFixed:
      return fmt::format("fixed {} ms", a_ms);
    case Kind::kUniform:
      return fmt::format("uniform {}..{} ms", a_ms, b_ms);
    case Kind::kNormal:
      return fmt::format("normal {} sd {} floor {} ms", a_ms, b_ms, floor_ms);
  }
  return "?";
}

uint64_t Schedule::max_buffer_bytes() const {
  uint64_t m = 0;
  for (const auto& op : step) m = std::max(m, buffer_floats(op) * sizeof(float));
  return m;
}

std::string_view redop_name(RedOp r) {
  switch (r) {
    case RedOp::kSum:
      return "sum";
    case RedOp::kProd:
      return "prod";
    case RedOp::kMax:
      return "max";
    case RedOp::kMin:
      return "min";
    case RedOp::kAvg:
      return "avg";
  }
  return "?";
}

RedOp parse_redop(std::string_view name) {
  for (RedOp r : {RedOp::kSum, RedOp::kProd, RedOp::kMax, RedOp::kMin, RedOp::kAvg}) {
    if (name == redop_name(r)) return r;
  }
  throw Error("unknown reduction op '" + std::string(name) + "' (known: sum, prod, max, min, avg, all)");
}

uint64_t Schedule::digest() const {
  uint64_t h = 1469598103934665603ull;
  auto mix = [&h](std::string_view v) {
    for (unsigned char c : v) h = (h ^ c) * 1099511628211ull;
    h = (h ^ 0xff) * 1099511628211ull;  // separator, so "ab","c" differs from "a","bc"
  };
  mix(std::to_string(ranks));
  for (const auto& g : groups) {
    mix(g.name);
    mix(g.kind);
    for (int r : g.ranks) mix(std::to_string(r));
  }
  for (const auto& op : step) {
    mix(std::to_string(op.group));
    mix(op_name(op.type));
    mix(std::to_string(op.bytes));
    mix(std::to_string(op.src));
    mix(std::to_string(op.dst));
    // Only a non-sum reduction enters, so a schedule's digest stays what it was before -o.
    if (op.redop != RedOp::kSum) mix(redop_name(op.redop));
    // Only the new ops' own fields enter, so the other ops' digests stay what they were.
    if (op.type == OpType::kBroadcast) mix("root " + std::to_string(op.root));
    for (uint64_t b : op.sizes) mix(std::to_string(b));
    if (op.compute.any()) mix("compute " + op.compute.to_string());
  }
  // Only a schedule with modelled compute mixes it in, so the others' digests stay what they were.
  if (has_compute()) {
    mix("step compute " + step_compute.to_string());
    mix("seed " + std::to_string(seed));
  }
  return h;
}

uint64_t parse_bytes(std::string_view text) {
  uint64_t v = 0;
  const char* b = text.data();
  const char* e = b + text.size();
  auto [p, ec] = std::from_chars(b, e, v);
  if (ec != std::errc() || p == b) throw Error("bad byte count '" + std::string(text) + "' (e.g. 4096, 64KiB, 4MiB)");
  std::string_view suffix(p, static_cast<size_t>(e - p));
  uint64_t mult = 1;
  if (suffix.empty() || suffix == "B") {
    mult = 1;
  } else if (suffix == "K" || suffix == "KiB") {
    mult = 1ull << 10;
  } else if (suffix == "M" || suffix == "MiB") {
    mult = 1ull << 20;
  } else if (suffix == "G" || suffix == "GiB") {
    mult = 1ull << 30;
  } else {
    throw Error("bad byte count '" + std::string(text) + "': unknown suffix '" + std::string(suffix) +
                "' (B, K/KiB, M/MiB, G/GiB)");
  }
  if (v > (~0ull) / mult) throw Error("byte count '" + std::string(text) + "' is too large");
  return v * mult;
}

Schedule parse_schedule(const std::string& text, const std::string& origin) {
  YamlDoc doc = load_yaml_string(text, origin);
  try {
    return parse(doc);
  } catch (const YAML::Exception& e) {
    // A conversion yaml-cpp refused that the checks above did not anticipate.
    throw ConfigError(fmt::format("{}:{}:{}: {}", origin, e.mark.line + 1, e.mark.column + 1, e.msg));
  }
}

Schedule load_schedule(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw ConfigError(path + ": cannot open the schedule file");
  std::stringstream ss;
  ss << in.rdbuf();
  return parse_schedule(ss.str(), path);
}

}  // namespace ocslab::workloads
