// The phase-workload run's rails and controller side: per mode a fresh orchestrator per rail
// with the job placed on the ranks' slots, the controller's options, every reconfiguration the
// rails made (joined to the op that asked for it), failed ports and their masks, and a virtual
// lab's switching time per sweep point. The ranks and the results are elsewhere
// (rank_launcher.h, phase_results.h).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ocslab/common/sample.h"
#include "ocslab/ocsctl/driver.h"
#include "ocslab/phase/controller.h"
#include "ocslab/phase/orchestrator.h"
#include "ocslab/runner/phase_workload.h"
#include "ocslab/vlab/lab_timing.h"

namespace ocslab::runner {

struct Target;
class RunContext;

// One run of the job: a mode at a sweep point and repetition.
struct RunPoint {
  std::string mode;
  std::string label;         // the folder's name: the mode, "-<ms>ms" per sweep point, "-r<k>" per repetition
  double switching_ms = -1;  // the sweep point (-1: the switch's own timing)
  int repetition = 1;
  // The survival axes' point: the ranks' sweep.env values, and the outage length every
  // port-dark / circuit-cut fault of this run lasts (-1: the faults' own).
  std::vector<std::pair<std::string, std::string>> env = {};
  double outage_ms = -1;
  double link_gbps = -1;  // the sweep.link_gbps point: every lit circuit's rate (-1: the lab's own)
};

// One reconfiguration the controller made, with the op that asked for it.
struct PhaseReconfig {
  std::string label, mode;  // the run (RunPoint::label) and its mode
  std::string rail;         // the rail the orchestrator reprogrammed
  double switching_ms = -1;
  int repetition = 1;
  std::string from, to;  // topo_ids
  int64_t issued_ns = 0, acked_ns = 0;
  size_t added = 0, removed = 0;
  std::vector<ocs::Port> ports;  // every port a command named
  std::string group;             // the op's shim group and sequence number (controller events)
  int64_t seq = -1;
  int step = -1;
};

// One failed port of a mode (phase.detect): its port_failed event and what the mask did.
struct PortMask {
  std::string rail;
  int port = 0;
  int64_t reported_ns = 0;
  int64_t reported_mono_ns = 0;
  std::string evidence;
  bool answered = false;  // a masked event came for it
  bool masked = false;    // a rank moved, or the port was on no rank's slot (nothing to move)
  int rank = -1;          // the rank moved (-1: none)
  double recovery_ms = 0;
  // First dark reading -> the controller had the report (the detection); known when a rank
  // moved (the masked event's value counts from the first dark reading).
  std::optional<double> detect_ms;
  std::string move;  // the masked event's detail: the move, or why nothing moved
};

// The mode's failed ports from the controller's events: each port_failed with the masked
// event that answered it (the next one on its rail).
std::vector<PortMask> port_masks(const std::vector<phase::ControllerEvent>& events);

// Whether a controller problem is the report of a port failure that was masked (its
// port_failed and its masked notes): the run recovered from it, so it is listed under
// summary.txt's failed ports (mask_record) and is not a problem of the run. A failure that
// could not be masked stays a problem.
bool recovered_port_note(const std::vector<PortMask>& masks, const std::string& problem);

// meta.json's masks of a mode and its lines of summary.txt: per failed port when it was
// reported (started_ns: the mode's start), the evidence, and what the mask did (the rank moved
// and its new slot, recovery = first dark reading -> circuits re-made on the spare, or why
// nothing moved).
struct MaskLine {
  std::string text;
  bool masked = false;  // false: a problem of the run
};
struct MaskRecord {
  nlohmann::json record = nlohmann::json::array();
  std::vector<MaskLine> lines;
};
MaskRecord mask_record(const std::string& label, int64_t started_ns, const std::vector<phase::ControllerEvent>& events);

// A virtual lab's emulated switching time and link rate, set per sweep point through the lab's
// timing control (`ocslab vlab timing`) and put back as they were when the run ends. A real
// switch, or a sweep with injected delays, is left alone (the controller injects the time
// instead); a link-rate sweep needs a virtual lab (the spec's parser refuses it otherwise).
class LabSwitching {
 public:
  LabSwitching(const Target& target, const PhaseWorkloadSpec& pw, const RunContext& ctx);
  ~LabSwitching();
  LabSwitching(const LabSwitching&) = delete;
  LabSwitching& operator=(const LabSwitching&) = delete;

  void set(double ms);
  void set_link_gbps(double gbps);

 private:
  void put_back_switching();
  const Target& target_;
  const RunContext& ctx_;
  const bool active_;
  const bool rate_active_;
  bool changed_ = false;
  bool rate_changed_ = false;
  double current_ = -1;
  double current_gbps_ = -1;
  vlab::TimingState original_;
};

using RailList = std::vector<std::shared_ptr<phase::Orchestrator>>;

// The job's rails (the spec's phase.rails, else the one rail of the placement) over the run, and
// the reconfigurations they made.
class PhaseRails {
 public:
  // control: the capture's row sink for the switch's setup, command and ack rows (empty: no
  // capture).
  PhaseRails(const Target& target, const RunContext& ctx, std::function<void(const Sample&)> control);

  // A fresh control plane per mode: native mode keeps the rails on the spec's native topology,
  // the others start from the initial one. Returns one orchestrator per rail; placement_added:
  // the circuits the placement made. Waits phase.settle_ms when circuits changed.
  RailList open(const RunPoint& p, size_t& placement_added);
  // The controller's options for a mode over its rails; every reprogram recorded (record).
  // p must outlive the controller.
  phase::ControllerOptions controller_options(RailList rails, const RunPoint& p, const std::string& token);

  size_t reconfig_count() const;
  // Each reconfiguration from `first` on to the op that asked for it: the controller's latest
  // reconfig_start on the rail before the command, whose (group, seq) gives the step (step_of:
  // StepOfSeq, from the schedule or, for a torch job, from the mode's rows).
  void join_reconfigs(size_t first, const std::vector<phase::ControllerEvent>& events,
                      const std::function<int(const std::string&, int64_t)>& step_of);
  // The median command time of the reconfigurations from `first` on (ms; nullopt: none).
  std::optional<double> median_command_ms(size_t first) const;
  std::vector<PhaseReconfig> reconfigs() const;

  const std::vector<RailSpec>& rails() const { return rails_; }
  // Per rail: the ranks' slots, then the spares'.
  const std::vector<std::vector<phase::Slot>>& slots() const { return rail_slots_; }
  // meta.json's phase.rails: per rail its name, each rank's NIC and slot, the spares.
  nlohmann::json meta() const;

  // The safe-window table the controllers use from now on, instead of the spec's
  // (phase.safe_window_from: measured, once the native mode measured it).
  void use_windows(phase::PhaseWindows table) { windows_ = std::move(table); }

 private:
  // A reconfiguration the controller's rail made (on its worker thread): recorded for the
  // breakdown and, with probes, as the switch command / ack rows of the timeline.
  void record(const RunPoint& p, const phase::ReconfigReport& r);

  const Target& target_;
  const PhaseWorkloadSpec& pw_;
  const RunContext& ctx_;
  std::function<void(const Sample&)> control_;
  std::vector<RailSpec> rails_;
  std::vector<std::vector<phase::Slot>> rail_slots_;
  mutable std::mutex mu_;  // reconfigs_: the rails' workers record into it
  std::vector<PhaseReconfig> reconfigs_;
  std::optional<phase::PhaseWindows> windows_;  // use_windows()
};

}  // namespace ocslab::runner
