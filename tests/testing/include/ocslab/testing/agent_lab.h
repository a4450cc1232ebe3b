// Local ocslab-agents reached over the loopback sshd fixture, as the runner reaches lab hosts:
// the SSH options for the fixture, the command line of one agent with its own socket and spool
// folder (so many agents share one sshd), and a reaper for the daemons they leave running.
#pragma once

#include <signal.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

#include "ocslab/common/process.h"
#include "ocslab/ocsctl/stream.h"
#include "ocslab/testing/processes.h"
#include "ocslab/testing/sshd_fixture.h"
#include "ocslab/testing/wait.h"

namespace ocslab::testing {

inline ocs::SshOptions agent_ssh_options(const SshdFixture& sshd) {
  ocs::SshOptions o;
  o.host = "127.0.0.1";
  o.port = sshd.port();
  o.user = sshd.user();
  o.identity_file = sshd.client_key();
  o.known_hosts_file = sshd.known_hosts();
  return o;
}

// `ocslab-agent serve --stdio` for an agent living in base/name (socket, spool, daemon log);
// daemon: bridge to (and start when needed) that agent's daemon, else serve in-process.
// agent_host is what the agent stamps on its samples.
inline std::string agent_command(const std::string& base, const std::string& name, const std::string& agent_host,
                                 bool daemon) {
  std::string d = base + "/" + name;
  return bin_path("ocslab-agent") + " serve --stdio" + (daemon ? "" : " --no-daemon") + " --socket " + d +
         "/agent.sock --spool-dir " + d + "/spool --host " + agent_host + " --log-level warn";
}

// The daemons outlive every SSH session by design; the test ends them (SIGTERM: a clean stop).
// Besides the pids it is given, it ends every process serving a socket under base (the agents
// of agent_command(base, ...)), so daemons whose hello never arrived do not outlive the test.
class DaemonReaper {
 public:
  explicit DaemonReaper(std::string base = {}) : base_(std::move(base)) {}
  DaemonReaper(const DaemonReaper&) = delete;
  DaemonReaper& operator=(const DaemonReaper&) = delete;
  void add(long long pid) {
    if (pid > 0) pids_.push_back(static_cast<pid_t>(pid));
  }
  ~DaemonReaper() {
    using namespace std::chrono_literals;
    std::vector<pid_t> pids = pids_;
    if (!base_.empty()) {
      for (pid_t p : serving_under(base_)) pids.push_back(p);
    }
    for (pid_t p : pids) ::kill(p, SIGTERM);
    for (pid_t p : pids) {
      poll_until([&] { return !process_alive(p); }, 3000ms);
      if (process_alive(p)) ::kill(p, SIGKILL);
    }
  }

 private:
  // Processes whose command line has `--socket <base>/...`.
  static std::vector<pid_t> serving_under(const std::string& base) {
    std::vector<pid_t> out;
    for (const auto& p : list_processes()) {
      if (p.cmdline.find(std::string("--socket") + '\0' + base + "/") != std::string::npos) out.push_back(p.pid);
    }
    return out;
  }

  std::string base_;
  std::vector<pid_t> pids_;
};

}  // namespace ocslab::testing
