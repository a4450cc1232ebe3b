// `ocslab run`: one experiment from a spec, through the pipeline every experiment type shares:
// resolve the target (start or reuse the virtual lab, the hosts' SSH details, this build's
// binaries on the hosts), open the results folder, run the spec's type (reconfig-latency:
// reconfiguration.cpp; phase-workload: phase_workload.cpp), release the target. The analysis
// (breakdown, summary) and the plots are separate steps over the folder (analysis/, plots/).
#pragma once

#include <atomic>
#include <functional>
#include <iosfwd>
#include <string>
#include <vector>

#include "ocslab/common/sample.h"
#include "ocslab/ocsctl/driver.h"
#include "ocslab/runner/experiment_spec.h"
#include "ocslab/runner/host_session.h"
#include "ocslab/runner/phase_workload.h"
#include "ocslab/runner/target.h"

namespace ocslab::runner {

struct RunOptions {
  std::string cache_dir;      // virtual labs; empty: vlab::default_cache_dir()
  std::string self_exe;       // the ocslab binary (starts `vlab supervise`); empty: /proc/self/exe
  std::string agent_binary;   // the ocslab-agent copied into a virtual lab; empty: next to self_exe
  std::string output_dir;     // the results folder itself; empty: <spec.output>/<name>-<time>
  const std::atomic<bool>* interrupted = nullptr;  // Ctrl-C: stop the schedule, keep what was captured
  std::ostream* progress = nullptr;  // a terminal: a live status line; nullptr: quiet
  std::ostream* log = nullptr;       // one line per notable event (host lost, switch error); may be null
  std::string version;               // ocslab's version, for meta.json
};

struct ReconfigRecord {
  int iteration = 0;
  std::string mapping;
  int64_t issued_ns = 0, acked_ns = 0;  // runner clock
  bool ok = false;
  std::string error;
  size_t removed = 0, added = 0;  // circuits
};

struct RunResult {
  std::string folder;
  std::string run_id;
  bool interrupted = false;
  std::vector<ReconfigRecord> reconfigurations;
  std::vector<HostReport> hosts;
  size_t samples = 0;  // rows in timeline.csv
  std::vector<std::string> problems;  // hosts lost, failed reconfigurations: also in meta.json
  std::vector<StepFigures> steps;     // phase-workload: per mode and step
};

// Samples within [from_ns, to_ns] of a virtual lab's ground-truth file, renamed to the runner's
// view: an emulated NIC "<host>-<nic>" becomes host <host>, subject <nic>; switch rows get host
// "switch". Throws Error naming the file when it cannot be read.
std::vector<Sample> read_ground_truth(const std::string& path, int64_t from_ns, int64_t to_ns,
                                      const std::vector<HostEntry>& hosts);

// The iteration of a sample at t: 0 before the first reconfiguration's issue time minus the
// guard, i when t is in [issued_i - guard, issued_{i+1} - guard).
int iteration_of(int64_t t_ns, const std::vector<int64_t>& issued_ns, int64_t guard_ns = 200'000'000);


// Runs the experiment: the spec's type (experiment_type.h) on its resolved target (target.h)
// with a run context (run_context.h). Throws ConfigError / Error before anything was captured
// (bad lab, no switch, a host unreachable at start); after that, failures are recorded in the
// result and the folder is always written.
RunResult run_experiment(const ExperimentSpec& spec, const RunOptions& options);

}  // namespace ocslab::runner
