// The RC transport's timer arithmetic, the queue-pair recommendation and the `qp:` block's
// errors, against values worked out by hand (T = 4.096 us x 2^timeout = 2^(timeout + 12) ns).
#include <catch2/catch.hpp>

#include <cstdint>
#include <vector>

#include "ocslab/analysis/qp_timers.h"

using namespace ocslab::analysis;
using Catch::Matchers::Contains;

TEST_CASE("the local ACK timeout is 4.096 us x 2^timeout; timeout 0 has no timer", "[qp]") {
  CHECK(ack_timeout_ns(14) == 67'108'864);         // 4.096 us x 16384 = 67.108864 ms
  CHECK(ack_timeout_ns(18) == 1'073'741'824);      // x 262144 = 1.073741824 s
  CHECK(ack_timeout_ns(20) == 4'294'967'296);      // x 1048576 = 4.294967296 s
  CHECK(ack_timeout_ns(25) == 137'438'953'472);    // x 33554432 = 137.438953472 s
  CHECK(ack_timeout_ns(31) == 8'796'093'022'208);  // x 2^31 = 8796.093022208 s
  CHECK_FALSE(ack_timeout_ns(0).has_value());
  CHECK_THROWS_WITH(ack_timeout_ns(32), "timeout must be in [0, 31], got 32");
  CHECK_THROWS_WITH(ack_timeout_ns(-1), "timeout must be in [0, 31], got -1");
}

TEST_CASE("with retry_cnt 7 a queue pair survives 7 x T and errors after 8 x T", "[qp]") {
  // timeout 14: 7 x 67.108864 ms = 469.762048 ms; 8 x = 536.870912 ms
  CHECK(survivable_outage_ns(14, 7) == 469'762'048);
  CHECK(time_to_error_ns(14, 7) == 536'870'912);
  // timeout 18: 7 x 1.073741824 s = 7.516192768 s; 8 x = 8.589934592 s
  CHECK(survivable_outage_ns(18, 7) == 7'516'192'768);
  CHECK(time_to_error_ns(18, 7) == 8'589'934'592);
  // timeout 20 (NCCL's default): 7 x 4.294967296 s = 30.064771072 s; 8 x = 34.359738368 s
  CHECK(survivable_outage_ns(20, 7) == 30'064'771'072);
  CHECK(time_to_error_ns(20, 7) == 34'359'738'368);
  // timeout 25 (Opus): 7 x 137.438953472 s = 962.072674304 s; 8 x = 1099.511627776 s
  CHECK(survivable_outage_ns(25, 7) == 962'072'674'304);
  CHECK(time_to_error_ns(25, 7) == 1'099'511'627'776);

  // NCCL's defaults: the boundary is 30.064771072 s, inclusive.
  CHECK(survives_outage(kNcclDefaultTimeout, kNcclDefaultRetryCnt, 30'064'771'072));
  CHECK_FALSE(survives_outage(kNcclDefaultTimeout, kNcclDefaultRetryCnt, 30'064'771'073));
  // An OCS reconfiguration with firmware link training (3-10 s) outlives timeout 18's 7.5 s.
  CHECK(survives_outage(18, 7, 7'000'000'000));
  CHECK_FALSE(survives_outage(18, 7, 10'000'000'000));
}

TEST_CASE("retry_cnt 0 survives no outage; timeout 0 survives any", "[qp]") {
  CHECK(survivable_outage_ns(14, 0) == 0);
  CHECK(time_to_error_ns(14, 0) == 67'108'864);  // the first expiry errors
  CHECK(survives_outage(14, 0, 0));
  CHECK_FALSE(survives_outage(14, 0, 1));
  CHECK_FALSE(survivable_outage_ns(0, 7).has_value());
  CHECK_FALSE(time_to_error_ns(0, 0).has_value());
  CHECK(survives_outage(0, 0, INT64_MAX));
  CHECK_THROWS_WITH(survivable_outage_ns(14, 8), "retry_cnt must be in [0, 7], got 8");
}

TEST_CASE("the recommendation: the shortest timeout whose retries cover p99 x margin, then the fewest retries",
          "[qp]") {
  // Outages 30, 60, ..., 3000 ms (100 of them). p99 (linear, like numpy): position 0.99 x 99 =
  // 98.01 between 2970 and 3000 -> 2970.3 ms; x 2 = 5940.6 ms. Timeout 17 (T = 536.870912 ms)
  // covers 7 x T = 3758.096 ms: too short. Timeout 18 (T = 1073.741824 ms) covers 7516.193 ms;
  // 5 x T = 5368.709 ms < 5940.6 <= 6 x T = 6442.451 ms: retry_cnt 6, erroring at 7 x T.
  std::vector<double> outages;
  for (int i = 1; i <= 100; ++i) outages.push_back(30.0 * i);
  QpRecommendation r = recommend_qp(outages);
  CHECK(r.outages == 100);
  CHECK(r.p99_ms == Approx(2970.3));
  CHECK(r.required_ms == Approx(5940.6));
  CHECK(r.settings.timeout == 18);
  CHECK(r.settings.retry_cnt == 6);
  CHECK(r.settings.rnr_retry == 7);
  CHECK(r.survives_ns == 6'442'450'944);
  CHECK(r.error_ns == 7'516'192'768);
  CHECK(r.nccl_defaults_survive);
  std::string text = recommendation_text(r);
  CHECK_THAT(text, Contains("NCCL_IB_TIMEOUT=18 NCCL_IB_RETRY_CNT=6\n"));
  CHECK_THAT(text, Contains("timeout=18 retry_cnt=6 rnr_retry=7"));
  CHECK_THAT(text, Contains("survives outages up to 6442.451 ms (6 x 1073.742 ms ACK timeout)"));
  CHECK_THAT(text, Contains("survive up to 30064.771 ms: enough"));
}

TEST_CASE("the recommendation beyond NCCL's defaults, at the floor, and past every finite timer", "[qp]") {
  // 20 s outages x 2 = 40 s > 30.065 s (NCCL's defaults). Timeout 21 (T = 8589.934592 ms):
  // 4 x T = 34359.738 ms < 40000 <= 5 x T = 42949.673 ms.
  QpRecommendation r = recommend_qp(std::vector<double>(10, 20'000.0));
  CHECK(r.settings.timeout == 21);
  CHECK(r.settings.retry_cnt == 5);
  CHECK_FALSE(r.nccl_defaults_survive);
  CHECK_THAT(recommendation_text(r), Contains("NOT enough"));

  // 1, 2, 3 ms: p99 = 2.98 ms, x 1.5 = 4.47 ms; one try of the floor's 67.1 ms covers it.
  r = recommend_qp({3.0, 1.0, 2.0}, 1.5);
  CHECK(r.p99_ms == Approx(2.98));
  CHECK(r.settings.timeout == kMinRecommendedTimeout);
  CHECK(r.settings.retry_cnt == 1);

  // 7 x 2^43 ns = 61572651.155 ms is the longest any finite setting survives.
  CHECK_THROWS_WITH(recommend_qp({40'000'000.0}), Contains("longer than any finite ACK timeout survives"));
  CHECK_THROWS_WITH(recommend_qp({}), "no outages to recommend queue-pair settings for");
  CHECK_THROWS_WITH(recommend_qp({1.0}, 0.5), "the margin must be at least 1, got 0.5");
}

TEST_CASE("outages from a breakdown: ok rows, first of light lost and carrier down, to carrier up", "[qp]") {
  Breakdown b;
  auto row = [&](Status s, std::optional<int64_t> light_lost, std::optional<int64_t> carrier_down,
                 std::optional<int64_t> carrier_up) {
    BreakdownRow r;
    r.status = s;
    r.edges[kLightLost] = light_lost;
    r.edges[kCarrierDown] = carrier_down;
    r.edges[kCarrierUp] = carrier_up;
    b.rows.push_back(r);
  };
  row(Status::kOk, 1'000'000, 3'000'000, 51'000'000);            // light lost first: 50 ms
  row(Status::kOk, std::nullopt, 2'000'000, 22'000'000);         // carrier only: 20 ms
  row(Status::kOk, 9'000'000, 4'000'000, 14'000'000);            // carrier down first: 10 ms
  row(Status::kOk, std::nullopt, std::nullopt, 5'000'000);       // came up from dark: no outage
  row(Status::kIncomplete, 1'000'000, 2'000'000, std::nullopt);  // never came back
  row(Status::kFailed, 1'000'000, 2'000'000, 900'000'000);       // not ok
  CHECK(outages_from_breakdown(b) == std::vector<double>{50.0, 20.0, 10.0});
}

TEST_CASE("a qp: block: ranges, missing and unknown keys name file:line:col", "[qp][config]") {
  auto parse = [](const std::string& text) {
    ocslab::YamlDoc doc = ocslab::load_yaml_string(text, "survival.yaml");
    return parse_qp_block(doc, doc.root["qp"]);
  };
  QpSettings s = parse("qp:\n  timeout: 18\n  retry_cnt: 6\n");
  CHECK(s.timeout == 18);
  CHECK(s.retry_cnt == 6);
  CHECK(s.rnr_retry == 7);
  CHECK(parse("qp: {timeout: 0, retry_cnt: 0, rnr_retry: 0}\n").rnr_retry == 0);
  CHECK_THROWS_WITH(parse("qp:\n  timeout: 32\n  retry_cnt: 7\n"),
                    "survival.yaml:2:12: qp.timeout must be in [0, 31], got 32");
  CHECK_THROWS_WITH(parse("qp:\n  timeout: -1\n  retry_cnt: 7\n"),
                    "survival.yaml:2:12: qp.timeout must be in [0, 31], got -1");
  CHECK_THROWS_WITH(parse("qp:\n  timeout: 20\n  retry_cnt: 8\n"),
                    "survival.yaml:3:14: qp.retry_cnt must be in [0, 7], got 8");
  CHECK_THROWS_WITH(parse("qp: {timeout: 20, retry_cnt: 7, rnr_retry: 9}\n"),
                    "survival.yaml:1:44: qp.rnr_retry must be in [0, 7], got 9");
  CHECK_THROWS_WITH(parse("qp:\n  timeout: fast\n  retry_cnt: 7\n"), Contains("survival.yaml:2:12:"));
  CHECK_THROWS_WITH(parse("qp:\n  retry_cnt: 7\n"), Contains("survival.yaml:2:3:"));
  CHECK_THROWS_WITH(parse("qp:\n  retry_cnt: 7\n"), Contains("timeout"));
  CHECK_THROWS_WITH(parse("qp:\n  timeout: 20\n  retry_cnt: 7\n  retries: 3\n"),
                    Contains("survival.yaml:4:3: unknown key 'retries'"));
  CHECK_THROWS_WITH(parse("qp: 20\n"), "survival.yaml:1:5: qp must be a map of timeout, retry_cnt and rnr_retry");
}
