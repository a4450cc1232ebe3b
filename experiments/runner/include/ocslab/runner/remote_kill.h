// An injected crash on a lab host (the agent-killed and rank-killed faults): SIGKILL to a pid the
// runner learnt, sent over a session of its own, and only while that pid still runs the program
// the runner means (its /proc/PID/comm), never to a process the pid was reused for.
#pragma once

#include <string>

#include "ocslab/ocsctl/ssh_session.h"

namespace ocslab::runner {

// Kills pid on the host `ssh` reaches when its command name starts with `program` (a file name;
// the kernel keeps its first 15 characters). Throws Error naming `what` (e.g. "h2's agent")
// with the host's answer when the pid is not that program any more or the kill failed.
void kill_program(const ocs::SshOptions& ssh, long long pid, const std::string& program, const std::string& what);

}  // namespace ocslab::runner
