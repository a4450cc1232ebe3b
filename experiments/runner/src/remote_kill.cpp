#include "ocslab/runner/remote_kill.h"

#include <fmt/format.h>

#include <chrono>

#include "ocslab/common/error.h"
#include "ocslab/common/shell.h"

namespace ocslab::runner {

void kill_program(const ocs::SshOptions& ssh, long long pid, const std::string& program, const std::string& what) {
  if (pid <= 0) throw Error(fmt::format("{}: no process to kill (its pid is not known)", what));
  constexpr size_t kCommLength = 15;  // TASK_COMM_LEN - 1
  const std::string comm = program.substr(0, kCommLength);
  ocs::SshSession s(ssh);
  auto r = s.exec(fmt::format("case \"$(cat /proc/{0}/comm 2>/dev/null)\" in {1}*) kill -KILL {0};; "
                              "*) echo 'pid {0} is not {2} any more'; exit 3;; esac",
                              pid, shell_quote(comm), comm),
                  std::chrono::seconds(10));
  if (r.exit_status == 0) return;
  std::string why = r.err.empty() ? r.out : r.err;
  while (!why.empty() && (why.back() == '\n' || why.back() == '\r')) why.pop_back();
  throw Error(fmt::format("{}: kill -KILL {} failed (status {}): {}", what, pid, r.exit_status, why));
}

}  // namespace ocslab::runner
