// The agent core: owns the running probes, the capture's spool and its sequence numbers, and
// serves protocol sessions over file descriptors (stdin/stdout, a unix socket connection).
// Several sessions may be served at once; probes keep running when a session ends, so a
// daemon outlives the SSH sessions that bridge to it.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "ocslab/agent/protocol.h"
#include "ocslab/agent/registry.h"
#include "ocslab/agent/spool.h"
#include "ocslab/agent/spool_retention.h"

namespace ocslab::agent {

struct AgentOptions {
  std::string host;                         // stamped on every sample; empty: gethostname()
  std::string spool_dir;                    // one spool file per capture here (created if missing;
                                            // refused when a symlink, another user's, or writable by others)
  const ProbeRegistry* registry = nullptr;  // nullptr: builtin_registry()
  SpoolOptions spool;
  // Old spools are deleted when a capture starts and every retention_interval (spool_retention.h).
  RetentionOptions retention;
  std::chrono::seconds retention_interval{60};
};

class Session;

class Agent {
 public:
  explicit Agent(AgentOptions options);
  // Stops the probes and finishes (flushes, fsyncs) the spool.
  ~Agent();
  Agent(const Agent&) = delete;
  Agent& operator=(const Agent&) = delete;

  // Serves one session reading requests from in_fd and writing to out_fd until EOF, "bye", a
  // write failure or shutdown(). Does not close the fds. Thread-safe.
  void serve(int in_fd, int out_fd);
  // Ends every session being served (their serve() calls return soon after).
  void shutdown_sessions();

  // Stops the running probes and finishes the capture's spool (a clean stop: nothing lost).
  void stop_probes();
  nlohmann::json status() const;
  const std::string& host() const { return host_; }

 private:
  friend class Session;
  void handle(Session& s, const Request& r, int64_t t2);
  nlohmann::json start_probes(Session& s, const Request& r);
  void fetch(Session& s, const Request& r);
  nlohmann::json delete_spool(const Request& r);
  // Applies options_.retention, never to keep_path (the running capture's spool).
  void enforce_retention(const std::string& keep_path);
  void on_sample(const Sample& sample);
  void flusher();

  AgentOptions options_;
  std::string host_;
  const ProbeRegistry* registry_;

  mutable std::mutex control_;  // serializes start/stop (never held by probe threads)
  std::vector<std::unique_ptr<probes::Probe>> probes_;
  std::vector<std::string> running_;

  mutable std::mutex mutex_;  // the data path: seq, spool, subscribers
  std::shared_ptr<Spool> spool_;
  std::string capture_;
  uint64_t last_seq_ = 0;
  std::string line_;  // the sample line being built (under mutex_), reused
  uint64_t captures_ = 0;
  std::vector<Session*> sessions_;
  std::string spool_error_;  // first spool failure of this capture, reported by status

  std::atomic<bool> stopping_{false};
  std::thread flusher_;
};

}  // namespace ocslab::agent
