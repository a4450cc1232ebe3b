#include "ocslab/runner/job_launcher.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <sys/wait.h>

#include <csignal>
#include <fstream>
#include <regex>
#include <thread>

#include "ocslab/common/error.h"
#include "ocslab/common/process.h"
#include "ocslab/common/shell.h"
#include "ocslab/ocsctl/ssh_session.h"

namespace ocslab::runner {

namespace {

void append(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::app) << text;
}

std::string read_tail(const std::string& path, size_t from) {
  std::ifstream in(path, std::ios::binary);
  in.seekg(static_cast<std::streamoff>(from));
  return std::string(std::istreambuf_iterator<char>(in), {});
}

size_t file_size_or_zero(const std::string& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  return in ? static_cast<size_t>(in.tellg()) : 0;
}

LauncherOutcome run_here(const std::vector<std::string>& argv, const std::string& log_file,
                         std::chrono::seconds limit, const std::atomic<bool>* interrupted) {
  const size_t before = file_size_or_zero(log_file);
  SpawnOptions so;
  so.log_file = log_file;
  pid_t pid = spawn_program(argv, so);
  LauncherOutcome o;
  int status = 0;
  const auto deadline = std::chrono::steady_clock::now() + limit;
  for (;;) {
    if (::waitpid(pid, &status, WNOHANG) == pid) break;
    const bool stop = interrupted && interrupted->load();
    if (stop || std::chrono::steady_clock::now() > deadline) {
      o.timed_out = !stop;
      ::kill(pid, SIGTERM);
      ::waitpid(pid, &status, 0);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  o.exit_status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  o.output = read_tail(log_file, before);
  return o;
}

LauncherOutcome run_there(const LauncherPlace& place, const std::vector<std::string>& argv,
                          const std::string& log_file, std::chrono::seconds limit,
                          const std::atomic<bool>* interrupted) {
  // timeout(1) on the host: the launcher ends there too when the runner stops waiting (124 is
  // timeout's own status for that). The shell prints its pid first, which exec hands to
  // timeout: on Ctrl-C a second session sends it SIGTERM, which timeout passes to the launcher.
  std::vector<std::string> cmd = {"timeout", "-s", "TERM", std::to_string(limit.count())};
  cmd.insert(cmd.end(), argv.begin(), argv.end());
  ocs::SshSession s(*place.ssh);
  LauncherOutcome o;
  bool stopped = false;
  auto on_tick = [&] {
    if (stopped || !interrupted || !interrupted->load()) return;
    static const std::regex pid_re(R"(ocslab-launcher-pid ([0-9]+))");
    std::smatch m;
    if (!std::regex_search(o.output, m, pid_re)) return;  // not started yet: next tick
    stopped = true;
    try {
      ocs::SshSession k(*place.ssh);
      k.exec("kill -TERM " + m[1].str(), std::chrono::seconds(15));
    } catch (const std::exception& e) {
      spdlog::warn("could not stop the launcher on {}: {}", place.where(), e.what());
    }
  };
  auto r = s.exec("cd / && echo ocslab-launcher-pid $$ && exec " + shell_join(cmd) + " 2>&1",
                  limit + std::chrono::seconds(15), {},
                  [&](std::string_view chunk) {
                    o.output.append(chunk);
                    append(log_file, std::string(chunk));
                  },
                  on_tick);
  o.exit_status = r.exit_status;
  o.timed_out = r.exit_status == 124;
  return o;
}

}  // namespace

LauncherOutcome run_launcher_command(const LauncherPlace& place, const std::vector<std::string>& argv,
                                     const std::string& log_file, std::chrono::seconds limit,
                                     const std::atomic<bool>* interrupted) {
  if (argv.empty()) throw Error("run_launcher_command: no command");
  return place.host_name.empty() ? run_here(argv, log_file, limit, interrupted)
                                 : run_there(place, argv, log_file, limit, interrupted);
}

std::string salloc_job_id(const std::string& output) {
  static const std::regex re(R"(Granted job allocation ([0-9]+))");
  std::smatch m;
  return std::regex_search(output, m, re) ? m[1].str() : std::string();
}

std::string mpirun_job_id(const std::string& output) {
  static const std::regex re(R"(Data for JOB \[([0-9]+,[0-9]+)\])");
  std::smatch m;
  return std::regex_search(output, m, re) ? m[1].str() : std::string();
}

SlurmAllocation::SlurmAllocation(LauncherPlace place, std::vector<std::string> salloc_argv,
                                 const std::string& log_file)
    : place_(std::move(place)), log_file_(log_file) {
  append(log_file_, "$ " + shell_join(salloc_argv) + "\n");
  // --immediate bounds the wait for resources; this bounds salloc itself.
  auto o = run_launcher_command(place_, salloc_argv, log_file_, std::chrono::seconds(120));
  job_id_ = salloc_job_id(o.output);
  if (o.exit_status != 0 || job_id_.empty()) {
    std::string said = o.output;
    while (!said.empty() && (said.back() == '\n' || said.back() == '\r')) said.pop_back();
    if (!job_id_.empty()) {
      // Granted but salloc failed afterwards: do not leave the allocation behind.
      try {
        run_launcher_command(place_, {"scancel", job_id_}, log_file_, std::chrono::seconds(30));
      } catch (const std::exception&) {
      }
    }
    throw Error(fmt::format("srun launcher: no Slurm allocation: {} on {} exited with status {}{}", salloc_argv[0],
                            place_.where(), o.exit_status, said.empty() ? "" : ": " + said));
  }
}

SlurmAllocation::~SlurmAllocation() {
  try {
    append(log_file_, "$ scancel " + job_id_ + "\n");
    auto o = run_launcher_command(place_, {"scancel", job_id_}, log_file_, std::chrono::seconds(30));
    if (o.exit_status != 0) spdlog::warn("scancel {} on {} exited with {}", job_id_, place_.where(), o.exit_status);
  } catch (const std::exception& e) {
    spdlog::warn("could not release Slurm allocation {} on {}: {}", job_id_, place_.where(), e.what());
  }
}

}  // namespace ocslab::runner
