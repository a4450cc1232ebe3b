// The per-rail orchestrator: owns one OCS driver and the slots (port pairs) of the rail, places
// jobs on disjoint slots, and turns a job's new topo_id into the minimal circuit changes for
// the stages whose sub-mappings changed, applied through libocs on those ports only. Failed
// ports are masked: the rank on them moves to a spare slot, or the job is reported infeasible.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "ocslab/common/clock.h"
#include "ocslab/ocsctl/driver.h"
#include "ocslab/phase/allocator.h"
#include "ocslab/phase/policy.h"
#include "ocslab/phase/topology.h"

namespace ocslab::phase {

// The rail cannot host what was asked (too few healthy slots, a slot outside the switch's
// allow-list).
class InfeasibleError : public Error {
 public:
  using Error::Error;
};

// What one reprogramming did and how long each part took.
struct ReconfigReport {
  std::string rail;
  std::string job;
  std::string from;  // topo_id before ("" for a fresh placement)
  std::string to;
  std::vector<int> stages;  // stages whose outgoing circuits changed
  std::vector<ocs::Circuit> removed;
  std::vector<ocs::Circuit> added;
  std::vector<ocs::Port> ports_touched;  // every port a command named, sorted
  std::vector<ocs::CallTiming> calls;    // the driver's protocol calls, in order
  Timestamp started;
  Timestamp finished;
  double plan_ms = 0;   // diffing and validation before the first command
  double total_ms = 0;  // started -> finished (monotonic)
  bool changed() const { return !removed.empty() || !added.empty(); }
};

// What a greedy allocation granted and what it sent.
struct GreedyReport {
  GreedyAllocation allocation;
  ReconfigReport reconfig;
};

struct MaskReport {
  ocs::Port port = 0;
  std::string job;  // empty: the port was on a free slot
  int rank = -1;
  std::optional<Slot> from;
  std::optional<Slot> to;
  std::optional<ReconfigReport> reapplied;
};

class Orchestrator {
 public:
  // slots: the rail's port pairs in placement order (one per NIC fibred to this switch).
  // The driver is the only way this orchestrator touches the switch; its allow-list, when
  // set, must contain every slot port (checked here, before anything is sent).
  Orchestrator(std::string rail, std::vector<Slot> slots, std::unique_ptr<ocs::OcsDriver> driver);

  const std::string& rail() const { return rail_; }

  // Places the job on the first free healthy slots (or on `slots` when given), reads what the
  // switch has on those ports, and wires `initial`. Throws InfeasibleError / TopologyError.
  ReconfigReport add_job(const JobLayout& layout, const TopoId& initial, std::optional<std::vector<Slot>> slots = {});
  // Removes the job's circuits and frees its slots.
  ReconfigReport remove_job(const std::string& job);

  // Moves the job to `topo`: only the stages whose outgoing edges change are reprogrammed.
  ReconfigReport set_topology(const std::string& job, const TopoId& topo);
  // Wires the job as one ring over all its ranks (the static fallback when the control
  // plane cannot keep up); set_topology afterwards leaves the fallback.
  ReconfigReport set_giant_ring(const std::string& job);
  // The greedy policy: replaces the job's circuits with allocate_greedy(demands) (largest
  // demands first while transmitters and receivers are free). The whole plan is validated before
  // anything is sent: every new circuit's ports must be healthy (not masked) and inside the
  // driver's allow-list, and no circuit may change on a stage in `locked_stages` (the stages the
  // controller has an op in flight on or under reconfiguration: G1/G2). A plan that fails any
  // check throws InfeasibleError naming the job, the rank and the port, and nothing is sent.
  // Commit is one disconnect and one connect; a connect the switch refuses is rolled back
  // (the removed circuits are remade) before the error is rethrown. Afterwards the job has no
  // topo_id (topology() is empty) until the next set_topology.
  // `allocator` picks how the rail's one transmitter and one receiver per rank are shared
  // (allocator.h): largest-demand is the allocation above (allocate_greedy); uniform and
  // orchestrrl run allocate_circuits with one port per rank, and orchestrrl's duplex circuits
  // may wire a reverse direction nobody demanded (granted with 0 bytes).
  GreedyReport allocate(const std::string& job, const std::vector<Demand>& demands,
                        const std::set<int>& locked_stages = {}, Allocator allocator = Allocator::kLargestDemand);
  // The controller's greedy policy: set_topology through allocate, every edge of `topo` one
  // demand; the job keeps `topo` as its topo_id when exactly its edges were wired.
  GreedyReport allocate_topology(const std::string& job, const TopoId& topo,
                                 Allocator allocator = Allocator::kLargestDemand);
  // What set_topology would change, without touching the switch.
  ReconfigReport plan(const std::string& job, const TopoId& topo) const;

