// One authenticated libssh session with its host key verified: the base of libocs's SSH
// transports (TL1 shell, NETCONF subsystem) and of ocslab's remote commands on lab hosts
// (the virtual lab's readiness checks, the runner's agents).
#pragma once

#include <libssh/libssh.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "ocslab/ocsctl/stream.h"

namespace ocslab::ocs {

struct ExecResult {
  int exit_status = -1;  // -1: the remote side reported none (killed by a signal)
  // Standard output and error, each whole up to the exec's max_kept bytes; beyond that its first
  // and last max_kept / 2 bytes around a line "[... N bytes dropped ...]".
  std::string out;
  std::string err;
  uint64_t out_dropped = 0, err_dropped = 0;  // bytes left out of out / err (0: whole)
};

// What exec keeps of each stream by default: a command's answer, a rank's log; a remote command
// printing without end must not exhaust the runner's memory.
inline constexpr size_t kExecMaxKept = 16 << 20;

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
  // when set, runs at least every 200 ms while the command runs (a caller's Ctrl-C check). The
  // deadline is checked on every read, also while output keeps arriving. Of each stream at most
  // max_kept bytes are kept (head and tail, ExecResult); on_output still sees every byte.
  ExecResult exec(const std::string& command, std::chrono::milliseconds timeout, const std::string& input = {},
                  const std::function<void(std::string_view)>& on_output = {},
                  const std::function<void()>& on_tick = {}, size_t max_kept = kExecMaxKept);

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
