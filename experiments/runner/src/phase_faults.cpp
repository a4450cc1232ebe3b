#include "ocslab/runner/phase_faults.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <utility>

#include "ocslab/common/clock.h"

namespace ocslab::runner {

PhaseFaults::PhaseFaults(const ExperimentSpec& spec, std::string lab_dir,
                         std::function<int(const phase::ControllerEvent&)> step_of, Log log, std::string journal,
                         FaultInjector::Kill kill)
    : spec_(spec),
      step_of_(std::move(step_of)),
      log_(log),
      due_(spec.faults.size(), false),
      done_(spec.faults.size(), false),
      injector_(
          spec, std::move(lab_dir),
          [this](const Sample& s) {
            std::lock_guard lock(mu_);
            rows_.push_back(s);
          },
          std::move(log), std::move(journal), std::move(kill)) {}

PhaseFaults::~PhaseFaults() {
  for (const auto& p : stop()) log_(p);
  for (const auto& p : release()) log_(p);
}

void PhaseFaults::start() {
  std::lock_guard lock(mu_);
  if (started_ || spec_.faults.empty()) return;
  started_ = true;
  start_mono_ns_ = monotonic_ns();
  thread_ = std::thread([this] { loop(); });
}

void PhaseFaults::on_event(const phase::ControllerEvent& e) {
  if (e.kind != phase::ControllerEvent::Kind::kRequest) return;
  const int step = step_of_(e);
  if (step < 0) return;
  bool any = false;
  {
    std::lock_guard lock(mu_);
    for (size_t k = 0; k < spec_.faults.size(); ++k) {
      const int at = spec_.faults[k].at_step;
      if (at >= 0 && step >= at && !due_[k]) {
        due_[k] = true;
        any = true;
      }
    }
  }
  if (any) cv_.notify_all();
}

void PhaseFaults::loop() {
  std::unique_lock lock(mu_);
  for (;;) {
    if (stopping_) return;  // the ranks ended: nothing more is injected
    // The next fault to inject now (due by step, or its time passed), else when to look again.
    const int64_t now = monotonic_ns();
    int64_t next = INT64_MAX;
    size_t pick = spec_.faults.size();
    for (size_t k = 0; k < spec_.faults.size() && pick == spec_.faults.size(); ++k) {
      if (done_[k]) continue;
      const FaultSpec& f = spec_.faults[k];
      if (f.after_s > 0) {
        const int64_t at = start_mono_ns_ + static_cast<int64_t>(f.after_s * 1e9);
        if (at <= now) due_[k] = true;
        next = std::min(next, at);
      }
      if (due_[k]) pick = k;
    }
    if (pick < spec_.faults.size()) {
      done_[pick] = true;
      const FaultSpec& f = spec_.faults[pick];
      lock.unlock();  // the injection takes the lab or an SSH session some ms; the row callback locks
      auto problem = injector_.inject(pick, FaultInjector::when(f));
      lock.lock();
      if (problem) problems_.push_back(*problem);
      continue;
    }
    if (next == INT64_MAX) {
      cv_.wait(lock);
    } else {
      cv_.wait_for(lock, std::chrono::nanoseconds(next - now));
    }
  }
}

std::vector<std::string> PhaseFaults::stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  std::lock_guard lock(mu_);
  for (size_t k = 0; k < spec_.faults.size(); ++k) {
    if (done_[k] || !started_) continue;
    done_[k] = true;  // said once
    const FaultSpec& f = spec_.faults[k];
    log_(fmt::format("{} {} was not injected: the ranks ended first", FaultInjector::describe(spec_, f),
                     FaultInjector::when(f)));
  }
  return std::exchange(problems_, {});
}

std::vector<std::string> PhaseFaults::release() { return injector_.release(); }

std::vector<Sample> PhaseFaults::rows() const {
  std::lock_guard lock(mu_);
  return rows_;
}

nlohmann::json PhaseFaults::record() const { return injector_.record(); }

}  // namespace ocslab::runner
