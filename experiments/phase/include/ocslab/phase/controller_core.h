// The phase controller's logic without sockets, threads or timers: the job's group registry,
// the per-(group, seq) barriers, the per-stage locks that enforce G1 (no op starts on a stage
// under reconfiguration) and G2 (no reconfiguration of a stage while an op is in flight on it),
// the retries of a rail that does not confirm and the fallback to a static giant ring.
//
// It is driven by inputs (a connection opened, a protocol line, a connection closed, a rail's
// result, a timer that fired, a ring that was wired) and asks for everything else through
// CoreActions: send a message, close a connection, reprogram a rail, arm or cancel a timer,
// wire the giant ring. Controller (controller.h) runs it on one Asio event loop with real
// sockets, strands and timers; the unit tests drive it by hand (tests/unit/phase).
// All inputs come from one thread; intended(), events(), problems() and in_fallback() may be
// called from any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ocslab/phase/policy.h"
#include "ocslab/phase/protocol.h"
#include "ocslab/phase/topology.h"

namespace ocslab::phase {

// One thing the controller did or saw, for timelines and for the G1/G2 checkers.
struct ControllerEvent {
  enum class Kind {
    kRequest,        // rank asked for (group, seq)
    kAck,            // rank ACKed: its op on `stages` may start (G1 starts here)
    kDone,           // rank finished (group, seq)
    kReconfigStart,  // rail starts reprogramming `stages` (attempt number in `value`)
    kReconfigEnd,    // rail confirmed
    kTimeout,        // rail did not confirm within ack_timeout
    kRetry,
    kFallback,    // giving up: giant ring
    kRingReady,   // the giant ring is wired on a rail (or failed, see detail)
    kDisconnect,  // a rank's connection ended without bye
    kRejected,    // bad input (detail names rank and group)
    kDeclined,    // safe-window kept the circuits: the window was too short (value: idle_us)
    kPortFailed,  // a rail's port was reported failed (value: the port; detail: the evidence)
    kMasked,      // the rail masked it (rank: the rank moved, -1 none; value: ms from the failure
                  // being seen to the circuits re-made on the spare; detail: the move or the error)
  };
  Kind kind = Kind::kRequest;
  int64_t mono_ns = 0;
  int64_t real_ns = 0;
  int rank = -1;
  std::string rail;
  std::string group;
  int64_t seq = -1;
  std::vector<int> stages;
  double value = 0;
  std::string detail;
};
std::string_view to_string(ControllerEvent::Kind k);
// The events as CSV (mono_ns,t_ns,kind,rank,rail,group,seq,stages,value,detail): the runner's
// controller-events.csv and `ocslab controller --events`. Throws ocslab::Error naming the file.
void write_events_csv(const std::string& path, const std::vector<ControllerEvent>& events);

using ConnId = uint64_t;

// What the core asks of whoever runs it. Every call is made from the core's input thread.
class CoreActions {
 public:
  virtual ~CoreActions() = default;
  virtual void send(ConnId conn, const Message& m) = 0;
  // Close the connection now (its bye). The runner then reports closed(conn, ...).
  virtual void close(ConnId conn) = 0;
  // Close once everything sent so far is written (a rejected client).
  virtual void close_after_send(ConnId conn) = 0;
  // Bring the rail to ControllerCore::intended(rail) as it is when the work runs, then report
  // on_rail_result with the version and topology it applied. Work for one rail runs in order.
  virtual void reprogram(size_t rail) = 0;
  // Report on_timeout(reconfig, rail, attempt) after the ack timeout, unless cancelled first.
  virtual void arm_timer(uint64_t reconfig, size_t rail, int attempt, std::chrono::milliseconds after) = 0;
  virtual void cancel_timer(uint64_t reconfig, size_t rail) = 0;
  // Wire the job's static giant ring on the rail, then report on_ring_result.
  virtual void build_ring(size_t rail) = 0;
  // Mask the failed port on the rail (Orchestrator::mask_port, in order with the rail's
  // reprogramming), then report on_mask_result.
  virtual void mask(size_t rail, int port) = 0;
};

// What masking a failed port did (Orchestrator::mask_port's report, in the core's terms).
struct MaskOutcome {
  int rank = -1;      // the rank that moved; -1: the port was on no rank's slot
  Slot from, to;      // its slot before and after (when rank >= 0 and no error)
  std::string error;  // not empty: nothing moved (no healthy spare: InfeasibleError's text)
};

struct CoreConfig {
  JobLayout layout;
  std::vector<std::string> rails;                // rail names, in order
  std::vector<TopoId> initial;                   // per rail: the job's topology on it now
  std::chrono::milliseconds ack_timeout{10000};  // per rail and attempt
  int max_retries = 2;                           // attempts after the first before falling back to the giant ring
  // The shims' shared secret: every hello must carry it (compared in constant time), else the
  // connection is refused before it can name a rank. Empty: no authentication (loopback only,
  // enforced by Controller::start).
  std::string token;
  // The orchestrator policy (policy.h). safe-window needs `windows` (the phase table with its
  // idle_us column) and `switch_time` > 0, else the constructor throws.
  Policy policy = Policy::kOnRequest;
  PhaseWindows windows;
  std::chrono::microseconds switch_time{0};
  // Called with every event as it is recorded, on the thread that records it (not under a lock
  // of the core's): it must be quick and must not call back into the controller.
  std::function<void(const ControllerEvent&)> on_event;
};

class ControllerCore {
 public:
  // Throws ocslab::Error for an invalid layout, no rails, or rails and initial of other sizes.
  ControllerCore(CoreConfig config, CoreActions& actions);
  ControllerCore(const ControllerCore&) = delete;
  ControllerCore& operator=(const ControllerCore&) = delete;

