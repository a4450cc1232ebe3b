// `ocslab run`: one experiment from a spec, through the pipeline every experiment type shares:
// resolve the target (start or reuse the virtual lab, the hosts' SSH details, this build's
// binaries on the hosts), open the results folder, run the spec's type (reconfig-latency:
// reconfiguration.cpp; phase-workload: phase_workload.cpp), release the target. The analysis
// (breakdown, summary) and the plots are separate steps over the folder (analysis/, plots/).
#pragma once

#include <string>

#include "ocslab/runner/experiment_spec.h"
#include "ocslab/runner/run_types.h"

namespace ocslab::runner {

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
