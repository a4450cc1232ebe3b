#include "ocslab/phase/orchestrator.h"

#include <fmt/format.h>

#include <algorithm>
#include <tuple>

#include "ocslab/common/log.h"

namespace ocslab::phase {

Orchestrator::Orchestrator(std::string rail, std::vector<Slot> slots, std::unique_ptr<ocs::OcsDriver> driver)
    : rail_(std::move(rail)), slots_(std::move(slots)), driver_(std::move(driver)) {
  if (!driver_) throw Error(fmt::format("rail {}: an orchestrator needs a switch driver", rail_));
  std::set<ocs::Port> seen;
  for (const auto& s : slots_) {
    for (auto p : {s.ingress, s.egress}) {
      if (!seen.insert(p).second) throw InfeasibleError(fmt::format("rail {}: port {} appears in two slots", rail_, p));
    }
  }
  // Refuse a rail whose slots reach outside the driver's allow-list before anything is sent.
  std::vector<ocs::Port> all(seen.begin(), seen.end());
  if (const auto& allow = driver_->options().allow) {
    for (auto p : all) {
      if (!allow->contains(p)) {
        throw InfeasibleError(
            fmt::format("rail {}: slot port {} is outside the switch allow-list {}", rail_, p, allow->to_string()));
      }
    }
  }
}

Orchestrator::Job& Orchestrator::job_ref(const std::string& job) {
  auto it = jobs_.find(job);
  if (it == jobs_.end()) throw Error(fmt::format("rail {}: no job '{}'", rail_, job));
  return it->second;
}
const Orchestrator::Job& Orchestrator::job_ref(const std::string& job) const {
  return const_cast<Orchestrator*>(this)->job_ref(job);
}

bool Orchestrator::slot_masked(const Slot& s) const { return masked_.count(s.ingress) || masked_.count(s.egress); }

bool Orchestrator::slot_free(const Slot& s) const {
  for (const auto& [name, j] : jobs_) {
    if (std::find(j.slots.begin(), j.slots.end(), s) != j.slots.end()) return false;
  }
  return true;
}

std::map<ocs::Port, ocs::Port> Orchestrator::target_of(const Job& j, const std::vector<RankEdge>& edges) const {
  std::map<ocs::Port, ocs::Port> target;
  for (const auto& c : to_circuits(edges, j.slots)) target[c.ingress] = c.egress;
  return target;
}

ReconfigReport Orchestrator::diff(const Job& j, const std::map<ocs::Port, ocs::Port>& target) const {
  ReconfigReport r;
  r.rail = rail_;
  r.job = j.layout.job;
  std::set<ocs::Port> touched;
  for (const auto& [in, out] : j.circuits) {
    auto it = target.find(in);
    if (it == target.end() || it->second != out) {
      r.removed.push_back({in, out});
      touched.insert(in);
      touched.insert(out);
    }
  }
  for (const auto& [in, out] : target) {
    auto it = j.circuits.find(in);
    if (it == j.circuits.end() || it->second != out) {
      r.added.push_back({in, out});
      touched.insert(in);
      touched.insert(out);
    }
  }
  r.ports_touched.assign(touched.begin(), touched.end());
  return r;
}

void Orchestrator::resync(Job& j) {
  // After a failed command our record of the job's ports is stale: read the switch back so a
  // retry diffs against what is really there. If even that fails the record is emptied and
  // the next attempt's commands will say what is wrong.
  std::set<ocs::Port> ingress;
  for (const auto& s : j.slots) ingress.insert(s.ingress);
  j.circuits.clear();
  try {
    for (const auto& c : driver_->list()) {
      if (ingress.count(c.ingress)) j.circuits[c.ingress] = c.egress;
    }
  } catch (const std::exception& e) {
    spdlog::warn("rail {}: job {}: cannot read the switch back after a failure: {}", rail_, j.layout.job, e.what());
  }
}

void Orchestrator::execute(Job& j, ReconfigReport& r, const std::map<ocs::Port, ocs::Port>& target) {
  try {
    execute_unchecked(j, r, target);
  } catch (...) {
    resync(j);
    throw;
  }
}

void Orchestrator::execute_unchecked(Job& j, ReconfigReport& r, const std::map<ocs::Port, ocs::Port>& target) {
  auto t0 = now();
  r.started = t0;
  r.calls.clear();
  if (r.changed()) {
    driver_->check_circuits(r.added);  // allow-list and switch size, before anything is sent
    auto record = [&] {
      if (auto t = driver_->last_timing()) r.calls.push_back(*t);
    };
    if (!r.removed.empty()) {
      std::vector<ocs::Port> ingress;
      for (const auto& c : r.removed) ingress.push_back(c.ingress);
      driver_->disconnect(ingress);
      record();
      for (auto p : ingress) j.circuits.erase(p);
    }
    if (!r.added.empty()) {
      driver_->connect(r.added);
      record();
    }
  }
  j.circuits = target;
  r.finished = now();
  r.total_ms = elapsed_ms(t0, r.finished);
}

ReconfigReport Orchestrator::add_job(const JobLayout& layout, const TopoId& initial,
                                     std::optional<std::vector<Slot>> slots) {
  std::lock_guard lock(mutex_);
  auto t0 = now();
  layout.validate();
  initial.validate(layout);
  if (jobs_.count(layout.job)) throw Error(fmt::format("rail {}: job '{}' is already placed", rail_, layout.job));
  Job j;
  j.layout = layout;
  j.table = std::make_unique<SubMappingTable>(layout);
  const size_t need = static_cast<size_t>(layout.ranks());
  if (slots) {
    if (slots->size() != need) {
      throw InfeasibleError(
          fmt::format("rail {}: job {} has {} ranks but {} slots were given", rail_, layout.job, need, slots->size()));
    }
    for (const auto& s : *slots) {
      if (std::find(slots_.begin(), slots_.end(), s) == slots_.end()) {
        throw InfeasibleError(fmt::format("rail {}: job {}: slot {}/{} is not one of the rail's", rail_, layout.job,
                                          s.ingress, s.egress));
      }
      if (!slot_free(s) || slot_masked(s)) {
        throw InfeasibleError(
            fmt::format("rail {}: job {}: slot {}/{} is taken or masked", rail_, layout.job, s.ingress, s.egress));
      }
    }
    j.slots = *slots;
  } else {
    for (const auto& s : slots_) {
      if (j.slots.size() == need) break;
      if (slot_free(s) && !slot_masked(s)) j.slots.push_back(s);
    }
    if (j.slots.size() < need) {
      throw InfeasibleError(fmt::format("rail {}: job {} needs {} slots, {} free healthy slots remain", rail_,
                                        layout.job, need, j.slots.size()));
    }
  }
  // Learn what is already wired on the job's ports, so the first diff is honest. A circuit from
  // one of them to a free slot of this rail (a spare a rank was masked onto in an earlier run)
  // is the rail's own: the diff removes it.
  std::set<ocs::Port> ingress, egress, free_ingress, free_egress;
  for (const auto& s : j.slots) {
    ingress.insert(s.ingress);
    egress.insert(s.egress);
  }
  for (const auto& s : slots_) {
    if (slot_free(s) && !ingress.count(s.ingress)) {
      free_ingress.insert(s.ingress);
      free_egress.insert(s.egress);
    }
  }
  for (const auto& c : driver_->list()) {
    if ((ingress.count(c.ingress) && (egress.count(c.egress) || free_egress.count(c.egress))) ||
        (free_ingress.count(c.ingress) && egress.count(c.egress))) {
      j.circuits[c.ingress] = c.egress;
    } else if (ingress.count(c.ingress) || egress.count(c.egress)) {
      throw InfeasibleError(fmt::format("rail {}: job {}: circuit {} links one of its ports to a port it does not own",
                                        rail_, layout.job, ocs::to_string(c)));
    }
  }
  auto target = target_of(j, j.table->compose(initial));
  auto r = diff(j, target);
  r.to = initial.str();
  for (int s = 0; s < layout.pp; ++s) r.stages.push_back(s);
  r.plan_ms = elapsed_ms(t0, now());
  auto& placed = jobs_[layout.job] = std::move(j);
  execute(placed, r, target);
  placed.topo = initial;
  return r;
}

ReconfigReport Orchestrator::remove_job(const std::string& job) {
  std::lock_guard lock(mutex_);
  auto& j = job_ref(job);
  auto r = diff(j, {});
  r.from = j.topo ? j.topo->str() : "ring";
  execute(j, r, {});
  jobs_.erase(job);
  return r;
}

ReconfigReport Orchestrator::plan(const std::string& job, const TopoId& topo) const {
  std::lock_guard lock(mutex_);
  const auto& j = job_ref(job);
  topo.validate(j.layout);
  auto r = diff(j, target_of(j, j.table->compose(topo)));
  r.from = j.topo ? j.topo->str() : "ring";
  r.to = topo.str();
  if (j.topo) r.stages = j.table->affected_stages(*j.topo, topo);
  return r;
}

ReconfigReport Orchestrator::set_topology(const std::string& job, const TopoId& topo) {
  std::lock_guard lock(mutex_);
  auto t0 = now();
  auto& j = job_ref(job);
  topo.validate(j.layout);
  std::map<ocs::Port, ocs::Port> target;
  std::vector<int> stages;
  if (j.topo) {
    // Only the affected stages' sub-mappings are recomposed; the others keep their circuits.
    stages = j.table->affected_stages(*j.topo, topo);
    target = j.circuits;
    for (int s : stages) {
      int rps = j.layout.ranks_per_stage();
      for (int l = 0; l < rps; ++l) target.erase(j.slots[static_cast<size_t>(s * rps + l)].ingress);
    }
    for (const auto& [in, out] : target_of(j, j.table->compose_stages(topo, stages))) target[in] = out;
  } else {
    for (int s = 0; s < j.layout.pp; ++s) stages.push_back(s);
    target = target_of(j, j.table->compose(topo));
  }
  auto r = diff(j, target);
  r.from = j.topo ? j.topo->str() : "ring";
  r.to = topo.str();
  r.stages = stages;
  r.plan_ms = elapsed_ms(t0, now());
  execute(j, r, target);
  j.topo = topo;
  j.greedy.reset();
  spdlog::debug("rail {}: job {} {} -> {}: {} removed, {} added in {:.3f} ms", rail_, job, r.from, r.to,
                r.removed.size(), r.added.size(), r.total_ms);
  return r;
}

ReconfigReport Orchestrator::set_giant_ring(const std::string& job) {
  std::lock_guard lock(mutex_);
  auto t0 = now();
  auto& j = job_ref(job);
  auto target = target_of(j, j.table->giant_ring());
  auto r = diff(j, target);
  r.from = j.topo ? j.topo->str() : "ring";
  r.to = "ring";
  for (int s = 0; s < j.layout.pp; ++s) r.stages.push_back(s);
  r.plan_ms = elapsed_ms(t0, now());
  execute(j, r, target);
  j.topo.reset();
  j.greedy.reset();
  return r;
}

void Orchestrator::set_slot_hosts(std::vector<std::string> hosts) {
  std::lock_guard lock(mutex_);
  if (!hosts.empty() && hosts.size() != slots_.size()) {
    throw Error(fmt::format("rail {}: {} slot host(s) for {} slot(s)", rail_, hosts.size(), slots_.size()));
  }
  slot_hosts_ = std::move(hosts);
}

MaskReport Orchestrator::mask_port(ocs::Port port) {
  std::lock_guard lock(mutex_);
  MaskReport m;
  m.port = port;
  auto it =
      std::find_if(slots_.begin(), slots_.end(), [&](const Slot& s) { return s.ingress == port || s.egress == port; });
  if (it == slots_.end()) throw Error(fmt::format("rail {}: port {} is not one of the rail's slot ports", rail_, port));
  masked_.insert(port);
  Slot failed = *it;
  for (auto& [name, j] : jobs_) {
    auto pos = std::find(j.slots.begin(), j.slots.end(), failed);
    if (pos == j.slots.end()) continue;
    m.job = name;
    m.rank = static_cast<int>(pos - j.slots.begin());
    m.from = failed;
    std::optional<Slot> spare;
    const size_t failed_at = static_cast<size_t>(it - slots_.begin());
    auto on_failed_host = [&](size_t i) {
      return !slot_hosts_.empty() && !slot_hosts_[failed_at].empty() && slot_hosts_[i] == slot_hosts_[failed_at];
    };
    for (size_t i = 0; i < slots_.size(); ++i) {
      const Slot& s = slots_[i];
      if (!slot_free(s) || slot_masked(s)) continue;
      if (!spare) spare = s;  // the first healthy one, unless the failed slot's host has one
      if (on_failed_host(i)) {
        spare = s;
        break;
      }
    }
    if (!spare) {
      throw InfeasibleError(
          fmt::format("rail {}: port {} failed under job {} rank {}; no healthy spare slot remains ({} masked)", rail_,
                      port, name, m.rank, masked_.size()));
    }
    m.to = spare;
    *pos = *spare;
    // Circuits on the failed slot's ports go; the rank's edges are re-made on the spare.
    auto edges = j.topo ? j.table->compose(*j.topo) : j.greedy ? *j.greedy : j.table->giant_ring();
    auto target = target_of(j, edges);
    auto r = diff(j, target);
    r.from = j.topo ? j.topo->str() : j.greedy ? "greedy" : "ring";
    r.to = r.from;
    execute(j, r, target);
    m.reapplied = std::move(r);
    break;
  }
  return m;
}

void Orchestrator::validate_plan(const Job& j, const ReconfigReport& r, const std::set<int>& locked_stages) const {
  const auto& name = j.layout.job;
  auto rank_of = [&](ocs::Port p) {
    for (size_t i = 0; i < j.slots.size(); ++i) {
      if (j.slots[i].ingress == p || j.slots[i].egress == p) return static_cast<int>(i);
    }
    return -1;
  };
  const auto& allow = driver_->options().allow;
  for (const auto& c : r.added) {
    for (auto p : {c.ingress, c.egress}) {
      if (masked_.count(p)) {
        throw InfeasibleError(fmt::format("rail {}: job {}: the plan needs rank {}'s port {}, which is masked; nothing "
                                          "was sent",
                                          rail_, name, rank_of(p), p));
      }
      if (allow && !allow->contains(p)) {
        throw InfeasibleError(fmt::format("rail {}: job {}: the plan needs rank {}'s port {}, outside the switch "
                                          "allow-list {}; nothing was sent",
                                          rail_, name, rank_of(p), p, allow->to_string()));
      }
    }
  }
  for (const auto* list : {&r.removed, &r.added}) {
    for (const auto& c : *list) {
      for (auto p : {c.ingress, c.egress}) {
        const int rank = rank_of(p);
        const int stage = rank < 0 ? -1 : j.layout.stage_of(rank);
        if (locked_stages.count(stage)) {
          throw InfeasibleError(fmt::format("rail {}: job {}: the plan changes rank {}'s port {} on stage {}, which has "
                                            "an op in flight or is under reconfiguration (G1/G2); nothing was sent",
                                            rail_, name, rank, p, stage));
        }
      }
    }
  }
  try {
    driver_->check_circuits(r.added);  // switch size and the driver's own checks
  } catch (const InfeasibleError&) {
    throw;
  } catch (const Error& e) {
    throw InfeasibleError(fmt::format("rail {}: job {}: {}; nothing was sent", rail_, name, e.what()));
  }
}

GreedyReport Orchestrator::allocate(const std::string& job, const std::vector<Demand>& demands,
                                    const std::set<int>& locked_stages, Allocator allocator) {
  std::lock_guard lock(mutex_);
  return allocate_locked(job_ref(job), demands, locked_stages, std::nullopt, allocator);
}

GreedyReport Orchestrator::allocate_topology(const std::string& job, const TopoId& topo, Allocator allocator) {
  std::lock_guard lock(mutex_);
  auto& j = job_ref(job);
  topo.validate(j.layout);
  std::vector<Demand> demands;
  for (const auto& e : j.table->compose(topo)) demands.push_back({e.src, e.dst, 1});
  return allocate_locked(j, demands, {}, topo, allocator);
}

namespace {

// allocate_circuits with the rail's one port per rank, as granted / dropped demands: every
// circuit granted with the bytes demanded on it (0 for a duplex circuit's undemanded
// direction), every demand without a circuit dropped; both largest first (ties: lower src,
// then lower dst).
GreedyAllocation allocate_on_rail(Allocator allocator, const std::vector<Demand>& demands, int ranks) {
  auto plan = allocate_circuits(allocator, demands, ranks, 1);
  auto wanted = demand_matrix(demands, ranks);
  GreedyAllocation out;
  for (const auto& e : plan.edges()) {
    auto it = wanted.find({e.src, e.dst});
    out.granted.push_back({e.src, e.dst, it == wanted.end() ? 0 : it->second});
  }
  for (const auto& d : demands) {
    if (plan.count(d.src, d.dst) == 0) out.dropped.push_back(d);
  }
  auto order = [](const Demand& a, const Demand& b) {
    return std::tie(b.bytes, a.src, a.dst) < std::tie(a.bytes, b.src, b.dst);
  };
  std::stable_sort(out.granted.begin(), out.granted.end(), order);
  std::stable_sort(out.dropped.begin(), out.dropped.end(), order);
  return out;
}

}  // namespace

GreedyReport Orchestrator::allocate_locked(Job& j, const std::vector<Demand>& demands,
                                           const std::set<int>& locked_stages, const std::optional<TopoId>& as,
                                           Allocator allocator) {
  const auto& job = j.layout.job;
  auto t0 = now();
  GreedyReport g;
  try {
    g.allocation = allocator == Allocator::kLargestDemand ? allocate_greedy(demands, j.layout.ranks())
                                                          : allocate_on_rail(allocator, demands, j.layout.ranks());
  } catch (const TopologyError& e) {
    throw InfeasibleError(fmt::format("rail {}: job {}: {}", rail_, job, e.what()));
  }
  std::vector<RankEdge> edges;
  for (const auto& d : g.allocation.granted) edges.push_back({d.src, d.dst});
  auto target = target_of(j, edges);
  auto& r = g.reconfig;
  r = diff(j, target);
  r.from = j.topo ? j.topo->str() : "ring";
  r.to = as ? as->str() : "greedy";
  std::set<int> stages;
  for (const auto& c : r.removed) stages.insert(j.layout.stage_of(static_cast<int>(
      std::find_if(j.slots.begin(), j.slots.end(), [&](const Slot& s) { return s.ingress == c.ingress; }) -
      j.slots.begin())));
  for (const auto& d : g.allocation.granted) stages.insert(j.layout.stage_of(d.src));
  r.stages.assign(stages.begin(), stages.end());
  validate_plan(j, r, locked_stages);  // everything is checked before the first command
  r.plan_ms = elapsed_ms(t0, now());
  r.started = now();
  if (r.changed()) {
    auto record = [&] {
      if (auto t = driver_->last_timing()) r.calls.push_back(*t);
    };
    try {
      if (!r.removed.empty()) {
        std::vector<ocs::Port> ingress;
        for (const auto& c : r.removed) ingress.push_back(c.ingress);
        driver_->disconnect(ingress);
        record();
      }
    } catch (...) {
      resync(j);
      throw;
    }
    try {
      if (!r.added.empty()) {
        driver_->connect(r.added);
        record();
      }
    } catch (...) {
      // Commit or nothing: remake what this plan removed, then report the refusal.
      try {
        if (!r.removed.empty()) driver_->connect(r.removed);
      } catch (const std::exception& e) {
        spdlog::warn("rail {}: job {}: rolling back a refused greedy plan failed: {}", rail_, job, e.what());
      }
      resync(j);
      throw;
    }
  }
  j.circuits = target;
  // The job is at `as` only when exactly its edges were wired (orchestrrl may add reverse ones).
  const bool exact = g.allocation.dropped.empty() &&
                     std::all_of(g.allocation.granted.begin(), g.allocation.granted.end(),
                                 [&](const Demand& d) {
                                   return std::any_of(demands.begin(), demands.end(), [&](const Demand& w) {
                                     return w.src == d.src && w.dst == d.dst;
                                   });
                                 });
  if (as && exact) {
    j.topo = as;
    j.greedy.reset();
  } else {
    j.topo.reset();
    j.greedy = edges;
  }
  r.finished = now();
  r.total_ms = elapsed_ms(r.started, r.finished);
  return g;
}

std::set<ocs::Port> Orchestrator::masked() const {
  std::lock_guard lock(mutex_);
  return masked_;
}

std::optional<TopoId> Orchestrator::topology(const std::string& job) const {
  std::lock_guard lock(mutex_);
  return job_ref(job).topo;
}

std::vector<Slot> Orchestrator::slots_of(const std::string& job) const {
  std::lock_guard lock(mutex_);
  return job_ref(job).slots;
}

std::vector<ocs::Circuit> Orchestrator::circuits_of(const std::string& job) const {
  std::lock_guard lock(mutex_);
  std::vector<ocs::Circuit> out;
  for (const auto& [in, e] : job_ref(job).circuits) out.push_back({in, e});
  return out;
}

std::vector<std::string> Orchestrator::jobs() const {
  std::lock_guard lock(mutex_);
  std::vector<std::string> out;
  for (const auto& [n, j] : jobs_) out.push_back(n);
  return out;
}

size_t Orchestrator::free_slots() const {
  std::lock_guard lock(mutex_);
  size_t n = 0;
  for (const auto& s : slots_) n += slot_free(s) && !slot_masked(s);
  return n;
}

}  // namespace ocslab::phase
