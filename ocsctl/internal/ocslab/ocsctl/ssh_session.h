// One authenticated libssh session with its host key verified: the base of libocs's SSH
// transports (TL1 shell, NETCONF subsystem) and of ocslab's remote commands on lab hosts
// (the virtual lab's readiness checks, the runner's agents).
#pragma once

#include <libssh/libssh.h>

#include <chrono>
#include <functional>
#include <string_view>
#include <string>

#include "ocslab/ocsctl/stream.h"

namespace ocslab::ocs {

struct ExecResult {
  int exit_status = -1;  // -1: the remote side reported none (killed by a signal)
  std::string out;       // standard output
  std::string err;       // standard error
};

class SshSession {
 public:
  // Connects, verifies the host key against options.known_hosts_file and authenticates
  // (key, then password). Throws ConnectionError naming user@host:port and the failed step.
  explicit SshSession(const SshOptions& options);
  ~SshSession();
  SshSession(const SshSession&) = delete;
  SshSession& operator=(const SshSession&) = delete;

  ssh_session get() const { return session_; }
  // "ssh root@127.0.0.1:2201"; used in error messages.
  const std::string& describe() const { return what_; }

  // Runs command in a fresh channel, feeding `input` to its standard input, and collects its
  // output until it exits. `on_output`, when set, also sees each piece of standard output the
  // moment it arrives (a remote monitor's events, stamped on arrival). Throws TimeoutError when
  // it has not finished within `timeout`, ConnectionError when the connection breaks. `on_tick`,
  // when set, runs at least every 200 ms while the command runs (a caller's Ctrl-C check).
  ExecResult exec(const std::string& command, std::chrono::milliseconds timeout, const std::string& input = {},
                  const std::function<void(std::string_view)>& on_output = {},
                  const std::function<void()>& on_tick = {});

  // Disconnects (idempotent).
  void close();
  // Closes, then throws ConnectionError "<describe>: <step> failed: <libssh's error>".
  [[noreturn]] void fail(const std::string& step);

 private:
  void verify_host(const SshOptions& o);
  void authenticate(const SshOptions& o);
  bool keyboard_interactive(const std::string& password);

  ssh_session session_ = nullptr;
  std::string what_;
};

}  // namespace ocslab::ocs
