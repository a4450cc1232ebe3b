// A real OpenSSH sshd on a loopback port, for end-to-end tests of SSH transports. Generates
// a host key and a client key in a temp folder, writes a known_hosts file for the client,
// and runs `force_command` for every session (shell or subsystem). Needs root (CI is root).
#pragma once

#include <string>
#include <sys/types.h>

namespace ocslab::testing {

struct SshdOptions {
  // Set one of the two (sshd's ForceCommand would override the subsystem too).
  std::string force_command;      // run for every session (TL1 over SSH: a shell channel)
  std::string netconf_subsystem;  // command for "Subsystem netconf"
  // sshd's MaxStartups. The fixture's own is generous, for tests that open tens of sessions at
  // once; "" leaves sshd's default (10:30:100: from 10 unauthenticated connections on it drops
  // 30 % of new ones), as a stock lab host has it.
  std::string max_startups = "100:30:200";
};

class SshdFixture {
 public:
  explicit SshdFixture(const SshdOptions& options);
  ~SshdFixture();
  SshdFixture(const SshdFixture&) = delete;
  SshdFixture& operator=(const SshdFixture&) = delete;

  int port() const { return port_; }
  const std::string& dir() const { return dir_; }
  std::string client_key() const { return dir_ + "/client_key"; }
  std::string known_hosts() const { return dir_ + "/known_hosts"; }
  std::string user() const;  // the user tests log in as (the current user)
  // SIGKILL to every process under this sshd (its connections' processes), not to the listener:
  // drops the sessions it serves, as a host that rebooted or a middlebox would, and touches
  // nothing else on the machine. Returns how many processes it killed.
  int drop_connections() const;

 private:
  std::string dir_;
  int port_ = 0;
  pid_t pid_ = -1;
};

// Folder under /tmp removed on destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// Runs a shell command; throws std::runtime_error with its output when it fails.
std::string run_command(const std::string& cmd);

// Path of a binary built by this project (ocsctl, ocs-testpeer, ...): $OCSLAB_BIN_DIR when
// ctest sets it, else <test binary folder>/../bin.
std::string bin_path(const std::string& name);

// A free TCP port on 127.0.0.1 (bound then released).
int free_loopback_port();

}  // namespace ocslab::testing
