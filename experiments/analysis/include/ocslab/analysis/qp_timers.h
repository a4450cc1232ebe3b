// The InfiniBand RC transport's retransmission arithmetic (local ACK timeout, retry count): which
// queue-pair settings survive a link outage of a given length, and the smallest settings that
// survive a lab's measured outages (`ocslab analyze --recommend-qp`, docs/experiments.md).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ocslab/analysis/breakdown.h"
#include "ocslab/common/config.h"

namespace ocslab::analysis {

// The verbs attributes' ranges (struct ibv_qp_attr, rdma-core's ibv_modify_qp(3)): `timeout` is a
// 5-bit field, `retry_cnt` and `rnr_retry` 3-bit ones; rnr_retry 7 means "retry forever".
constexpr int kMaxQpTimeout = 31;
constexpr int kMaxQpRetryCnt = 7;
constexpr int kMaxQpRnrRetry = 7;

// NCCL's defaults for NCCL_IB_TIMEOUT and NCCL_IB_RETRY_CNT (NCCL's environment-variable
// documentation, env.html, as issue 45 quotes them).
constexpr int kNcclDefaultTimeout = 20;
constexpr int kNcclDefaultRetryCnt = 7;

// The local ACK timeout T = 4.096 us x 2^timeout, in ns (exactly 2^(timeout + 12)); nullopt for
// timeout 0, which disables the timer (the QP waits for an ACK forever). Throws Error outside
// 0..31.
std::optional<int64_t> ack_timeout_ns(int timeout);

// The bound used throughout: a busy RC queue pair sends a packet the moment the link goes dark,
// then retransmits after each expiry of its ACK timer, retry_cnt times, and moves to the error
// state (IBV_WC_RETRY_EXC_ERR) on the expiry after the last retransmission, i.e. after
// retry_cnt + 1 expiries without an ACK. It survives when its last retransmission, sent
// retry_cnt x T after the outage began, finds the link back: an outage of at most retry_cnt x T.
// nullopt: survives any outage (timeout 0). retry_cnt 0 survives no outage that loses a packet.
std::optional<int64_t> survivable_outage_ns(int timeout, int retry_cnt);
// (retry_cnt + 1) x T: from the first unacknowledged send to the error; nullopt for timeout 0.
std::optional<int64_t> time_to_error_ns(int timeout, int retry_cnt);
bool survives_outage(int timeout, int retry_cnt, int64_t outage_ns);

struct QpSettings {
  int timeout = kNcclDefaultTimeout;
  int retry_cnt = kNcclDefaultRetryCnt;
  int rnr_retry = kMaxQpRnrRetry;
};

// A `qp:` block of a spec: {timeout: 0..31, retry_cnt: 0..7, rnr_retry: 0..7 (default 7)}.
// ConfigError at the offending node's file:line:col for a value out of range, a missing key, an
// unknown key or a block that is not a map.
QpSettings parse_qp_block(const YamlDoc& doc, const YAML::Node& block);

// The margin the p99 outage is multiplied by: the p99 of a few dozen reconfigurations is an
// estimate, and firmware link training varies from one run to the next (3-10 s on the Opus
// testbed), so the settings keep twice the measured p99.
constexpr double kDefaultQpMargin = 2.0;
// The shortest ACK timer recommended (67 ms): shorter timers retransmit on the ordinary queueing
// delays of a loaded RoCE fabric (PFC pauses), which costs bandwidth without surviving more.
constexpr int kMinRecommendedTimeout = 14;

struct QpRecommendation {
  size_t outages = 0;
  double p99_ms = 0, margin = kDefaultQpMargin, required_ms = 0;
  QpSettings settings;
  int64_t survives_ns = 0;  // survivable_outage_ns(settings)
  int64_t error_ns = 0;     // time_to_error_ns(settings)
  bool nccl_defaults_survive = false;
};

// The smallest settings that survive p99(outages_ms) x margin: the shortest timeout (at least
// kMinRecommendedTimeout) whose 7 retries cover it, since a shorter timer retransmits sooner
// after light returns; then the fewest retries at that timeout, since a real failure errors
// sooner. Throws Error with no outages, a margin below 1, or an outage no finite setting survives.
QpRecommendation recommend_qp(std::vector<double> outages_ms, double margin = kDefaultQpMargin);

// The outage a queue pair whose circuit comes back sees, per `ok` row of a breakdown, in ms: from
// the first of light_lost and carrier_down to carrier_up. Rows without carrier_up or without
// either start edge (a port coming up from dark) are not outages and are left out.
std::vector<double> outages_from_breakdown(const Breakdown& b);

// The recommendation as a job sets it: the NCCL environment line, the verbs attributes, the
// bounds, and whether NCCL's defaults would have survived.
std::string recommendation_text(const QpRecommendation& r);

}  // namespace ocslab::analysis
