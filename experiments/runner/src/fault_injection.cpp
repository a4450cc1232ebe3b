#include "ocslab/runner/fault_injection.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>

#include "ocslab/common/clock.h"
#include "ocslab/runner/run_context.h"
#include "ocslab/vlab/lab_timing.h"

namespace ocslab::runner {

namespace {

// The supervisor answers in milliseconds; 10 s is `ocslab vlab timing`'s own limit.
constexpr std::chrono::seconds kApplyWait{10};

std::string nic_name(const ExperimentSpec& spec, const FaultSpec& f) { return spec.hosts[f.host].name + ":" + f.nic; }

}  // namespace

FaultInjector::FaultInjector(const ExperimentSpec& spec, std::string lab_dir, Row row, Log log)
    : spec_(spec),
      lab_dir_(std::move(lab_dir)),
      row_(std::move(row)),
      log_(std::move(log)),
      applied_(spec.faults.size()) {}

FaultInjector::~FaultInjector() {
  try {
    for (const auto& p : release()) log_(p);
  } catch (const std::exception& e) {
    log_(std::string("releasing the injected faults: ") + e.what());
  }
}

Sample FaultInjector::row(const std::string& host, const std::string& nic, bool held, int64_t t_ns) {
  return Sample{t_ns, 0, host, "fault", nic, "held_down", held ? 1.0 : 0.0, "bool"};
}

std::vector<std::string> FaultInjector::lab_set(const std::string& adding) const {
  std::vector<std::string> set = found_;
  auto add = [&set](const std::string& nic) {
    if (std::find(set.begin(), set.end(), nic) == set.end()) set.push_back(nic);
  };
  for (size_t k = 0; k < spec_.faults.size(); ++k) {
    if (applied_[k].held_ns) add(nic_name(spec_, spec_.faults[k]));
  }
  add(adding);
  return set;
}

std::vector<std::string> FaultInjector::before_reconfiguration(int i) {
  std::vector<std::string> problems;
  for (size_t k = 0; k < spec_.faults.size(); ++k) {
    const FaultSpec& f = spec_.faults[k];
    if (f.before_iteration != i) continue;
    const std::string nic = nic_name(spec_, f);
    try {
      if (!found_read_) {
        found_ = vlab::lab_timing(lab_dir_).held_down;
        found_read_ = true;
      }
      vlab::LabTiming t;
      t.hold_down = lab_set(nic);
      vlab::set_lab_timing(lab_dir_, t, kApplyWait);
      applied_[k].held_ns = realtime_ns();
      row_(row(spec_.hosts[f.host].name, f.nic, true, applied_[k].held_ns));
      // Not "fault:": that prefix is the localisation's verdict at the end of a run.
      log_(fmt::format("injected {} on {} before reconfiguration {} (its link stays down until the run ends)", f.kind,
                       nic, i));
    } catch (const std::exception& e) {
      applied_[k].error = e.what();
      problems.push_back(
          fmt::format("fault {} {} before reconfiguration {} not injected: {}", f.kind, nic, i, e.what()));
    }
  }
  return problems;
}

std::vector<std::string> FaultInjector::release() {
  if (released_ || !found_read_) return {};
  released_ = true;
  vlab::LabTiming t;
  t.hold_down = found_;
  try {
    vlab::set_lab_timing(lab_dir_, t, kApplyWait);
  } catch (const std::exception& e) {
    for (auto& a : applied_) {
      if (a.held_ns) a.error = std::string("release failed: ") + e.what();
    }
    return {std::string("the injected faults were not released (the lab's NICs may still be held down; `ocslab vlab "
                        "timing LAB --release-all`): ") +
            e.what()};
  }
  const int64_t now = realtime_ns();
  for (size_t k = 0; k < spec_.faults.size(); ++k) {
    if (!applied_[k].held_ns) continue;
    applied_[k].released_ns = now;
    row_(row(spec_.hosts[spec_.faults[k].host].name, spec_.faults[k].nic, false, now));
  }
  log_("faults released: the lab's NIC holds are as the run found them");
  return {};
}

nlohmann::json FaultInjector::record() const {
  nlohmann::json out = nlohmann::json::array();
  for (size_t k = 0; k < spec_.faults.size(); ++k) {
    const FaultSpec& f = spec_.faults[k];
    const Applied& a = applied_[k];
    out.push_back({{"kind", f.kind},
                   {"host", spec_.hosts[f.host].name},
                   {"nic", f.nic},
                   {"before_iteration", f.before_iteration},
                   {"where", f.where},
                   {"held_ns", a.held_ns},
                   {"held", a.held_ns ? iso_time(a.held_ns) : std::string()},
                   {"released_ns", a.released_ns},
                   {"released", a.released_ns ? iso_time(a.released_ns) : std::string()},
                   {"error", a.error}});
  }
  return out;
}

}  // namespace ocslab::runner
