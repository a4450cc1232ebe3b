// The carrier probe: when did each watched interface's carrier go down and up, stamped on this
// host's clocks as the kernel announced it over rtnetlink, with the transitions linkwatch
// coalesced or a socket overrun lost recovered from the kernel's carrier counters.
// Signals and units: see carrier_tracker.h and docs/probes-carrier.md.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ocslab/probes/probe.h"

namespace ocslab::probes {

struct CarrierProbeOptions {
  std::vector<std::string> interfaces;  // names, all of which must exist when the probe starts
  std::string netns;                    // name under /run/netns; empty: the caller's namespace
  std::string host;                     // Sample::host
  // SO_RCVBUF of the event socket in bytes; 0 keeps the kernel default. Tests shrink it to
  // provoke overruns.
  int receive_buffer_bytes = 0;
  // SCHED_FIFO priority (1..99) for the receive-only thread, 0 for normal scheduling. On a busy
  // host a normal thread can wake milliseconds after the message arrived, and that delay goes
  // straight into the timestamp; the thread sleeps in poll all but microseconds per event, so a
  // real-time priority costs the host nothing. Needs CAP_SYS_NICE; without it the probe says so
  // in the log and runs at normal priority.
  int receiver_rt_priority = 0;
  // Every this many ms, also read the watched interfaces' live carrier bit (one RTM_GETLINK
  // dump of the namespace's links: a request for one device would, since Linux 6.8, send that
  // device's pending linkwatch announcement at once and so change what `carrier` records) and
  // emit its changes as `carrier_bit` and `carrier_bit_inferred` (carrier_tracker.h). The bit
  // is the driver's netif_carrier_ok() at that moment, which linkwatch does not delay; the
  // announcement (`carrier`) can come up to a second late (docs/probes-carrier.md). 0: no
  // polling; else kMinPollMs..kMaxPollMs. The poller runs at receiver_rt_priority too.
  int poll_interval_ms = 0;
};

inline constexpr int kMinPollMs = 1;
inline constexpr int kMaxPollMs = 1000;
// What ocslab-agent polls at unless told otherwise (probe param poll_ms, capture
// --carrier-poll-ms): the breakdown needs the live bit wherever reconfigurations come less than
// a second apart, and 5 ms of lag is well under a reconfiguration's outage (docs/probes-carrier.md).
inline constexpr int kDefaultPollMs = 10;

// Why `poll_ms` cannot be a poll interval (0 or kMinPollMs..kMaxPollMs); "" when it can.
std::string poll_interval_problem(long long poll_ms);

// Two threads: one that only waits in poll + recvmsg and stamps each message with both clocks
// right after recvmsg returns, and one that parses, reconciles counters, re-dumps after an
// overrun and calls the sink, so a slow sink delays samples but never their timestamps. With
// poll_interval_ms a third asks for the live bit on its own socket, stamps each reply as the
// receiver does, and hands it to the same worker.
class CarrierProbe : public Probe {
 public:
  explicit CarrierProbe(CarrierProbeOptions options);
  ~CarrierProbe() override;  // stops
  CarrierProbe(const CarrierProbe&) = delete;
  CarrierProbe& operator=(const CarrierProbe&) = delete;

  std::string name() const override { return "carrier"; }
  // Binds RTMGRP_LINK (inside options.netns), then dumps the links once: the initial state is
  // emitted as samples. Unavailable, naming the interface and namespace, when the namespace or
  // an interface does not exist, or naming the option when poll_interval_ms is out of range.
  ProbeStatus start(SampleSink sink) override;
  void stop() override;

  // Event socket overruns (ENOBUFS) so far, also after stop(); each one was followed by a
  // re-dump.
  uint64_t overruns() const;

 private:
  struct State;
  CarrierProbeOptions options_;
  std::unique_ptr<State> state_;
  bool started_ = false;
  uint64_t overruns_after_stop_ = 0;
};

}  // namespace ocslab::probes
