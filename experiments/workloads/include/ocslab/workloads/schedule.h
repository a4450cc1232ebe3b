// The collective schedule both workloads (ocslab-collbench-verbs, ocslab-collbench-nccl) run:
// named rank groups with a parallelism kind, and one training step as an ordered list of
// collectives on those groups (docs/workloads.md). Errors name file:line:col and the group/rank.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ocslab::workloads {

enum class OpType { kAllReduce, kAllGather, kReduceScatter, kSendRecv, kBarrier, kAllToAll, kAllToAllV, kBroadcast };

// Every op type, in the order above (parsers and tables walk it).
inline constexpr OpType kOpTypes[] = {OpType::kAllReduce, OpType::kAllGather, OpType::kReduceScatter,
                                      OpType::kSendRecv,  OpType::kBarrier,   OpType::kAllToAll,
                                      OpType::kAllToAllV, OpType::kBroadcast};

std::string_view op_name(OpType t);  // "allreduce", ..., "alltoall", "alltoallv", "broadcast"
// The type named `name`, or false when there is none.
bool op_type_of(std::string_view name, OpType& out);
// "allreduce, allgather, ..." for messages.
std::string known_op_names();

// The reduction of allreduce and reducescatter, as nccl-tests' -o: a schedule's ops are sums;
// the size sweep (sweep.h) takes any of them. avg is the sum divided by the group size.
enum class RedOp { kSum, kProd, kMax, kMin, kAvg };

std::string_view redop_name(RedOp r);  // "sum", "prod", "max", "min", "avg"
// Throws ocslab::Error naming the known ones.
RedOp parse_redop(std::string_view name);

struct Group {
  std::string name;
  std::string kind;        // dp, pp, tp, cp, ep, sp or world
  std::vector<int> ranks;  // global ranks, in ring order; no duplicates
  int line = 0;            // 1-based line in the schedule file

  // Position of `rank` in ranks, -1 when it is not a member.
  int index_of(int rank) const;
};

// Modelled compute (docs/workloads.md "Modelled compute"): a fixed time or a draw from a
// distribution, in the emulator's timing syntax (a number of ms, {fixed: MS}, {uniform: [LO,
// HI]}, {normal: {mean: MS, sd: MS, floor: MS}}). Draws are a pure function of (the schedule's
// seed, rank, step, op index): a rerun spends the same times.
struct ComputeTime {
  enum class Kind { kNone, kFixed, kUniform, kNormal };
  Kind kind = Kind::kNone;
  double a_ms = 0;      // fixed: value; uniform: low; normal: mean
  double b_ms = 0;      // uniform: high; normal: standard deviation
  double floor_ms = 0;  // normal: draws below it are raised to it (default 0: never negative)
  int line = 0;         // where the schedule gave it; 0 when it did not

  bool any() const { return kind != Kind::kNone; }
  // The time to spend in nanoseconds, >= 0. Its own generator (splitmix64 and Box-Muller), not
  // std::uniform_real_distribution / normal_distribution, whose output differs between
  // standard libraries: the same arguments give the same time on every machine.
  // index: the op's position in the step, kStepCompute for the per-step compute.
  int64_t draw_ns(uint64_t seed, int rank, int step, int index) const;
  std::string to_string() const;  // "none", "fixed 5 ms", "uniform 2..4 ms", "normal 10 sd 2 floor 5 ms"
};

// The op index the per-step compute is drawn with.
inline constexpr int kStepCompute = -1;
// The longest compute one draw may give (one hour): more is a typo, and it keeps every draw and
// a step's sum far inside int64 nanoseconds.
inline constexpr double kMaxComputeMs = 3'600'000;

struct Op {
  size_t group = 0;  // index into Schedule::groups
  OpType type = OpType::kAllReduce;
  // nccl-tests' "size": allreduce = the buffer on each rank; allgather = the gathered output
  // (each rank contributes bytes / n); reducescatter = the input (each rank keeps bytes / n);
  // sendrecv = the message; barrier = 0; alltoall = each rank's send buffer (bytes / n to every
  // member, itself included; nccl-tests' alltoall size); alltoallv = the largest send or receive
  // buffer of any member (the row or column sum of `sizes`); broadcast = the buffer.
  uint64_t bytes = 0;
  int src = -1, dst = -1;  // sendrecv only: global ranks, both members of the group
  // alltoallv only: n x n bytes, row-major in group order: sizes[i * n + j] is what member i
  // sends to member j (each a multiple of 4; the diagonal is a member's copy to itself).
  std::vector<uint64_t> sizes;
  int root = -1;  // broadcast only: the global rank that sends (a member; default the first)
  RedOp redop = RedOp::kSum;  // allreduce and reducescatter only
  // compute_ms: spent before the op by every rank that takes part in it, before the pre hook.
  ComputeTime compute;
  int line = 0;
};

struct Schedule {
  std::string origin;  // file path (or label) for messages
  std::string name;
  int ranks = 0;   // world size; every group member is in [0, ranks)
  int steps = 1;   // measured steps
  int warmup = 0;  // steps run first and marked as warm-up
  std::vector<Group> groups;
  std::vector<Op> step;
  // Top-level compute_ms: spent once per step by every rank that takes part in any of the
  // step's ops, before its first op (the forward pass), so it lies inside the step's window.
  ComputeTime step_compute;
  uint64_t seed = 0;  // seed: of the compute draws

  // Whether any compute is modelled (per step or on any op).
  bool has_compute() const;

  const Group& group_of(const Op& op) const { return groups.at(op.group); }
  // Ranks that take part in op (sendrecv: src and dst only).
  bool involves(const Op& op, int rank) const;
  // Largest per-rank buffer any op needs, in bytes (alltoall and alltoallv: send and receive
  // buffers together, buffer_floats in ring.h).
  uint64_t max_buffer_bytes() const;
  // FNV-1a over groups (name, kind, ranks) and ops (group, type, bytes, src, dst) and, when any
  // is modelled, the compute times and seed; not steps or layout: ranks compare it at the
  // rendezvous so one started with a different schedule is refused.
  uint64_t digest() const;
};

// Throws ocslab::ConfigError "origin:line:col: ..." for any malformed or inconsistent input.
Schedule parse_schedule(const std::string& text, const std::string& origin);
Schedule load_schedule(const std::string& path);

// "4MiB", "64K", "1048576" -> bytes (binary multiples). Throws ocslab::Error naming the text.
uint64_t parse_bytes(std::string_view text);

}  // namespace ocslab::workloads
