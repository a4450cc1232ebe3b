// Topology encoding for parallelism-driven rail reconfiguration (Opus-style): a job's
// parallel layout, the topo_id of one rail (one digit per pipeline stage: 0 = the stage is in
// its pipeline-parallel phase, k = 1..9 = rings along the job's k-th symmetric dimension),
// the per-stage sub-mappings that make a topo_id cheap to store and to diff, and the
// translation of a composed topology onto switch ports.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "ocslab/common/error.h"
#include "ocslab/ocsctl/types.h"

namespace ocslab::phase {

// Bad topology input (unknown dimension, a digit the job lacks, too many dimensions...).
class TopologyError : public Error {
 public:
  using Error::Error;
};

// A symmetric parallelism dimension (DP, CP, TP, EP...). Its digit is its index + 1.
struct Dimension {
  std::string name;
  int size = 1;
};

// Ranks are numbered stage-major: rank = stage * ranks_per_stage() + local, and the local
// index is mixed-radix over dims with dims[0] varying fastest (DP=2, CP=2: local = dp + 2*cp).
struct JobLayout {
  std::string job;
  int pp = 1;                   // pipeline stages (the asymmetric dimension, digit 0)
  std::vector<Dimension> dims;  // symmetric dimensions, digits 1..dims.size() (at most 9)

  // Throws TopologyError naming the job and the bad field.
  void validate() const;
  int ranks_per_stage() const;
  int ranks() const { return pp * ranks_per_stage(); }
  int stage_of(int rank) const { return rank / ranks_per_stage(); }
  int local_of(int rank) const { return rank % ranks_per_stage(); }
  std::vector<int> coords(int local) const;  // one coordinate per dims entry
  int local_from(const std::vector<int>& coords) const;
  // "pp" -> 0, a dimension name -> its digit; throws TopologyError listing the job's names.
  int digit_of(std::string_view dimension) const;
  // Number of parallel dimensions counted for storage: PP plus every symmetric dimension.
  int n_parallel() const { return 1 + static_cast<int>(dims.size()); }
  std::string describe_digits() const;  // "0=pp, 1=dp, 2=cp"
};

// One rail's topology for one job: digit s is the phase stage s's ports are wired for.
class TopoId {
 public:
  TopoId() = default;
  explicit TopoId(std::vector<uint8_t> digits) : digits_(std::move(digits)) {}
  // Every stage at the same digit (the job's starting point, e.g. all DP rings).
  static TopoId uniform(const JobLayout& layout, int digit);
  // "012": one decimal digit per stage. Throws TopologyError naming the job, the stage and
  // the digit when the length differs from layout.pp or a digit names a dimension it lacks.
  static TopoId parse(std::string_view text, const JobLayout& layout);
  void validate(const JobLayout& layout) const;

  const std::vector<uint8_t>& digits() const { return digits_; }
  int digit(int stage) const { return digits_.at(static_cast<size_t>(stage)); }
  void set(int stage, int digit) { digits_.at(static_cast<size_t>(stage)) = static_cast<uint8_t>(digit); }
  size_t stages() const { return digits_.size(); }
  std::string str() const;
  bool operator==(const TopoId&) const = default;

 private:
  std::vector<uint8_t> digits_;
};

// Stages whose digit differs between a and b (same length required).
std::vector<int> changed_stages(const TopoId& a, const TopoId& b);

// A directed rank-to-rank link: src's transmit port feeds dst's receive port.
struct RankEdge {
  int src = 0;
  int dst = 0;
  auto operator<=>(const RankEdge&) const = default;
};

// The sub-mapping of one stage for one digit: for every local rank of the stage, the local
// index it transmits to (-1: no circuit, a group of one). For a symmetric digit the target is
// in the same stage (the next rank of its ring along that dimension); for PP (digit 0) the
// target has the same local index in the next stage that is also in its PP phase, resolved
// when digits are composed, so a stage's PP sub-mapping does not depend on other stages.
struct SubMapping {
  int stage = 0;
  int digit = 0;
  std::vector<int> next;  // indexed by local rank
};

// Every sub-mapping of a job: pp x n_parallel of them with ranks_per_stage entries each, so
// storage is n_parallel x ranks instead of one full mapping per possible topo_id
// (n_parallel ^ pp of them).
class SubMappingTable {
 public:
  explicit SubMappingTable(JobLayout layout);
  const JobLayout& layout() const { return layout_; }
  const SubMapping& at(int stage, int digit) const;
  size_t count() const { return table_.size(); }
  size_t stored_entries() const;
  // The rank edges of a whole topo_id, ordered by src. A PP stage links to the next stage
  // (cyclically) whose digit is also 0; a lone PP stage gets no edges.
  std::vector<RankEdge> compose(const TopoId& topo) const;
  // Only the edges leaving the given stages (what must change when those digits change;
  // a PP change also moves the edges of the PP stage before it, see affected_stages).
  std::vector<RankEdge> compose_stages(const TopoId& topo, const std::vector<int>& stages) const;
  // Stages whose outgoing edges differ between a and b: the changed stages plus, when a
  // PP digit changed, the preceding PP stage whose ring successor moved.
  std::vector<int> affected_stages(const TopoId& a, const TopoId& b) const;
  // Stages owning either end of an edge that differs between a and b: every stage whose
  // transmit or receive ports a move from a to b disturbs (what the controller locks).
  std::vector<int> touched_stages(const TopoId& a, const TopoId& b) const;
  // One ring over every rank of the job in rank order: the static fallback topology.
  std::vector<RankEdge> giant_ring() const;

 private:
  JobLayout layout_;
  std::vector<SubMapping> table_;  // stage-major, digit-minor
};

// The two switch ports one rank's NIC on a rail is fibred to.
struct Slot {
  ocs::Port ingress = 0;  // the NIC's transmit fibre enters the switch here
  ocs::Port egress = 0;   // the NIC's receive fibre leaves the switch here
  auto operator<=>(const Slot&) const = default;
};

// Rank edges -> circuits through a rank -> slot assignment.
std::vector<ocs::Circuit> to_circuits(const std::vector<RankEdge>& edges, const std::vector<Slot>& slots);

}  // namespace ocslab::phase
