// An injected crash on a lab host (the agent-killed and rank-killed faults): SIGKILL to a pid the
// runner learnt, sent over a session of its own, and only while that pid still runs the program
// the runner means (its /proc/PID/comm), never to a process the pid was reused for.
#pragma once

#include <memory>
#include <string>

#include "ocslab/ocsctl/ssh_session.h"

namespace ocslab::runner {

// Kills pid on the host `ssh` reaches when its command name starts with `program` (a file name;
// the kernel keeps its first 15 characters). Throws Error naming `what` (e.g. "h2's agent")
// with the host's answer when the pid is not that program any more or the kill failed.
void kill_program(const ocs::SshOptions& ssh, long long pid, const std::string& program, const std::string& what);

// The same over a session opened ahead of time, so that a fault lands within one command's round
// trip of when it is due rather than after a fresh key exchange (which, with the host or sshd
// busy, took over a second: a rank to be killed at step 3 had finished it by then; CI,
// 2026-11-30). The constructor connects; a connection that cannot be made then, or that broke
// since, is made again at kill(). One thread at a time.
class RemoteKiller {
 public:
  explicit RemoteKiller(ocs::SshOptions ssh);
  ~RemoteKiller();
  RemoteKiller(const RemoteKiller&) = delete;
  RemoteKiller& operator=(const RemoteKiller&) = delete;

  // As kill_program. Throws Error naming `what` as it does.
  void kill(long long pid, const std::string& program, const std::string& what);
  bool connected_ahead() const { return ahead_; }  // the constructor's connection was made

 private:
  ocs::SshOptions ssh_;
  std::unique_ptr<ocs::SshSession> session_;
  bool ahead_ = false;
};

}  // namespace ocslab::runner
