// The mpirun and srun rank launchers: one command line for the whole job, run on this machine
// or on launcher.host over SSH; the launcher reaches the nodes itself and the ranks write into
// a folder every node shares, copied into the mode's folder afterwards. srun runs inside a
// Slurm allocation held from before the first mode to the end of the run.
#include <errno.h>
#include <fmt/format.h>
#include <stdlib.h>

#include <filesystem>
#include <optional>
#include <set>
#include <sstream>

#include "ocslab/common/error.h"
#include "ocslab/common/file.h"
#include "ocslab/common/secret.h"
#include "ocslab/common/shell.h"
#include "ocslab/ocsctl/ssh_session.h"
#include "ocslab/runner/experiment_spec.h"
#include "ocslab/runner/job_launcher.h"
#include "ocslab/runner/rank_launcher.h"
#include "ocslab/runner/run_context.h"
#include "ocslab/runner/run_types.h"
#include "ocslab/runner/target.h"

namespace ocslab::runner {

namespace fs = std::filesystem;

namespace {

// What mpirun and srun share: where the command runs, the shared folder, the run of one mode.
class JobCommandLauncher : public RankLauncher {
 public:
  explicit JobCommandLauncher(const LaunchInputs& in)
      : in_(in), pw_(*in.target.spec.phase_workload), hosts_(in.target.spec.hosts) {}

  // Before the first mode: where the launcher runs, the shared folder (a virtual lab's own
  // when the spec names none), then the launcher's own preparation (prepare_command).
  void prepare() override {
    if (!pw_.launcher_host.empty()) {
      for (const auto& h : hosts_) {
        if (h.name == pw_.launcher_host) place_ = {h.name, ssh_options(h)};
      }
    }
    shared_root_ = pw_.shared_dir;
    if (shared_root_.empty() && in_.target.is_vlab()) shared_root_ = in_.target.lab.shared_dir();
    if (!shared_root_.empty()) {
      // A new folder per run (mkdtemp: never an earlier run's, whose rank files a rank that
      // writes nothing would otherwise pass off as its own; never removed by the runner).
      fs::create_directories(shared_root_);
      std::string tmpl = shared_root_ + "/" + in_.run_id + ".XXXXXX";
      if (!::mkdtemp(tmpl.data())) throw SystemError("mkdtemp " + tmpl, errno);
      shared_root_ = tmpl;
    }
    prepare_command();
  }

  void run(ModeRanks& m) override {
    const bool shared_given = !shared_root_.empty();
    std::string shared = shared_given ? shared_root_ + "/" + m.label : m.dir;
    fs::create_directories(shared);
    m.launch.output_dir = shared;
    m.launch.schedule = shared_given ? shared + "/schedule.yaml" : in_.folder + "/schedule.yaml";
    if (shared_given) write_text(m.launch.schedule, in_.schedule_text);
    m.launch.launcher_args = extra_;
    m.launch.job_id = allocation_id();
    // The ranks read the token from the shared folder: a new 0600 file, removed after the job.
    m.launch.token_file = shared + "/controller.token";
    write_secret_file(m.launch.token_file, in_.token);
    struct RemoveToken {
      std::string path;
      ~RemoveToken() {
        std::error_code ec;
        fs::remove(path, ec);
      }
    } remove_token{m.launch.token_file};
    auto argv = launcher_argv(pw_, hosts_, m.launch);
    const std::string log = m.dir + "/launcher.log";
    write_text(log, "$ " + shell_join(argv) + "\n");
    in_.ctx.log(fmt::format("{}: {} on {}", m.label, shell_join(argv), place_.where()));
    try {
      auto o = run_launcher_command(place_, argv, log, rank_wait_limit(pw_), in_.ctx.options().interrupted);
      m.job_id = job_id_of(o.output);
      if (o.timed_out || in_.ctx.interrupted()) {
        m.problem(
            fmt::format("{}: {} stopped ({})", m.label, argv[0], in_.ctx.interrupted() ? "interrupted" : "timed out"));
      } else if (o.exit_status != 0) {
        m.problem(fmt::format("{}: {} on {} exited with status {} (see {})", m.label, argv[0], place_.where(),
                              o.exit_status, log));
      }
    } catch (const std::exception& e) {
      m.problem(fmt::format("{}: {} on {}: {}", m.label, argv[0], place_.where(), e.what()));
    }
    if (!shared_given) return;
    for (int r = 0; r < pw_.schedule.ranks; ++r) {
      for (const std::string& name : rank_file_names(r)) {
        std::error_code ec;
        if (fs::exists(shared + "/" + name))
          fs::copy_file(shared + "/" + name, m.dir + "/" + name, fs::copy_options::overwrite_existing, ec);
      }
    }
  }

  void describe(nlohmann::json& workload) const override {
    // Where the one command ran, the Slurm allocation (srun) or Open MPI's job (mpirun) per mode.
    workload["launcher_host"] = pw_.launcher_host.empty() ? nlohmann::json(nullptr) : nlohmann::json(pw_.launcher_host);
    workload["shared_dir"] = shared_root_;
  }

 protected:
  // The runner's own launcher arguments (extra_) and anything that must exist before a rank
  // starts; throws to refuse the run.
  virtual void prepare_command() = 0;
  // The job id the ranks are told (srun's --jobid); empty: none.
  virtual std::string allocation_id() const { return {}; }
  // The job a mode's command ran as, from the launcher's output, for meta.json.
  virtual std::string job_id_of(const std::string& output) const = 0;