  // Marks a port failed. A job rank on it moves to a free healthy slot and the job's current
  // topology is re-applied there; without a spare the job is reported infeasible
  // (InfeasibleError naming job, rank, port) and keeps running on what it has. Where the slots
  // have hosts (set_slot_hosts), a spare on the failed slot's host is taken first: the one a
  // rank can follow without re-patching (its own standby NIC).
  MaskReport mask_port(ocs::Port port);
  // The host each slot's NIC is on, in slot order (empty names: unknown). Only mask_port's choice
  // of spare reads it.
  void set_slot_hosts(std::vector<std::string> hosts);
  std::set<ocs::Port> masked() const;

  // Snapshot accessors (thread-safe).
  std::optional<TopoId> topology(const std::string& job) const;
  std::vector<Slot> slots_of(const std::string& job) const;
  std::vector<ocs::Circuit> circuits_of(const std::string& job) const;
  std::vector<std::string> jobs() const;
  size_t free_slots() const;

 private:
  struct Job {
    JobLayout layout;
    std::unique_ptr<SubMappingTable> table;
    std::vector<Slot> slots;                  // by rank
    std::optional<TopoId> topo;               // empty while in the giant-ring fallback or greedy
    std::optional<std::vector<RankEdge>> greedy;  // the edges a greedy allocation granted
    std::map<ocs::Port, ocs::Port> circuits;  // ingress -> egress, on this job's ports only
  };
  Job& job_ref(const std::string& job);
  const Job& job_ref(const std::string& job) const;
  // Pure: the circuits to remove/add to move j to `target` (ingress -> egress on j's ports).
  ReconfigReport diff(const Job& j, const std::map<ocs::Port, ocs::Port>& target) const;
  // Sends the diff through the driver and records it in j.
  void execute(Job& j, ReconfigReport& r, const std::map<ocs::Port, ocs::Port>& target);
  void execute_unchecked(Job& j, ReconfigReport& r, const std::map<ocs::Port, ocs::Port>& target);
  void resync(Job& j);
  // allocate's checks of a planned change (throws InfeasibleError); sends nothing.
  GreedyReport allocate_locked(Job& j, const std::vector<Demand>& demands, const std::set<int>& locked_stages,
                              const std::optional<TopoId>& as, Allocator allocator);
  void validate_plan(const Job& j, const ReconfigReport& r, const std::set<int>& locked_stages) const;
  std::map<ocs::Port, ocs::Port> target_of(const Job& j, const std::vector<RankEdge>& edges) const;
  bool slot_free(const Slot& s) const;
  bool slot_masked(const Slot& s) const;

  std::string rail_;
  std::vector<Slot> slots_;
  std::vector<std::string> slot_hosts_;  // parallel to slots_, or empty
  std::unique_ptr<ocs::OcsDriver> driver_;
  mutable std::mutex mutex_;  // one reprogramming at a time on a rail; guards everything below
  std::map<std::string, Job> jobs_;
  std::set<ocs::Port> masked_;
};

}  // namespace ocslab::phase
