// A phase workload's injected faults (the spec's `faults:`, docs/experiments.md "Faults in a
// phase workload"): each comes once per run of the job, at a step (at_step: when the controller
// records the step's first request) or a time (after_s: after the ranks started), on a thread of
// its own so that neither the controller nor the ranks wait for the lab or an SSH session. The
// FaultInjector does the work and keeps the record; release() puts the lab back afterwards.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "ocslab/common/sample.h"
#include "ocslab/phase/controller_core.h"
#include "ocslab/runner/experiment_spec.h"
#include "ocslab/runner/fault_injection.h"

namespace ocslab::runner {

class PhaseFaults {
 public:
  using Log = FaultInjector::Log;
  // step_of: the step of a controller event (a request's group and seq; -1 for none).
  // lab_dir: the virtual lab's run folder ("" on real hosts: rank-killed only). journal: as
  // FaultInjector's. kill: rank-killed's (SIGKILL to the rank's process).
  PhaseFaults(const ExperimentSpec& spec, std::string lab_dir,
              std::function<int(const phase::ControllerEvent&)> step_of, Log log, std::string journal,
              FaultInjector::Kill kill);
  ~PhaseFaults();  // stop() and release(); errors are logged
  PhaseFaults(const PhaseFaults&) = delete;
  PhaseFaults& operator=(const PhaseFaults&) = delete;

  // circuit-cut's switch sessions (FaultInjector::set_switch); before start().
  void set_switch(FaultInjector::MakeDriver make) { injector_.set_switch(std::move(make)); }
  // The ranks start now: after_s counts from here.
  void start();
  // The controller's on_event: a request of a fault's step makes it due.
  void on_event(const phase::ControllerEvent& e);
  // No more faults (the ranks ended): the thread ends; a fault not yet due is not injected
  // (recorded with an empty held time). Returns the problems of faults that could not be injected.
  std::vector<std::string> stop();
  // The lab's holds and dark ports as they were found (after stop()).
  std::vector<std::string> release();

  std::vector<Sample> rows() const;  // the faults' timeline rows (runner clock)
  nlohmann::json record() const;     // meta.json's faults of this run

 private:
  void loop();

  const ExperimentSpec& spec_;
  std::function<int(const phase::ControllerEvent&)> step_of_;
  Log log_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Sample> rows_;
  std::vector<bool> due_, done_;
  bool started_ = false, stopping_ = false;
  int64_t start_mono_ns_ = 0;
  std::vector<std::string> problems_;
  FaultInjector injector_;  // after rows_ and mu_: its row callback appends under mu_
  std::thread thread_;
};

}  // namespace ocslab::runner