  std::set<size_t> used_hosts() const {
    std::set<size_t> out;
    for (const auto& r : pw_.ranks) out.insert(r.host);
    return out;
  }

  LaunchInputs in_;
  const PhaseWorkloadSpec& pw_;
  const std::vector<HostEntry>& hosts_;
  LauncherPlace place_;
  std::string shared_root_;         // the folder the ranks write into (per mode below it); empty: m.dir
  std::vector<std::string> extra_;  // the runner's own launcher arguments
};

class MpirunLauncher final : public JobCommandLauncher {
 public:
  using JobCommandLauncher::JobCommandLauncher;

 protected:
  void prepare_command() override {
    if (!pw_.launcher_host.empty()) check_names_resolve();
    extra_ = {"--display-map"};  // its "Data for JOB [N,1]" is the job id meta.json records
    if (in_.target.is_vlab()) add_vlab_mpirun_args(extra_);
  }
  std::string job_id_of(const std::string& output) const override { return mpirun_job_id(output); }

 private:
  // mpirun on a lab host names the others by their inventory names: each must resolve there
  // (getent, as mpirun's ssh will), else the job's host list cannot be used. Before any rank.
  void check_names_resolve() {
    std::vector<std::string> names;
    for (size_t h : used_hosts()) names.push_back(hosts_[h].name);
    ocs::SshSession s(*place_.ssh);
    auto r = s.exec("getent hosts " + shell_join(names), std::chrono::seconds(30));
    std::set<std::string> found;
    std::istringstream in(r.out);
    for (std::string line; std::getline(in, line);) {
      std::istringstream words(line);
      std::string w;
      words >> w;  // the address
      while (words >> w) found.insert(w);
    }
    std::string missing;
    for (const auto& n : names) {
      if (!found.count(n)) missing += (missing.empty() ? "" : ", ") + n;
    }
    if (!missing.empty()) {
      throw Error(
          fmt::format("mpirun launcher: on {} (launcher.host) these hosts of the placement do not resolve "
                      "(getent hosts): {}; mpirun -H names them so: add them to its /etc/hosts or DNS",
                      place_.where(), missing));
    }
  }

  // In a virtual lab mpirun runs as root in a guest and reaches the others over the management
  // LAN (every guest's eth0 has the same QEMU user-network address) with the lab's key,
  // checking the hosts' keys against a known_hosts file written for the guests' names.
  void add_vlab_mpirun_args(std::vector<std::string>& extra) const {
    std::string known;
    for (const auto& h : in_.target.lab.hosts) {
      std::string pub = read_file_or_empty(in_.target.lab.host_dir(h.name) + "/ssh_host_ed25519_key.pub");
      std::istringstream in(pub);
      std::string type, key;
      in >> type >> key;
      known += fmt::format("{},{} {} {}\n", h.name, h.lan_ip.substr(0, h.lan_ip.find('/')), type, key);
    }
    const std::string known_file = (shared_root_.empty() ? in_.folder : shared_root_) + "/known_hosts";
    write_text(known_file, known);
    extra.insert(
        extra.end(),
        {"--allow-run-as-root", "--mca", "plm_rsh_args",
         fmt::format("-i {} -o UserKnownHostsFile={} -o StrictHostKeyChecking=yes -o LogLevel=ERROR",
                     in_.target.lab.client_key(), known_file),
         "--mca", "oob_tcp_if_include", "lan0", "--mca", "btl_tcp_if_include", "lan0", "--mca", "routed", "direct"});
  }
};

class SrunLauncher final : public JobCommandLauncher {
 public:
  using JobCommandLauncher::JobCommandLauncher;

  void describe(nlohmann::json& workload) const override {
    JobCommandLauncher::describe(workload);
    if (allocation_) workload["job_id"] = allocation_->job_id();
  }

 protected:
  // The job's Slurm allocation, long enough for every planned run. Throws before any rank
  // starts when Slurm refuses it.
  void prepare_command() override {
    const auto runs = static_cast<int64_t>(in_.planned_runs);
    const int minutes = static_cast<int>((runs * rank_wait_limit(pw_).count() + 59) / 60) + 1;
    auto argv = salloc_argv(pw_, hosts_, "ocslab-" + in_.run_id, minutes);
    if (pw_.launcher_program.find('/') != std::string::npos)  // salloc next to the srun the spec names
      argv[0] = (fs::path(pw_.launcher_program).parent_path() / "salloc").string();
    in_.ctx.log(fmt::format("srun launcher: {} on {}", shell_join(argv), place_.where()));
    allocation_.emplace(place_, argv, in_.folder + "/salloc.log");
    in_.ctx.log(fmt::format("srun launcher: Slurm job {} allocated ({} minute(s) at most; released at the end)",
                            allocation_->job_id(), minutes));
  }
  std::string allocation_id() const override { return allocation_ ? allocation_->job_id() : std::string(); }
  std::string job_id_of(const std::string& /*output*/) const override { return allocation_id(); }

 private:
  std::optional<SlurmAllocation> allocation_;  // held from before the first mode to the end
};

}  // namespace

std::unique_ptr<RankLauncher> make_mpirun_launcher(const LaunchInputs& in) {
  return std::make_unique<MpirunLauncher>(in);
}

std::unique_ptr<RankLauncher> make_srun_launcher(const LaunchInputs& in) { return std::make_unique<SrunLauncher>(in); }

}  // namespace ocslab::runner
