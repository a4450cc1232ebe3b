// The collective schedule both workloads (ocslab-collbench-verbs, ocslab-collbench-nccl) run:
// named rank groups with a parallelism kind, and one training step as an ordered list of
// collectives on those groups (docs/workloads.md). Errors name file:line:col and the group/rank.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ocslab::workloads {

enum class OpType { kAllReduce, kAllGather, kReduceScatter, kSendRecv, kBarrier };

std::string_view op_name(OpType t);  // "allreduce", ...

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

struct Op {
  size_t group = 0;  // index into Schedule::groups
  OpType type = OpType::kAllReduce;
  // nccl-tests' "size": allreduce = the buffer on each rank; allgather = the gathered output
  // (each rank contributes bytes / n); reducescatter = the input (each rank keeps bytes / n);
  // sendrecv = the message; barrier = 0.
  uint64_t bytes = 0;
  int src = -1, dst = -1;  // sendrecv only: global ranks, both members of the group
  RedOp redop = RedOp::kSum;  // allreduce and reducescatter only
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

  const Group& group_of(const Op& op) const { return groups.at(op.group); }
  // Ranks that take part in op (sendrecv: src and dst only).
  bool involves(const Op& op, int rank) const;
  // Largest per-rank buffer any op needs, in bytes.
  uint64_t max_buffer_bytes() const;
  // FNV-1a over groups (name, kind, ranks) and ops (group, type, bytes, src, dst), not steps or
  // layout: ranks compare it at the rendezvous so one started with a different schedule is refused.
  uint64_t digest() const;
};

// Throws ocslab::ConfigError "origin:line:col: ..." for any malformed or inconsistent input.
Schedule parse_schedule(const std::string& text, const std::string& origin);
Schedule load_schedule(const std::string& path);

// "4MiB", "64K", "1048576" -> bytes (binary multiples). Throws ocslab::Error naming the text.
uint64_t parse_bytes(std::string_view text);

}  // namespace ocslab::workloads
