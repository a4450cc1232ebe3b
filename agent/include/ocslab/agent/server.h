// How ocslab-agent is reached: a daemon that owns the probes and the spool behind a unix
// socket, a stdio session (what the runner starts over SSH) that bridges to that daemon and
// starts it when none runs, or an in-process stdio session for one-off use. Killing an SSH
// session kills only its bridge; the daemon keeps capturing.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "ocslab/agent/agent.h"

namespace ocslab::agent {

// Serves the agent on a unix socket until SIGTERM or SIGINT, then stops the probes and
// finishes the spool (a clean stop). A lock file PATH.lock keeps a second daemon off the same
// socket. Throws ocslab::Error when the socket is owned by another daemon or cannot be bound.
void run_daemon(const AgentOptions& options, const std::string& socket_path);

// One in-process session on stdin/stdout; SIGTERM, SIGINT and SIGHUP end it cleanly. The
// probes stop when it ends.
void serve_stdio(const AgentOptions& options);

// Connects stdin/stdout to the daemon at socket_path, first starting daemon_argv detached
// (own session, stdio on log_file) when nothing listens there; returns when either side
// closes. Throws ocslab::Error when the daemon does not come up within start_timeout, or at
// once when nothing listens and daemon_argv is empty (a bridge that may not start one).
void bridge_stdio(const std::string& socket_path, const std::vector<std::string>& daemon_argv,
                  const std::string& log_file, std::chrono::milliseconds start_timeout);

// A connected unix socket fd, or -1 when nothing listens at path.
int connect_unix(const std::string& path);

// Starts argv as a daemon: double fork + setsid, stdin /dev/null, stdout and stderr appended
// to log_file, no other fd inherited. Throws SystemError when fork fails.
void start_detached(const std::vector<std::string>& argv, const std::string& log_file);

}  // namespace ocslab::agent
