#include "ocslab/runner/forwarding_follow.h"

#include <fmt/format.h>

#include <algorithm>
#include <iterator>

#include "ocslab/common/clock.h"
#include "ocslab/forwarding/reroute.h"
#include "ocslab/forwarding/routes.h"
#include "ocslab/runner/forwarding_spec.h"

namespace ocslab::runner {

namespace fw = ocslab::forwarding;
using json = nlohmann::json;

std::set<fw::PortRef> dark_circuit_ends(const fw::Fabric& fabric, const std::map<fw::PortRef, PortLight>& light) {
  std::set<fw::PortRef> out;
  for (const auto& c : fabric.circuits)
    for (const auto& end : {c.a, c.b}) {
      auto it = light.find(end);
      if (it != light.end() && !it->second.lit) out.insert(end);
    }
  return out;
}

json to_json(const RerouteRecord& r) {
  return {{"iteration", r.iteration},
          {"mapping", r.mapping},
          {"dark_circuits", r.dark},
          {"detected_ns", r.detected_ns},
          {"applied_ns", r.applied_ns},
          {"detected_to_applied_ms", static_cast<double>(r.applied_ns - r.detected_ns) / 1e6},
          {"circuits", r.circuits},
          {"unrouted_pairs", r.unrouted_pairs},
          {"ok", r.ok},
          {"error", r.error},
          {"matrix", r.matrix},
          {"matrix_reachable", r.matrix_reachable},
          {"matrix_pairs", r.matrix_pairs}};
}

json to_json(const ChangeRecord& c) {
  json j = {{"iteration", c.iteration},
            {"from", c.from},
            {"to", c.to},
            {"kept", c.kept},
            {"broken", c.broken},
            {"made", c.made},
            {"make_before_break", c.make_before_break},
            {"predicted_lost", c.predicted_lost},
            {"predicted_lost_break_first", c.predicted_lost_break_first},
            {"pairs", c.pairs},
            {"pairs_lost", c.pairs_lost < 0 ? json(nullptr) : json(c.pairs_lost)},
            {"matrix", c.matrix}};
  if (c.bridge_applied_ns) {
    j["bridge"] = {{"started_ns", c.bridge_started_ns},
                   {"applied_ns", c.bridge_applied_ns},
                   {"ms", static_cast<double>(c.bridge_applied_ns - c.bridge_started_ns) / 1e6},
                   {"ok", c.bridge_ok},
                   {"error", c.bridge_error}};
  }
  return j;
}

ForwardingFollower::ForwardingFollower(LabForwarding& fwd, const Mapping& first, std::string folder)
    : fwd_(fwd), current_(&first), folder_(std::move(folder)) {}

void PortStates::observe(const Sample& s, int64_t received_ns) {
  const bool power = s.source == "ocs_power" && s.signal == "light";
  const bool carrier = s.source == "carrier" && s.signal == "carrier";
  if (!power && !carrier) return;
  const bool lit = s.value >= 0.5;
  std::lock_guard lock(mutex_);
  State& st = ports_[fw::PortRef{s.host, s.subject}];
  PortLight& p = power ? st.light : st.carrier;
  if (carrier && lit) st.awaiting_up = false;
  if (p.lit == lit && p.since_ns != 0) return;
  p.since_ns = power ? s.t_ns : received_ns;
  p.lit = lit;
  ++version_;
}

void PortStates::expect_link_up(const std::set<fw::PortRef>& ports) {
  std::lock_guard lock(mutex_);
  for (const auto& p : ports) {
    auto it = ports_.find(p);
    // A carrier already up (or never reported) has nothing to wait for.
    if (it != ports_.end() && it->second.carrier.since_ns != 0 && !it->second.carrier.lit) {
      it->second.awaiting_up = true;
      ++version_;
    }
  }
}

std::map<fw::PortRef, PortLight> PortStates::snapshot(uint64_t* version) const {
  std::lock_guard lock(mutex_);
  if (version) *version = version_;
  std::map<fw::PortRef, PortLight> out;
  for (const auto& [port, st] : ports_) {
    const bool carrier_dark = !st.carrier.lit && !st.awaiting_up;
    PortLight p;
    p.lit = st.light.lit && !carrier_dark;
    // Since when it is as it is: the newest change of a source that says dark, else of either.
    if (!st.light.lit && carrier_dark)
      p.since_ns = std::min(st.light.since_ns, st.carrier.since_ns);
    else if (!st.light.lit)
      p.since_ns = st.light.since_ns;
    else if (carrier_dark)
      p.since_ns = st.carrier.since_ns;
    else
      p.since_ns = std::max(st.light.since_ns, st.carrier.since_ns);
    out[port] = p;
  }
  return out;
}

uint64_t PortStates::version() const {
  std::lock_guard lock(mutex_);
  return version_;
}

void ForwardingFollower::check(int iteration) {
  const ExperimentSpec& spec = fwd_.spec();
  if (!spec.forwarding.reroute_on_dark) return;
  if (states_.version() == checked_) return;  // every 20 ms: nothing to do unless a port changed
  uint64_t version = 0;
  const auto light = states_.snapshot(&version);
  checked_ = version;
  const auto dark = dark_circuit_ends(fabric_for(spec, *current_), light);
  if (dark == avoided_) return;
  // The reading that changed the set: the newest among the ports that went dark or lit again.
  int64_t detected = 0;
  std::set<fw::PortRef> changed;
  std::set_symmetric_difference(dark.begin(), dark.end(), avoided_.begin(), avoided_.end(),
                                std::inserter(changed, changed.end()));
  for (const auto& p : changed) {
    auto it = light.find(p);
    detected = std::max(detected, it == light.end() ? realtime_ns() : it->second.since_ns);
  }
  reroute(dark, detected, iteration);
}

void ForwardingFollower::reroute(const std::set<fw::PortRef>& dark, int64_t detected_ns, int iteration) {
  const ExperimentSpec& spec = fwd_.spec();
  RerouteRecord r;
  r.iteration = iteration;
  r.mapping = current_->name;
  r.detected_ns = detected_ns;
  std::vector<fw::Circuit> dropped;
  const fw::Fabric alive = fw::surviving_fabric(fabric_for(spec, *current_), dark, &dropped);
  for (const auto& c : dropped) r.dark.push_back(fw::to_string(c.a) + " <-> " + fw::to_string(c.b));
  fw::RouteOptions options = route_options(spec, alive);
  options.partial = true;
  const fw::Routes routes = fw::compute_routes(alive, options);
  r.circuits = alive.circuits.size();
  for (const auto& s : alive.hosts)
    for (const auto& d : alive.hosts) r.unrouted_pairs += s.name != d.name && !routes.has_route(s.name, d.name);
  const std::string label = fmt::format("{}.reroute-{}", current_->name, reroutes_.size() + 1);
  try {
    fwd_.apply_routes(label, alive, routes, iteration);
    r.ok = true;
  } catch (const std::exception& e) {  // rolled back: the hosts keep the routes they had
    r.error = e.what();
    problems_.push_back(fmt::format("forwarding reroute of mapping '{}' around {} dark circuit(s) failed: {}",
                                    r.mapping, r.dark.size(), r.error));
  }
  r.applied_ns = realtime_ns();
  avoided_ = dark;  // a failed reroute is not retried until the dark circuits change again
  std::string what = r.dark.empty() ? std::string("every circuit lit again") : "dark: ";
  for (size_t k = 0; k < r.dark.size(); ++k) what += (k ? ", " : "") + r.dark[k];
  fwd_.log()(
      fmt::format("forwarding: mapping '{}', {}: routes recomputed on {} circuit(s){} and {} in {:.0f} ms from "
                  "the reading that changed the dark set",
                  r.mapping, what, r.circuits,
                  r.unrouted_pairs ? fmt::format(" ({} pair(s) they cannot join)", r.unrouted_pairs) : "",
                  r.ok ? "applied" : "NOT applied", (r.applied_ns - r.detected_ns) / 1e6));
  if (r.ok && !dark.empty() && spec.forwarding.verify_change) {
    VerifyMatrix m = fwd_.verify_installed(label);
    write_matrix_files(m, folder_, iteration);
    fwd_.log()(format_matrix(m));
    r.matrix = label;
    r.matrix_pairs = m.pairs.size();
    for (const auto& p : m.pairs) r.matrix_reachable += p.reachable;
  }
  reroutes_.push_back(std::move(r));
}

void ForwardingFollower::before_switch(const Mapping& to, int iteration) {
  const ExperimentSpec& spec = fwd_.spec();
  check(iteration - 1);  // what is installed avoids what is dark now
  ChangeRecord c;
  c.iteration = iteration;
  c.from = current_->name;
  c.to = to.name;
  c.make_before_break = spec.forwarding.make_before_break;
  const LabForwarding::Installed installed = fwd_.installed();
  const fw::ChangePlan change = fw::plan_change(installed.fabric, fabric_for(spec, to));
  c.kept = change.kept.size();
  c.broken = change.broken.size();
  c.made = change.made.size();
  c.predicted_lost_break_first = fw::pairs_lost(installed.fabric, installed.routes, change.broken).size();
  if (c.make_before_break && !change.broken.empty() && !change.kept.empty()) {
    const fw::Routes bridge = fw::make_before_break_routes(installed.fabric, installed.routes, change,
                                                           route_options(spec, change.kept_fabric));
    c.bridge_started_ns = realtime_ns();
    try {
      fwd_.apply_routes(to.name + ".bridge", installed.fabric, bridge, iteration);
      c.bridge_ok = true;
    } catch (const std::exception& e) {  // rolled back: the change breaks first, as without the option
      c.bridge_error = e.what();
      problems_.push_back(fmt::format("forwarding make-before-break for reconfiguration {} to '{}' failed: {}",
                                      iteration, to.name, c.bridge_error));
    }
    c.bridge_applied_ns = realtime_ns();
    fwd_.log()(
        fmt::format("forwarding: make-before-break to '{}': routes moved onto the {} kept circuit(s) in {:.0f} "
                    "ms, before the switch breaks {}",
                    to.name, c.kept, (c.bridge_applied_ns - c.bridge_started_ns) / 1e6, c.broken));
  }
  c.predicted_lost = fw::pairs_lost(fwd_.installed().fabric, fwd_.installed().routes, change.broken).size();
  changes_.push_back(std::move(c));
}

void ForwardingFollower::after_switch(const Mapping& to, int iteration, bool switched) {
  if (changes_.empty() || changes_.back().iteration != iteration) return;
  ChangeRecord& c = changes_.back();
  if (!switched || !fwd_.spec().forwarding.verify_change) return;
  // The routes installed now are the old mapping's (or the bridge): the pairs they cannot
  // complete over the circuits the switch left lit are what the change costs until the new
  // mapping's routes are on.
  VerifyMatrix m = fwd_.verify_installed(to.name + ".during");
  write_matrix_files(m, folder_, iteration);
  fwd_.log()(format_matrix(m));
  c.matrix = m.mapping;
  c.measured_ns = realtime_ns();
  c.pairs = m.pairs.size();
  c.pairs_lost =
      static_cast<int>(std::count_if(m.pairs.begin(), m.pairs.end(), [](const PairResult& p) { return !p.reachable; }));
  fwd_.log()(
      fmt::format("forwarding: reconfiguration {} from '{}' to '{}': {} of {} pairs lost reachability during "
                  "the change (make-before-break {}; the model predicted {}, {} breaking first)",
                  iteration, c.from, c.to, c.pairs_lost, c.pairs, c.make_before_break ? "on" : "off", c.predicted_lost,
                  c.predicted_lost_break_first));
}

void ForwardingFollower::reconfigured(const Mapping& to, bool applied) {
  if (!applied) return;
  if (!changes_.empty() && changes_.back().to == to.name) {
    // The circuits this change made: their carrier comes up after a NIC's link-up time.
    std::set<fw::PortRef> made;
    const fw::Fabric from = fabric_for(fwd_.spec(), *current_), next = fabric_for(fwd_.spec(), to);
    for (const auto& c : fw::plan_change(from, next).made) made.insert({c.a, c.b});
    states_.expect_link_up(made);
  }
  current_ = &to;
  avoided_.clear();  // the mapping's own routes: the next check reroutes around what is dark now
  checked_ = ~uint64_t{0};
}

std::vector<Sample> ForwardingFollower::samples() const {
  std::vector<Sample> out;
  for (const auto& r : reroutes_) {
    const double ms = r.ok ? static_cast<double>(r.applied_ns - r.detected_ns) / 1e6 : -1;
    out.push_back(Sample{r.applied_ns, 0, "lab", "forwarding", r.mapping, "reroute_ms", ms, "ms"});
    out.push_back(Sample{r.applied_ns, 0, "lab", "forwarding", r.mapping, "dark_circuits",
                         static_cast<double>(r.dark.size()), "count"});
  }
  for (const auto& c : changes_) {
    if (c.bridge_applied_ns)
      out.push_back(Sample{c.bridge_applied_ns, 0, "lab", "forwarding", c.to, "bridge_ms",
                           c.bridge_ok ? static_cast<double>(c.bridge_applied_ns - c.bridge_started_ns) / 1e6 : -1,
                           "ms"});
    if (c.pairs_lost >= 0)
      out.push_back(Sample{c.measured_ns, 0, "lab", "forwarding", c.to, "pairs_lost", static_cast<double>(c.pairs_lost),
                           "count"});
  }
  return out;
}

json ForwardingFollower::record() const {
  json j = {{"reroute_on_dark", fwd_.spec().forwarding.reroute_on_dark},
            {"make_before_break", fwd_.spec().forwarding.make_before_break},
            {"reroutes", json::array()},
            {"changes", json::array()}};
  for (const auto& r : reroutes_) j["reroutes"].push_back(to_json(r));
  for (const auto& c : changes_) j["changes"].push_back(to_json(c));
  return j;
}

}  // namespace ocslab::runner
