#include "ocslab/analysis/qp_timers.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "ocslab/analysis/summary.h"
#include "ocslab/common/error.h"

namespace ocslab::analysis {

namespace {

// 4.096 us = 4096 ns = 2^12 ns: the unit of the local ACK timeout (rdma-core's ibv_modify_qp(3):
// "4.096 usec * 2^timeout"; the IBA spec's C9-140..C9-142, which Linux's ib_srp cites when it
// computes 4096 << timeout ns), so T is a whole number of ns for every timeout.
constexpr int kAckTimeoutUnitLog2Ns = 12;

void check_range(int value, int max, const char* what) {
  if (value < 0 || value > max) throw Error(fmt::format("{} must be in [0, {}], got {}", what, max, value));
}

std::string qp_ms(int64_t ns) { return fmt::format("{:.3f}", static_cast<double>(ns) / 1e6); }

}  // namespace

std::optional<int64_t> ack_timeout_ns(int timeout) {
  check_range(timeout, kMaxQpTimeout, "timeout");
  if (timeout == 0) return std::nullopt;
  return int64_t{1} << (timeout + kAckTimeoutUnitLog2Ns);
}

std::optional<int64_t> survivable_outage_ns(int timeout, int retry_cnt) {
  check_range(retry_cnt, kMaxQpRetryCnt, "retry_cnt");
  auto t = ack_timeout_ns(timeout);
  if (!t) return std::nullopt;
  return *t * retry_cnt;  // at most 7 x 2^43: no overflow
}

std::optional<int64_t> time_to_error_ns(int timeout, int retry_cnt) {
  check_range(retry_cnt, kMaxQpRetryCnt, "retry_cnt");
  auto t = ack_timeout_ns(timeout);
  if (!t) return std::nullopt;
  return *t * (retry_cnt + 1);
}

bool survives_outage(int timeout, int retry_cnt, int64_t outage_ns) {
  auto bound = survivable_outage_ns(timeout, retry_cnt);
  return !bound || outage_ns <= *bound;
}

QpSettings parse_qp_block(const YamlDoc& doc, const YAML::Node& block) {
  if (!block.IsMap()) throw config_error(doc, block, "qp must be a map of timeout, retry_cnt and rnr_retry");
  only_keys(doc, block, {"timeout", "retry_cnt", "rnr_retry"});
  QpSettings s;
  s.timeout = int_in(doc, require(doc, block, "timeout"), 0, kMaxQpTimeout, "qp.timeout");
  s.retry_cnt = int_in(doc, require(doc, block, "retry_cnt"), 0, kMaxQpRetryCnt, "qp.retry_cnt");
  if (block["rnr_retry"]) s.rnr_retry = int_in(doc, block["rnr_retry"], 0, kMaxQpRnrRetry, "qp.rnr_retry");
  return s;
}

QpRecommendation recommend_qp(std::vector<double> outages_ms, double margin) {
  if (outages_ms.empty()) throw Error("no outages to recommend queue-pair settings for");
  if (!(margin >= 1)) throw Error(fmt::format("the margin must be at least 1, got {}", margin));
  std::sort(outages_ms.begin(), outages_ms.end());
  QpRecommendation r;
  r.outages = outages_ms.size();
  r.p99_ms = percentile(outages_ms, 99);
  r.margin = margin;
  r.required_ms = r.p99_ms * margin;
  auto required_ns = static_cast<int64_t>(std::ceil(std::max(0.0, r.required_ms) * 1e6));
  r.nccl_defaults_survive = survives_outage(kNcclDefaultTimeout, kNcclDefaultRetryCnt, required_ns);
  for (int t = kMinRecommendedTimeout; t <= kMaxQpTimeout; ++t) {
    if (!survives_outage(t, kMaxQpRetryCnt, required_ns)) continue;
    int retry = 1;  // retry_cnt 0 survives no outage at all
    while (!survives_outage(t, retry, required_ns)) ++retry;
    r.settings = {t, retry, kMaxQpRnrRetry};
    r.survives_ns = *survivable_outage_ns(t, retry);
    r.error_ns = *time_to_error_ns(t, retry);
    return r;
  }
  throw Error(
      fmt::format("an outage of {} ms (p99 {} ms x margin {}) is longer than any finite ACK timeout "
                  "survives ({} ms); timeout 0 disables the timer",
                  r.required_ms, r.p99_ms, margin, qp_ms(*survivable_outage_ns(kMaxQpTimeout, kMaxQpRetryCnt))));
}

std::vector<double> outages_from_breakdown(const Breakdown& b) {
  std::vector<double> out;
  for (const auto& row : b.rows) {
    if (row.status != Status::kOk || !row.edges[kCarrierUp]) continue;
    std::optional<int64_t> start = row.edges[kLightLost];
    if (row.edges[kCarrierDown] && (!start || *row.edges[kCarrierDown] < *start)) start = row.edges[kCarrierDown];
    if (!start || *start > *row.edges[kCarrierUp]) continue;
    out.push_back(static_cast<double>(*row.edges[kCarrierUp] - *start) / 1e6);
  }
  return out;
}

std::string recommendation_text(const QpRecommendation& r) {
  const QpSettings& s = r.settings;
  auto t = *ack_timeout_ns(s.timeout);
  std::string text = fmt::format(
      "queue-pair settings for {} outage(s): p99 {:.3f} ms x margin {} = {:.3f} ms\n"
      "NCCL_IB_TIMEOUT={} NCCL_IB_RETRY_CNT={}\n"
      "verbs (ibv_modify_qp RTR->RTS): timeout={} retry_cnt={} rnr_retry={}\n"
      "survives outages up to {} ms ({} x {} ms ACK timeout); a dead link errors {} ms after the first "
      "unacknowledged send\n",
      r.outages, r.p99_ms, r.margin, r.required_ms, s.timeout, s.retry_cnt, s.timeout, s.retry_cnt, s.rnr_retry,
      qp_ms(r.survives_ns), s.retry_cnt, qp_ms(t), qp_ms(r.error_ns));
  text += fmt::format("NCCL's defaults (NCCL_IB_TIMEOUT={} NCCL_IB_RETRY_CNT={}) survive up to {} ms: {}\n",
                      kNcclDefaultTimeout, kNcclDefaultRetryCnt,
                      qp_ms(*survivable_outage_ns(kNcclDefaultTimeout, kNcclDefaultRetryCnt)),
                      r.nccl_defaults_survive ? "enough" : "NOT enough");
  return text;
}

}  // namespace ocslab::analysis
