#include "ocslab/runner/remote_kill.h"

#include <fmt/format.h>

#include <chrono>

#include "ocslab/common/error.h"
#include "ocslab/common/shell.h"
#include "ocslab/ocsctl/errors.h"

namespace ocslab::runner {

namespace {

// SIGKILL to pid over `s` when its comm starts with `program`; throws Error naming `what`.
void kill_over(ocs::SshSession& s, long long pid, const std::string& program, const std::string& what) {
  constexpr size_t kCommLength = 15;  // TASK_COMM_LEN - 1
  const std::string comm = program.substr(0, kCommLength);
  auto r = s.exec(fmt::format("case \"$(cat /proc/{0}/comm 2>/dev/null)\" in {1}*) kill -KILL {0};; "
                              "*) echo 'pid {0} is not {2} any more'; exit 3;; esac",
                              pid, shell_quote(comm), comm),
                  std::chrono::seconds(10));
  if (r.exit_status == 0) return;
  std::string why = r.err.empty() ? r.out : r.err;
  while (!why.empty() && (why.back() == '\n' || why.back() == '\r')) why.pop_back();
  throw Error(fmt::format("{}: kill -KILL {} failed (status {}): {}", what, pid, r.exit_status, why));
}

std::string no_pid(const std::string& what) { return what + ": no process to kill (its pid is not known)"; }

}  // namespace

void kill_program(const ocs::SshOptions& ssh, long long pid, const std::string& program, const std::string& what) {
  if (pid <= 0) throw Error(no_pid(what));
  ocs::SshSession s(ssh);
  kill_over(s, pid, program, what);
}

RemoteKiller::RemoteKiller(ocs::SshOptions ssh) : ssh_(std::move(ssh)) {
  try {
    session_ = std::make_unique<ocs::SshSession>(ssh_);
    ahead_ = true;
  } catch (const std::exception&) {
    // made again at kill(), whose error then names the host and the step that failed
  }
}

RemoteKiller::~RemoteKiller() = default;

void RemoteKiller::kill(long long pid, const std::string& program, const std::string& what) {
  if (pid <= 0) throw Error(no_pid(what));
  if (session_) {
    try {
      kill_over(*session_, pid, program, what);
      return;
    } catch (const ocs::ConnectionError&) {
      session_.reset();  // broke while it waited (the host rebooted, a middlebox dropped it): once more, fresh
    }
  }
  session_ = std::make_unique<ocs::SshSession>(ssh_);
  kill_over(*session_, pid, program, what);
}

}  // namespace ocslab::runner
