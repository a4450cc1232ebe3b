// Orchestrator policies (selectable per job): when the controller reconfigures and how circuits
// are allocated when a demand does not fit the ports. Everything here is pure (no sockets, no
// switch): the controller core and the orchestrator call it, the unit tests pin it to values.
//
//   on-request   every barrier that needs another topology reconfigures (the default).
//   safe-window  reconfigure only when the predicted idle window before the op (from the phase
//                table's idle_us column) exceeds the switch time; otherwise keep the circuits:
//                the op runs over what is wired (or the fallback ring) and the decline is counted.
//   greedy       circuit allocation by demand size: when the job's ports are fewer than the
//                demanded pairs, the largest demands get circuits first; the whole plan is
//                validated (allow-list, masked ports, locked stages) before anything is sent.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ocslab/phase/topology.h"

namespace ocslab::phase {

enum class Policy { kOnRequest, kSafeWindow, kGreedy };

std::string_view to_string(Policy p);
// "on-request", "safe-window", "greedy"; nullopt for anything else.
std::optional<Policy> parse_policy(std::string_view name);
// The accepted names, for error messages: "on-request, safe-window, greedy".
std::string policy_names();

// One op of a step with its predicted idle window: the time between the end of the previous
// op and the start of this one (compute the switch can hide behind).
struct OpWindow {
  int index = 0;
  std::string group;  // the shim's group name (what requests carry)
  std::string type;
  uint64_t bytes = 0;
  int64_t idle_us = 0;
};

// The job's phase table with windows: CSV with header "index,group,type,bytes,idle_us", one row
// per op of the job's step in order (every group's ops, as the schedule's step lists them: the
// shim's per-rank table plus a column, over all ranks). Errors name file:line:col.
struct PhaseWindows {
  std::vector<OpWindow> ops;
  static PhaseWindows load(const std::string& path);
  // The row of the group's `seq`-th op (1, 2, ... over the whole run): the group's rows in step
  // order, seq wrapping around them step after step. Null when the table has no row of the
  // group or seq < 1.
  const OpWindow* find(std::string_view group, int64_t seq) const;
};

struct WindowDecision {
  bool reconfigure = true;
  int64_t idle_us = -1;  // the predicted window; -1: the table has no such op
  std::string why;       // one line, for the controller's events
};

// safe-window: reconfigure for the `seq`-th op of `group` only when its predicted idle window is
// strictly longer than `switch_time`. The barrier's key (group, seq) is the same on every
// member, unlike the op's index in each rank's own step. An op of a group the table lacks is not
// predictable: it reconfigures, as on-request would, and `why` says so.
WindowDecision decide_safe_window(const PhaseWindows& table, std::string_view group, int64_t seq,
                                  std::chrono::microseconds switch_time);

// A wish for a circuit: rank `src` transmits to rank `dst`, carrying `bytes`.
struct Demand {
  int src = 0;
  int dst = 0;
  uint64_t bytes = 0;
  bool operator==(const Demand&) const = default;
};

struct GreedyAllocation {
  std::vector<Demand> granted;  // largest first
  std::vector<Demand> dropped;  // largest first: their transmitter or receiver was taken
};

// Each rank has one transmit and one receive port per rail, so at most one circuit leaves and
// one enters it. Demands are taken largest first (ties: lower src, then lower dst) and granted
// when both ends are still free. Throws TopologyError for a rank outside 0..ranks-1 or a
// demand from a rank to itself.
GreedyAllocation allocate_greedy(std::vector<Demand> demands, int ranks);

}  // namespace ocslab::phase
