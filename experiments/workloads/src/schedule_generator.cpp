#include "ocslab/workloads/schedule_generator.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <initializer_list>
#include <limits>
#include <map>
#include <set>

#include "ocslab/common/config.h"
#include "ocslab/common/error.h"
#include "ocslab/workloads/shim_hooks.h"

namespace ocslab::workloads {

// Named, not anonymous: the unity build puts this file in one unit with schedule.cpp.
namespace generator {

constexpr long long kMaxRanks = 65536;
constexpr uint64_t kMaxOpBytes = 1ull << 34;  // the schedule format's limit per op (16 GiB)
constexpr size_t kMaxOps = 100'000;           // per step; more is a typo in the sizes or micro-batches

// a x b x ..., saturating at UINT64_MAX (then over any limit and refused) instead of wrapping.
uint64_t prod(std::initializer_list<uint64_t> v) {
  uint64_t r = 1;
  for (uint64_t x : v)
    if (__builtin_mul_overflow(r, x, &r)) return std::numeric_limits<uint64_t>::max();
  return r;
}

uint64_t sum(uint64_t a, uint64_t b) {
  uint64_t r = 0;
  return __builtin_add_overflow(a, b, &r) ? std::numeric_limits<uint64_t>::max() : r;
}
constexpr long long kMaxShape = 1'000'000'000;  // any one shape field; more is a typo

int positive(const YamlDoc& doc, const YAML::Node& map, const char* key, long long max, int fallback = -1) {
  const YAML::Node n = map[key];
  if (!n.IsDefined()) {
    if (fallback >= 0) return fallback;
    throw config_error(doc, map, fmt::format("missing key '{}'", key));
  }
  return int_in(doc, n, 1, max, key);
}

int64_t positive64(const YamlDoc& doc, const YAML::Node& map, const char* key, int64_t fallback = -1) {
  const YAML::Node n = map[key];
  if (!n.IsDefined()) {
    if (fallback >= 0) return fallback;
    throw config_error(doc, map, fmt::format("missing key '{}'", key));
  }
  long long v = as_int(doc, n);
  if (v < 1 || v > kMaxShape)
    throw config_error(doc, n, fmt::format("{} must be in [1, {}], got {}", key, kMaxShape, v));
  return v;
}

// The element size of a dtype name, 0 when unknown.
int dtype_size(const std::string& t) {
  if (t == "fp32" || t == "float32") return 4;
  if (t == "bf16" || t == "fp16" || t == "float16") return 2;
  if (t == "fp8") return 1;
  return 0;
}

// model: the transformer or DLRM shape.
void parse_model(const YamlDoc& doc, const YAML::Node& m, GeneratorConfig& c) {
  if (!m.IsMap()) throw config_error(doc, m, "model is a map (layers, hidden, heads, sequence, ...)");
  only_keys(doc, m,
            {"kind", "layers", "hidden", "heads", "sequence", "vocabulary", "micro_batch", "dtype", "batch", "tables",
             "embedding_dim", "dense_params"});
  if (m["kind"]) c.model_kind = as_string(doc, m["kind"]);
  if (c.model_kind != "transformer" && c.model_kind != "dlrm")
    throw config_error(doc, m["kind"], "unknown model kind '" + c.model_kind + "' (known: transformer, dlrm)");
  if (m["dtype"]) c.dtype = as_string(doc, m["dtype"]);
  c.dtype_bytes = dtype_size(c.dtype);
  if (c.dtype_bytes == 0)
    throw config_error(doc, m["dtype"], "unknown dtype '" + c.dtype + "' (known: fp32, bf16, fp16, fp8)");
  if (c.model_kind == "dlrm") {
    for (const char* k : {"layers", "hidden", "heads", "sequence", "vocabulary", "micro_batch"})
      if (m[k])
        throw config_error(doc, m[k],
                           fmt::format("{} is a transformer's; a dlrm model takes batch, tables, "
                                       "embedding_dim, dense_params",
                                       k));
    c.batch = positive64(doc, m, "batch");
    c.tables = positive64(doc, m, "tables");
    c.embedding_dim = positive64(doc, m, "embedding_dim");
    c.dense_params = positive64(doc, m, "dense_params");
    return;
  }
  for (const char* k : {"batch", "tables", "embedding_dim", "dense_params"})
    if (m[k]) throw config_error(doc, m[k], fmt::format("{} is a dlrm model's (model.kind: dlrm)", k));
  c.layers = positive(doc, m, "layers", 100'000);
  c.hidden = positive(doc, m, "hidden", 1'000'000);
  c.heads = positive(doc, m, "heads", 100'000);
  c.sequence = positive64(doc, m, "sequence");
  c.vocabulary = positive64(doc, m, "vocabulary");
  c.micro_batch = positive64(doc, m, "micro_batch", 1);
  if (c.hidden % c.heads != 0)
    throw config_error(doc, m["heads"], fmt::format("heads {} does not divide hidden {}", c.heads, c.hidden));
}

// parallel: the sizes, their product the world; each size divides what it splits.
void parse_parallel(const YamlDoc& doc, const YAML::Node& root, GeneratorConfig& c) {
  const YAML::Node p = require(doc, root, "parallel");
  if (!p.IsMap()) throw config_error(doc, p, "parallel is a map {tp, dp, pp, cp, ep}");
  only_keys(doc, p, {"tp", "dp", "pp", "cp", "ep"});
  c.tp = positive(doc, p, "tp", kMaxRanks, 1);
  c.dp = positive(doc, p, "dp", kMaxRanks, 1);
  c.pp = positive(doc, p, "pp", kMaxRanks, 1);
  c.cp = positive(doc, p, "cp", kMaxRanks, 1);
  c.ep = positive(doc, p, "ep", kMaxRanks, 1);
  const long long product = 1LL * c.tp * c.dp * c.pp * c.cp * c.ep;
  if (product != c.ranks) {
    throw config_error(doc, p,
                       fmt::format("tp {} x dp {} x pp {} x cp {} x ep {} = {} ranks, but ranks is {} (line {})", c.tp,
                                   c.dp, c.pp, c.cp, c.ep, product, c.ranks, root["ranks"].Mark().line + 1));
  }
  auto refuse = [&](const char* key, const std::string& why) { throw config_error(doc, p[key], why); };
  phase::JobLayout layout{c.name, c.pp, {{"tp", c.tp}, {"cp", c.cp}, {"ep", c.ep}, {"dp", c.dp}}};
  try {
    layout.validate();  // the controller's limits (stages, dimension sizes)
  } catch (const Error& e) {
    throw config_error(doc, p, std::string("the controller cannot serve this layout: ") + e.what());
  }
  if (c.model_kind == "dlrm") {
    if (c.dp != c.ranks)
      refuse("dp", fmt::format("a dlrm job is data parallel over every rank: dp must be ranks ({})", c.ranks));
    if (c.tables % c.ranks != 0)
      refuse("dp",
             fmt::format("{} ranks do not divide the {} tables (each rank holds tables / ranks)", c.ranks, c.tables));
    return;
  }
  if (c.layers % c.pp != 0)
    refuse("pp",
           fmt::format("pp {} does not divide the model's {} layers (each stage holds layers / pp)", c.pp, c.layers));
  if (c.hidden % c.tp != 0 || c.heads % c.tp != 0 || c.vocabulary % c.tp != 0)
    refuse("tp", fmt::format("tp {} must divide hidden {}, heads {} and vocabulary {}", c.tp, c.hidden, c.heads,
                             c.vocabulary));
  if (c.sequence % c.cp != 0)
    refuse("cp",
           fmt::format("cp {} does not divide the sequence {} (each rank holds sequence / cp)", c.cp, c.sequence));
}

// pipeline: {schedule: gpipe | 1f1b, micro_batches: N}; sharding; moe.
void parse_training(const YamlDoc& doc, const YAML::Node& root, GeneratorConfig& c) {
  if (const YAML::Node pl = root["pipeline"]) {
    if (!pl.IsMap()) throw config_error(doc, pl, "pipeline is a map {schedule: gpipe | 1f1b, micro_batches: N}");
    only_keys(doc, pl, {"schedule", "micro_batches"});
    if (pl["schedule"]) {
      std::string k = as_string(doc, pl["schedule"]);
      if (k == "gpipe") {
        c.pipeline = PipelineKind::kGPipe;
      } else if (k == "1f1b") {
        c.pipeline = PipelineKind::k1F1B;
      } else {
        throw config_error(doc, pl["schedule"], "unknown pipeline schedule '" + k + "' (known: gpipe, 1f1b)");
      }
    }
    c.micro_batches = positive(doc, pl, "micro_batches", 4096, 1);
  }
  if (const YAML::Node sh = root["sharding"]) {
    static const std::map<std::string, Sharding> kNames = {{"none", Sharding::kNone},
                                                           {"zero1", Sharding::kZero1},
                                                           {"zero2", Sharding::kZero2},
                                                           {"zero3", Sharding::kZero3},
                                                           {"fsdp", Sharding::kFsdp}};
    auto it = kNames.find(as_string(doc, sh));
    if (it == kNames.end())
      throw config_error(doc, sh, "unknown sharding '" + sh.Scalar() + "' (known: none, zero1, zero2, zero3, fsdp)");
    c.sharding = it->second;
  }
  if (const YAML::Node moe = root["moe"]) {
    if (!moe.IsMap()) throw config_error(doc, moe, "moe is a map {experts: N, top_k: K}");
    only_keys(doc, moe, {"experts", "top_k"});
    c.experts = positive(doc, moe, "experts", 65536);
    c.top_k = positive(doc, moe, "top_k", 65536);
    if (c.top_k > c.experts)
      throw config_error(doc, moe["top_k"], fmt::format("top_k {} is more than the {} experts", c.top_k, c.experts));
    if (c.experts % c.ep != 0)
      throw config_error(doc, moe["experts"], fmt::format("ep {} does not divide the {} experts", c.ep, c.experts));
  } else if (c.ep > 1) {
    throw config_error(doc, root["parallel"]["ep"], "ep > 1 needs a moe section {experts: N, top_k: K}");
  }
}

GeneratorConfig parse(const YamlDoc& doc) {
  const YAML::Node& root = doc.root;
  if (!root.IsMap())
    throw config_error(doc, root, "a parallel configuration is a mapping (name, ranks, model, parallel, ...)");
  only_keys(doc, root,
            {"name", "ranks", "steps", "warmup", "model", "parallel", "pipeline", "sharding", "moe", "scale_down"});
  GeneratorConfig c;
  c.origin = doc.origin;
  c.name = as_string(doc, require(doc, root, "name"));
  if (c.name.empty() || c.name.find_first_of(" \t\n:#") != std::string::npos)
    throw config_error(doc, root["name"], "name must be one word");
  c.ranks = positive(doc, root, "ranks", kMaxRanks);
  c.steps = positive(doc, root, "steps", 1'000'000, 3);
  c.warmup = root["warmup"] ? int_in(doc, root["warmup"], 0, 1'000'000, "warmup") : 1;
  if (root["scale_down"]) c.scale_down = static_cast<uint64_t>(positive64(doc, root, "scale_down"));
  parse_model(doc, require(doc, root, "model"), c);
  parse_parallel(doc, root, c);
  parse_training(doc, root, c);
  return c;
}

std::string sharding_name(Sharding s) {
  switch (s) {
    case Sharding::kNone:
      return "none (plain DP allreduce)";
    case Sharding::kZero1:
      return "zero1";
    case Sharding::kZero2:
      return "zero2";
    case Sharding::kZero3:
      return "zero3";
    case Sharding::kFsdp:
      return "fsdp";
  }
  return "?";
}

struct GenOp {
  size_t group = 0;
  OpType type = OpType::kAllReduce;
  uint64_t bytes = 0;
  int src = -1, dst = -1;
  std::string why;
};

// Builds the groups and the step of one configuration.
class Builder {
 public:
  explicit Builder(const GeneratorConfig& c) : c_(c) {
    layout_.job = c.name;
    layout_.pp = c.pp;
    for (auto [name, size] :
         std::initializer_list<std::pair<const char*, int>>{{"tp", c.tp}, {"cp", c.cp}, {"ep", c.ep}, {"dp", c.dp}})
      if (size > 1) layout_.dims.push_back({name, size});
    layout_.validate();
    make_groups();
  }

  GeneratedSchedule run() {
    if (c_.model_kind == "dlrm") {
      dlrm_step();
    } else {
      pipeline_step();
      gradient_sync();
    }
    GeneratedSchedule g;
    g.layout = layout_;
    g.initial = phase::TopoId::uniform(layout_, layout_.dims.empty() ? 0 : 1);
    std::string body = yaml_body();
    g.schedule = parse_schedule(body, c_.origin + " (generated)");
    g.reconfigurations = predict_reconfigurations(g.schedule, layout_, g.initial);
    g.yaml = header(g) + body;
    g.summary = summary(g);
    return g;
  }

 private:
  // Rank of (stage, coordinates), coordinates in layout_.dims order.
  int rank_of(int stage, const std::vector<int>& coords) const {
    return stage * layout_.ranks_per_stage() + layout_.local_from(coords);
  }

  // Every dimension's groups per stage, then one pipeline group per local index.
  void make_groups() {
    const int rps = layout_.ranks_per_stage();
    for (size_t d = 0; d < layout_.dims.size(); ++d) {
      const auto& dim = layout_.dims[d];
      for (int s = 0; s < c_.pp; ++s) {
        for (int local = 0; local < rps; ++local) {
          std::vector<int> co = layout_.coords(local);
          if (co[d] != 0) continue;
          Group g;
          g.kind = dim.name;
          g.name = fmt::format("{}-s{}{}", dim.name, s, suffix(co, d));
          for (int i = 0; i < dim.size; ++i) {
            co[d] = i;
            g.ranks.push_back(rank_of(s, co));
          }
          dim_groups_[dim.name][s].push_back(groups_.size());
          groups_.push_back(g);
        }
      }
    }
    if (c_.pp > 1) {
      for (int local = 0; local < rps; ++local) {
        Group g;
        g.kind = "pp";
        g.name = "pp" + suffix(layout_.coords(local), layout_.dims.size());
        for (int s = 0; s < c_.pp; ++s) g.ranks.push_back(s * rps + local);
        pp_groups_.push_back(groups_.size());
        groups_.push_back(g);
      }
    }
  }

  // "-tp1-dp0": the coordinates of every dimension but `skip`.
  std::string suffix(const std::vector<int>& co, size_t skip) const {
    std::string s;
    for (size_t d = 0; d < layout_.dims.size(); ++d)
      if (d != skip) s += fmt::format("-{}{}", layout_.dims[d].name, co[d]);
    return s;
  }

  // raw bytes -> the op's bytes: divided by scale_down, rounded up to a whole number of `unit`.
  uint64_t scaled(uint64_t raw, uint64_t unit, std::string& why) const {
    uint64_t b = raw / c_.scale_down + (raw % c_.scale_down != 0 ? 1 : 0);
    if (b > kMaxOpBytes) {
      throw ConfigError(
          fmt::format("{}: {}: {} bytes after scale_down {}, over the schedule's limit of {} per op "
                      "(raise scale_down)",
                      c_.origin, why, b, c_.scale_down, kMaxOpBytes));
    }
    if (ops_.size() >= kMaxOps)
      throw ConfigError(
          fmt::format("{}: the step would have more than {} ops (fewer micro-batches or ranks)", c_.origin, kMaxOps));
    if (c_.scale_down > 1) why += fmt::format(" / scale_down {}", c_.scale_down);
    uint64_t r = std::max<uint64_t>(unit, (b + unit - 1) / unit * unit);
    if (r != raw / c_.scale_down || raw % c_.scale_down != 0)
      why += fmt::format(" -> {} (whole {}-byte units)", r, unit);
    return r;
  }

  uint64_t unit_of(OpType t, size_t n) const {
    return (t == OpType::kAllGather || t == OpType::kReduceScatter || t == OpType::kAllToAll) ? 4 * n : 4;
  }

  // One op on every group of `dim` in stage s.
  void on_dim(const std::string& dim, int s, OpType t, uint64_t raw, const std::string& why) {
    auto it = dim_groups_.find(dim);
    if (it == dim_groups_.end()) return;  // size 1: nothing to exchange
    for (size_t gi : it->second[s]) {
      GenOp op{gi, t, 0, -1, -1, why};
      op.bytes = scaled(raw, unit_of(t, groups_[gi].ranks.size()), op.why);
      ops_.push_back(op);
    }
  }

  // A send from stage `from` to stage `to` on every pipeline group.
  void on_pp(int from, int to, uint64_t raw, const std::string& why) {
    for (size_t gi : pp_groups_) {
      GenOp op{gi, OpType::kSendRecv, 0, groups_[gi].ranks[from], groups_[gi].ranks[to], why};
      op.bytes = scaled(raw, 4, op.why);
      ops_.push_back(op);
    }
  }

  uint64_t d() const { return static_cast<uint64_t>(c_.dtype_bytes); }
  uint64_t stage_layers() const { return static_cast<uint64_t>(c_.layers / c_.pp); }
  uint64_t tokens() const {
    return prod({static_cast<uint64_t>(c_.micro_batch), static_cast<uint64_t>(c_.sequence / c_.cp)});
  }
  uint64_t h() const { return static_cast<uint64_t>(c_.hidden); }

  // Parameters one rank of stage s holds: per layer 4h^2 of attention and 8h^2 of MLP (or
  // experts / ep experts of 8h^2 each), the embedding V x h on the first stage and the output
  // layer V x h on the last, all split over TP.
  uint64_t params(int s, std::string& why) const {
    const uint64_t mlp = prod({c_.experts > 0 ? static_cast<uint64_t>(c_.experts / c_.ep) : 1u, 8, h(), h()});
    const uint64_t emb = (s == 0 ? 1u : 0u) + (s == c_.pp - 1 ? 1u : 0u);
    const uint64_t p = sum(prod({stage_layers(), sum(prod({4, h(), h()}), mlp)}),
                           prod({emb, static_cast<uint64_t>(c_.vocabulary), h()})) /
                       static_cast<uint64_t>(c_.tp);
    why = fmt::format("P = (L/pp {} x (4h^2 + {}h^2) + {} x V {} x h {}) / tp {} = {} params", stage_layers(),
                      mlp / (h() * h()), emb, c_.vocabulary, h(), c_.tp, p);
    return p;
  }

  void forward(int s, int m) {
    const std::string mb = fmt::format("F mb{} s{}", m, s);
    if (c_.sharding == Sharding::kZero3 || c_.sharding == Sharding::kFsdp) {
      std::string why;
      uint64_t p = params(s, why);
      on_dim("dp", s, OpType::kAllGather, prod({p, d()}), fmt::format("{}: gather params, {} x {} B", mb, why, d()));
    }
    layer_ops(s, mb, true);
    if (s < c_.pp - 1)
      on_pp(s, s + 1, prod({tokens(), h(), d()}),
            fmt::format("{}: activations b {} x S/cp {} x h {} x {} B", mb, c_.micro_batch, c_.sequence / c_.cp, h(),
                        d()));
  }

  void backward(int s, int m) {
    const std::string mb = fmt::format("B mb{} s{}", m, s);
    if (c_.sharding == Sharding::kZero3 || c_.sharding == Sharding::kFsdp) {
      std::string why;
      uint64_t p = params(s, why);
      on_dim("dp", s, OpType::kAllGather, prod({p, d()}), fmt::format("{}: gather params, {} x {} B", mb, why, d()));
    }
    layer_ops(s, mb, false);
    if (s > 0)
      on_pp(s, s - 1, prod({tokens(), h(), d()}),
            fmt::format("{}: activation gradients b {} x S/cp {} x h {} x {} B", mb, c_.micro_batch,
                        c_.sequence / c_.cp, h(), d()));
  }

  // The per-layer exchanges of one micro-batch on a stage, each fused over the stage's layers.
  void layer_ops(int s, const std::string& mb, bool fwd) {
    const uint64_t L = stage_layers();
    if (c_.cp > 1) {
      uint64_t raw =
          prod({2, L, static_cast<uint64_t>(c_.micro_batch), static_cast<uint64_t>(c_.sequence), h() / c_.tp, d()});
      on_dim("cp", s, fwd ? OpType::kAllGather : OpType::kReduceScatter, raw,
             fmt::format("{}: K,V {} 2 x L/pp {} x b {} x S {} x h/tp {} x {} B", mb, fwd ? "gather" : "grad scatter",
                         L, c_.micro_batch, c_.sequence, h() / c_.tp, d()));
    }
    if (c_.ep > 1) {
      uint64_t raw = prod({2, L, tokens(), static_cast<uint64_t>(c_.top_k), h(), d()});
      on_dim("ep", s, OpType::kAllToAll, raw,
             fmt::format("{}: dispatch+combine 2 x L/pp {} x b*S/cp {} x top_k {} x h {} x {} B", mb, L, tokens(),
                         c_.top_k, h(), d()));
    }
    if (c_.tp > 1) {
      on_dim("tp", s, OpType::kAllReduce, prod({2, L, tokens(), h(), d()}),
             fmt::format("{}: 2 x L/pp {} x b*S/cp {} x h {} x {} B", mb, L, tokens(), h(), d()));
    }
  }

  // Each stage's task order (true: forward) under GPipe or 1F1B.
  std::vector<std::pair<bool, int>> tasks_of(int s) const {
    const int M = c_.micro_batches;
    std::vector<std::pair<bool, int>> t;
    if (c_.pipeline == PipelineKind::kGPipe) {
      for (int m = 0; m < M; ++m) t.emplace_back(true, m);
      for (int m = M - 1; m >= 0; --m) t.emplace_back(false, m);
      return t;
    }
    const int w = std::min(c_.pp - s - 1, M);
    for (int m = 0; m < w; ++m) t.emplace_back(true, m);
    for (int i = 0; i < M - w; ++i) {
      t.emplace_back(true, w + i);
      t.emplace_back(false, i);
    }
    for (int m = M - w; m < M; ++m) t.emplace_back(false, m);
    return t;
  }

  // List scheduling of the stages' tasks (forward 1 unit, backward 2): the next task to run is
  // the one that can start first; its ops join the step in that order, so every rank meets its
  // partners' ops in the same order and the step cannot deadlock.
  void pipeline_step() {
    const int P = c_.pp, M = c_.micro_batches;
    constexpr long kUnset = -1;
    std::vector<std::vector<long>> fdone(P, std::vector<long>(M, kUnset)), bdone = fdone;
    std::vector<std::vector<std::pair<bool, int>>> tasks(P);
    for (int s = 0; s < P; ++s) tasks[s] = tasks_of(s);
    std::vector<size_t> next(P, 0);
    std::vector<long> free(P, 0);
    for (size_t left = static_cast<size_t>(2 * P * M); left > 0; --left) {
      int best = -1;
      long best_start = std::numeric_limits<long>::max();
      for (int s = 0; s < P; ++s) {
        if (next[s] == tasks[s].size()) continue;
        auto [fwd, m] = tasks[s][next[s]];
        long dep = fwd ? (s > 0 ? fdone[s - 1][m] : 0) : (s < P - 1 ? bdone[s + 1][m] : fdone[s][m]);
        if (dep == kUnset) continue;
        long start = std::max(free[s], dep);
        if (start < best_start) best = s, best_start = start;
      }
      if (best < 0) throw Error("schedule generator: the pipeline schedule cannot proceed (a bug)");
      auto [fwd, m] = tasks[best][next[best]++];
      free[best] = best_start + (fwd ? 1 : 2);
      (fwd ? fdone : bdone)[best][m] = free[best];
      if (fwd) {
        forward(best, m);
      } else {
        backward(best, m);
      }
    }
  }

  // After the last micro-batch: each stage's gradients over its DP groups.
  void gradient_sync() {
    for (int s = 0; s < c_.pp; ++s) {
      std::string why;
      const uint64_t p = params(s, why);
      const uint64_t g = prod({p, d()});
      switch (c_.sharding) {
        case Sharding::kNone:
          on_dim("dp", s, OpType::kAllReduce, g, fmt::format("grads s{}: {} x {} B", s, why, d()));
          break;
        case Sharding::kZero1:
        case Sharding::kZero2:
          on_dim("dp", s, OpType::kReduceScatter, g, fmt::format("grads s{}: {} x {} B", s, why, d()));
          on_dim("dp", s, OpType::kAllGather, g, fmt::format("updated params s{}: {} x {} B", s, why, d()));
          break;
        case Sharding::kZero3:
        case Sharding::kFsdp:
          on_dim("dp", s, OpType::kReduceScatter, g, fmt::format("grads s{}: {} x {} B", s, why, d()));
          break;
      }
    }
  }

  // DLRM: pooled embeddings out and their gradients back by alltoall, then the dense MLP's
  // gradients by allreduce over every rank.
  void dlrm_step() {
    const uint64_t emb = prod({static_cast<uint64_t>(c_.batch), static_cast<uint64_t>(c_.tables),
                               static_cast<uint64_t>(c_.embedding_dim), d()});
    const std::string e =
        fmt::format("batch {} x tables {} x dim {} x {} B", c_.batch, c_.tables, c_.embedding_dim, d());
    on_dim("dp", 0, OpType::kAllToAll, emb, "pooled embeddings: " + e);
    on_dim("dp", 0, OpType::kAllToAll, emb, "embedding gradients: " + e);
    on_dim("dp", 0, OpType::kAllReduce, prod({static_cast<uint64_t>(c_.dense_params), d()}),
           fmt::format("dense grads: {} params x {} B", c_.dense_params, d()));
  }

  std::string yaml_body() const {
    std::string y =
        fmt::format("name: {}\nranks: {}\nsteps: {}\nwarmup: {}\ngroups:\n", c_.name, c_.ranks, c_.steps, c_.warmup);
    for (const auto& g : groups_)
      y += fmt::format("  - {{name: {}, kind: {}, ranks: [{}]}}\n", g.name, g.kind, fmt::join(g.ranks, ", "));
    y += "step:\n";
    for (const auto& op : ops_) {
      std::string line =
          fmt::format("  - {{group: {}, op: {}, bytes: {}", groups_[op.group].name, op_name(op.type), op.bytes);
      if (op.type == OpType::kSendRecv) line += fmt::format(", src: {}, dst: {}", op.src, op.dst);
      y += line + "}  # " + op.why + "\n";
    }
    return y;
  }

  std::string dims_yaml() const {
    std::vector<std::string> v;
    for (const auto& dim : layout_.dims) v.push_back(fmt::format("{{name: {}, size: {}}}", dim.name, dim.size));
    return fmt::format("[{}]", fmt::join(v, ", "));
  }

  std::string header(const GeneratedSchedule& g) const {
    std::string model =
        c_.model_kind == "dlrm"
            ? fmt::format("dlrm: batch {} per rank, {} tables x dim {}, {} dense params, {}", c_.batch, c_.tables,
                          c_.embedding_dim, c_.dense_params, c_.dtype)
            : fmt::format("layers {}, hidden {}, heads {}, sequence {}, vocabulary {}, micro-batch {}, {}", c_.layers,
                          c_.hidden, c_.heads, c_.sequence, c_.vocabulary, c_.micro_batch, c_.dtype);
    std::string s = fmt::format(
        "# Generated by `ocslab schedule generate` from {}; do not edit (docs/workloads.md, \"Generating a "
        "schedule\").\n# model: {}\n# parallel: tp {} dp {} pp {} cp {} ep {}; pipeline {} x {} micro-batch(es); "
        "sharding {}{}; scale_down {}\n",
        std::filesystem::path(c_.origin).filename().string(), model, c_.tp, c_.dp, c_.pp, c_.cp, c_.ep,
        c_.pipeline == PipelineKind::kGPipe ? "gpipe" : "1f1b", c_.micro_batches, sharding_name(c_.sharding),
        c_.experts > 0 ? fmt::format("; moe {} experts, top-{}", c_.experts, c_.top_k) : "", c_.scale_down);
    s += fmt::format("# controller job (phase:): pp: {}, dims: {}, initial: \"{}\"\n", layout_.pp, dims_yaml(),
                     g.initial.str());
    s += fmt::format("# reconfigurations per step on demand (warm-up included): {}\n",
                     fmt::join(g.reconfigurations, " "));
    return s;
  }

  std::string summary(const GeneratedSchedule& g) const {
    return fmt::format(
        "schedule {}: {} rank(s), {} group(s), {} op(s) per step, {} step(s) + {} warm-up\n"
        "controller job: pp: {}, dims: {}, initial: \"{}\"\n"
        "reconfigurations per step on demand: {}\n",
        c_.name, c_.ranks, groups_.size(), ops_.size(), c_.steps, c_.warmup, layout_.pp, dims_yaml(), g.initial.str(),
        fmt::join(g.reconfigurations, " "));
  }

  const GeneratorConfig& c_;
  phase::JobLayout layout_;
  std::vector<Group> groups_;
  std::map<std::string, std::map<int, std::vector<size_t>>> dim_groups_;
  std::vector<size_t> pp_groups_;
  std::vector<GenOp> ops_;
};

}  // namespace generator

GeneratorConfig parse_generator_config(const std::string& text, const std::string& origin) {
  return generator::parse(load_yaml_string(text, origin));
}

GeneratorConfig load_generator_config(const std::string& path) { return generator::parse(load_yaml_file(path)); }

GeneratedSchedule generate_schedule(const GeneratorConfig& cfg) { return generator::Builder(cfg).run(); }

std::vector<int> predict_reconfigurations(const Schedule& s, const phase::JobLayout& layout,
                                          const phase::TopoId& initial) {
  phase::SubMappingTable table(layout);
  phase::TopoId cur = initial;
  std::vector<int> out;
  for (int step = 0; step < s.warmup + s.steps; ++step) {
    int n = 0;
    for (const auto& op : s.step) {
      const Group& g = s.group_of(op);
      const std::string dim = shim_dim(g);
      if (dim == "mgmt") continue;
      const int digit = layout.digit_of(dim);
      std::vector<int> members = g.ranks;
      if (shim_group(s, op) != g.name) members = {op.src, op.dst};
      phase::TopoId next = cur;
      for (int r : members) next.set(layout.stage_of(r), digit);
      if (table.compose(next) != table.compose(cur)) ++n;
      cur = next;
    }
    out.push_back(n);
  }
  return out;
}

}  // namespace ocslab::workloads
