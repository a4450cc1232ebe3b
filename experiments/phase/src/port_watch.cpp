#include "ocslab/phase/port_watch.h"

#include <fmt/format.h>

#include <set>

#include "ocslab/common/clock.h"
#include "ocslab/common/error.h"
#include "ocslab/common/log.h"

namespace ocslab::phase {

PortWatch::PortWatch(std::shared_ptr<Orchestrator> rail, std::unique_ptr<ocs::OcsDriver> driver, OnFailure on_failure,
                     PortWatchOptions options)
    : rail_(std::move(rail)), driver_(std::move(driver)), on_failure_(std::move(on_failure)), options_(options) {
  if (!rail_ || !driver_) throw Error("port watch: a rail and a driver are required");
  if (options_.interval.count() <= 0)
    throw Error(fmt::format("port watch {}: the interval must be positive (got {} ms)", rail_->rail(),
                            options_.interval.count()));
  if (options_.dark_polls < 1)
    throw Error(
        fmt::format("port watch {}: dark_polls must be at least 1 (got {})", rail_->rail(), options_.dark_polls));
  if (options_.settle.count() < 0)
    throw Error(
        fmt::format("port watch {}: settle must not be negative (got {} ms)", rail_->rail(), options_.settle.count()));
  if (options_.settle.count() == 0) options_.settle = options_.interval * 3;
  loop_ = std::make_unique<Periodic>("port watch " + rail_->rail(), options_.interval, [this] { poll(); });
}

PortWatch::~PortWatch() { stop(); }

void PortWatch::start() { loop_->start(); }

void PortWatch::stop() {
  if (!loop_->stop()) return;
  try {
    driver_->close();
  } catch (const std::exception& e) {
    spdlog::debug("port watch {}: closing: {}", rail_->rail(), e.what());
  }
}

uint64_t PortWatch::polls() const {
  std::lock_guard lock(mu_);
  return polls_;
}

uint64_t PortWatch::failed_polls() const {
  std::lock_guard lock(mu_);
  return failed_polls_;
}

std::vector<PortFailure> PortWatch::judge(const std::vector<ocs::Circuit>& circuits,
                                          const std::vector<ocs::PortPower>& power, int64_t mono_ns) {
  std::map<ocs::Port, double> dbm;
  for (const auto& p : power) dbm[p.port] = p.dbm;
  const auto masked = rail_->masked();
  const int64_t settle_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(options_.settle).count();
  std::vector<PortFailure> out;
  std::set<ocs::Port> judged;
  auto lit = [&](ocs::Port p) { return dbm.at(p) >= options_.threshold_dbm; };

  for (const auto& c : circuits) {
    if (masked.count(c.ingress) || masked.count(c.egress)) continue;
    if (!dbm.count(c.ingress) || !dbm.count(c.egress)) continue;  // no reading: nothing to judge
    // Both ends are tracked against this circuit; a new partner is a new circuit.
    for (auto [port, partner] : {std::pair{c.ingress, c.egress}, std::pair{c.egress, c.ingress}}) {
      judged.insert(port);
      auto it = tracks_.find(port);
      if (it == tracks_.end() || it->second.partner != partner) tracks_[port] = Track{partner, mono_ns, 0, 0, false};
    }
    // The port that takes the blame: light missing where it enters, else where it leaves.
    const bool in_dark = !lit(c.ingress);
    const bool out_dark = !in_dark && !lit(c.egress);
    for (auto [port, dark] : {std::pair{c.ingress, in_dark}, std::pair{c.egress, out_dark}}) {
      auto& t = tracks_[port];
      if (!dark || mono_ns - t.made_ns < settle_ns) {
        t.dark = 0;
        continue;
      }
      if (t.dark++ == 0) t.first_dark_ns = mono_ns;
      if (t.dark < options_.dark_polls || t.reported) continue;
      t.reported = true;
      PortFailure f;
      f.rail = rail_->rail();
      f.port = static_cast<int>(port);
      f.seen_mono_ns = t.first_dark_ns;
      f.evidence = port == c.ingress
                       ? fmt::format("no light enters ingress port {} of circuit {}->{} ({:.1f} dBm, {} readings)",
                                     c.ingress, c.ingress, c.egress, dbm.at(c.ingress), t.dark)
                       : fmt::format(
                             "no light leaves egress port {} of circuit {}->{} ({:.1f} dBm while ingress {} "
                             "reads {:.1f} dBm, {} readings)",
                             c.egress, c.ingress, c.egress, dbm.at(c.egress), c.ingress, dbm.at(c.ingress), t.dark);
      out.push_back(std::move(f));
    }
  }
  // Ports no longer on a circuit (moved, removed, masked) start afresh when they are again.
  for (auto it = tracks_.begin(); it != tracks_.end();) {
    it = judged.count(it->first) ? std::next(it) : tracks_.erase(it);
  }
  return out;
}

std::vector<ocs::Circuit> rail_circuits(const Orchestrator& rail) {
  std::vector<ocs::Circuit> circuits;
  for (const auto& job : rail.jobs()) {
    auto cs = rail.circuits_of(job);
    circuits.insert(circuits.end(), cs.begin(), cs.end());
  }
  return circuits;
}

void PortWatch::poll() {
  const auto circuits = rail_circuits(*rail_);
  std::vector<ocs::Port> ports;
  for (const auto& c : circuits) {
    ports.push_back(c.ingress);
    ports.push_back(c.egress);
  }
  std::vector<PortFailure> found;
  bool ok = true;
  if (!ports.empty()) {
    try {
      auto power = driver_->power(ports);
      found = judge(circuits, power, now().monotonic_ns);
      if (failing_) spdlog::info("port watch {}: power readings answered again", rail_->rail());
      failing_ = false;
    } catch (const std::exception& e) {
      ok = false;
      if (!failing_)
        spdlog::warn("port watch {}: power poll failed (retrying every {} ms): {}", rail_->rail(),
                     options_.interval.count(), e.what());
      failing_ = true;
    }
  }
  for (const auto& f : found) {
    spdlog::warn("port watch {}: port {} failed: {}", f.rail, f.port, f.evidence);
    if (on_failure_) on_failure_(f);
  }
  std::lock_guard lock(mu_);
  ++polls_;
  if (!ok) ++failed_polls_;
}

}  // namespace ocslab::phase
