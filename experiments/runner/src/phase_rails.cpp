// The rails and controller side of a phase-workload run (phase_rails.h).
#include "ocslab/runner/phase_rails.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <thread>

#include "ocslab/common/clock.h"
#include "ocslab/phase/nic_watch.h"
#include "ocslab/runner/experiment_spec.h"
#include "ocslab/runner/phase_figures.h"
#include "ocslab/runner/run_context.h"
#include "ocslab/runner/target.h"

namespace ocslab::runner {

using json = nlohmann::json;

std::vector<PortMask> port_masks(const std::vector<phase::ControllerEvent>& events) {
  std::vector<PortMask> out;
  for (const auto& e : events) {
    if (e.kind == phase::ControllerEvent::Kind::kPortFailed) {
      PortMask pm;
      pm.rail = e.rail;
      pm.port = static_cast<int>(e.value);
      pm.reported_ns = e.real_ns;
      pm.reported_mono_ns = e.mono_ns;
      pm.evidence = e.detail;
      out.push_back(std::move(pm));
    } else if (e.kind == phase::ControllerEvent::Kind::kMasked) {
      for (auto it = out.rbegin(); it != out.rend(); ++it) {
        if (it->rail != e.rail || it->answered) continue;
        it->answered = true;
        it->masked = e.rank >= 0 || e.detail.find(" masked; ") != std::string::npos;
        it->rank = e.rank;
        it->recovery_ms = e.rank >= 0 ? e.value : 0;
        if (e.rank >= 0) it->detect_ms = e.value - static_cast<double>(e.mono_ns - it->reported_mono_ns) / 1e6;
        it->move = e.detail;
        break;
      }
    }
  }
  return out;
}

bool recovered_port_note(const std::vector<PortMask>& masks, const std::string& problem) {
  for (const auto& pm : masks) {
    if (!pm.masked) continue;
    for (const std::string& head : {fmt::format("rail {}: port {} failed: ", pm.rail, pm.port),
                                    fmt::format("rail {}: port {} masked; ", pm.rail, pm.port)}) {
      if (problem.rfind(head, 0) == 0) return true;
    }
  }
  return false;
}

MaskRecord mask_record(const std::string& label, int64_t started_ns,
                       const std::vector<phase::ControllerEvent>& events) {
  MaskRecord out;
  for (const auto& pm : port_masks(events)) {
    const bool moved = pm.rank >= 0;
    // Who saw it: the hosts' probes (phase.detect_nic: NIC, layer) or the switch's power monitors.
    const auto nic = phase::parse_nic_evidence(pm.evidence);
    out.record.push_back({{"rail", pm.rail},
                          {"detected_by", nic ? "host probes" : "switch power"},
                          {"host", nic ? json(nic->host) : json(nullptr)},
                          {"nic", nic ? json(nic->nic) : json(nullptr)},
                          {"layer", nic ? json(nic->layer) : json("light")},
                          {"port", pm.port},
                          {"reported", pm.reported_ns},
                          {"evidence", pm.evidence},
                          {"masked", pm.masked},
                          {"rank", moved ? json(pm.rank) : json(nullptr)},
                          {"detect_ms", pm.detect_ms ? json(*pm.detect_ms) : json(nullptr)},
                          {"recovery_ms", moved ? json(pm.recovery_ms) : json(nullptr)},
                          {"move", pm.move}});
    const double at_s = static_cast<double>(pm.reported_ns - started_ns) / 1e9;
    std::string line = fmt::format(
        "{}: rail {} port {} failed, reported at +{:.3f} s{} ({})", label, pm.rail, pm.port, at_s,
        pm.detect_ms ? fmt::format(", {:.1f} ms after {}", *pm.detect_ms, nic ? "the NIC was down under its circuits"
                                                                                  : "its first dark reading")
                     : std::string(),
        pm.evidence);
    if (moved) {
      line += fmt::format("; masked: {}; recovered {:.1f} ms after {}", pm.move, pm.recovery_ms,
                          nic ? "the NIC was down under its circuits" : "the first dark reading");
    } else if (pm.masked) {
      line += "; masked: " + pm.move;
    } else {
      line += "; not masked: " + (pm.move.empty() ? std::string("no answer from the rail") : pm.move);
    }
    out.lines.push_back({line, pm.masked || moved});
  }
  return out;
}

LabSwitching::LabSwitching(const Target& target, const PhaseWorkloadSpec& pw, const RunContext& ctx)
    : target_(target),
      ctx_(ctx),
      active_(target.is_vlab() && !pw.inject_delay && !pw.sweep_switching_ms.empty()),
      rate_active_(target.is_vlab() && !pw.sweep_link_gbps.empty()) {
  if (active_ || rate_active_) original_ = vlab::lab_timing(target_.lab.dir);
}

LabSwitching::~LabSwitching() {
  if (active_ && changed_) put_back_switching();
  if (!rate_active_ || !rate_changed_) return;
  try {
    vlab::LabTiming t;
    t.link_gbps = fmt::format("{}", original_.link_gbps);
    vlab::set_lab_timing(target_.lab.dir, t, std::chrono::seconds(10));
    ctx_.log(original_.link_gbps > 0 ? fmt::format("virtual lab link rate put back to {:g} Gbit/s", original_.link_gbps)
                                     : std::string("virtual lab link rate put back to no cap"));
  } catch (const std::exception& e) {
    ctx_.log(std::string("could not put the virtual lab's link rate back: ") + e.what());
  }
}

void LabSwitching::put_back_switching() {
  try {
    vlab::LabTiming t;
    const auto& d = original_.switching;
    switch (d.kind) {
      case emu::Distribution::Kind::kFixed:
        t.switching_ms = fmt::format("{}", d.a_ms);
        break;
      case emu::Distribution::Kind::kUniform:
        t.switching_ms = fmt::format("{{uniform: [{}, {}]}}", d.a_ms, d.b_ms);
        break;
      case emu::Distribution::Kind::kNormal:
        t.switching_ms = fmt::format("{{normal: {{mean: {}, sd: {}, floor: {}}}}}", d.a_ms, d.b_ms, d.floor_ms);
        break;
    }
    vlab::set_lab_timing(target_.lab.dir, t, std::chrono::seconds(10));
    ctx_.log("virtual lab switching time put back to " + d.to_string());
  } catch (const std::exception& e) {
    ctx_.log(std::string("could not put the virtual lab's switching time back: ") + e.what());
  }
}

void LabSwitching::set(double ms) {
  if (!active_ || ms == current_) return;
  vlab::LabTiming t;
  t.switching_ms = fmt::format("{}", ms);
  auto now = vlab::set_lab_timing(target_.lab.dir, t, std::chrono::seconds(10));
  changed_ = true;
  current_ = ms;
  ctx_.log("virtual lab switching time now " + now.switching.to_string());
}

void LabSwitching::set_link_gbps(double gbps) {
  if (!rate_active_ || gbps == current_gbps_) return;
  vlab::LabTiming t;
  t.link_gbps = fmt::format("{}", gbps);
  auto now = vlab::set_lab_timing(target_.lab.dir, t, std::chrono::seconds(10));
  rate_changed_ = true;
  current_gbps_ = gbps;
  ctx_.log(fmt::format("virtual lab link rate now {:g} Gbit/s", now.link_gbps));
}

PhaseRails::PhaseRails(const Target& target, const RunContext& ctx, std::function<void(const Sample&)> control)
    : target_(target),
      pw_(*target.spec.phase_workload),
      ctx_(ctx),
      control_(std::move(control)),
      rails_(pw_.rail_list()) {
  for (const auto& r : rails_) rail_slots_.push_back(PhaseWorkloadSpec::slots_of(r, target.spec.hosts));
}

RailList PhaseRails::open(const RunPoint& m, size_t& placement_added) {
  SwitchAccess sw = target_.switch_access();
  const phase::TopoId& topo = m.mode == "native" ? pw_.native : pw_.initial;
  const int64_t t0 = realtime_ns();
  std::vector<std::shared_ptr<phase::Orchestrator>> rails;
  bool changed = false;
  placement_added = 0;
  for (size_t k = 0; k < rails_.size(); ++k) {
    const auto& slots = rail_slots_[k];
    auto rail = std::make_shared<phase::Orchestrator>(rails_[k].name, slots, ocs::make_driver(sw.url, sw.options));
    // A failed port's rank takes a spare on its own host first (a standby NIC it can follow).
    std::vector<std::string> hosts;
    for (const auto* list : {&rails_[k].nics, &rails_[k].spares}) {
      for (const auto& p : *list) hosts.push_back(target_.spec.hosts[p.host].name);
    }
    rail->set_slot_hosts(std::move(hosts));
    auto placed =
        rail->add_job(pw_.layout, topo,
                      std::vector<phase::Slot>(slots.begin(), slots.begin() + static_cast<long>(pw_.schedule.ranks)));
    placement_added += placed.added.size();
    changed = changed || placed.changed();
    ctx_.log(fmt::format("{}: job {} wired as {} on rail {} ({} circuit(s) made, {} removed)", m.label, pw_.layout.job,
                         topo.str(), rails_[k].name, placed.added.size(), placed.removed.size()));
    rails.push_back(std::move(rail));
  }
  // Circuits the placement made: their links need the switch's and the NICs' time to come up
  // before the ranks use them (the settle time of a reconfiguration experiment).
  if (changed && control_) {
    control_(Sample{t0, 0, "switch", "ocs", m.label + " setup " + topo.str(), "setup", 1, ""});
  }
  if (changed) std::this_thread::sleep_for(std::chrono::milliseconds(pw_.settle_ms));
  return rails;
}

void PhaseRails::record(const RunPoint& m, const phase::ReconfigReport& r) {
  if (!r.changed()) return;
  PhaseReconfig rec;
  rec.label = m.label;
  rec.mode = m.mode;
  rec.rail = r.rail;
  rec.switching_ms = m.switching_ms;
  rec.repetition = m.repetition;
  rec.from = r.from;
  rec.to = r.to;
  rec.issued_ns = r.started.realtime_ns;
  for (const auto& c : r.calls) {
    if (c.op != "list" && c.op != "info") {
      rec.issued_ns = c.issued.realtime_ns;
      break;
    }
  }
  rec.acked_ns = r.finished.realtime_ns;
  rec.added = r.added.size();
  rec.removed = r.removed.size();
  rec.ports = r.ports_touched;
  if (control_) {
    const std::string subject = m.label + " " + (rails_.size() > 1 ? r.rail + " " : std::string()) + r.to;
    control_(Sample{rec.issued_ns, 0, "switch", "ocs", subject, "command", 1, ""});
    control_(Sample{rec.acked_ns, 0, "switch", "ocs", subject, "ack", 1, "bool"});
  }
  std::lock_guard lock(mu_);
  reconfigs_.push_back(std::move(rec));
}

phase::ControllerOptions PhaseRails::controller_options(RailList rails, const RunPoint& m, const std::string& token) {
  phase::ControllerOptions co;
  co.listen_host = pw_.listen_host;
  co.listen_port = pw_.listen_port;
  co.token = token;
  co.layout = pw_.layout;
  co.rails = std::move(rails);
  co.ack_timeout = std::chrono::milliseconds(pw_.ack_timeout_ms);
  co.max_retries = pw_.max_retries;
  co.policy = pw_.policy;
  co.allocator = pw_.allocator;
  co.windows = windows_ ? *windows_ : pw_.windows;
  co.switch_time = std::chrono::microseconds(static_cast<int64_t>(pw_.switch_time_ms * 1000));
  if (pw_.inject_delay && m.switching_ms > 0) {
    co.injected_switch_time = std::chrono::microseconds(static_cast<int64_t>(m.switching_ms * 1000));
    // The injected time comes on top of every attempt: the ack timeout must leave room for it.
    co.ack_timeout += std::chrono::milliseconds(static_cast<int64_t>(m.switching_ms) + 1);
  }
  co.on_reprogram = [this, &m](const phase::ReconfigReport& r) { record(m, r); };
  return co;
}

size_t PhaseRails::reconfig_count() const {
  std::lock_guard lock(mu_);
  return reconfigs_.size();
}

void PhaseRails::join_reconfigs(size_t first, const std::vector<phase::ControllerEvent>& events,
                                const std::function<int(const std::string&, int64_t)>& step_of) {
  std::lock_guard lock(mu_);
  for (size_t i = first; i < reconfigs_.size(); ++i) {
    auto& r = reconfigs_[i];
    const phase::ControllerEvent* best = nullptr;
    for (const auto& e : events) {
      if (e.kind != phase::ControllerEvent::Kind::kReconfigStart || e.real_ns > r.issued_ns) continue;
      if (!best || e.real_ns >= best->real_ns) best = &e;
    }
    if (!best) continue;
    r.group = best->group;
    r.seq = best->seq;
    r.step = step_of(best->group, best->seq);
  }
}

std::optional<double> PhaseRails::median_command_ms(size_t first) const {
  std::vector<double> ms;
  {
    std::lock_guard lock(mu_);
    for (size_t i = first; i < reconfigs_.size(); ++i)
      ms.push_back(static_cast<double>(reconfigs_[i].acked_ns - reconfigs_[i].issued_ns) / 1e6);
  }
  if (ms.empty()) return std::nullopt;
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

std::vector<PhaseReconfig> PhaseRails::reconfigs() const {
  std::lock_guard lock(mu_);
  return reconfigs_;
}

json PhaseRails::meta() const {
  json out = json::array();
  for (size_t k = 0; k < rails_.size(); ++k) {
    json nics = json::array(), spares = json::array();
    const auto& rail = rails_[k];
    for (size_t i = 0; i < rail.nics.size() + rail.spares.size(); ++i) {
      const RankPlacement& p = i < rail.nics.size() ? rail.nics[i] : rail.spares[i - rail.nics.size()];
      json e = {{"host", target_.spec.hosts[p.host].name},
                {"nic", p.nic},
                {"slot", fmt::format("{}-{}", rail_slots_[k][i].ingress, rail_slots_[k][i].egress)}};
      (i < rail.nics.size() ? nics : spares).push_back(e);
    }
    out.push_back({{"name", rail.name}, {"nics", nics}, {"spares", spares}});
  }
  return out;
}

}  // namespace ocslab::runner
