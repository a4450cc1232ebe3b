// The phase-workload run's results writer: after each mode the controller's events, the ranks'
// rows and samples, the step figures and the mode's timeline; at the end the capture's merged
// timeline and breakdown (with probes), phase-steps.csv, sweep.csv, windows, summary.txt and
// meta.json. It reads the rails' record (phase_rails.h) and never starts anything.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "ocslab/analysis/breakdown.h"
#include "ocslab/analysis/job_survival.h"
#include "ocslab/common/sample.h"
#include "ocslab/phase/controller.h"
#include "ocslab/runner/idle_windows.h"
#include "ocslab/runner/phase_figures.h"
#include "ocslab/runner/phase_rails.h"
#include "ocslab/runner/rank_launcher.h"
#include "ocslab/runner/target.h"
#include "ocslab/workloads/op_record.h"

namespace ocslab::runner {

struct RunResult;
class RunContext;
class HostCapture;

// One phase mode's run: where its files go (ModeRanks), what went wrong, when it ran.
struct ModeRun : ModeRanks {
  RunPoint point;
  size_t first_reconfig = 0;   // index of its first reconfiguration in the rails' record
  size_t placement_added = 0;  // circuits its placement made (the switch's state from the previous run)
  int64_t started_ns = 0, ended_ns = 0;
  std::vector<Sample> fault_rows;                   // the injected faults' timeline rows
  nlohmann::json faults = nlohmann::json::array();  // meta.json's record of them
};

// A host's clock minus the runner's, from `date +%s%N` over SSH: the reading is taken to be
// at the middle of the round trip; the shortest of a few round trips is kept.
struct ClockOffset {
  int64_t offset_ns = 0;
  int64_t uncertainty_ns = -1;  // half the round trip; -1: not measured
  std::string error;
  std::string by = "ssh";  // "agent": the probes' agent's clock estimate replaced it
};

// What meta.json says about the run besides its modes.
struct RunFacts {
  std::string program;  // as the ranks' hosts see it
  nlohmann::json host_preparation = nlohmann::json::object();
  const RankLauncher& launcher;
  bool probes = false;  // a capture ran (meta.json's probes)
};

class PhaseResults {
 public:
  PhaseResults(const Target& target, const RunContext& ctx, RunResult& result, std::string folder,
               const PhaseRails& rails)
      : target_(target),
        spec_(target.spec),
        pw_(*spec_.phase_workload),
        ctx_(ctx),
        result_(result),
        folder_(std::move(folder)),
        rails_(rails) {}

  // Every run's group windows so far (idle_windows.h), in run order.
  std::vector<IdleWindow> group_windows() const {
    std::vector<IdleWindow> out;
    for (const auto& [w, sw] : windows_) out.push_back(w);
    return out;
  }

  // Per host name, the clock offset rank samples are corrected by (empty: none corrected).
  std::map<std::string, ClockOffset>& clock_offsets() { return offsets_; }

  // After a mode: its controller events, the ranks' rows, figures and timeline; meta.json's
  // entry for it; its problems into the run's. fallback: the controller fell back to the ring.
  // Returns the step of each (group, seq) of the mode, for its reconfigurations' rows.
  StepOfSeq finish_mode(ModeRun& m, const std::vector<phase::ControllerEvent>& events, bool fallback);
  // After the last mode: the figures relative to native, the capture's timeline and breakdown
  // (capture: null without probes), the step files, summary.txt and meta.json.
  void finish(HostCapture* capture, const RunFacts& facts);

 private:
  // The ranks' samples of a mode, from the files they left in its folder, and their op rows.
  struct ModeRows {
    std::vector<workloads::OpRecord> rows;
    std::vector<Sample> samples;
  };

  double switching_of(const ModeRun& m, size_t first_reconfig) const;
  void add_windows(const ModeRun& m, const std::vector<workloads::OpRecord>& rows);
  void drop_incomplete_steps(ModeRun& m, std::vector<StepFigures>& figures) const;
  nlohmann::json job_record(const ModeRun& m, const std::vector<phase::ControllerEvent>& events,
                            const std::vector<workloads::OpRecord>& rows);
  bool add_job_run(const ModeRun& m, const std::vector<workloads::OpRecord>& rows, const nlohmann::json& stopped);
  int64_t offset_of(const std::string& host) const;
  ModeRows read_rank_files(ModeRun& m) const;
  void write_mode_timeline(const ModeRun& m, const ModeRows& got) const;
  void write_learned_phases(const ModeRun& m);
  std::string switch_text() const;
  void write_step_files();
  void finish_capture(HostCapture& capture);
  analysis::Breakdown only_touched(analysis::Breakdown b, const std::vector<PhaseReconfig>& recs) const;
  void write_phase_breakdown(const analysis::Breakdown& b, const std::vector<PhaseReconfig>& recs);
  nlohmann::json meta(const RunFacts& facts) const;

  const Target& target_;
  const ExperimentSpec& spec_;
  const PhaseWorkloadSpec& pw_;
  const RunContext& ctx_;
  RunResult& result_;
  const std::string folder_;  // absolute
  const PhaseRails& rails_;
  std::map<std::string, ClockOffset> offsets_;
  nlohmann::json meta_modes_ = nlohmann::json::array();
  size_t timeline_rows_ = 0;
  nlohmann::json capture_meta_ = nullptr;
  std::string mask_lines_;                              // summary.txt's failed ports (phase.detect), one line each
  std::string job_lines_;                               // summary.txt's "Where the job stopped", per failed run
  std::string breakdown_summary_;                       // summary.txt's per-layer part (probes only)
  std::string learned_lines_;                           // summary.txt's learned phase tables (torch), per run
  std::vector<std::pair<IdleWindow, double>> windows_;  // every run's, with its switching time
  std::vector<std::pair<PhaseWindow, double>> phase_windows_;  // every run's phase-to-phase windows
  std::vector<WindowSummary> window_summaries_;
  size_t breakdown_rows_ = 0;
  std::vector<analysis::JobRun> job_runs_;  // runs with an outage of a planned length
};

}  // namespace ocslab::runner
