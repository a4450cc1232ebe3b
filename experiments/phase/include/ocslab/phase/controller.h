// The per-job controller: a Boost.Asio TCP server (one event loop, no thread per connection)
// that the ranks' shims talk to, around the socket-free ControllerCore (controller_core.h). It keeps the job's group
// registry, counts ready ranks per (group, op sequence number), and only once every rank of a group asked does it
// change the fabric: the rails' orchestrators run on worker threads (one strand per rail, so a slow switch never blocks
// the loop), and every rank is ACKed after every rail confirmed. Per-stage locking enforces G1 (no op starts on a stage
// under reconfiguration) and G2 (no reconfiguration of a stage while an op is in flight on it). A rail that does not
// confirm in time is retried; after repeated failures the job falls back to a static giant ring and every shim is told
// so.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "ocslab/phase/controller_core.h"
#include "ocslab/phase/allocator.h"
#include "ocslab/phase/orchestrator.h"
#include "ocslab/phase/topology.h"

namespace ocslab::phase {

struct ControllerOptions {
  // A loopback address unless `token` is set: start() refuses any other address without one.
  std::string listen_host = "127.0.0.1";
  int listen_port = 0;  // 0: any free port (see Controller::port())
  // The shims' shared secret (their hello's "token"); empty: none (loopback only).
  std::string token;
  // Network limits: a client that has not sent an accepted hello within hello_timeout of
  // connecting, or whose line is still incomplete line_timeout after its first byte, or
  // whose line grows past kMaxLine (protocol.h), is dropped. The deadlines are absolute: a
  // byte a second does not extend them. At most max_strangers connections that have not
  // joined yet are held; more are closed at once.
  std::chrono::milliseconds hello_timeout{5000};
  std::chrono::milliseconds line_timeout{5000};
  size_t max_strangers = 64;
  JobLayout layout;
  // The job must already be placed on every rail (Orchestrator::add_job).
  std::vector<std::shared_ptr<Orchestrator>> rails;
  std::chrono::milliseconds ack_timeout{10000};  // per rail and attempt
  int max_retries = 2;                           // attempts after the first before falling back to the giant ring
  // Injected switching time: after a rail's orchestrator changed circuits, its worker waits this
  // long before the rail counts as confirmed, as if the switch were this much slower (a
  // switching-latency sweep on a switch whose own time cannot be set). 0: none.
  std::chrono::microseconds injected_switch_time{0};
  // Called on the rail's worker thread after every reprogramming attempt that returned (circuits
  // changed or not), with the orchestrator's report: the runner records each reconfiguration.
  std::function<void(const ReconfigReport&)> on_reprogram;
  // Called on the rail's worker thread after a failed port was masked (port_failed), with the
  // orchestrator's report (its `reapplied` is the re-made circuits, also given to on_reprogram).
  std::function<void(const std::string& rail, const MaskReport&)> on_mask;
  // Called with every event the controller records, as it does (on its own thread; quick, and
  // never calling back into the controller): a runner's step-triggered faults watch requests.
  std::function<void(const ControllerEvent&)> on_event;
  // The orchestrator policy (policy.h, docs/phase-control.md#orchestrator-policies).
  // safe-window: reconfigure only when the phase table's idle window before the op exceeds
  // switch_time (both required, else start() throws). greedy: each rail's change is allocated
  // and validated whole (Orchestrator::allocate_topology) before anything is sent.
  Policy policy = Policy::kOnRequest;
  // greedy's circuit allocator (allocator.h, docs/phase-control.md#circuit-allocators).
  Allocator allocator = Allocator::kLargestDemand;
  PhaseWindows windows;
  std::chrono::microseconds switch_time{0};
};

// ControllerEvent and its to_string: controller_core.h.

class Controller {
 public:
  explicit Controller(ControllerOptions options);
  ~Controller();
  Controller(const Controller&) = delete;
  Controller& operator=(const Controller&) = delete;

  // Binds and starts the event loop and the rail workers. Throws ocslab::Error naming the
  // address when it cannot listen, or when it would listen on a non-loopback address
  // without a token.
  void start();
  // Closes every connection and the listener; waits for rail work in progress. Idempotent.
  void stop();
  int port() const;

  // Thread-safe snapshots.
  std::vector<ControllerEvent> events() const;
  std::vector<std::string> problems() const;  // disconnects, rejections, fallbacks, in words
  bool in_fallback() const;
  // Reconfigurations the safe-window policy declined (0 under the other policies).
  size_t declined() const;

  // A port of the named rail failed (a detector saw no light on a made circuit, ...): the
  // controller masks it once, in order with the rail's reprogramming (Orchestrator::mask_port:
  // the rank on it moves to a free healthy slot and its circuits are re-made there), records
  // port_failed and masked events, and tells every shim (`masked`). seen_mono_ns: when the
  // evidence was first seen (monotonic clock; 0: now). Thread-safe; returns at once. Throws
  // ocslab::Error for a rail the job does not have.
  void port_failed(const std::string& rail, int port, std::string evidence, int64_t seen_mono_ns = 0);

  struct Impl;  // opaque; public only so the source file's session type can name it

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace ocslab::phase
