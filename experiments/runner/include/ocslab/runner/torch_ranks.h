// The command lines of a `framework: torch` phase workload: each rank is Debian's python3
// running the job's script through `-m ocslab.torch_backend`, told who it is by PyTorch's
// environment contract (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT) and where the
// controller is by the backend's OCSLAB_* variables. docs/workloads.md, "Your own PyTorch job".
#pragma once

#include <string>
#include <vector>

#include "ocslab/runner/phase_workload.h"

namespace ocslab::runner {

// Debian's interpreter: python3-torch is installed for it, not for a python3 earlier in PATH.
inline constexpr const char* kTorchPython = "/usr/bin/python3";

// The backend's OCSLAB_LAYOUT value for the job: pp first, then its dimensions in order.
std::string torch_layout(const phase::JobLayout& layout);

// The kinds of group a torch job has, as its group_if / native_group_if name them: world (the
// whole world's collectives: the management network), pp, then the layout's dimensions.
std::vector<std::string> torch_group_kinds(const phase::JobLayout& layout);

// The backend's OCSLAB_GROUP_IF in `mode`: the interface workload.group_if (or, in native mode,
// native_group_if, first) names for a kind of group, "world=lan0,pp=lan0"; empty when none.
// Kinds it does not name bind to the rank's own placement NIC (OCSLAB_RANK_IFS: every rank's,
// in rank order, so one command line serves every rank), world to gloo's own choice.
std::string torch_group_ifs(const PhaseWorkloadSpec& spec, const std::string& mode);
std::string torch_rank_ifs(const PhaseWorkloadSpec& spec);

// Rank r under the ssh launcher: `env RANK=.. WORLD_SIZE=.. LOCAL_RANK=<its index among the
// ranks of its host> MASTER_ADDR=.. MASTER_PORT=.. OCSLAB_..=.. [PYTHONPATH=..] python3 -m
// ocslab.torch_backend SCRIPT --backend ocslab ARGS`, with OCSLAB_RANK_IFS, OCSLAB_GROUP_IF when
// the spec names one, and OCSLAB_PROFILE_STEPS when workload.profile_steps is given.
std::vector<std::string> torch_rank_argv(const PhaseWorkloadSpec& spec, int rank, const RankLaunch& l);

// The part of the mpirun / srun command line after the launcher's own flags: a `sh -c` that
// takes RANK and LOCAL_RANK from the launcher's environment (OMPI_COMM_WORLD_RANK /
// OMPI_COMM_WORLD_LOCAL_RANK, SLURM_PROCID / SLURM_LOCALID), then the same env + python3.
std::vector<std::string> torch_launcher_tail(const PhaseWorkloadSpec& spec, const RankLaunch& l);

// The process groups the layout implies, one line per dimension, for `ocslab run --check`:
// "pp: [0 2] [1 3]" (a rank per stage, same place in its stage), then each of phase.dims
// ("dp: [0 1] [2 3]": one stage, the other coordinates equal). Ranks are stage-major.
std::vector<std::string> torch_expected_groups(const phase::JobLayout& layout);

// Where this build's importable ocslab package is (<build>/python next to <build>/bin/ocslab),
// for PYTHONPATH; empty when the runner is installed (the package is on python3's own path).
// An empty self_exe is /proc/self/exe.
std::string torch_python_path(const std::string& self_exe);

}  // namespace ocslab::runner