  // ---- inputs: one thread ----
  void opened(ConnId conn, std::string peer);
  // One protocol line without its '\n' (a malformed one is rejected and the connection closed).
  void on_line(ConnId conn, std::string_view line);
  // The connection ended. `ours`: the runner closed it (stopping), not a rank failure; a
  // connection that said bye is never a failure either.
  void closed(ConnId conn, const std::string& reason, bool ours);
  // The connection said a hello that was accepted (it is a rank of the job).
  bool joined(ConnId conn) const;
  void on_rail_result(size_t rail, uint64_t version, bool ok, const std::string& error, const TopoId& topo);
  void on_timeout(uint64_t reconfig, size_t rail, int attempt);
  void on_ring_result(size_t rail, const std::string& error);
  // A port of the rail failed: `seen_mono_ns` is when the evidence was first seen (a power
  // monitor's first dark reading; monotonic clock), `evidence` says what it was. The core records
  // it and asks for the port to be masked once; a port reported again is ignored.
  void on_port_failed(size_t rail, int port, const std::string& evidence, int64_t seen_mono_ns);
  // The rail's answer to mask(): a rank that moved is announced to every shim (`masked`).
  void on_mask_result(size_t rail, int port, const MaskOutcome& outcome);
  // Cancels every timer still armed (the runner is stopping).
  void cancel_timers();

  // ---- any thread ----
  // What a rail should have now and the version number of that intention.
  std::pair<TopoId, uint64_t> intended(size_t rail) const;
  std::vector<ControllerEvent> events() const;
  std::vector<std::string> problems() const;  // disconnects, rejections, fallbacks, in words
  bool in_fallback() const { return fallback_flag_; }
  // Reconfigurations safe-window declined (each ACKed its ranks on the circuits as they were).
  size_t declined() const { return declined_; }
  const CoreConfig& config() const { return cfg_; }

