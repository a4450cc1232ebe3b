// The choice of rank launcher and what every launcher shares (rank_launcher.h).
#include "ocslab/runner/rank_launcher.h"

#include <fmt/format.h>

#include "ocslab/common/error.h"
#include "ocslab/runner/experiment_spec.h"
#include "ocslab/runner/target.h"

namespace ocslab::runner {

std::unique_ptr<RankLauncher> make_rank_launcher(const LaunchInputs& in) {
  switch (in.target.spec.phase_workload->launcher) {
    case Launcher::kSsh:
      return make_ssh_rank_launcher(in);
    case Launcher::kMpirun:
      return make_mpirun_launcher(in);
    case Launcher::kSrun:
      return make_srun_launcher(in);
  }
  throw Error("unknown workload.launcher");
}

std::chrono::seconds rank_wait_limit(const PhaseWorkloadSpec& pw) { return std::chrono::seconds(pw.timeout_s + 60); }

std::vector<std::string> rank_file_names(int r) {
  std::vector<std::string> out;
  for (const char* pattern :
       {"ops-rank{}.csv", "timeline-rank{}.csv", "shim-rank{}.csv", "phase-table-rank{}.csv", "phases-rank{}.csv"})
    out.push_back(fmt::format(fmt::runtime(pattern), r));
  return out;
}

}  // namespace ocslab::runner
