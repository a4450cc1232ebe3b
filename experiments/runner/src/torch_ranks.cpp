// A torch phase workload's rank command lines (torch_ranks.h).
#include "ocslab/runner/torch_ranks.h"

#include <fmt/format.h>

#include <filesystem>

#include "ocslab/common/error.h"

namespace ocslab::runner {

namespace fs = std::filesystem;

std::string torch_layout(const phase::JobLayout& layout) {
  std::string out = fmt::format("pp={}", layout.pp);
  for (const auto& d : layout.dims) out += fmt::format(",{}={}", d.name, d.size);
  return out;
}

std::vector<std::string> torch_group_kinds(const phase::JobLayout& layout) {
  std::vector<std::string> kinds = {"world", "pp"};
  for (const auto& d : layout.dims) kinds.push_back(d.name);
  return kinds;
}

std::string torch_group_ifs(const PhaseWorkloadSpec& spec, const std::string& mode) {
  auto find = [](const std::vector<std::pair<std::string, std::string>>& map, const std::string& kind) {
    for (const auto& [k, v] : map)
      if (k == kind) return v;
    return std::string();
  };
  std::string out;
  for (const auto& kind : torch_group_kinds(spec.layout)) {
    std::string iface = mode == "native" ? find(spec.native_group_if, kind) : std::string();
    if (iface.empty()) iface = find(spec.group_if, kind);
    if (!iface.empty()) out += fmt::format("{}{}={}", out.empty() ? "" : ",", kind, iface);
  }
  return out;
}

std::string torch_rank_ifs(const PhaseWorkloadSpec& spec) {
  std::string out;
  for (const auto& r : spec.ranks) out += (out.empty() ? "" : ",") + r.nic;
  return out;
}

namespace {

// What every rank gets after its own RANK / LOCAL_RANK: world size, rank 0's rendezvous, the
// controller (none in native mode: the backend then passes every op through), the shim's
// samples file ("{rank}" is the backend's placeholder), the folder for the rank's op rows and
// learned phase table (collbench's --output), the package, then the interpreter.
void append_job_env_and_program(std::vector<std::string>& a, const PhaseWorkloadSpec& spec, const RankLaunch& l,
                                const std::string& shim_csv) {
  const auto colon = l.rendezvous.rfind(':');
  if (colon == std::string::npos || colon == 0)
    throw Error(fmt::format("torch ranks: rendezvous '{}' is not HOST:PORT", l.rendezvous));
  a.push_back(fmt::format("WORLD_SIZE={}", spec.schedule.ranks));
  a.push_back("MASTER_ADDR=" + l.rendezvous.substr(0, colon));
  a.push_back("MASTER_PORT=" + l.rendezvous.substr(colon + 1));
  if (l.mode != "native") {
    a.push_back("OCSLAB_CONTROLLER=" + l.controller);
    a.push_back("OCSLAB_JOB=" + l.job);
    if (!l.token_file.empty()) a.push_back("OCSLAB_CONTROLLER_TOKEN_FILE=" + l.token_file);
    // On demand is the backend's default: only provisioning is said.
    if (l.mode == "provisioning") a.push_back("OCSLAB_PHASE_MODE=provisioning");
  }
  a.push_back("OCSLAB_LAYOUT=" + torch_layout(spec.layout));
  // Each data group binds to its rank's placement NIC (where its circuits are) unless the spec
  // names another interface for its kind.
  a.push_back("OCSLAB_RANK_IFS=" + torch_rank_ifs(spec));
  if (const auto g = torch_group_ifs(spec, l.mode); !g.empty()) a.push_back("OCSLAB_GROUP_IF=" + g);
  if (spec.profile_steps > 0) a.push_back(fmt::format("OCSLAB_PROFILE_STEPS={}", spec.profile_steps));
  a.push_back("OCSLAB_SHIM_CSV=" + l.output_dir + "/" + shim_csv);
  a.push_back("OCSLAB_OUTPUT=" + l.output_dir);
  if (!l.python_path.empty()) a.push_back("PYTHONPATH=" + l.python_path);
  for (const auto& [k, v] : l.env) a.push_back(k + "=" + v);  // the run's sweep.env point
  a.insert(a.end(), {l.program, "-m", "ocslab.torch_backend", l.script, "--backend", "ocslab"});
  a.insert(a.end(), spec.args.begin(), spec.args.end());
}

}  // namespace

std::vector<std::string> torch_rank_argv(const PhaseWorkloadSpec& spec, int rank, const RankLaunch& l) {
  const size_t host = spec.ranks.at(static_cast<size_t>(rank)).host;
  int local = 0;
  for (int r = 0; r < rank; ++r) local += spec.ranks[static_cast<size_t>(r)].host == host ? 1 : 0;
  std::vector<std::string> a = {"env", fmt::format("RANK={}", rank), fmt::format("LOCAL_RANK={}", local)};
  append_job_env_and_program(a, spec, l, fmt::format("shim-rank{}.csv", rank));
  return a;
}

std::vector<std::string> torch_launcher_tail(const PhaseWorkloadSpec& spec, const RankLaunch& l) {
  const bool mpirun = spec.launcher == Launcher::kMpirun;
  if (!mpirun && spec.launcher != Launcher::kSrun)
    throw Error("torch_launcher_tail: the ssh launcher starts one command per rank");
  // Each process learns its rank only from the launcher's environment: a shell sets PyTorch's
  // names from it, then execs the rest of argv (no word of which it interprets).
  const std::string prefix = mpirun ? "export RANK=\"$OMPI_COMM_WORLD_RANK\" LOCAL_RANK=\"$OMPI_COMM_WORLD_LOCAL_RANK\""
                                    : "export RANK=\"$SLURM_PROCID\" LOCAL_RANK=\"$SLURM_LOCALID\"";
  std::vector<std::string> a = {"sh", "-c", prefix + " && exec \"$@\"", "sh", "env"};
  append_job_env_and_program(a, spec, l, "shim-rank{rank}.csv");
  return a;
}

std::vector<std::string> torch_expected_groups(const phase::JobLayout& layout) {
  const int per = layout.ranks_per_stage();
  std::vector<std::string> out;
  std::string line = "pp:";
  for (int local = 0; local < per; ++local) {
    std::string g;
    for (int s = 0; s < layout.pp; ++s) g += fmt::format("{}{}", g.empty() ? "" : " ", s * per + local);
    line += " [" + g + "]";
  }
  out.push_back(line);
  for (size_t d = 0; d < layout.dims.size(); ++d) {
    line = layout.dims[d].name + ":";
    for (int s = 0; s < layout.pp; ++s) {
      for (int local = 0; local < per; ++local) {
        std::vector<int> c = layout.coords(local);
        if (c[d] != 0) continue;  // each group once, from its member at coordinate 0
        std::string g;
        for (int k = 0; k < layout.dims[d].size; ++k) {
          c[d] = k;
          g += fmt::format("{}{}", g.empty() ? "" : " ", s * per + layout.local_from(c));
        }
        line += " [" + g + "]";
      }
    }
    out.push_back(line);
  }
  return out;
}

std::string torch_python_path(const std::string& self_exe) {
  std::error_code ec;
  const fs::path exe = self_exe.empty() ? fs::read_symlink("/proc/self/exe", ec) : fs::path(self_exe);
  const fs::path dir = exe.parent_path().parent_path() / "python";
  if (fs::exists(dir / "ocslab" / "torch_backend.py", ec)) return dir.string();
  return {};
}

}  // namespace ocslab::runner
