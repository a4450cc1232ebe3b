// The RDMA probe: one RC queue pair between two hosts sending a small message at a fixed
// interval and recording every completion, so a switch reconfiguration shows up as an RDMA
// outage with its last good completion before, the first one after (resume) and whether the
// QP survived (its retry settings covered the outage) or went to error and was re-created.
// Queue-pair numbers are exchanged over TCP on the management network, never over the link
// under test, on a connection authenticated with the run's secret (rdma_control.h).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>

#include "ocslab/probes/probe.h"

namespace ocslab::probes {

// The server's default TCP port for the QP exchange. Not perftest's 18515: ib_write_bw and the
// other perftest tools listen there by default, and a lab often runs them next to the probe.
inline constexpr int kRdmaControlPort = 18520;

struct RdmaProbeConfig {
  enum class Role { kServer, kClient };
  Role role = Role::kClient;
  std::string interface;  // netdev of the RDMA port ("eth1"): picks the device and its RoCE v2 GID
  std::string device;     // optional: the RDMA device ("rxe_eth1"); must serve `interface`
  int port = 1;
  // Server: the TCP address to listen on for the QP exchange (the management address, port
  // kRdmaControlPort by convention; the agent has no all-addresses default).
  // Client: the server's management address ("h2:18520").
  std::string control;
  bool any_address = false;  // server: allow a wildcard control address (0.0.0.0: every interface)
  // Both sides: the run's control secret (32 to 256 hex digits; the runner generates 64 per run
  // and hands it over the agent session). The client presents it first; the server drops a
  // connection without it. Required: start() refuses without one. Never logged.
  std::string secret;
  // The control connection's limits: a line is at most kRdmaControlMaxLine bytes and complete
  // within this deadline (a new connection: the secret and the first QP line, from accept).
  std::chrono::milliseconds control_deadline{5000};
  std::chrono::microseconds interval{1000};  // one SEND per interval (client)
  uint8_t timeout = 14;                      // local ACK timeout: 4.096 us * 2^timeout
  uint8_t retry_cnt = 7;                     // 3 bits; Soft-RoCE treats 7 as infinite, hardware does not
  uint8_t rnr_retry = 7;                     // 7 = infinite
  double outage_factor = 5;                  // a gap of more than factor x interval between completions is an outage
  uint32_t message_bytes = 64;
  std::string host;   // Sample.host
  std::string label;  // when set, the subject ends in "@<label>" (e.g. the peer host): one probe per peer
  // The port's hardware counters (RdmaCounters): read at start, every `counter_period` (0: only
  // at the events), when an outage is noticed, at its resume, at a QP error and at stop.
  std::chrono::milliseconds counter_period{100};
  std::string sysfs_root = "/sys/class/infiniband";
};

// Samples (source "rdma", subject "<device>/<interface>", or "<device>/<interface>@<label>"):
//   completion   value = ibv_wc_status (0 success), unit "wc_status"; every completion: the
//                client's SENDs, the server's RECVs
//   stalled      t = the last good completion before an outage, value = 1 (emitted with the
//                resume, or at stop when the outage is still going on); before any good
//                completion the outage starts at the first SEND (pairing, on a server), or at
//                the probe's start when pairing failed first (the peer's link was dark)
//   resumed      t = the first good completion after it, value = the gap in ms, unit "ms"
//   qp_error     value = the ibv_wc_status that put the QP in error
//   qp_recreated value = the new QP number: every pair after the first (both sides re-create and
//                re-exchange, on the same control connection or a fresh one)
//   setup_error  value = 0; the reason is logged (peer unreachable, ...): the probe retries
//   hw_base.<c>  value = hardware counter hw_counters/<c> at its first read (start), unit "count"
//   hw.<c>       value = its change since the previous read, emitted only when it changed
//   pma_base.<c>, pma.<c>   the same for the IB PMA counters/<c>
//   (t = right after the read; a port without counters emits none and says so in the method)
class RdmaProbe : public Probe {
 public:
  explicit RdmaProbe(RdmaProbeConfig config);
  ~RdmaProbe() override;
  std::string name() const override { return "rdma"; }
  ProbeStatus start(SampleSink sink) override;
  void stop() override;

  // Counters for tests and status reports (read after stop(), or racy-but-monotonic while running).
  uint64_t completions() const { return completions_; }
  uint64_t errors() const { return errors_; }
  uint64_t recreated() const { return recreated_; }

 private:
  struct Impl;
  struct Loop;  // the probe thread (rdma_probe.cpp)
  RdmaProbeConfig config_;
  std::unique_ptr<Impl> impl_;
  std::thread thread_;
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> completions_{0}, errors_{0}, recreated_{0};
};

}  // namespace ocslab::probes
