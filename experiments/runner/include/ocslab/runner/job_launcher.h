// Where the mpirun / srun launchers run and what they leave behind: the one command line runs
// on this machine or on a login host of the lab over SSH (launcher.host: a cluster node, as
// `mpirun` and `srun` normally run), the srun launcher's Slurm allocation (salloc before the
// first rank, scancel however the run ends) and the job ids the runner records in meta.json.
#pragma once

#include <atomic>
#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "ocslab/ocsctl/stream.h"

namespace ocslab::runner {

// Where a launcher command runs: here (no host), or on `host_name` over SSH.
struct LauncherPlace {
  std::string host_name;             // empty: this machine
  std::optional<ocs::SshOptions> ssh;  // set with host_name
  std::string where() const { return host_name.empty() ? "this machine" : host_name; }
};

struct LauncherOutcome {
  int exit_status = 0;  // 128 + signal when one killed it; -1: the SSH side reported none
  bool timed_out = false;
  std::string output;   // standard output and error, as they came
};

// Runs argv at `place` to completion (at most `limit`; over SSH it runs under timeout(1) there,
// so a launcher the runner gave up on does not keep the job running), appending its output to
// log_file. When `interrupted` becomes true the launcher is sent SIGTERM (over a second SSH
// session when it runs on a host) and its end is awaited.
LauncherOutcome run_launcher_command(const LauncherPlace& place, const std::vector<std::string>& argv,
                                     const std::string& log_file, std::chrono::seconds limit,
                                     const std::atomic<bool>* interrupted = nullptr);

// "salloc: Granted job allocation 42" -> "42"; empty when the text has none.
std::string salloc_job_id(const std::string& output);
// Open MPI's `--display-map`: "Data for JOB [35398,1]" -> "35398,1"; empty when absent.
std::string mpirun_job_id(const std::string& output);

// A Slurm allocation for the srun launcher: `salloc --no-shell` with the job's node list and
// tasks per node (the ranks' placement), named after the run; released with scancel when the
// object goes. Throws Error naming where salloc ran and what Slurm said (more ranks than nodes
// or slots, an unknown node, a munge key the controller does not share) before any rank starts.
class SlurmAllocation {
 public:
  SlurmAllocation(LauncherPlace place, std::vector<std::string> salloc_argv, const std::string& log_file);
  ~SlurmAllocation();
  SlurmAllocation(const SlurmAllocation&) = delete;
  SlurmAllocation& operator=(const SlurmAllocation&) = delete;
  const std::string& job_id() const { return job_id_; }

 private:
  LauncherPlace place_;
  std::string log_file_;
  std::string job_id_;
};

}  // namespace ocslab::runner
