// How a phase-workload run starts its ranks: one RankLauncher per way (SSH per host:
// ssh_rank_launcher.cpp; one mpirun / srun command line: job_rank_launcher.cpp), chosen by
// make_rank_launcher from the spec's launcher and nowhere else. A launcher is given what a
// launch needs (LaunchInputs once, a ModeRanks per mode) and runs the mode's ranks to their end,
// leaving their files in the mode's folder.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ocslab/runner/job_localisation.h"
#include "ocslab/runner/phase_workload.h"

namespace ocslab::runner {

struct Target;
class RunContext;

// What every launch of the run shares, fixed before the first mode.
struct LaunchInputs {
  const Target& target;   // the spec (hosts, workload) and a virtual lab's files
  const RunContext& ctx;  // the run's log and Ctrl-C
  std::string folder;     // the results folder, absolute
  std::string run_id;
  std::string schedule_text;  // the schedule file, as the ranks get it
  std::string token;          // the controller's secret for this run: only ever in a 0600 file
  size_t planned_runs = 1;    // modes x sweep points x repetitions (the srun allocation's length)
};

// One mode's ranks as a launcher sees them: what they are told (launch: program, controller,
// job, mode, rendezvous, set by the run) and what came back.
struct ModeRanks {
  std::string label;  // the run's name, in every message
  std::string dir;    // <results>/<label>: rank files, rank<r>.log or launcher.log go here
  RankLaunch launch;
  std::mutex mu;  // problems and ends, while the ranks' threads run
  std::vector<std::string> problems;
  std::string job_id;  // mpirun / srun: the launcher's job (Slurm's allocation, Open MPI's job)
  // ssh launcher: each rank's pid on its host while the ranks run (null otherwise).
  const std::vector<std::atomic<long long>>* pids = nullptr;
  std::vector<RankEnd> ends;  // ssh launcher: how each rank ended (under mu)
  void problem(std::string p) {
    std::lock_guard lock(mu);
    problems.push_back(std::move(p));
  }
};

class RankLauncher {
 public:
  virtual ~RankLauncher() = default;
  // Before the first mode and before any host is prepared: whatever can refuse the run (a
  // Slurm allocation, a host name mpirun could not resolve) throws here.
  virtual void prepare() {}
  // Starts the mode's ranks and returns when they ended (or Ctrl-C stopped them), their files
  // in m.dir; failures are m's problems.
  virtual void run(ModeRanks& m) = 0;
  // Whether the ranks' samples are on their hosts' clocks as the runner measures them (each rank
  // started on its own lab host), so the timelines subtract those hosts' clock offsets.
  virtual bool host_clocks() const { return false; }
  // The launcher's part of meta.json's `workload` (where the one command ran, its job ids).
  virtual void describe(nlohmann::json& /*workload*/) const {}
};

// The launcher the spec's workload.launcher names. The one place that choice is made.
std::unique_ptr<RankLauncher> make_rank_launcher(const LaunchInputs& in);

// The implementations, one per way of starting ranks.
std::unique_ptr<RankLauncher> make_ssh_rank_launcher(const LaunchInputs& in);
std::unique_ptr<RankLauncher> make_mpirun_launcher(const LaunchInputs& in);
std::unique_ptr<RankLauncher> make_srun_launcher(const LaunchInputs& in);

// How long the runner waits for a mode's ranks: their own --timeout-s plus a margin.
std::chrono::seconds rank_wait_limit(const PhaseWorkloadSpec& pw);

// The files rank r leaves in its output folder (ops, timeline, shim and phase-table rows).
std::vector<std::string> rank_file_names(int r);

}  // namespace ocslab::runner
