// One lab host as the runner sees it during an experiment: an SSH session (libssh, host key
// verified) running `ocslab-agent serve --stdio`, the agent's hello and clock offsets before and
// after, its probes, and a reader thread that hands every sample to the runner. When the
// session drops, stop() reconnects once and fetches what the live stream missed from the
// agent's spool; when the agent itself is gone the host is reported lost and what arrived up to
// then is kept. A SessionPool opens many hosts in parallel, at most connect_concurrency SSH
// handshakes at a time (HandshakeGate).
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "ocslab/agent/client.h"
#include "ocslab/agent/protocol.h"
#include "ocslab/ocsctl/stream.h"
#include "ocslab/runner/handshake_gate.h"

namespace ocslab::runner {

struct HostTarget {
  std::string name;     // the lab's name for the host: every sample's host is set to it
  ocs::SshOptions ssh;  // host, port, user, identity_file, known_hosts_file; command is set here
  std::string agent_command = "ocslab-agent serve --stdio";  // run over SSH (exec channel)
  std::vector<agent::ProbeRequest> probes;
  // The run id sent with probes.start: the agent names the capture and its spool file after it
  // ("": none). [A-Za-z0-9._-], at most agent::kMaxRunBytes (spool_run_id makes one).
  std::string run;
  int clock_exchanges = 16;
  std::chrono::milliseconds request_timeout{15000};
};

struct Target;
// The reconfiguration experiment's agent sessions, one per host of the target's spec, with the
// probes the spec asks of it and one RDMA probe pair per spec pair. Every RDMA probe request
// carries the control secret drawn for this call (random_token), the same on both sides.
std::vector<HostTarget> host_targets(const Target& target, const std::string& run_id);
// A run id as the agent takes it in probes.start: characters other than [A-Za-z0-9._-]
// replaced by '_', a leading '.' too, cut to agent::kMaxRunBytes.
std::string spool_run_id(const std::string& run_id);

enum class HostState { kIdle, kConnected, kCapturing, kLost, kStopped };
const char* to_string(HostState s);

// kLost here means the session is gone (dropped SSH, killed agent): stop() reconnects once and
// finds out whether the agent is still capturing (then nothing is lost) or gone.
struct HostHealth {
  HostState state = HostState::kIdle;
  uint64_t samples = 0;        // delivered to the sink so far
  int64_t last_sample_ns = 0;  // t_ns (host clock) of the newest sample, 0: none
  std::string error;           // why the session was lost / the last failure, empty when healthy
  int resumed = 0;             // dropped sessions taken up again mid-run
  std::string resume_note;     // what the last of them fetched (for the run's log)
};

// Where a host's connect() went, in order: waiting for a handshake slot (HandshakeGate), the
// SSH handshake up to the exec channel and the agent client's set-up, the agent's hello (its
// bridge starts the daemon when none runs), the clock estimate. The phases are contiguous, so
// connect_time is their sum (each is rounded down to the ms: the sum may be up to 3 ms short).
struct ConnectPhases {
  std::chrono::milliseconds queue{0}, ssh{0}, hello{0}, clock{0};
};

struct HostReport {
  std::string name;
  agent::HelloInfo hello;
  agent::ClockEstimate clock_before, clock_after;  // clock_after.exchanges == 0: not measured
  agent::StartResult started;
  uint64_t last_seq = 0;                      // the capture's last seq as the agent reported at stop (0: lost)
  uint64_t samples = 0;                       // delivered (live + recovered), each seq once
  uint64_t recovered = 0;                     // of which replayed from the spool after a dropped session
  bool lost = false;                          // the agent could not be reached again: samples up to the loss are kept
  int resumed = 0;                            // dropped sessions replaced mid-run (gap fetched, live again)
  long long pid_after = 0;                    // the agent's pid at the reconnect after a dropped session (0: none);
                                              // differs from hello.pid when the daemon died and a fresh one answered
  std::vector<std::string> errors;            // every failure, in order, with the time it happened
  std::chrono::milliseconds connect_time{0};  // queue + SSH + hello + first clock estimate
  ConnectPhases connect_phases;
};

// Called from the session's reader thread (one per host), or from the thread in start()/stop()
// (samples that come with a reply, the spool replay): must be thread-safe across hosts.
// The sample's host is already the target's name; t_ns is still the host's own clock.
using HostSampleSink = std::function<void(const std::string& host, const agent::SeqSample&)>;

class HostSession {
 public:
  // gate: bounds the SSH handshakes of every session that shares it (null: unbounded).
  HostSession(HostTarget target, HostSampleSink sink, std::shared_ptr<HandshakeGate> gate = nullptr);
  ~HostSession();  // stops the reader, closes the session (does not stop the agent's probes)
  HostSession(const HostSession&) = delete;
  HostSession& operator=(const HostSession&) = delete;

  const std::string& name() const { return target_.name; }
  const HostTarget& target() const { return target_; }

