#include "ocslab/phase/nic_watch.h"

#include <fmt/format.h>

#include <algorithm>

#include "ocslab/common/clock.h"
#include "ocslab/common/error.h"
#include "ocslab/common/log.h"

namespace ocslab::phase {

std::string nic_evidence(const WatchedNic& n, const std::string& layer, double down_ms,
                         const std::vector<ocs::Circuit>& circuits) {
  std::string list;
  for (const auto& c : circuits) list += fmt::format("{}{}->{}", list.empty() ? "" : ", ", c.ingress, c.egress);
  return fmt::format("NIC {}:{} (interface {}): {} down for {:.0f} ms with its circuits made ({})", n.host, n.nic,
                     n.interface, layer, down_ms, list);
}

std::optional<NicEvidence> parse_nic_evidence(const std::string& evidence) {
  if (evidence.rfind("NIC ", 0) != 0) return std::nullopt;
  const auto colon = evidence.find(':', 4);
  const auto space = evidence.find(' ', 4);
  const auto layer_at = evidence.find("): ");
  if (colon == std::string::npos || space == std::string::npos || colon > space || layer_at == std::string::npos)
    return std::nullopt;
  const auto layer_end = evidence.find(' ', layer_at + 3);
  if (layer_end == std::string::npos) return std::nullopt;
  NicEvidence e;
  e.host = evidence.substr(4, colon - 4);
  e.nic = evidence.substr(colon + 1, space - colon - 1);
  e.layer = evidence.substr(layer_at + 3, layer_end - layer_at - 3);
  if (e.host.empty() || e.nic.empty() || e.layer.empty()) return std::nullopt;
  return e;
}

NicWatch::NicWatch(std::shared_ptr<Orchestrator> rail, std::vector<WatchedNic> nics, OnFailure on_failure,
                   NicWatchOptions options)
    : rail_(std::move(rail)), nics_(std::move(nics)), on_failure_(std::move(on_failure)), options_(options) {
  if (!rail_) throw Error("NIC watch: a rail is required");
  if (options_.down_for.count() <= 0)
    throw Error(fmt::format("NIC watch {}: down_for must be positive (got {} ms)", rail_->rail(),
                            options_.down_for.count()));
  for (const auto& n : nics_) {
    if (n.host.empty() || n.interface.empty())
      throw Error(fmt::format("NIC watch {}: the NIC of slot {}/{} needs a host and an interface", rail_->rail(),
                              n.slot.ingress, n.slot.egress));
  }
  tracks_.resize(nics_.size());
  loop_ = std::make_unique<Periodic>("NIC watch " + rail_->rail(), options_.interval, [this] { tick(); });
}

NicWatch::~NicWatch() { stop(); }

void NicWatch::reading(const std::string& host, const std::string& interface, const std::string& layer, bool up,
                       int64_t at_ns) {
  std::lock_guard lock(mu_);
  for (size_t i = 0; i < nics_.size(); ++i) {
    if (nics_[i].host != host || nics_[i].interface != interface) continue;
    auto [it, fresh] = tracks_[i].layers.try_emplace(layer);
    Layer& l = it->second;
    if (!up && (fresh || l.up)) l.down_since_ns = at_ns;
    l.up = up;
  }
}

void NicWatch::heard(const std::string& host, int64_t at_ns) {
  std::lock_guard lock(mu_);
  auto [it, fresh] = heard_.try_emplace(host, at_ns);
  if (!fresh && at_ns > it->second) it->second = at_ns;
}

std::vector<PortFailure> NicWatch::judge(const std::vector<ocs::Circuit>& circuits, const std::set<ocs::Port>& masked,
                                         int64_t now_ns, int64_t now_mono_ns) {
  std::vector<PortFailure> out;
  std::lock_guard lock(mu_);
  for (size_t i = 0; i < nics_.size(); ++i) {
    const WatchedNic& n = nics_[i];
    Track& t = tracks_[i];
    std::vector<ocs::Circuit> mine;
    for (const auto& c : circuits) {
      if (c.ingress == n.slot.ingress || c.egress == n.slot.egress) mine.push_back(c);
    }
    std::sort(mine.begin(), mine.end(),
              [](const ocs::Circuit& a, const ocs::Circuit& b) { return std::tie(a.ingress, a.egress) < std::tie(b.ingress, b.egress); });
    const bool judged = !mine.empty() && !masked.count(n.slot.ingress) && !masked.count(n.slot.egress);
    if (!judged) {
      t.circuits.clear();
      t.reported = false;
      continue;
    }
    const bool same = mine.size() == t.circuits.size() &&
                      std::equal(mine.begin(), mine.end(), t.circuits.begin(), [](const auto& a, const auto& b) {
                        return a.ingress == b.ingress && a.egress == b.egress;
                      });
    if (!same) {
      t.circuits = mine;
      t.made_ns = now_ns;
      t.reported = false;
    }
    if (t.reported) continue;
    const auto heard = heard_.find(n.host);
    if (heard == heard_.end()) continue;
    const int64_t known = std::min(now_ns, heard->second);  // the host's state is known to here
    // The layer down the longest, counted from when the circuits were made at the earliest.
    std::optional<std::pair<std::string, int64_t>> worst;
    for (const auto& [layer, l] : t.layers) {
      if (l.up) continue;
      const int64_t since = std::max(l.down_since_ns, t.made_ns);
      if (!worst || since < worst->second) worst = {layer, since};
    }
    if (!worst || known - worst->second < std::chrono::nanoseconds(options_.down_for).count()) continue;
    t.reported = true;
    PortFailure f;
    f.rail = rail_->rail();
    f.port = static_cast<int>(n.slot.ingress);
    f.seen_mono_ns = now_mono_ns - (now_ns - worst->second);
    f.evidence = nic_evidence(n, worst->first, static_cast<double>(known - worst->second) / 1e6, mine);
    out.push_back(std::move(f));
  }
  return out;
}

void NicWatch::start() { loop_->start(); }

void NicWatch::stop() { loop_->stop(); }

void NicWatch::tick() {
  const Timestamp t = now();
  for (const auto& f : judge(rail_circuits(*rail_), rail_->masked(), t.realtime_ns, t.monotonic_ns)) {
    spdlog::warn("NIC watch {}: port {} failed: {}", f.rail, f.port, f.evidence);
    if (on_failure_) on_failure_(f);
  }
}

}  // namespace ocslab::phase
