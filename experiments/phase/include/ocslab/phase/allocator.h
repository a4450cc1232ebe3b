// Circuit allocators (selectable per job, `allocator:`): how a demand matrix is turned into
// circuits when every node has `ports` transmit and `ports` receive ports on the switch. Pure:
// no sockets, no switch; the orchestrator (greedy policy) and the comparison on the emulator
// call it. docs/phase-control.md#circuit-allocators has the algorithms, with OrchestrRL's
// notation, and the interpretations this implementation had to make.
//
//   largest-demand  today's policy (allocate_greedy, generalised to `ports`): directed demands
//                   largest first, one circuit each while the source has a free transmitter
//                   and the destination a free receiver. The default.
//   uniform         demand-oblivious: round after round, in (src, dst) order, every demand gets
//                   one more circuit while both ends have a free port, until a round adds none.
//   orchestrrl      OrchestrRL's allocator (arXiv 2601.01209, App. D, Algorithm 3): circuits are
//                   duplex (one port at each end carries both directions), a pair {i,j} may get
//                   several; each step gives one more circuit to the feasible pair with the
//                   largest PAIRTIME (its max directional demand over its circuits; no circuit:
//                   infinite), ties to the larger MAXDIRDEMAND, then the lower (i, j).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ocslab/ocsctl/types.h"
#include "ocslab/phase/policy.h"

namespace ocslab::phase {

enum class Allocator { kLargestDemand, kUniform, kOrchestrRL };

std::string_view to_string(Allocator a);
// "largest-demand", "uniform", "orchestrrl"; nullopt for anything else.
std::optional<Allocator> parse_allocator(std::string_view name);
// The accepted names, for error messages: "largest-demand, uniform, orchestrrl".
std::string allocator_names();

// What an allocator decided: directed circuits per ordered pair (src's transmitter to dst's
// receiver; a duplex circuit of orchestrrl counts once in each direction).
struct CircuitPlan {
  int nodes = 0;
  int ports = 0;  // per node, each direction
  std::map<std::pair<int, int>, int> circuits;
  int count(int src, int dst) const;
  int total() const;
  // Every directed circuit once (a pair with n circuits n times), in (src, dst) order.
  std::vector<Demand> edges() const;
  bool operator==(const CircuitPlan&) const = default;
};

// The demand of every ordered pair (duplicates summed, zero-byte demands left out). Throws
// TopologyError for a node outside 0..nodes-1 or a demand from a node to itself.
std::map<std::pair<int, int>, uint64_t> demand_matrix(const std::vector<Demand>& demands, int nodes);

// Allocates circuits for `demands` over `nodes` nodes of `ports` ports each (>= 1; throws
// TopologyError otherwise). Deterministic: equal inputs give equal plans whatever the order.
CircuitPlan allocate_circuits(Allocator a, const std::vector<Demand>& demands, int nodes, int ports);

// The time each demand takes over its circuits at `gbps` per circuit (bytes / (circuits x rate)),
// the demand's transfer time being its share split evenly over its parallel circuits.
struct DemandTime {
  Demand demand;
  int circuits = 0;
  double ms = 0;  // +infinity without a circuit
};
struct TransferTime {
  std::vector<DemandTime> demands;  // (src, dst) order
  double ms = 0;                    // the slowest demand (+infinity when one has no circuit)
  int unserved = 0;                 // demands without a circuit
};
TransferTime transfer_time(const std::vector<Demand>& demands, const CircuitPlan& plan, double gbps);

// The plan on one switch: node i owns ingress ports first + i*ports .. + ports-1 (its
// transmitters) and the egress ports egress_offset + those (its receivers). A directed circuit
// takes the source's lowest free transmitter and the destination's lowest free receiver, in
// (src, dst) order.
std::vector<ocs::Circuit> assign_ports(const CircuitPlan& plan, int first, int egress_offset);

}  // namespace ocslab::phase