  // SSH connect, hello, clock estimate (clock_before). Throws ocs::ConnectionError /
  // agent::AgentError naming the host.
  void connect();
  // probes.start, then a reader thread follows the live stream. Throws when the agent refuses
  // the request or none of the probes can run (the reasons in the message).
  const agent::StartResult& start();
  HostHealth health() const;
  // The agent's hello from connect() (pid: the daemon owning the probes); empty before.
  agent::HelloInfo hello() const;
  // The report so far (hello, clock_before, started; counts up to now).
  HostReport report() const;
  // probes.stop; when the session was lost, one reconnect + spool.fetch of everything after the
  // last seq seen (samples up to the agent's end are kept either way); clock_after; bye.
  // Never throws: failures go into the report (and lost = true when the agent is gone).
  HostReport stop();
  // `ocslab recover`: the session of a runner that died. Connects again and, when the daemon
  // that answers is the one that started the capture (at_start.pid), stops its probes and
  // fetches every sample after delivered_seq from its spool, then measures clock_after: the
  // same report as stop() after a dropped session. Never throws.
  HostReport reattach(const agent::HelloInfo& at_start, uint64_t delivered_seq);
  // For fault tests and Ctrl-C: drop the SSH session without a goodbye.
  void drop();

 private:
  void reader_loop();
  // The reader's answer to a session that ended under it: while the run goes on (up to
  // kResumeWindow), a fresh session to the same daemon fetches the gap from the spool and
  // follows live again. False when the daemon is another one or none answered in time.
  bool resume_after_drop(const std::string& why);
  void fail(const std::string& what);
  void set_state(HostState s);
  HostState state() const;
  // Hands a sample to the sink unless its seq was delivered already (live and replayed
  // streams may overlap after a reconnect).
  void deliver(const agent::SeqSample& s);
  // A fresh SSH session to the agent, its handshake through the gate; queue_end (when given)
  // gets the moment the gate let it through.
  std::unique_ptr<agent::AgentClient> open_client(std::chrono::steady_clock::time_point* queue_end = nullptr);
  // Ends the reader thread (drop: closes the session from inside it, as a cut link would).
  void join_reader();
  // After a dropped session: one reconnect, probes.stop, spool.fetch of the gap.
  void recover();

  HostTarget target_;
  HostSampleSink sink_;
  std::shared_ptr<HandshakeGate> gate_;
  // Used by one thread at a time: the reader while it runs, else the caller (AgentClient is
  // not thread-safe).
  std::unique_ptr<agent::AgentClient> client_;
  mutable std::mutex mutex_;  // health_, report_ (the reader adds errors and counts)
  HostHealth health_;
  HostReport report_;
  bool started_ = false;        // probes.start succeeded: stop() must stop the probes
  uint64_t delivered_seq_ = 0;  // highest seq handed to the sink (seqs arrive in order)
  bool recovering_ = false;     // samples now come from the spool replay
  std::atomic<bool> reading_{false};
  std::atomic<bool> drop_requested_{false};
  std::thread reader_;
};

// spool.delete of one host's capture on a session of its own (SSH, hello, spool.delete, bye),
// sent once the runner has that capture's samples safely in its results folder. Returns ""
// or what failed, naming the host; never throws. The agent's retention deletes a spool that
// is never confirmed. gate: the pool's, so releases count against connect_concurrency too.
std::string release_spool(const HostTarget& target, const std::string& capture, HandshakeGate* gate = nullptr);

// Many hosts at once: connect() and start() fan out on one thread per host and return when all
// are done; failures are per host (the others go on). stop_all() likewise. Every SSH handshake
// of its sessions (connect, resume, the reconnect at stop) waits for one of connect_concurrency
// slots, so a large lab neither trips sshd's MaxStartups nor queues a hundred key exchanges
// for two cores; hello, clock estimate and probes.start run on all hosts in parallel.
class SessionPool {
 public:
  // connect_concurrency >= 1 (HandshakeGate throws otherwise).
  explicit SessionPool(HostSampleSink sink, int connect_concurrency = kDefaultConnectConcurrency)
      : sink_(std::move(sink)), gate_(std::make_shared<HandshakeGate>(connect_concurrency)) {}
  // A gate shared with other sessions of the run (its reattach and spool.delete sessions).
  SessionPool(HostSampleSink sink, std::shared_ptr<HandshakeGate> gate) : sink_(std::move(sink)), gate_(std::move(gate)) {}
  void add(HostTarget target);
  // Returns one error string per host, empty when it succeeded.
  std::vector<std::string> connect_all();
  std::vector<std::string> start_all();
  std::vector<HostReport> stop_all();
  std::vector<HostHealth> health() const;
  std::vector<std::unique_ptr<HostSession>>& sessions() { return sessions_; }
  // The gate every session of this pool shares (limit, peak so far); also for release_spool.
  HandshakeGate& gate() { return *gate_; }
  const HandshakeGate& gate() const { return *gate_; }

 private:
  HostSampleSink sink_;
  std::shared_ptr<HandshakeGate> gate_;
  std::vector<std::unique_ptr<HostSession>> sessions_;
};

}  // namespace ocslab::runner
