// Where a phase-driven reconfiguration shim plugs into the workloads: called around every
// collective a rank takes part in, with what the op is. The time spent inside the hooks is
// recorded as the operation's "reconfiguration wait" (docs/workloads.md, docs/phase-control.md).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "ocslab/workloads/schedule.h"

namespace ocslab::workloads {

// One collective as a shim sees it.
struct OpDesc {
  std::string_view group;  // group name from the schedule
  std::string_view kind;   // the group's parallelism kind: dp, pp, tp, ...
  OpType type = OpType::kAllReduce;
  uint64_t bytes = 0;                       // nccl-tests size (see Op::bytes)
  int step = 0;                             // 0-based, warm-up steps included
  int index = 0;                            // position of the op in the step (0-based, across all groups)
  uint64_t seq = 0;                         // step * ops per step + index: unique per op for the whole run
  int rank = 0;                             // the calling rank (global)
  const std::vector<int>* ranks = nullptr;  // the group's members (global ranks)
  int src = -1, dst = -1;                   // sendrecv only
};

// What the hooks decided for one op, copied into the op's record (ops CSV columns phase,
// reconfigured, provisioned, fallback, topo, barrier; docs/workloads.md).
struct HookOutcome {
  // One word: "none" (no shim), "pass" (management op, no controller involved), "ready" (the
  // fabric already served the op), "reconfigured" (the fabric changed for it), "fallback"
  // (the controller gave up or is gone: static giant ring or unknown fabric).
  std::string phase = "none";
  bool reconfigured = false;
  bool provisioned = false;  // requested ahead by the previous op's post hook
  bool fallback = false;
  std::string topo;  // "rail=topo_id;..." the op ran on, empty when unknown
  // The op made a controller round trip (ops CSV column barrier); false for management ops and
  // for ops whose topology an earlier ACK of their group had granted.
  bool barrier = false;
};

// Default: no reconfiguration (both hooks return at once). A shim overrides them; a hook that
// cannot make the fabric ready throws (the workload stops with the message) rather than
// returning and letting the collective run on a topology under reconfiguration.
class PhaseHooks {
 public:
  virtual ~PhaseHooks() = default;
  // Before the rank starts the op: block until the fabric serves this op's group.
  virtual void pre_communication(const OpDesc&) {}
  // After the rank's part of the op completed.
  virtual void post_communication(const OpDesc&) {}
  // Called after post_communication: what was decided for the op.
  virtual HookOutcome outcome(const OpDesc&) { return {}; }
};

}  // namespace ocslab::workloads