 private:
  struct Conn {
    std::string peer;
    int rank = -1;
    bool bye = false;
  };
  struct Group {
    int digit = -1;  // -1: management group, never reconfigures
    std::string dim;
    std::vector<int> ranks;
    std::vector<int> stages;
    int registered_by = -1;
  };
  struct Barrier {
    int digit = 0;
    int64_t op = -1;
    std::map<int, int64_t> ready;  // rank -> monotonic ns of its request
    int64_t run = -1;              // the smallest run a rank declared so far (-1: none asked yet)
  };
  struct Pending {
    std::string group;
    int64_t seq = 0;
    int digit = 0;
    std::map<int, int64_t> ready;
    // Ops of the group after seq that every member declared back to back (request "run"):
    // granted with this ACK (ack "keep") for a symmetric group; 0 otherwise.
    int64_t keep = 0;
  };
  struct Reconfig {
    uint64_t id = 0;
    Pending p;
    std::vector<int> stages;     // locked until every rail confirmed
    std::vector<uint64_t> need;  // per rail: intended version that must be confirmed (0: none)
    std::vector<bool> done;
    std::vector<int> attempts;
  };
  enum class Fallback { kNo, kDraining, kApplying, kActive };

  void record(ControllerEvent e);
  void problem(std::string text);
  void reject(ConnId c, const std::string& text, bool close, const std::string& group = {}, int64_t seq = -1);
  void hello(ConnId c, const Message& m);
  void do_register(ConnId c, const Message& m);
  void request(ConnId c, const Message& m);
  void done_msg(ConnId c, const Message& m);
  void pump();
  // declined: safe-window kept the circuits; the ACK says fallback for this op only.
  void ack_all(const Pending& p, bool reconfigured, bool declined = false);
  // safe-window: true when the change `p` needs is declined (ACKed at once, counted).
  bool decline(const Pending& p);
  void start_reconfig(Pending p, const std::vector<TopoId>& next, const std::vector<int>& stages);
  void dispatch(uint64_t id, size_t rail, int attempt);
  void retry_or_fallback(Reconfig& r, size_t rail, const std::string& why);
  void enter_fallback(const std::string& reason);
  void apply_ring();
  void broadcast(const Message& m);
  void lose_rank(int rank, const std::string& reason);
  std::map<std::string, std::string> topo_map() const;

  CoreConfig cfg_;
  CoreActions& act_;
  SubMappingTable table_;

  std::map<ConnId, Conn> conns_;
  std::map<int, ConnId> rank_conn_;
  std::map<std::string, Group> groups_;
  std::set<int> lost_;
  std::map<std::pair<std::string, int64_t>, Barrier> barriers_;
  std::deque<Pending> queue_;
  std::vector<int> inflight_;  // per stage
  std::vector<bool> busy_;     // per stage
  std::map<int, std::multiset<std::pair<std::string, int64_t>>> rank_ops_;
  std::map<uint64_t, Reconfig> active_;
  uint64_t next_id_ = 0;
  // (rail, port) -> when the failure was first seen (monotonic ns) and its evidence
  std::map<std::pair<size_t, int>, std::pair<int64_t, std::string>> failed_;
  std::vector<TopoId> current_;      // per rail, confirmed
  std::vector<uint64_t> confirmed_;  // per rail
  Fallback fallback_ = Fallback::kNo;
  size_t rings_pending_ = 0;

  mutable std::mutex intended_mu_;
  std::vector<TopoId> intended_;  // per rail: confirmed + every dispatched change
  std::vector<uint64_t> version_;

  mutable std::mutex events_mu_;
  std::vector<ControllerEvent> events_;
  std::vector<std::string> problems_;
  std::atomic<bool> fallback_flag_{false};
  std::atomic<size_t> declined_{0};
  // Refusals of clients that never joined: the first kRecordedRefusals are events and
  // problems, the rest only counted, so strangers cannot grow the controller's memory.
  static constexpr size_t kRecordedRefusals = 16;
  size_t refused_strangers_ = 0;
};

}  // namespace ocslab::phase
