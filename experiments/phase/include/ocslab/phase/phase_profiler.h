// Learns a training step's phase table from the op stream a rank sees, the way Opus's shim
// profiles its first steps: the repeating step (after a warm-up that may differ), the groups, the
// phase boundaries, the pipeline sends and the measured idle time before each op. The table is
// the shim's own PhaseTable, so a learned one drives O1 and provisioning like a declared one.
//
//   PhaseProfiler p({.steps = 5});
//   for (each op the rank runs) p.add({group, ranks, kind, type, bytes, start_ns, end_ns, first_of_step});
//   if (auto r = p.result(); r.learned) ... r.learned->table ...   else warn(r.reason);
//
// Pure: no clock, no socket. Times are any one clock of the rank's, in ns. docs/phase-control.md, "Phases learned by
// profiling".
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "ocslab/phase/policy.h"
#include "ocslab/phase/shim.h"

namespace ocslab::phase {

// Collective ops (allreduce, allgather...) run on a group's rings; point-to-point ops (send,
// recv, sendrecv) are a pipeline stage's transfers to the next stage.
enum class OpKind { kCollective, kPointToPoint };

std::string_view to_string(OpKind k);  // "collective", "p2p"
// send, recv and sendrecv are point-to-point; every other type is a collective.
OpKind kind_of_type(std::string_view type);

// One op as a rank ran it.
struct ProfiledOp {
  std::string group;       // the shim's group name
  std::vector<int> ranks;  // the group's members (global ranks)
  OpKind kind = OpKind::kCollective;
  std::string type;  // allreduce, send, recv, ...
  uint64_t bytes = 0;
  int64_t start_ns = 0;  // when the rank entered the op (before any reconfiguration wait)
  int64_t end_ns = 0;    // when the rank's part of it completed; 0: unknown (no idle time after it)
  // The caller knows this op starts a training step (a training loop's iteration, collbench's
  // op 0). Any op marked: steps are the caller's; none marked: steps are found by period.
  bool step_start = false;
};

// A maximal run of consecutive ops of the step on one group. Runs do not wrap into the next
// step: op 0 always starts a phase.
struct Phase {
  std::string group;
  OpKind kind = OpKind::kCollective;
  int first = 0;  // table index of its first op
  int count = 0;
  int64_t idle_ns = 0;  // measured idle time before its first op
  bool operator==(const Phase&) const = default;
};

struct LearnedPhases {
  PhaseTable table;              // the step's ops in order, indexes 0..n-1 (the shim's type)
  std::vector<OpKind> kinds;     // per table op
  std::vector<int64_t> idle_ns;  // per table op: median over the profiled steps of (its start -
                                 // the previous op's end), >= 0; 0 where never measured
  std::vector<Phase> phases;
  std::vector<int> boundaries;                     // table index of each phase's first op (0 included)
  std::vector<int> pipeline_sends;                 // table indexes of the point-to-point ops
  std::map<std::string, std::vector<int>> groups;  // group -> members, as the ops gave them
  // Ops before the profiled steps: they differ from the step, or are older than the newest
  // `steps` + 1 marked steps the profiler keeps (a stream that does not repeat is not kept whole).
  int warmup_ops = 0;
  int steps = 0;        // whole steps that repeated, among those kept
  bool marked = false;  // steps came from the caller's marks (else: found by period)

  // The ops O1 asks the controller for in a step: phase boundaries and pipeline sends (the
  // union, in table order).
  std::vector<int> requests() const;
  // The table with idle windows, as the safe-window policy reads it (idle_us rounded down).
  PhaseWindows windows() const;
};

// What profiling gave: the learned step, or why there is none (the stream did not repeat, or
// not for enough steps yet). Without a table the shim keeps asking for every op.
struct ProfileResult {
  std::optional<LearnedPhases> learned;
  std::string reason;  // empty when learned
};

struct ProfileOptions {
  // How many times the step must repeat (Opus profiles five steps). >= 1.
  int steps = 5;
  // Without marks, the longest step looked for, in ops: bounds the work per op.
  int max_period = 4096;
};

// Fed one rank's ops in the order it ran them. With marks, the step is the caller's: the
// profiler needs `steps` identical marked steps in a row (earlier steps are the warm-up).
// Without marks it looks for the shortest period p such that the stream ends with at least
// `steps` repetitions of p ops; the warm-up (the ops before the repetition) must not be longer
// than the repetition, and the step starts where the repetition starts.
class PhaseProfiler {
 public:
  // Throws ConfigError when steps or max_period is below 1.
  explicit PhaseProfiler(ProfileOptions options = {});

  void add(ProfiledOp op);
  // For a caller that adds an op when it starts: the last op added ended at end_ns.
  void end_last(int64_t end_ns);
  // The table from the stream so far, or the reason there is none. With marks only closed
  // steps count (a step closes at the next mark, or at finish()).
  ProfileResult result() const;
  // The stream is over: the last marked step is whole.
  void finish() { finished_ = true; }
  size_t ops() const { return dropped_ + ops_.size(); }
  bool marked() const { return marked_; }

 private:
  ProfileResult learn_marked() const;
  ProfileResult learn_period() const;
  LearnedPhases describe(size_t first, size_t period, int steps, bool marked) const;

  ProfileOptions options_;
  std::vector<ProfiledOp> ops_;
  std::vector<int> sig_;  // per op: an id for (group, kind, type, bytes)
  std::map<std::tuple<std::string, OpKind, std::string, uint64_t>, int> ids_;
  std::vector<size_t> marks_;  // op positions marked as step starts
  size_t dropped_ = 0;         // ops dropped from the front: too old to become the table
  size_t dropped_steps_ = 0;   // marked steps among them
  bool marked_ = false, finished_ = false;
  // Unmarked: run_[p - 1] = how many of the last ops equal the op p before them.
  std::vector<int64_t> run_;
};

// Learns a whole recorded stream (finish() included).
ProfileResult learn_phases(const std::vector<ProfiledOp>& stream, ProfileOptions options = {});

// The job's step from every rank's learned step: each op once (an op is its group and its
// occurrence among the group's ops in the step, the key every member shares), ordered so that
// every rank's own order holds (earliest position in the ranks' steps first, then lowest rank);
// a send and its recv become one "sendrecv". An op's idle time is the smallest of its members'
// (the window the switch can hide behind on every member). Throws Error naming the ranks and
// the op when the ranks disagree on an op or on the order (no common step exists).
LearnedPhases merge_ranks(const std::vector<LearnedPhases>& ranks);

// phases.csv: the safe-window table (header "index,group,type,bytes,idle_us", PhaseWindows::load
// reads it). Throws Error naming a group that a CSV cell cannot hold (',' or a line break).
void write_phases_csv(const LearnedPhases& learned, const std::string& path);

}  // namespace ocslab::phase
