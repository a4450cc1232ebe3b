// The main() both collbench programs share: the command line (common and phase options, help,
// errors), the job checked against its schedule, and the run around the transport (rendezvous,
// phase hooks, report, the shim's files). A program adds its transport's options and Backend.
#pragma once

#include <boost/program_options.hpp>

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "ocslab/phase/shim.h"
#include "ocslab/workloads/collbench.h"
#include "ocslab/workloads/rendezvous.h"
#include "ocslab/workloads/schedule.h"
#include "ocslab/workloads/sweep.h"

namespace ocslab::workloads {

// This rank's job from the shared flags, checked against the schedule: the world size is the
// schedule's, the rank inside it, and a rendezvous given when there is more than one rank.
// Without --schedule the job is nccl-tests' size sweep: the schedule is sweep_schedule's.
struct Job {
  CommonOptions options;
  Schedule schedule;                        // --steps and --warmup applied
  std::optional<phase::ShimOptions> phase;  // nullopt without --controller
  std::optional<SweepOptions> sweep;        // set without --schedule
  std::string program;                      // "ocslab-collbench-verbs", for the sweep's table
  std::vector<std::string> args;            // argv, for the sweep's JSON
};

// An option the job needs was not given (`--if`, `--rank`): the command line, exit 1
// (docs/exit-codes.md); a value given that is wrong is a plain ocslab::Error, exit 2.
class MissingOption : public Error {
 public:
  using Error::Error;
};

// This host cannot run what was asked at all (no CUDA device for the NCCL backend): refused
// before anything started, exit 3 as docs/exit-codes.md says.
class CannotRunHere : public Error {
 public:
  using Error::Error;
};

struct CollbenchProgram {
  std::string name;  // "ocslab-collbench-verbs": begins every error message
  std::string usage;
  // The transport's own options, listed after the shared ones and before --help.
  std::function<void(boost::program_options::options_description&)> add_options;
  // Checks the transport's options and runs the job (run_job); returns the exit status.
  std::function<int(const boost::program_options::variables_map&, const Job&)> run;
};

// Reads the Job from the parsed command line: a schedule job with --schedule, else the size sweep,
// whose world size is the launcher's / --nranks / --ranks, or 1 (rank 0) when none names it.
// Throws ocslab::Error naming the offending option.
Job read_job(const boost::program_options::variables_map& vm);

// Parses argv: --help prints the usage and the options (exit 0); a malformed command line or a
// missing option is one line naming it and where the help is (exit 1, kExitUsage). Then reads
// the Job and calls program.run: a bad value exits 2, a rendezvous peer that cannot be reached
// or drops the connection 4 (RendezvousPeerError); any other ocslab::Error prints as
// "NAME: message" and exits 2 (kExitInput).
int collbench_main(int argc, char** argv, const CollbenchProgram& program);

// The run after the transport's options are checked: the rendezvous with rank 0, the phase
// hooks (ShimHooks with --controller, whose join comes after the rendezvous so every rank is up;
// else no-op hooks), the transport from make_backend (it may exchange over the rendezvous; its
// describe() goes to stderr), run_and_report, and with --output the shim's own record next to
// the rows. Returns run_and_report's exit status. A sweep job runs run_sweep_and_report instead
// (no hooks: read_job refuses --controller without --schedule).
int run_job(const Job& job, const std::string& backend_name,
            const std::function<std::unique_ptr<Backend>(Rendezvous&)>& make_backend);

}  // namespace ocslab::workloads
