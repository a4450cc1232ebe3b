#include "ocslab/testing/peer_switch.h"

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

namespace ocslab::testing {

PeerSwitch::PeerSwitch(int ingress, int egress, std::string state_file)
    : ingress_(ingress), egress_(egress), state_file_(std::move(state_file)) {}

void PeerSwitch::load() const {
  if (state_file_.empty()) return;
  std::ifstream in(state_file_);
  if (!in) return;
  nlohmann::json j;
  try {
    in >> j;
  } catch (const std::exception&) {
    return;
  }
  by_ingress_.clear();
  for (const auto& c : j) by_ingress_[c.at(0).get<int>()] = c.at(1).get<int>();
}

void PeerSwitch::save() const {
  if (state_file_.empty()) return;
  nlohmann::json j = nlohmann::json::array();
  for (auto [i, e] : by_ingress_) j.push_back({i, e});
  std::string tmp = state_file_ + ".tmp";
  std::ofstream(tmp) << j.dump();
  std::rename(tmp.c_str(), state_file_.c_str());
}

std::string PeerSwitch::connect(const std::vector<ocs::Circuit>& circuits, bool replace) {
  std::lock_guard lock(mutex_);
  load();
  std::set<ocs::Port> ins, outs;
  for (const auto& c : circuits) {
    if (!is_ingress(c.ingress)) return "Invalid OXC port: " + std::to_string(c.ingress);
    if (!is_egress(c.egress)) return "Invalid OXC port: " + std::to_string(c.egress);
    if (!ins.insert(c.ingress).second || !outs.insert(c.egress).second) return "Port used twice in request";
    if (!replace) {
      if (by_ingress_.count(c.ingress)) return "Port already connected: " + std::to_string(c.ingress);
      for (auto [i, e] : by_ingress_) {
        if (e == c.egress) return "Port already connected: " + std::to_string(c.egress);
      }
    }
  }
  for (const auto& c : circuits) {
    for (auto it = by_ingress_.begin(); it != by_ingress_.end();) {
      it = (it->first == c.ingress || it->second == c.egress) ? by_ingress_.erase(it) : std::next(it);
    }
    by_ingress_[c.ingress] = c.egress;
  }
  save();
  return {};
}

std::string PeerSwitch::disconnect(const std::vector<ocs::Port>& ports) {
  std::lock_guard lock(mutex_);
  load();
  for (ocs::Port p : ports) {
    if (!valid(p)) return "Invalid OXC port: " + std::to_string(p);
  }
  std::set<ocs::Port> kill(ports.begin(), ports.end());
  for (auto it = by_ingress_.begin(); it != by_ingress_.end();) {
    bool hit = ports.empty() || kill.count(it->first) || kill.count(it->second);
    it = hit ? by_ingress_.erase(it) : std::next(it);
  }
  save();
  return {};
}

std::vector<ocs::Circuit> PeerSwitch::circuits() const {
  std::lock_guard lock(mutex_);
  load();
  std::vector<ocs::Circuit> out;
  for (auto [i, e] : by_ingress_) out.push_back({i, e});
  return out;
}

double PeerSwitch::power_dbm(ocs::Port p) const {
  std::lock_guard lock(mutex_);
  load();
  for (auto [i, e] : by_ingress_) {
    if (i == p || e == p) return -3.0 - 0.1 * (p % 10);
  }
  return -60.0;
}

void PeerSwitch::record(const std::string& request) {
  std::lock_guard lock(mutex_);
  history_.push_back(request);
  // Peers started by sshd live in another process: persist so the test can read it.
  if (!state_file_.empty()) {
    std::ofstream(state_file_ + ".history", std::ios::app)
        << nlohmann::json(request).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  }
}

std::vector<std::string> PeerSwitch::history() const {
  std::lock_guard lock(mutex_);
  if (state_file_.empty()) return history_;
  std::vector<std::string> out;
  std::ifstream in(state_file_ + ".history");
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    try {
      out.push_back(nlohmann::json::parse(line).get<std::string>());
    } catch (const std::exception&) {
      out.push_back(line);  // a line cut short by a concurrent writer: keep it visible
    }
  }
  return out;
}

void PeerSwitch::clear_history() {
  std::lock_guard lock(mutex_);
  history_.clear();
  if (!state_file_.empty()) std::remove((state_file_ + ".history").c_str());
}

}  // namespace ocslab::testing
