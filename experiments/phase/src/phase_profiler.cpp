#include "ocslab/phase/phase_profiler.h"

#include <fmt/format.h>

#include <algorithm>
#include <set>

#include "ocslab/common/csv_writer.h"
#include "ocslab/common/error.h"

namespace ocslab::phase {

std::string_view to_string(OpKind k) { return k == OpKind::kPointToPoint ? "p2p" : "collective"; }

OpKind kind_of_type(std::string_view type) {
  return type == "send" || type == "recv" || type == "sendrecv" ? OpKind::kPointToPoint : OpKind::kCollective;
}

namespace {

std::string describe_op(const ProfiledOp& op) { return fmt::format("{} {} {} B", op.group, op.type, op.bytes); }

// Phases, boundaries and pipeline sends from the table, kinds and idle times.
void derive_phases(LearnedPhases& l) {
  l.phases.clear();
  l.boundaries.clear();
  l.pipeline_sends.clear();
  const auto& ops = l.table.ops;
  for (size_t i = 0; i < ops.size(); ++i) {
    const int at = static_cast<int>(i);
    if (i == 0 || ops[i].group != ops[i - 1].group) {
      l.phases.push_back({ops[i].group, l.kinds[i], at, 0, l.idle_ns[i]});
      l.boundaries.push_back(at);
    }
    ++l.phases.back().count;
    if (l.kinds[i] == OpKind::kPointToPoint) l.pipeline_sends.push_back(at);
  }
}

int64_t median(std::vector<int64_t> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[(v.size() - 1) / 2];  // the lower median: a value that was measured
}

}  // namespace

std::vector<int> LearnedPhases::requests() const {
  std::vector<int> out;
  std::set_union(boundaries.begin(), boundaries.end(), pipeline_sends.begin(), pipeline_sends.end(),
                 std::back_inserter(out));
  return out;
}

PhaseWindows LearnedPhases::windows() const {
  PhaseWindows w;
  for (size_t i = 0; i < table.ops.size(); ++i) {
    const auto& e = table.ops[i];
    w.ops.push_back({e.index, e.group, e.type, e.bytes, idle_ns[i] / 1000});
  }
  return w;
}

PhaseProfiler::PhaseProfiler(ProfileOptions options) : options_(options) {
  if (options_.steps < 1) throw ConfigError(fmt::format("profiling steps {}: want at least 1", options_.steps));
  if (options_.max_period < 1)
    throw ConfigError(fmt::format("profiling: longest step {} ops: want at least 1", options_.max_period));
}

void PhaseProfiler::add(ProfiledOp op) {
  auto key = std::make_tuple(op.group, op.kind, op.type, op.bytes);
  auto [it, fresh] = ids_.try_emplace(key, static_cast<int>(ids_.size()));
  (void)fresh;
  const size_t n = ops_.size();
  if (op.step_start) {
    marked_ = true;
    marks_.push_back(n);
  }
  sig_.push_back(it->second);
  ops_.push_back(std::move(op));
  if (!marked_) {
    // The run of each period p ending at the new op: one longer when it equals the op p before.
    const size_t periods = std::min(n, static_cast<size_t>(options_.max_period));
    if (run_.size() < periods) run_.resize(periods, 0);
    for (size_t p = 1; p <= periods; ++p) run_[p - 1] = sig_[n] == sig_[n - p] ? run_[p - 1] + 1 : 0;
  }
  // A stream that does not repeat must not grow without bound (the shim profiles on): only the
  // last `steps` closed steps and the open one can still become the table, or, unmarked, the
  // last `steps` periods of the longest step looked for.
  const size_t wanted = static_cast<size_t>(std::max(options_.steps, 2));
  size_t drop = 0;
  if (marked_ && marks_.size() > wanted + 1) drop = marks_[marks_.size() - wanted - 1];
  if (!marked_ && ops_.size() > 2 * wanted * static_cast<size_t>(options_.max_period)) drop = ops_.size() / 2;
  if (drop > 0) {
    ops_.erase(ops_.begin(), ops_.begin() + static_cast<std::ptrdiff_t>(drop));
    sig_.erase(sig_.begin(), sig_.begin() + static_cast<std::ptrdiff_t>(drop));
    dropped_steps_ +=
        static_cast<size_t>(std::count_if(marks_.begin(), marks_.end(), [&](size_t m) { return m < drop; }));
    std::erase_if(marks_, [&](size_t m) { return m < drop; });
    for (auto& m : marks_) m -= drop;
    dropped_ += drop;
  }
}

void PhaseProfiler::end_last(int64_t end_ns) {
  if (!ops_.empty()) ops_.back().end_ns = end_ns;
}

ProfileResult PhaseProfiler::result() const { return marked_ ? learn_marked() : learn_period(); }

ProfileResult PhaseProfiler::learn_marked() const {
  const int want = options_.steps;
  // Closed steps: [marks_[k], marks_[k + 1]), and the last one once the stream is over.
  std::vector<std::pair<size_t, size_t>> steps;
  for (size_t k = 0; k < marks_.size(); ++k) {
    if (k + 1 < marks_.size()) {
      steps.emplace_back(marks_[k], marks_[k + 1]);
    } else if (finished_) {
      steps.emplace_back(marks_[k], ops_.size());
    }
  }
  auto same = [&](std::pair<size_t, size_t> a, std::pair<size_t, size_t> b) {
    return a.second - a.first == b.second - b.first && std::equal(sig_.begin() + static_cast<std::ptrdiff_t>(a.first),
                                                                  sig_.begin() + static_cast<std::ptrdiff_t>(a.second),
                                                                  sig_.begin() + static_cast<std::ptrdiff_t>(b.first));
  };
  size_t run = steps.empty() ? 0 : 1;
  while (run < steps.size() && same(steps[steps.size() - 1 - run], steps.back())) ++run;
  if (static_cast<int>(run) >= want) {
    const auto first = steps[steps.size() - run];
    return {describe(first.first, first.second - first.first, static_cast<int>(run), true), {}};
  }
  ProfileResult r;
  if (static_cast<int>(steps.size()) < want) {
    r.reason = fmt::format("{} whole step(s) profiled, {} needed", dropped_steps_ + steps.size(), want);
    return r;
  }
  // Name where the newest differing step parts from the one after it.
  const auto a = steps[steps.size() - 1 - run], b = steps[steps.size() - run];
  const size_t la = a.second - a.first, lb = b.second - b.first;
  size_t j = 0;
  while (j < la && j < lb && sig_[a.first + j] == sig_[b.first + j]) ++j;
  const std::string what_a = j < la ? describe_op(ops_[a.first + j]) : "the end of the step";
  const std::string what_b = j < lb ? describe_op(ops_[b.first + j]) : "the end of the step";
  r.reason = fmt::format(
      "the op sequence does not repeat: step {} has {} at op {} where step {} has {}; the last {} step(s) agree, {} "
      "needed",
      dropped_steps_ + steps.size() - run, what_a, j, dropped_steps_ + steps.size() - run + 1, what_b, run, want);
  return r;
}

ProfileResult PhaseProfiler::learn_period() const {
  // One repetition is no evidence of a period: an unmarked step must be seen at least twice.
  const auto want = static_cast<size_t>(std::max(options_.steps, 2));
  const size_t n = ops_.size();
  for (size_t p = 1; p <= run_.size(); ++p) {
    // The repeating tail, in ops (its run may reach into ops already dropped).
    const size_t covered = std::min(static_cast<size_t>(run_[p - 1]) + p, n);
    const size_t warmup = n - covered;
    if (covered / p >= want && warmup <= covered) {
      return {describe(warmup, p, static_cast<int>(covered / p), false), {}};
    }
  }
  ProfileResult r;
  r.reason = fmt::format(
      "the op sequence does not repeat: no step of at most {} op(s) occurs {} times in a row in "
      "the {} op(s) profiled",
      options_.max_period, want, n);
  return r;
}

LearnedPhases PhaseProfiler::describe(size_t first, size_t period, int steps, bool marked) const {
  LearnedPhases l;
  l.warmup_ops = static_cast<int>(dropped_ + first);
  l.steps = steps;
  l.marked = marked;
  for (size_t i = 0; i < period; ++i) {
    const auto& op = ops_[first + i];
    l.table.ops.push_back({static_cast<int>(i), op.group, op.type, op.bytes});
    l.kinds.push_back(op.kind);
    std::vector<int64_t> idle;
    for (size_t s = 0; s < static_cast<size_t>(steps); ++s) {
      const size_t j = first + s * period + i;
      if (j == 0 || ops_[j - 1].end_ns == 0) continue;  // nothing ran before it, or its end is unknown
      idle.push_back(std::max<int64_t>(0, ops_[j].start_ns - ops_[j - 1].end_ns));
    }
    l.idle_ns.push_back(median(std::move(idle)));
    l.groups.try_emplace(op.group, op.ranks);
  }
  derive_phases(l);
  return l;
}

ProfileResult learn_phases(const std::vector<ProfiledOp>& stream, ProfileOptions options) {
  PhaseProfiler p(options);
  for (const auto& op : stream) p.add(op);
  p.finish();
  return p.result();
}

namespace {

// An op of the job's step: its group and its occurrence among the group's ops in the step.
using OpKey = std::pair<std::string, int>;

struct JobOp {
  PhaseEntry entry;
  OpKind kind = OpKind::kCollective;
  int64_t idle_ns = 0;
  int first_rank = 0;
};

// One rank's step as keys, and where each key sits in it.
struct RankSteps {
  std::vector<std::vector<OpKey>> keys;
  std::vector<std::map<OpKey, size_t>> position;
};

RankSteps key_ranks(const std::vector<LearnedPhases>& ranks, std::map<OpKey, JobOp>& ops) {
  RankSteps rs;
  for (size_t r = 0; r < ranks.size(); ++r) {
    const auto& l = ranks[r];
    std::map<std::string, int> occurrence;
    auto& keys = rs.keys.emplace_back();
    auto& pos = rs.position.emplace_back();
    for (size_t i = 0; i < l.table.ops.size(); ++i) {
      const auto& e = l.table.ops[i];
      OpKey key{e.group, occurrence[e.group]++};
      // A send and its recv are one transfer of the job's step.
      const std::string type = l.kinds[i] == OpKind::kPointToPoint ? "sendrecv" : e.type;
      auto [it, fresh] =
          ops.try_emplace(key, JobOp{{0, e.group, type, e.bytes}, l.kinds[i], l.idle_ns[i], static_cast<int>(r)});
      auto& job = it->second;
      if (!fresh && (job.entry.type != type || job.entry.bytes != e.bytes)) {
        throw Error(fmt::format("ranks {} and {} disagree on {} #{}: {} {} B against {} {} B", job.first_rank, r,
                                e.group, key.second + 1, job.entry.type, job.entry.bytes, type, e.bytes));
      }
      job.idle_ns = std::min(job.idle_ns, l.idle_ns[i]);
      pos[key] = keys.size();
      keys.push_back(std::move(key));
    }
  }
  return rs;
}

}  // namespace

LearnedPhases merge_ranks(const std::vector<LearnedPhases>& ranks) {
  if (ranks.empty()) throw Error("merge_ranks: no rank's step to merge");
  std::map<OpKey, JobOp> ops;
  const RankSteps rs = key_ranks(ranks, ops);
  LearnedPhases job;
  job.marked = true;
  job.steps = ranks.front().steps;
  for (const auto& l : ranks) {
    job.steps = std::min(job.steps, l.steps);
    job.marked = job.marked && l.marked;
    for (const auto& [g, members] : l.groups) job.groups.try_emplace(g, members);
  }
  std::vector<size_t> head(ranks.size(), 0);
  for (size_t done = 0; done < ops.size(); ++done) {
    // An op can go next when it is at the head of every rank that runs it; of those, the one
    // furthest forward in its ranks' steps, then the lowest rank's.
    const OpKey* best = nullptr;
    size_t best_depth = 0;
    for (size_t r = 0; r < ranks.size(); ++r) {
      if (head[r] >= rs.keys[r].size()) continue;
      const OpKey& key = rs.keys[r][head[r]];
      size_t depth = 0;
      bool ready = true;
      for (size_t q = 0; q < ranks.size() && ready; ++q) {
        auto at = rs.position[q].find(key);
        if (at == rs.position[q].end()) continue;
        ready = at->second == head[q];
        depth = std::max(depth, at->second);
      }
      if (ready && (!best || depth < best_depth)) {
        best = &key;
        best_depth = depth;
      }
    }
    if (!best) {
      std::string heads;
      for (size_t r = 0; r < ranks.size(); ++r) {
        if (head[r] >= rs.keys[r].size()) continue;
        const auto& k = rs.keys[r][head[r]];
        heads += fmt::format("{}rank {} next runs {} #{}", heads.empty() ? "" : ", ", r, k.first, k.second + 1);
      }
      throw Error("the ranks' steps order their ops inconsistently (no common step): " + heads);
    }
    const OpKey key = *best;
    for (size_t q = 0; q < ranks.size(); ++q) {
      if (rs.position[q].count(key)) ++head[q];
    }
    const JobOp& op = ops.at(key);
    job.table.ops.push_back(op.entry);
    job.table.ops.back().index = static_cast<int>(job.table.ops.size() - 1);
    job.kinds.push_back(op.kind);
    job.idle_ns.push_back(op.idle_ns);
  }
  derive_phases(job);
  return job;
}

void write_phases_csv(const LearnedPhases& learned, const std::string& path) {
  const auto rows = learned.windows().ops;
  for (const auto& op : rows) {
    for (const auto* cell : {&op.group, &op.type}) {
      if (cell->find_first_of(",\r\n\"") != std::string::npos)
        throw Error(fmt::format("{}: op {}: '{}' cannot be a cell of the phase table (',', quote or line break)", path,
                                op.index, *cell));
    }
  }
  CsvWriter w(path);
  w.header({"index", "group", "type", "bytes", "idle_us"});
  for (const auto& op : rows) {
    w.row({std::to_string(op.index), op.group, op.type, std::to_string(op.bytes), std::to_string(op.idle_us)});
  }
  w.close();
}

}  // namespace ocslab::phase
