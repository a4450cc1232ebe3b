// The ssh rank launcher: one SSH session per rank on its own host (its pid read from the
// session, so Ctrl-C and rank-killed faults reach exactly it), the schedule and the controller's
// token in a private folder per host, the ranks' files fetched back and verified afterwards.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>

#include "ocslab/common/clock.h"
#include "ocslab/common/error.h"
#include "ocslab/common/in_parallel.h"
#include "ocslab/common/shell.h"
#include "ocslab/ocsctl/ssh_session.h"
#include "ocslab/runner/experiment_spec.h"
#include "ocslab/runner/rank_launcher.h"
#include "ocslab/runner/remote_dir.h"
#include "ocslab/runner/run_context.h"
#include "ocslab/runner/target.h"

namespace ocslab::runner {

namespace fs = std::filesystem;

namespace {

// The line of a failed rank's output that says why: its program's own "<name>: ..." message
// (the usage text may follow it), else the last line.
std::string why_it_failed(const std::string& text, const std::string& program) {
  const std::string prefix = fs::path(program).filename().string() + ":";
  std::istringstream in(text);
  std::string line, last, own;
  while (std::getline(in, line)) {
    if (line.empty() || line.rfind("ocslab-rank-pid ", 0) == 0) continue;
    last = line;
    if (line.rfind(prefix, 0) == 0) own = line;
  }
  return own.empty() ? last : own;
}

class SshRankLauncher final : public RankLauncher {
 public:
  explicit SshRankLauncher(const LaunchInputs& in)
      : in_(in), pw_(*in.target.spec.phase_workload), hosts_(in.target.spec.hosts) {
    for (const auto& r : pw_.ranks) used_hosts_.insert(r.host);
  }

  bool host_clocks() const override { return true; }

