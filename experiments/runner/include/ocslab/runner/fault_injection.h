// Fault injection (the spec's `faults:`, docs/experiments.md#fault-injection): from just before
// a reconfiguration to the end of the run, in a virtual lab a NIC's link held down by the lab's
// emulated firmware (nic-held-down) or a switch port darkened, its shutter closed (port-dark).
// Both go through the lab's timing channel (vlab::set_lab_timing, `hold_down` / `dark_ports`),
// so the emulator records each in its ground truth; the runner records each fault and its end
// as a timeline row and in meta.json, and puts the lab's holds and dark ports back as it found
// them when the run ends, however it ends. On any lab, a host's agent killed (agent-killed,
// through the KillAgent the runner gives: it knows the daemon's pid and the host's SSH); that
// one is not undone.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "ocslab/common/sample.h"
#include "ocslab/ocsctl/driver.h"
#include "ocslab/runner/experiment_spec.h"
#include "ocslab/vlab/lab_timing.h"

namespace ocslab::runner {

// The journal's name in a results folder.
inline constexpr const char* kFaultJournal = "faults.json";

class FaultInjector {
 public:
  using Row = std::function<void(const Sample&)>;  // a timeline row (runner clock)
  using Log = std::function<void(const std::string&)>;
  // Kills the process an agent-killed (the host's agent daemon) or rank-killed (the rank) fault
  // names, with SIGKILL (no goodbye); throws Error naming what failed. Needed for those kinds.
  using Kill = std::function<void(const FaultSpec&)>;
  // A session to the run's switch, for circuit-cut (its driver deletes and remakes the circuit).
  using MakeDriver = std::function<std::unique_ptr<ocs::OcsDriver>()>;
  // lab_dir: the running virtual lab's run folder (empty on real hosts: only agent-killed then). journal (when not empty): a file rewritten
  // atomically before each fault is applied and after each release (the lab, what it had as
  // found, record()), so that `ocslab recover` can undo what a runner that died left in force
  // (release_journal).
  FaultInjector(const ExperimentSpec& spec, std::string lab_dir, Row row, Log log, std::string journal = {},
                Kill kill = {});
  ~FaultInjector();  // releases what is still held; errors are logged
  FaultInjector(const FaultInjector&) = delete;
  FaultInjector& operator=(const FaultInjector&) = delete;

  // Injects the faults due before reconfiguration i (the lab's holds and dark ports as found,
  // plus every fault injected so far). Returns a problem per fault that could not be injected.
  std::vector<std::string> before_reconfiguration(int i);
  // Injects fault k now (`when` says when in words for the log and the problem: "at step 3");
  // the problem when it could not be. A phase workload calls it from its own trigger.
  std::optional<std::string> inject(size_t k, const std::string& when);
  // Puts the lab's holds and dark ports back as they were before the first fault (nothing when
  // none was injected), and makes again a cut circuit whose remaking failed. Returns the
  // problem when that failed.
  std::vector<std::string> release();
  // circuit-cut's switch sessions (needed before such a fault is injected).
  void set_switch(MakeDriver make) { make_driver_ = std::move(make); }
  // Whether fault f ends by itself (a dark spell, a cut circuit, an unreachable spell): its end
  // is when it was due, not when the run released it.
  static bool ends_by_itself(const FaultSpec& f);

  // When the lab was asked to apply the first fault due before reconfiguration i (ns since the
  // epoch; 0: none was applied). Each is asked for just before the command; applying it takes
  // the lab some ms, and its effects (light lost) come in between.
  int64_t injected_ns(int i) const;

  // meta.json's `faults`: per fault kind, host, nic, port (port-dark; 0 otherwise),
  // before_iteration, where, held_ns / held (injected), released_ns / released (0 and "" when
  // it did not happen) and error.
  nlohmann::json record() const;

  // A fault's timeline row when it is injected (value 1) and undone (0), source "fault", unit
  // bool: nic-held-down host and NIC, signal "held_down"; port-dark host "switch", subject
  // "port P", signal "dark"; agent-killed the host, subject "agent", signal "killed" (value 1
  // only: it is not undone).
  static Sample row(const ExperimentSpec& spec, const FaultSpec& f, bool on, int64_t t_ns);
  // "nic-held-down on h3:eth1", "port-dark on switch port 19 (h3:eth1 rx)", "agent-killed on h2".
  static std::string describe(const ExperimentSpec& spec, const FaultSpec& f);
  // How long it lasts, in words: "released when the run ends", "ends by itself after 1500 ms",
  // "not undone: the host is lost for the rest of the run".
  static std::string lasts(const FaultSpec& f);
  // When it comes, in words: "before reconfiguration 2", "at step 3", "5 s after the ranks started".
  static std::string when(const FaultSpec& f);

  // `ocslab recover`: reads a journal a FaultInjector wrote. When a fault it records was applied
  // (or asked for) and not released, puts the lab's holds and dark ports back as the run found
  // them and marks those faults released now (the journal is rewritten). Returns the faults'
  // record (meta.json's `faults`; empty without a journal) and adds a problem per failure.
  static nlohmann::json release_journal(const std::string& journal, std::vector<std::string>& problems,
                                        const Log& log);

 private:
  struct Applied {
    int64_t asked_ns = 0, held_ns = 0, released_ns = 0;
    std::string error;
    std::vector<ocs::Circuit> cut;  // circuit-cut: the circuits deleted, to make again
  };
  // The lab's holds and dark ports as found, with every fault injected so far and fault k.
  vlab::LabTiming lab_set(size_t k) const;
  vlab::LabTiming lab_timing_for(size_t k) const;  // what applying fault k asks of the lab
  std::vector<std::string> release_lab();  // the virtual lab's part of release()
  void save_journal();  // a failure is logged: the run goes on without it
  void inject_kill(size_t k, const std::string& when);  // agent- or rank-killed fault k; a failure in applied_[k].error
  // circuit-cut fault k: delete the port's circuit, hold for_ms, make it again; the problem, if any.
  std::optional<std::string> inject_cut(size_t k, const std::string& when);

  const ExperimentSpec& spec_;
  std::string lab_dir_;
  Row row_;
  Log log_;
  Kill kill_;
  MakeDriver make_driver_;
  std::string journal_;
  std::vector<Applied> applied_;  // one per spec_.faults
  bool found_read_ = false;
  std::vector<std::string> found_;  // the lab's held NICs before the first fault (HOST:NIC)
  std::vector<int> found_dark_;     // the lab's dark ports before the first fault
  bool released_ = false;
};

}  // namespace ocslab::runner
