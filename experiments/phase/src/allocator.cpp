#include "ocslab/phase/allocator.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <tuple>

#include "ocslab/phase/topology.h"

namespace ocslab::phase {

std::string_view to_string(Allocator a) {
  switch (a) {
    case Allocator::kLargestDemand:
      return "largest-demand";
    case Allocator::kUniform:
      return "uniform";
    case Allocator::kOrchestrRL:
      return "orchestrrl";
  }
  return "?";
}

std::optional<Allocator> parse_allocator(std::string_view name) {
  for (auto a : {Allocator::kLargestDemand, Allocator::kUniform, Allocator::kOrchestrRL}) {
    if (name == to_string(a)) return a;
  }
  return std::nullopt;
}

std::string allocator_names() { return "largest-demand, uniform, orchestrrl"; }

int CircuitPlan::count(int src, int dst) const {
  auto it = circuits.find({src, dst});
  return it == circuits.end() ? 0 : it->second;
}

int CircuitPlan::total() const {
  int n = 0;
  for (const auto& [pair, c] : circuits) n += c;
  return n;
}

std::vector<Demand> CircuitPlan::edges() const {
  std::vector<Demand> out;
  for (const auto& [pair, c] : circuits) {
    for (int k = 0; k < c; ++k) out.push_back({pair.first, pair.second, 0});
  }
  return out;
}

std::map<std::pair<int, int>, uint64_t> demand_matrix(const std::vector<Demand>& demands, int nodes) {
  std::map<std::pair<int, int>, uint64_t> m;
  for (const auto& d : demands) {
    for (int r : {d.src, d.dst}) {
      if (r < 0 || r >= nodes)
        throw TopologyError(fmt::format("demand {}->{}: rank {} is outside 0..{}", d.src, d.dst, r, nodes - 1));
    }
    if (d.src == d.dst) throw TopologyError(fmt::format("demand {}->{}: a rank cannot send to itself", d.src, d.dst));
    if (d.bytes > 0) m[{d.src, d.dst}] += d.bytes;
  }
  return m;
}

namespace {

struct FreePorts {
  explicit FreePorts(int nodes, int budget)
      : budget(budget), tx(static_cast<size_t>(nodes), 0), rx(static_cast<size_t>(nodes), 0) {}
  bool directed_free(int s, int d) const { return tx[static_cast<size_t>(s)] < budget && rx[static_cast<size_t>(d)] < budget; }
  void take_directed(int s, int d) {
    ++tx[static_cast<size_t>(s)];
    ++rx[static_cast<size_t>(d)];
  }
  // A duplex circuit takes a transmitter and a receiver at both ends.
  bool duplex_free(int i, int j) const { return directed_free(i, j) && directed_free(j, i); }
  void take_duplex(int i, int j) {
    take_directed(i, j);
    take_directed(j, i);
  }
  int budget;
  std::vector<int> tx, rx;
};

CircuitPlan plan_largest_demand(const std::map<std::pair<int, int>, uint64_t>& m, FreePorts& ports, CircuitPlan plan) {
  std::vector<std::pair<std::pair<int, int>, uint64_t>> order(m.begin(), m.end());
  // Largest first; ties: lower src, then lower dst (the map's order, kept by the stable sort).
  std::stable_sort(order.begin(), order.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  for (const auto& [pair, bytes] : order) {
    if (!ports.directed_free(pair.first, pair.second)) continue;
    ports.take_directed(pair.first, pair.second);
    plan.circuits[pair] = 1;
  }
  return plan;
}

CircuitPlan plan_uniform(const std::map<std::pair<int, int>, uint64_t>& m, FreePorts& ports, CircuitPlan plan) {
  for (bool added = true; added;) {
    added = false;
    for (const auto& [pair, bytes] : m) {
      if (!ports.directed_free(pair.first, pair.second)) continue;
      ports.take_directed(pair.first, pair.second);
      ++plan.circuits[pair];
      added = true;
    }
  }
  return plan;
}

// Algorithm 3's state per unordered pair {i < j}.
struct PairState {
  int i = 0, j = 0;
  uint64_t max_dir = 0;  // MAXDIRDEMAND(i, j) = max(D[i][j], D[j][i])
  int circuits = 0;
};

// PAIRTIME(a) > PAIRTIME(b), exactly: max_dir/circuits compared by cross-multiplication (no
// rounding), a pair without a circuit being infinitely long.
bool pairtime_longer(const PairState& a, const PairState& b) {
  if (a.circuits == 0 || b.circuits == 0) return a.circuits == 0 && b.circuits != 0;
  using u128 = unsigned __int128;
  return static_cast<u128>(a.max_dir) * static_cast<u128>(b.circuits) >
         static_cast<u128>(b.max_dir) * static_cast<u128>(a.circuits);
}

CircuitPlan plan_orchestrrl(const std::map<std::pair<int, int>, uint64_t>& m, FreePorts& ports, CircuitPlan plan) {
  std::map<std::pair<int, int>, PairState> pairs;
  for (const auto& [pair, bytes] : m) {
    const std::pair<int, int> key{std::min(pair.first, pair.second), std::max(pair.first, pair.second)};
    auto& p = pairs[key];
    p.i = key.first;
    p.j = key.second;
    p.max_dir = std::max(p.max_dir, bytes);
  }
  for (;;) {
    PairState* best = nullptr;
    for (auto& [key, p] : pairs) {  // (i, j) order: the last tie-break is the lower pair
      if (!ports.duplex_free(p.i, p.j)) continue;
      if (!best || pairtime_longer(p, *best) || (!pairtime_longer(*best, p) && p.max_dir > best->max_dir)) best = &p;
    }
    if (!best) break;
    ports.take_duplex(best->i, best->j);
    ++best->circuits;
  }
  for (const auto& [key, p] : pairs) {
    if (p.circuits == 0) continue;
    plan.circuits[{p.i, p.j}] = p.circuits;
    plan.circuits[{p.j, p.i}] = p.circuits;
  }
  return plan;
}

}  // namespace

CircuitPlan allocate_circuits(Allocator a, const std::vector<Demand>& demands, int nodes, int ports) {
  if (nodes < 1) throw TopologyError(fmt::format("circuit allocation over {} nodes: needs at least one", nodes));
  if (ports < 1) throw TopologyError(fmt::format("circuit allocation with {} ports per node: needs at least one", ports));
  auto m = demand_matrix(demands, nodes);
  FreePorts budget(nodes, ports);
  CircuitPlan plan;
  plan.nodes = nodes;
  plan.ports = ports;
  switch (a) {
    case Allocator::kLargestDemand:
      return plan_largest_demand(m, budget, std::move(plan));
    case Allocator::kUniform:
      return plan_uniform(m, budget, std::move(plan));
    case Allocator::kOrchestrRL:
      return plan_orchestrrl(m, budget, std::move(plan));
  }
  return plan;
}

TransferTime transfer_time(const std::vector<Demand>& demands, const CircuitPlan& plan, double gbps) {
  if (!(gbps > 0)) throw TopologyError(fmt::format("link rate {} Gb/s: must be positive", gbps));
  TransferTime t;
  for (const auto& [pair, bytes] : demand_matrix(demands, plan.nodes)) {
    DemandTime d;
    d.demand = {pair.first, pair.second, bytes};
    d.circuits = plan.count(pair.first, pair.second);
    if (d.circuits == 0) {
      d.ms = std::numeric_limits<double>::infinity();
      ++t.unserved;
    } else {
      // bits / (circuits x Gb/s) = ns; / 1e6 = ms.
      d.ms = static_cast<double>(bytes) * 8.0 / (d.circuits * gbps) / 1e6;
    }
    t.ms = std::max(t.ms, d.ms);
    t.demands.push_back(d);
  }
  return t;
}

std::vector<ocs::Circuit> assign_ports(const CircuitPlan& plan, int first, int egress_offset) {
  std::vector<int> tx(static_cast<size_t>(plan.nodes), 0), rx(static_cast<size_t>(plan.nodes), 0);
  std::vector<ocs::Circuit> out;
  for (const auto& e : plan.edges()) {
    auto& a = tx[static_cast<size_t>(e.src)];
    auto& b = rx[static_cast<size_t>(e.dst)];
    if (a >= plan.ports || b >= plan.ports)
      throw TopologyError(fmt::format("circuit {}->{}: node {} has no free {} port left (of {})", e.src, e.dst,
                                      a >= plan.ports ? e.src : e.dst, a >= plan.ports ? "transmit" : "receive",
                                      plan.ports));
    out.push_back({first + e.src * plan.ports + a, egress_offset + first + e.dst * plan.ports + b});
    ++a;
    ++b;
  }
  return out;
}

}  // namespace ocslab::phase