  void run(ModeRanks& m) override {
    const std::map<size_t, std::string> remote = make_remote_dirs(m.label);
    in_.ctx.log(fmt::format("{}: starting {} rank(s) over SSH, controller {}", m.label, ranks(), m.launch.controller));
    // Each rank's pid on its host (its first output line), so Ctrl-C can end exactly it.
    std::vector<std::atomic<long long>> pids(static_cast<size_t>(ranks()));
    std::atomic<int> running{ranks()};
    m.pids = &pids;
    std::vector<std::thread> threads;
    for (int r = 0; r < ranks(); ++r) {
      threads.emplace_back([&, r] {
        run_rank(m, r, pids[static_cast<size_t>(r)], remote.at(host_index(r)));
        --running;
      });
    }
    while (running > 0) {
      if (in_.ctx.interrupted()) {
        stop_ranks(pids);
        m.problem(m.label + ": interrupted: the ranks were stopped");
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    for (auto& t : threads) t.join();
    m.pids = nullptr;
    remove_on_hosts(m, remote, fetch_rank_files(m, remote));
  }

 private:
  size_t host_index(int r) const { return pw_.ranks[static_cast<size_t>(r)].host; }

  // A folder per host made by mktemp -d there (a new name, the SSH user's own, mode 0700), with
  // the schedule in it: real hosts need not share a file system.
  std::map<size_t, std::string> make_remote_dirs(const std::string& mode) const {
    const std::string prefix = remote_dir_prefix(in_.run_id, mode);
    std::map<size_t, std::string> dirs, errors;
    std::mutex mu;
    const std::vector<size_t> hosts(used_hosts_.begin(), used_hosts_.end());
    in_parallel(hosts.size(), [&](size_t i) {
      const size_t h = hosts[i];
      std::string dir;
      try {
        ocs::SshSession s(ssh_options(hosts_[h]));
        dir = make_remote_dir(s, prefix, "schedule.yaml", in_.schedule_text);
        write_token(s, dir);
        std::lock_guard lock(mu);
        dirs[h] = dir;
      } catch (const std::exception& e) {
        std::lock_guard lock(mu);
        if (!dir.empty()) dirs[h] = dir;  // made, its token not written: removed below with the others
        errors[h] = fmt::format("{}: cannot make the ranks' folder: {}", hosts_[h].name, e.what());
      }
    });
    if (!errors.empty()) {
      for (const auto& [made, dir] : dirs) remove_quietly(made, dir);  // only the schedule's copies
      throw Error(errors.begin()->second);                             // the first host's, in spec order
    }
    return dirs;
  }

  // The controller's token into the host's (mktemp'd, private) folder: a new 0600 file renamed
  // into place. The token travels on the session's stdin, never in a command line.
  void write_token(ocs::SshSession& s, const std::string& dir) const {
    auto r = s.exec(fmt::format("umask 077 && t=$(mktemp {0}/.controller.token.XXXXXX) && cat > \"$t\" && "
                                "mv -f \"$t\" {0}/controller.token",
                                shell_quote(dir)),
                    std::chrono::seconds(30), in_.token + "\n");
    if (r.exit_status != 0) throw Error(fmt::format("cannot write {}/controller.token: {}", dir, r.err));
  }

  // Rank r over its own SSH session until it exits; its output goes to rank<r>.log.
  void run_rank(ModeRanks& m, int r, std::atomic<long long>& pid, const std::string& remote) const {
    const HostEntry& h = host_of_rank(r);
    RankLaunch launch = m.launch;
    launch.output_dir = remote;
    launch.schedule = remote + "/schedule.yaml";
    launch.token_file = remote + "/controller.token";
    std::string cmd = shell_join(rank_argv(pw_, hosts_, r, launch));
    std::string text = "$ " + cmd + "\n";
    std::string head;
    try {
      ocs::SshSession s(ssh_options(h));
      auto res = s.exec("echo ocslab-rank-pid $$; exec " + cmd, rank_wait_limit(pw_), {}, [&](std::string_view chunk) {
        if (head.find('\n') != std::string::npos) return;
        head.append(chunk);
        auto nl = head.find('\n');
        if (nl == std::string::npos || head.rfind("ocslab-rank-pid ", 0) != 0) return;
        pid = std::atoll(head.substr(16, nl - 16).c_str());
      });
      text += res.out + res.err + fmt::format("# exit status {}\n", res.exit_status);
      std::string last;
      if (res.exit_status != 0) last = why_it_failed(res.err.empty() ? res.out : res.err, m.launch.program);
      {
        std::lock_guard lock(m.mu);
        m.ends.push_back({r, h.name, res.exit_status, last, realtime_ns()});
      }
      if (res.exit_status != 0) {
        m.problem(fmt::format("{}: rank {} on {} {}: {}", m.label, r, h.name,
                              res.exit_status < 0 ? std::string("was killed by a signal")
                                                  : fmt::format("exited with status {}", res.exit_status),
                              last.empty() ? "(no output)" : last));
      }
    } catch (const std::exception& e) {
      text += std::string("# ") + e.what() + "\n";
      {
        std::lock_guard lock(m.mu);
        m.ends.push_back({r, h.name, 255, e.what(), realtime_ns()});  // as ssh's own failure status
      }
      m.problem(fmt::format("{}: rank {} on {}: {}", m.label, r, h.name, e.what()));
    }
    try {
      write_text(fmt::format("{}/rank{}.log", m.dir, r), text);
    } catch (const std::exception& e) {
      m.problem(fmt::format("{}: rank {}: {}", m.label, r, e.what()));
    }
  }

  // Ctrl-C: SIGTERM to every rank by its pid, over a session of its own; the rows the ranks
  // wrote before are still fetched.
  void stop_ranks(const std::vector<std::atomic<long long>>& pids) const {
    for (int r = 0; r < ranks(); ++r) {
      long long pid = pids[static_cast<size_t>(r)];
      if (pid <= 0) continue;
      try {
        ocs::SshSession s(ssh_options(host_of_rank(r)));
        s.exec(fmt::format("kill -TERM {} 2>/dev/null; true", pid), std::chrono::seconds(10));
      } catch (const std::exception& e) {
        spdlog::warn("could not stop rank {}: {}", r, e.what());
      }
    }
  }

  // Every rank's files back over SSH, each verified (written, fsynced, its size equal to the
  // host's). Returns the hosts whose folder must stay: a file there was not verified.
  std::set<size_t> fetch_rank_files(ModeRanks& m, const std::map<size_t, std::string>& remote) const {
    std::set<size_t> keep;
    std::mutex mu;
    // Every rank's files at once (each rank's own names, into the mode's folder).
    in_parallel(static_cast<size_t>(ranks()), [&](size_t i) {
      const int r = static_cast<int>(i);
      const HostEntry& h = host_of_rank(r);
      const std::vector<std::string> names = rank_file_names(r);
      try {
        ocs::SshSession s(ssh_options(h));
        auto got = fetch_verified(s, remote.at(host_index(r)), names, m.dir);
        for (const auto& p : got.problems) m.problem(fmt::format("{}: rank {} on {}: {}", m.label, r, h.name, p));
        if (!got.verified()) {
          std::lock_guard lock(mu);
          keep.insert(host_index(r));
        }
      } catch (const std::exception& e) {
        m.problem(fmt::format("{}: fetching rank {}'s files from {}: {}", m.label, r, h.name, e.what()));
        std::lock_guard lock(mu);
        keep.insert(host_index(r));
      }
    });
    return keep;
  }

  // Each host's folder is removed once all its files were verified; otherwise it stays, named.
  void remove_on_hosts(ModeRanks& m, const std::map<size_t, std::string>& remote, const std::set<size_t>& keep) const {
    std::vector<std::pair<size_t, std::string>> gone;
    for (const auto& [h, dir] : remote) {
      if (keep.count(h)) {
        m.problem(fmt::format("{}: kept {} on {}: not every rank file in it was copied and verified", m.label, dir,
                              hosts_[h].name));
      } else {
        gone.emplace_back(h, dir);
      }
    }
    in_parallel(gone.size(), [&](size_t i) { remove_quietly(gone[i].first, gone[i].second); });
  }

  void remove_quietly(size_t h, const std::string& dir) const {
    try {
      ocs::SshSession s(ssh_options(hosts_[h]));
      remove_remote_dir(s, dir);
    } catch (const std::exception& e) {
      spdlog::warn("could not remove {} on {}: {}", dir, hosts_[h].name, e.what());
    }
  }

  int ranks() const { return pw_.schedule.ranks; }
  const HostEntry& host_of_rank(int r) const { return hosts_[pw_.ranks[static_cast<size_t>(r)].host]; }

  LaunchInputs in_;
  const PhaseWorkloadSpec& pw_;
  const std::vector<HostEntry>& hosts_;
  std::set<size_t> used_hosts_;
};

}  // namespace

std::unique_ptr<RankLauncher> make_ssh_rank_launcher(const LaunchInputs& in) {
  return std::make_unique<SshRankLauncher>(in);
}

}  // namespace ocslab::runner
