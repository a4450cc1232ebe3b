// Byte transports under the drivers: raw TCP and an SSH channel (shell or subsystem) behave
// the same way to a driver. Every read takes a deadline; a closed or broken connection throws
// ConnectionError naming the peer.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

namespace ocslab::ocs {

using Clock = std::chrono::steady_clock;
using Deadline = Clock::time_point;

class Stream {
 public:
  virtual ~Stream() = default;
  // Writes all of data. Throws ConnectionError when the peer is gone.
  virtual void write(std::string_view data) = 0;
  // Returns the bytes available (at least one), or an empty string when the deadline
  // passed first. Throws ConnectionError on EOF or error.
  virtual std::string read_some(Deadline deadline) = 0;
  // read_some appending to out (returns how many bytes; 0: the deadline passed first), so a
  // caller that reads on every round trip can reuse one buffer instead of a fresh string.
  virtual size_t read_append(Deadline deadline, std::string& out) {
    std::string bytes = read_some(deadline);
    out += bytes;
    return bytes.size();
  }
  // read_append for a caller that read the steady clock (`now`) right before the call, so the
  // stream need not read it again on a request's first read. The wait may end later than the
  // deadline by the time that passed since `now`, never sooner.
  virtual size_t read_append(Deadline deadline, std::string& out, Clock::time_point now) {
    (void)now;
    return read_append(deadline, out);
  }
  virtual void close() = 0;
  // "tcp 127.0.0.1:3082", "ssh admin@host:22 (netconf)"; used in error messages.
  virtual std::string describe() const = 0;
};

// Connects within connect_timeout. Throws ConnectionError naming host:port.
std::unique_ptr<Stream> tcp_connect(const std::string& host, int port,
                                    std::chrono::milliseconds connect_timeout);

struct SshOptions {
  std::string host;
  int port = 22;
  std::string user;
  std::optional<std::string> password;  // password / keyboard-interactive auth
  std::string identity_file;            // private key; empty: ssh-agent, then ~/.ssh defaults
  std::string known_hosts_file;         // empty: ~/.ssh/known_hosts
  bool accept_unknown_host = false;     // only for throwaway labs; a *changed* key is always refused
  std::string subsystem;                // "netconf"; empty: interactive shell channel
  std::string command;                  // run this command (exec channel) instead; wins over subsystem
  std::chrono::milliseconds connect_timeout{10000};
};

// Opens an SSH session, verifies the host key, authenticates (key, then password), opens
// a channel and requests the command, the subsystem or a shell. Throws ConnectionError naming
// user@host:port and the step that failed (host key mismatch, auth refused, ...).
std::unique_ptr<Stream> ssh_open(const SshOptions& options);

}  // namespace ocslab::ocs
