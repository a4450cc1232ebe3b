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
#include "ocslab/runner/run_events.h"

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
  RunEventSink events;               // progress events (run_events.h); empty: none
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
// Streams them to fn one at a time (the file can be as long as the lab's life).
void read_ground_truth(const std::string& path, int64_t from_ns, int64_t to_ns, const std::vector<HostEntry>& hosts,
                       const std::function<void(const Sample&)>& fn);

// One input of merge_capture: a capture file (capture_store.h), and what to do to each of its
// rows before they are merged (a host's clock correction); fix may be empty.
struct CaptureInput {
  std::string path;
  std::function<void(Sample&)> fix;
};

// timeline.csv (the Sample columns, run, iteration) from capture files, in memory bounded by
// chunk_rows whatever their length: each input is cut into runs of at most chunk_rows rows,
// sorted by time and written under work_dir (removed after), merged 256 at a time into longer
// runs while there are more, then one k-way merge writes path,
// replaced atomically (write_file_atomic). Ties keep input order, then row order: the order a
// stable sort of the inputs concatenated gives. A last line cut short by a crash is skipped.
// Returns the rows written; throws Error naming the file that could not be read or written.
uint64_t merge_capture(const std::vector<CaptureInput>& inputs, const std::string& path, const std::string& run,
                       const std::function<int(int64_t)>& iteration, const std::string& work_dir,
                       size_t chunk_rows = size_t{1} << 16);

// How long before its command an iteration starts: what a command's first effects may precede it by.
inline constexpr int64_t kIterationGuardNs = 200'000'000;

// The iteration of a sample at t: 0 before the first reconfiguration's issue time minus the
// guard, i when t is in [issued_i - guard, issued_{i+1} - guard).
int iteration_of(int64_t t_ns, const std::vector<int64_t>& issued_ns, int64_t guard_ns = kIterationGuardNs);


// Runs the experiment: the spec's type (experiment_type.h) on its resolved target (target.h)
// with a run context (run_context.h). Throws ConfigError / Error before anything was captured
// (bad lab, no switch, a host unreachable at start); after that, failures are recorded in the
// result and the folder is always written.
RunResult run_experiment(const ExperimentSpec& spec, const RunOptions& options);

// `ocslab recover FOLDER`: finishes the results folder of a reconfig-latency run whose runner
// died (kill -9, OOM, a lost machine) after its probes started: every host's agent is reached
// again over SSH (a virtual lab must still be up), its probes stopped and what its spool holds
// beyond capture/ fetched, then timeline.csv and meta.json are written as the run would have,
// with `recovered` in meta.json and the gap in switch commands as a problem. Throws Error naming
// the folder when there is nothing to recover (no run.json, or the run finished) or the spec
// changed since. restore_switch: also put the switch on the mapping an uninterrupted run ends
// with (the schedule's last), recorded in the control stream as `restore` / `restore_ack`
// rows and in meta.json's `recovered.switch_restored`; a failure is a problem of the run.
RunResult recover_run(const std::string& folder, const RunOptions& options, bool restore_switch = false);

}  // namespace ocslab::runner
