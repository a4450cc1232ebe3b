// The breakdown and summary of synthetic timelines whose edges are known to the nanosecond.
#include <catch2/catch.hpp>

#include <fmt/format.h>
#include <map>
#include <sstream>
#include <string>

#include "ocslab/analysis/breakdown.h"
#include "ocslab/analysis/summary.h"
#include "ocslab/analysis/timeline.h"

using namespace ocslab::analysis;

namespace {

constexpr int64_t kMs = 1'000'000;
constexpr int64_t kS = 1'000'000'000;
constexpr int64_t kT0 = 1'763'800'000'000'000'000;  // some time in 2025

// A 9-column runner timeline, built row by row.
struct RunnerTimeline {
  std::string text = "t_ns,host,source,subject,signal,value,unit,run,iteration\n";
  void row(int64_t t, const std::string& host, const std::string& source, const std::string& subject,
           const std::string& signal, const std::string& value, int iteration, const std::string& unit = "bool") {
    text += fmt::format("{},{},{},{},{},{},{},r1,{}\n", t, host, source, subject, signal, value, unit, iteration);
  }
};

// A 7-column `ocslab-agent capture` file.
struct Capture {
  std::string text = "t_ns,host,source,subject,signal,value,unit\n";
  void row(int64_t t, const std::string& host, const std::string& source, const std::string& subject,
           const std::string& signal, const std::string& value, const std::string& unit = "bool") {
    text += fmt::format("{},{},{},{},{},{},{}\n", t, host, source, subject, signal, value, unit);
  }
};

Breakdown analyze(const std::string& text, BreakdownOptions o = {}) {
  return compute_breakdown(parse_timeline(text, "t.csv"), o);
}

std::string ms(const BreakdownRow& r, Duration d) {
  auto v = r.duration_ns(d);
  return v ? format_ms(*v) : "";
}

// One full reconfiguration at `t` for h1/eth1 with every layer, and h2/eth1 untouched.
void full_iteration(RunnerTimeline& tl, int64_t t, int it, bool ack) {
  tl.row(t, "switch", "ocs", "map-" + std::to_string(it), "command", "1", it);
  tl.row(t + 1 * kMs, "h1", "rdma", "rxe_eth1/eth1@h2", "stalled", "1", it);
  tl.row(t + 2 * kMs, "h1", "emulator", "eth1", "light", "0", it);
  tl.row(t + 3 * kMs, "h1", "emulator", "eth1", "link", "0", it);
  tl.row(t + 4 * kMs, "h1", "carrier", "eth1", "carrier", "0", it);
  tl.row(t + 5 * kMs, "switch", "ocs", "map-" + std::to_string(it), "ack", ack ? "1" : "0", it);
  for (int k = 0; k < 5; ++k)
    tl.row(t + 10 * kMs + k, "h1", "rdma", "rxe_eth1/eth1@h2", "completion", "0", it, "wc_status");
  tl.row(t + 30 * kMs, "h1", "emulator", "eth1", "light", "1", it);
  tl.row(t + 130 * kMs, "h1", "emulator", "eth1", "link", "1", it);
  tl.row(t + 133 * kMs + 500'000, "h1", "carrier", "eth1", "carrier", "1", it);
  tl.row(t + 150 * kMs, "h1", "rdma", "rxe_eth1/eth1@h2", "resumed", "149", it, "ms");
  tl.row(t + 160 * kMs, "h2", "carrier", "eth1", "carrier", "1", it);
}

}  // namespace

TEST_CASE("a runner timeline: every edge and duration of an ok row, an unaffected and a failed one") {
  RunnerTimeline tl;
  tl.row(kT0 - 5 * kS, "h1", "carrier", "eth1", "carrier", "1", 0);  // warm-up: no rows
  full_iteration(tl, kT0, 1, true);
  full_iteration(tl, kT0 + 10 * kS, 2, false);
  Breakdown b = analyze(tl.text);
  CHECK(b.iterations_from == "iteration column");
  CHECK(b.iterations == 2);
  REQUIRE(b.rows.size() == 4);

  const BreakdownRow& r = b.rows[0];
  CHECK(r.run == "r1");
  CHECK(r.iteration == 1);
  CHECK(r.mapping == "map-1");
  CHECK(r.host == "h1");
  CHECK(r.interface == "eth1");
  CHECK(r.status == Status::kOk);
  CHECK(r.edges[kIssued] == kT0);
  CHECK(r.edges[kAcked] == kT0 + 5 * kMs);
  CHECK(r.edges[kLightLost] == kT0 + 2 * kMs);
  CHECK(r.edges[kLightBack] == kT0 + 30 * kMs);
  CHECK(r.edges[kFirmwareDown] == kT0 + 3 * kMs);
  CHECK(r.edges[kFirmwareUp] == kT0 + 130 * kMs);
  CHECK(r.edges[kCarrierDown] == kT0 + 4 * kMs);
  CHECK(r.edges[kCarrierUp] == kT0 + 133 * kMs + 500'000);
  CHECK(r.edges[kRdmaStalled] == kT0 + 1 * kMs);
  CHECK(r.edges[kRdmaResumed] == kT0 + 150 * kMs);
  CHECK(ms(r, kControl) == "5.000000");
  CHECK(ms(r, kSwitching) == "30.000000");
  CHECK(ms(r, kDark) == "28.000000");
  CHECK(ms(r, kFirmware) == "100.000000");
  CHECK(ms(r, kCarrier) == "103.500000");
  CHECK(ms(r, kKernel) == "3.500000");
  CHECK(ms(r, kRdma) == "16.500000");
  CHECK(ms(r, kOutage) == "149.000000");
  CHECK(ms(r, kTotal) == "150.000000");

  const BreakdownRow& h2 = b.rows[1];
  CHECK(h2.host == "h2");
  CHECK(h2.status == Status::kUnaffected);
  CHECK_FALSE(h2.edges[kCarrierDown]);
  CHECK(h2.edges[kIssued] == kT0);
  CHECK_FALSE(h2.duration_ns(kTotal));  // no carrier_up edge: nothing went down

  // Iteration 2 was refused by the switch: failed on every host, edges still recorded.
  CHECK(b.rows[2].iteration == 2);
  CHECK(b.rows[2].status == Status::kFailed);
  CHECK(b.rows[3].status == Status::kFailed);
  CHECK_FALSE(b.rows[2].edges[kAcked]);
  CHECK(b.rows[2].edges[kCarrierUp] == kT0 + 10 * kS + 133 * kMs + 500'000);

  std::ostringstream csv;
  write_breakdown_csv(b, csv);
  std::string first = csv.str().substr(0, csv.str().find('\n'));
  CHECK(first ==
        "run,iteration,mapping,host,interface,status,issued_ns,acked_ns,light_lost_ns,light_back_ns,"
        "firmware_down_ns,firmware_up_ns,carrier_down_ns,carrier_up_ns,rdma_stalled_ns,rdma_resumed_ns,"
        "carrier_bit_down_ns,carrier_bit_up_ns,control_ms,switching_ms,dark_ms,firmware_ms,carrier_ms,kernel_ms,rdma_"
        "ms,outage_ms,total_ms");
  std::string second = csv.str().substr(first.size() + 1);
  second = second.substr(0, second.find('\n'));
  CHECK(second == fmt::format("r1,1,map-1,h1,eth1,ok,{},{},{},{},{},{},{},{},{},{},,,"
                              "5.000000,30.000000,28.000000,100.000000,103.500000,3.500000,16.500000,149.000000,"
                              "150.000000",
                              kT0, kT0 + 5 * kMs, kT0 + 2 * kMs, kT0 + 30 * kMs, kT0 + 3 * kMs, kT0 + 130 * kMs,
                              kT0 + 4 * kMs, kT0 + 133 * kMs + 500'000, kT0 + kMs, kT0 + 150 * kMs));
  CHECK(csv.str().find(fmt::format("r1,1,map-1,h2,eth1,unaffected,{},{},,,,,,,,,,,5.000000,,,,,,,,\n", kT0,
                                   kT0 + 5 * kMs)) != std::string::npos);
}

TEST_CASE("a layer that goes down and does not come back within the iteration is incomplete") {
  RunnerTimeline tl;
  tl.row(kT0, "switch", "ocs", "m", "command", "1", 1);
  tl.row(kT0 + kMs, "switch", "ocs", "m", "ack", "1", 1);
  tl.row(kT0 + 2 * kMs, "h1", "carrier", "eth1", "carrier", "0", 1);
  tl.row(kT0 + 3 * kMs, "h1", "rdma", "rxe0/eth1@h2", "stalled", "1", 1);
  tl.row(kT0 + 4 * kMs, "h1", "rdma", "rxe0/eth1@h2", "resumed", "1", 1);
  tl.row(kT0 + 5 * kS, "h1", "carrier", "eth1", "carrier", "1", 2);  // too late: the next iteration
  Breakdown b = analyze(tl.text);
  REQUIRE(b.rows.size() == 2);
  CHECK(b.rows[0].status == Status::kIncomplete);
  CHECK(b.rows[0].edges[kCarrierDown] == kT0 + 2 * kMs);
  CHECK_FALSE(b.rows[0].edges[kCarrierUp]);
  CHECK(ms(b.rows[0], kOutage) == "1.000000");
  CHECK(ms(b.rows[0], kTotal) == "4.000000");  // rdma resumed: total is resumed - issued
  CHECK_FALSE(b.rows[0].duration_ns(kCarrier));
  // Iteration 2 has no command row: the timeline has commands, so no ack means failed.
  CHECK(b.rows[1].iteration == 2);
  CHECK(b.rows[1].status == Status::kFailed);
}

TEST_CASE("resumed before stalled, and a second outage, do not count: first stalled, first resumed after it") {
  RunnerTimeline tl;
  tl.row(kT0, "switch", "ocs", "m", "command", "1", 1);
  tl.row(kT0 + 1, "switch", "ocs", "m", "ack", "1", 1);
  tl.row(kT0 + 2, "h1", "rdma", "rxe0/eth1@h2", "resumed", "5", 1);
  tl.row(kT0 + 10, "h1", "rdma", "rxe0/eth1@h2", "stalled", "1", 1);
  tl.row(kT0 + 20, "h1", "rdma", "rxe0/eth1@h3", "resumed", "1", 1);
  tl.row(kT0 + 30, "h1", "rdma", "rxe0/eth1@h2", "stalled", "1", 1);
  tl.row(kT0 + 40, "h1", "rdma", "rxe0/eth1@h2", "resumed", "1", 1);
  Breakdown b = analyze(tl.text);
  REQUIRE(b.rows.size() == 1);  // both peers reduce to h1/eth1
  CHECK(b.rows[0].edges[kRdmaStalled] == kT0 + 10);
  CHECK(b.rows[0].edges[kRdmaResumed] == kT0 + 20);
  CHECK(b.rows[0].status == Status::kOk);
  CHECK(ms(b.rows[0], kTotal) == "0.000020");
}

TEST_CASE("an agent capture without iteration or commands is cut at layers going down > 1 s apart") {
  Capture c;
  c.row(kT0, "h1", "carrier", "veth0", "carrier", "1");
  c.row(kT0 + 1, "h1", "carrier", "veth0", "carrier_up_count", "3", "count");
  c.row(kT0 + 2 * kS, "h1", "carrier", "veth0", "carrier", "0");
  c.row(kT0 + 3 * kS, "h1", "carrier", "veth0", "carrier", "1");
  // A flap within a second of the start: the same reconfiguration, first edges kept.
  c.row(kT0 + 2 * kS + 900 * kMs, "h1", "carrier", "veth0", "carrier", "0");
  c.row(kT0 + 3 * kS + 100 * kMs, "h1", "carrier", "veth0", "carrier", "1");
  c.row(kT0 + 10 * kS, "h1", "carrier", "veth0", "carrier", "0");
  c.row(kT0 + 10 * kS + 1, "h2", "carrier", "veth1", "carrier", "0");  // another interface, same event
  c.row(kT0 + 11 * kS, "h1", "carrier", "veth0", "carrier", "1");
  c.row(kT0 + 11 * kS + 7, "h2", "carrier", "veth1", "carrier", "1");
  Breakdown b = analyze(c.text);
  CHECK(b.iterations_from == "layer edges");
  CHECK(b.iterations == 2);
  REQUIRE(b.rows.size() == 4);
  const auto& r1 = b.rows[0];
  CHECK(r1.run.empty());
  CHECK(r1.mapping.empty());
  CHECK(r1.iteration == 1);
  CHECK(r1.host == "h1");
  CHECK(r1.status == Status::kOk);
  CHECK_FALSE(r1.edges[kIssued]);
  CHECK(r1.edges[kCarrierDown] == kT0 + 2 * kS);
  CHECK(r1.edges[kCarrierUp] == kT0 + 3 * kS);
  CHECK_FALSE(r1.duration_ns(kTotal));
  // h2/veth1 never went down in the first: unaffected, not failed (no commands to ack).
  CHECK(b.rows[1].host == "h2");
  CHECK(b.rows[1].status == Status::kUnaffected);
  CHECK(b.rows[2].iteration == 2);
  CHECK(b.rows[2].edges[kCarrierDown] == kT0 + 10 * kS);
  CHECK(b.rows[3].edges[kCarrierUp] == kT0 + 11 * kS + 7);
  CHECK(b.rows[3].status == Status::kOk);
}

TEST_CASE("a capture with ocs commands is cut 200 ms before each command") {
  Capture c;
  c.row(kT0 - 300 * kMs, "h1", "carrier", "eth1", "carrier", "0");  // before iteration 1: dropped
  c.row(kT0 - 150 * kMs, "h1", "carrier", "eth1", "carrier", "1");
  c.row(kT0 - 100 * kMs, "h1", "carrier", "eth1", "carrier", "0");  // in iteration 1's window
  c.row(kT0, "switch", "ocs", "\"a,b \"\"quoted\"\"\"", "command", "1");
  c.row(kT0 + 2 * kMs, "switch", "ocs", "x", "ack", "1");
  c.row(kT0 + 50 * kMs, "h1", "carrier", "eth1", "carrier", "1");
  c.row(kT0 + 1 * kS - 201 * kMs, "h1", "carrier", "eth1", "carrier", "0");  // still iteration 1
  c.row(kT0 + 1 * kS, "switch", "ocs", "m2", "command", "1");
  c.row(kT0 + 1 * kS + 1 * kMs, "switch", "ocs", "m2", "ack", "1");
  c.row(kT0 + 1 * kS + 300 * kMs, "h1", "carrier", "eth1", "carrier", "1");
  Breakdown b = analyze(c.text);
  CHECK(b.iterations_from == "ocs commands");
  REQUIRE(b.rows.size() == 2);
  CHECK(b.rows[0].mapping == "a,b \"quoted\"");
  CHECK(b.rows[0].edges[kCarrierDown] == kT0 - 100 * kMs);
  CHECK(b.rows[0].edges[kCarrierUp] == kT0 + 50 * kMs);
  CHECK(ms(b.rows[0], kTotal) == "50.000000");
  CHECK(ms(b.rows[0], kControl) == "2.000000");
  CHECK(b.rows[0].status == Status::kOk);
  CHECK(b.rows[1].mapping == "m2");
  CHECK_FALSE(b.rows[1].edges[kCarrierDown]);  // the 0 at +799 ms is iteration 1's
  CHECK(b.rows[1].status == Status::kUnaffected);
  std::ostringstream csv;
  write_breakdown_csv(b, csv);
  CHECK(csv.str().find(",1,\"a,b \"\"quoted\"\"\",h1,eth1,ok,") != std::string::npos);
}

TEST_CASE("rx power counts as dark below --dark-dbm; ground-truth light is preferred when present") {
  RunnerTimeline tl;
  tl.row(kT0, "switch", "ocs", "m", "command", "1", 1);
  tl.row(kT0 + 1, "switch", "ocs", "m", "ack", "1", 1);
  tl.row(kT0 + 10 * kMs, "h1", "rx_power", "eth1", "rx_power_dbm", "-2.5", 1, "dBm");
  tl.row(kT0 + 20 * kMs, "h1", "rx_power", "eth1", "rx_power_dbm", "-40", 1, "dBm");
  tl.row(kT0 + 30 * kMs, "h1", "rx_power", "eth1", "rx_power_dbm", "-29.9", 1, "dBm");
  // h2 has both: the emulator's light wins.
  tl.row(kT0 + 11 * kMs, "h2", "rx_power", "eth1", "rx_power_dbm", "-40", 1, "dBm");
  tl.row(kT0 + 12 * kMs, "h2", "emulator", "eth1", "light", "0", 1);
  tl.row(kT0 + 40 * kMs, "h2", "rx_power", "eth1", "rx_power_dbm", "-3", 1, "dBm");
  tl.row(kT0 + 45 * kMs, "h2", "emulator", "eth1", "light", "1", 1);
  Breakdown b = analyze(tl.text);
  REQUIRE(b.rows.size() == 2);
  CHECK(b.rows[0].edges[kLightLost] == kT0 + 20 * kMs);
  CHECK(b.rows[0].edges[kLightBack] == kT0 + 30 * kMs);
  CHECK(ms(b.rows[0], kDark) == "10.000000");
  CHECK(b.rows[1].edges[kLightLost] == kT0 + 12 * kMs);
  CHECK(b.rows[1].edges[kLightBack] == kT0 + 45 * kMs);
  CHECK(ms(b.rows[1], kSwitching) == "45.000000");

  // With a threshold of -50 dBm, -40 is light: nothing went down on h1.
  Breakdown lenient = analyze(tl.text, {.dark_dbm = -50});
  CHECK(lenient.rows[0].status == Status::kUnaffected);
  CHECK_FALSE(lenient.rows[0].edges[kLightLost]);
  // -29.9 is dark below -29.8.
  Breakdown strict = analyze(tl.text, {.dark_dbm = -29.8});
  CHECK(strict.rows[0].edges[kLightLost] == kT0 + 20 * kMs);
  CHECK(strict.rows[0].status == Status::kIncomplete);
}

TEST_CASE("the NIC firmware's link is used only where no emulator link is present") {
  RunnerTimeline tl;
  tl.row(kT0, "switch", "ocs", "m", "command", "1", 1);
  tl.row(kT0 + 1, "switch", "ocs", "m", "ack", "1", 1);
  tl.row(kT0 + 10, "h1", "firmware", "mlx5_0/eth1", "link", "0", 1);
  tl.row(kT0 + 20, "h1", "firmware", "mlx5_0/eth1", "link", "1", 1);
  tl.row(kT0 + 11, "h2", "firmware", "eth1", "link", "0", 1);
  tl.row(kT0 + 12, "h2", "emulator", "eth1", "link", "0", 1);
  tl.row(kT0 + 21, "h2", "firmware", "eth1", "link", "1", 1);
  tl.row(kT0 + 32, "h2", "emulator", "eth1", "link", "1", 1);
  Breakdown b = analyze(tl.text);
  REQUIRE(b.rows.size() == 2);
  CHECK(b.rows[0].edges[kFirmwareDown] == kT0 + 10);
  CHECK(b.rows[0].edges[kFirmwareUp] == kT0 + 20);
  CHECK(b.rows[1].edges[kFirmwareDown] == kT0 + 12);
  CHECK(b.rows[1].edges[kFirmwareUp] == kT0 + 32);
}

TEST_CASE("the switch is not a host; subjects reduce to the interface") {
  CHECK(interface_of("rxe_eth1/eth1@h2") == "eth1");
  CHECK(interface_of("eth1") == "eth1");
  CHECK(interface_of("mlx5_0/ens1f0") == "ens1f0");
  CHECK(interface_of("eth1@h2") == "eth1");
  CHECK(interface_of("a/b/c@x/y") == "c");
  RunnerTimeline tl;
  tl.row(kT0, "switch", "ocs", "m", "command", "1", 1);
  tl.row(kT0 + 1, "switch", "ocs", "m", "ack", "1", 1);
  tl.row(kT0 + 2, "switch", "emulator", "port 17", "light", "0", 1);
  tl.row(kT0 + 3, "h1", "carrier", "eth1", "carrier", "1", 1);
  Breakdown b = analyze(tl.text);
  REQUIRE(b.rows.size() == 1);
  CHECK(b.rows[0].host == "h1");
}

TEST_CASE("format_ms is exact to the nanosecond") {
  CHECK(format_ms(0) == "0.000000");
  CHECK(format_ms(1) == "0.000001");
  CHECK(format_ms(1'500'000) == "1.500000");
  CHECK(format_ms(-1) == "-0.000001");
  CHECK(format_ms(-2'000'001) == "-2.000001");
  CHECK(format_ms(9'223'372'036'854'775'807) == "9223372036854.775807");
}

TEST_CASE("percentiles interpolate like numpy.percentile") {
  // numpy.percentile([1, 2, 3, 4], [50, 90, 99]) == [2.5, 3.7, 3.97]
  std::vector<double> v = {1, 2, 3, 4};
  CHECK(percentile(v, 50) == Approx(2.5));
  CHECK(percentile(v, 90) == Approx(3.7));
  CHECK(percentile(v, 99) == Approx(3.97));
  CHECK(percentile(v, 0) == 1);
  CHECK(percentile(v, 100) == 4);
  CHECK(percentile({7}, 99) == 7);
  // numpy.percentile([10, 20, 40], 90) == 36.0
  CHECK(percentile({10, 20, 40}, 90) == Approx(36.0));
}

TEST_CASE("the summary counts only ok rows that have a value") {
  RunnerTimeline tl;
  // Three ok reconfigurations with control 1, 2, 4 ms; one failed with control 100 ms.
  int64_t control[] = {1, 2, 4};
  for (int i = 0; i < 3; ++i) {
    int64_t t = kT0 + i * 10 * kS;
    tl.row(t, "switch", "ocs", "m", "command", "1", i + 1);
    tl.row(t + control[i] * kMs, "switch", "ocs", "m", "ack", "1", i + 1);
    tl.row(t + 10 * kMs, "h1", "carrier", "eth1", "carrier", "0", i + 1);
    tl.row(t + (20 + 10 * i) * kMs, "h1", "carrier", "eth1", "carrier", "1", i + 1);
  }
  tl.row(kT0 + 40 * kS, "switch", "ocs", "m", "command", "1", 4);
  tl.row(kT0 + 40 * kS + 100 * kMs, "switch", "ocs", "m", "ack", "0", 4);
  Breakdown b = analyze(tl.text);
  auto s = summarize(b);
  REQUIRE(s.size() == kDurationCount);
  CHECK(s[kControl].column == "control_ms");
  CHECK(s[kControl].count == 3);
  CHECK(s[kControl].min == 1);
  CHECK(s[kControl].median == 2);
  CHECK(s[kControl].p90 == Approx(3.6));
  CHECK(s[kControl].p99 == Approx(3.96));
  CHECK(s[kControl].max == 4);
  CHECK(s[kTotal].count == 3);
  CHECK(s[kTotal].min == 20);
  CHECK(s[kTotal].max == 40);
  CHECK(s[kDark].count == 0);

  SummaryContext ctx{"t.csv", 14, 14, -30};
  std::string text = summary_text(b, s, ctx);
  CHECK(text.find("4 host/interface rows: 3 ok, 1 failed, 0 unaffected, 0 incomplete") != std::string::npos);
  CHECK(text.find("control_ms         3        1.000        2.000        3.600        3.960        4.000") !=
        std::string::npos);
  CHECK(text.find("dark_ms            0            -") != std::string::npos);
  auto j = summary_json(b, s, ctx);
  CHECK(j["durations_ms"]["control_ms"]["p90"].get<double>() == Approx(3.6));
  CHECK(j["durations_ms"]["control_ms"]["count"] == 3);
  CHECK(j["durations_ms"]["dark_ms"]["median"].is_null());
  CHECK(j["status"]["failed"] == 1);
  CHECK(j["reconfigurations"] == 4);
}

TEST_CASE("summary.json stays valid JSON when a timeline's names are not UTF-8") {
  // A host name with a byte that is no UTF-8 (found by analysis_timeline_fuzz): nlohmann's dump
  // threw type_error 316 and `ocslab analyze` ended in std::terminate.
  RunnerTimeline tl;
  tl.row(kT0, "switch", "ocs", "m", "command", "1", 1);
  tl.row(kT0 + kMs, "switch", "ocs", "m", "ack", "1", 1);
  tl.row(kT0 + 10 * kMs,
         "h\xff"
         "1",
         "carrier", "eth1", "carrier", "0", 1);
  Breakdown b = analyze(tl.text);
  REQUIRE(b.rows.size() == 1);
  CHECK(b.rows[0].host ==
        "h\xff"
        "1");
  std::string text = summary_json_text(summary_json(b, summarize(b), SummaryContext{"t.csv", 3, 3, -30}));
  auto j = nlohmann::json::parse(text, nullptr, false);
  REQUIRE_FALSE(j.is_discarded());
  CHECK(text.back() == '\n');
  CHECK(text.find("h\xef\xbf\xbd"
                  "1") != std::string::npos);  // the byte became U+FFFD
}

TEST_CASE("a carrier flap the kernel coalesced (carrier_inferred) is a down edge at the up's time") {
  RunnerTimeline tl;
  tl.row(kT0 - 5 * kS, "h1", "carrier", "eth2", "carrier", "1", 0);
  tl.row(kT0, "switch", "ocs", "crossed", "command", "1", 1);
  tl.row(kT0 + 2 * kMs, "h1", "emulator", "eth2", "light", "0", 1);
  tl.row(kT0 + 5 * kMs, "switch", "ocs", "crossed", "ack", "1", 1);
  tl.row(kT0 + 60 * kMs, "h1", "emulator", "eth2", "light", "1", 1);
  // linkwatch held the down back; when it ran, the link was up again: one report, both edges.
  tl.row(kT0 + 1000 * kMs, "h1", "carrier", "eth2", "carrier_inferred", "0", 1);
  tl.row(kT0 + 1000 * kMs, "h1", "carrier", "eth2", "carrier", "1", 1);
  Breakdown b = analyze(tl.text);
  REQUIRE(b.rows.size() == 1);
  const BreakdownRow& r = b.rows[0];
  CHECK(r.status == Status::kOk);
  CHECK(r.edges[kCarrierDown] == kT0 + 1000 * kMs);
  CHECK(r.edges[kCarrierUp] == kT0 + 1000 * kMs);
  CHECK(ms(r, kCarrier) == "940.000000");
}

// Issue 45: in a phase run on the virtual lab some reconfigurations had no carrier row at all
// (the kernel announced the outage after the next command), and their rows were called `ok`. A
// dark spell of at least unseen_min_ns that the probed carrier did not show is `unseen`; a
// shorter one, a coalesced flap the counters proved, and a port without a carrier probe are not.
TEST_CASE("a dark spell the probed carrier never saw is unseen, not ok") {
  RunnerTimeline tl;
  for (const char* h : {"h1", "h2", "h3"}) tl.row(kT0 - 5 * kS, h, "carrier", "eth1", "carrier", "1", 0);
  tl.row(kT0, "switch", "ocs", "m", "command", "1", 1);
  tl.row(kT0 + 5 * kMs, "switch", "ocs", "m", "ack", "1", 1);
  // h1: dark 50 ms (light rows only: the light rule alone), the carrier shows nothing; RDMA
  //     stalled and resumed.
  // h2: dark 10 ms, below the minimum, the link did not follow (no link rows), no carrier row.
  // h3: dark 50 ms, a flap the kernel coalesced: the counters prove both edges.
  // h4: dark 50 ms, no carrier probe on the host.
  // h5: dark 10 ms, below the minimum, but the emulator took the link down and up (delivered
  //     to the guest) and the carrier shows nothing: unseen however short.
  const std::map<std::string, int64_t> dark_ms = {{"h1", 50}, {"h2", 10}, {"h3", 50}, {"h4", 50}, {"h5", 10}};
  tl.row(kT0 - 5 * kS, "h5", "carrier", "eth1", "carrier", "1", 0);
  for (const auto& [h, d] : dark_ms) {
    const bool link = h == "h3" || h == "h4" || h == "h5";
    tl.row(kT0 + 1 * kMs, h, "rdma", "rxe_eth1/eth1@x", "stalled", "1", 1);
    tl.row(kT0 + 2 * kMs, h, "emulator", "eth1", "light", "0", 1);
    if (link) tl.row(kT0 + 2 * kMs, h, "emulator", "eth1", "link", "0", 1);
    tl.row(kT0 + (2 + d) * kMs, h, "emulator", "eth1", "light", "1", 1);
    if (link) tl.row(kT0 + (2 + d) * kMs, h, "emulator", "eth1", "link", "1", 1);
    tl.row(kT0 + 200 * kMs, h, "rdma", "rxe_eth1/eth1@x", "resumed", "199", 1, "ms");
  }
  tl.row(kT0 + 900 * kMs, "h3", "carrier", "eth1", "carrier_inferred", "0", 1);
  tl.row(kT0 + 900 * kMs, "h3", "carrier", "eth1", "carrier", "1", 1);
  Breakdown b = analyze(tl.text);
  REQUIRE(b.rows.size() == 5);
  std::map<std::string, std::string> status;
  for (const auto& r : b.rows) status[r.host] = status_name(r.status);
  CHECK(status == std::map<std::string, std::string>{
                      {"h1", "unseen"}, {"h2", "ok"}, {"h3", "ok"}, {"h4", "ok"}, {"h5", "unseen"}});
  CHECK(ms(b.rows[4], kFirmware) == "0.000000");  // h5's link bounce is its firmware layer
  CHECK(ms(b.rows[0], kDark) == "50.000000");
  CHECK_FALSE(b.rows[0].edges[kCarrierDown]);

  // Exactly at the minimum it is unseen; one nanosecond under, ok.
  CHECK(status_name(analyze(tl.text, {.unseen_min_ns = 50 * kMs}).rows[0].status) == std::string("unseen"));
  CHECK(status_name(analyze(tl.text, {.unseen_min_ns = 50 * kMs + 1}).rows[0].status) == std::string("ok"));

  // The summary counts it apart and leaves it out of the ok rows' durations.
  auto s = summarize(b);
  CHECK(s[kDark].count == 3);
  SummaryContext ctx{"t.csv", 1, 1, -30};
  CHECK_THAT(summary_text(b, s, ctx),
             Catch::Contains("5 host/interface rows: 3 ok, 0 failed, 0 unaffected, 0 incomplete, 0 disconnected, 2 "
                             "unseen (dark, no carrier transition)\n"));
  CHECK(summary_json(b, s, ctx)["status"]["unseen"] == 2);
  std::ostringstream csv;
  write_breakdown_csv(b, csv);
  CHECK_THAT(csv.str(), Catch::Contains("\nr1,1,m,h1,eth1,unseen,"));

  // Something that stayed down outweighs it: the row is incomplete.
  RowFacts f;
  f.intent = Intent::kMove;
  f.went_down = f.carrier_unseen = true;
  CHECK(classify_row(f) == Status::kUnseen);
  f.stayed_down = true;
  CHECK(classify_row(f) == Status::kIncomplete);
}

// Issue 45, item 5: the probe polls the live carrier bit (`carrier_bit`), which linkwatch does
// not delay. A row whose only carrier evidence is a polled edge saw the outage: it is ok, not
// unseen, its live-bit times are in their own columns and the carrier columns stay the
// announcement's (empty here: the announcement came after the next command).
TEST_CASE("a dark spell only the polled carrier bit saw is ok, not unseen") {
  RunnerTimeline tl;
  for (const char* h : {"h1", "h2", "h3"}) {
    tl.row(kT0 - 5 * kS, h, "carrier", "eth1", "carrier", "1", 0);
    tl.row(kT0 - 5 * kS, h, "carrier", "eth1", "carrier_bit", "1", 0);
  }
  tl.row(kT0, "switch", "ocs", "m", "command", "1", 1);
  tl.row(kT0 + 5 * kMs, "switch", "ocs", "m", "ack", "1", 1);
  // h1: dark 50 ms; the live bit went down and up, no announcement in the row.
  // h2: dark 50 ms; a flap shorter than the poll interval: one poll proved both edges.
  // h3: dark 50 ms; neither the announcement nor the live bit shows anything.
  for (const char* h : {"h1", "h2", "h3"}) {
    tl.row(kT0 + 1 * kMs, h, "rdma", "rxe_eth1/eth1@x", "stalled", "1", 1);
    tl.row(kT0 + 2 * kMs, h, "emulator", "eth1", "light", "0", 1);
    tl.row(kT0 + 2 * kMs, h, "emulator", "eth1", "link", "0", 1);
    tl.row(kT0 + 52 * kMs, h, "emulator", "eth1", "light", "1", 1);
    tl.row(kT0 + 52 * kMs, h, "emulator", "eth1", "link", "1", 1);
    tl.row(kT0 + 200 * kMs, h, "rdma", "rxe_eth1/eth1@x", "resumed", "199", 1, "ms");
  }
  tl.row(kT0 + 6 * kMs, "h1", "carrier", "eth1", "carrier_bit", "0", 1);
  tl.row(kT0 + 56 * kMs, "h1", "carrier", "eth1", "carrier_bit", "1", 1);
  tl.row(kT0 + 55 * kMs, "h2", "carrier", "eth1", "carrier_bit_inferred", "0", 1);
  tl.row(kT0 + 55 * kMs, "h2", "carrier", "eth1", "carrier_bit", "1", 1);
  Breakdown b = analyze(tl.text);
  REQUIRE(b.rows.size() == 3);
  std::map<std::string, std::string> status;
  for (const auto& r : b.rows) status[r.host] = status_name(r.status);
  CHECK(status == std::map<std::string, std::string>{{"h1", "ok"}, {"h2", "ok"}, {"h3", "unseen"}});
  const BreakdownRow& h1 = b.rows[0];
  CHECK(h1.edges[kCarrierBitDown] == kT0 + 6 * kMs);
  CHECK(h1.edges[kCarrierBitUp] == kT0 + 56 * kMs);
  CHECK_FALSE(h1.edges[kCarrierDown]);
  CHECK_FALSE(h1.edges[kCarrierUp]);
  CHECK_FALSE(h1.duration_ns(kCarrier));  // the durations stay the announcement's
  CHECK(b.rows[1].edges[kCarrierBitDown] == kT0 + 55 * kMs);
  CHECK(b.rows[1].edges[kCarrierBitUp] == kT0 + 55 * kMs);
  CHECK_FALSE(b.rows[2].edges[kCarrierBitDown]);

  std::ostringstream csv;
  write_breakdown_csv(b, csv);
  CHECK_THAT(csv.str(), Catch::Contains(fmt::format(",{},{},5.000000,", kT0 + 6 * kMs, kT0 + 56 * kMs)));
  CHECK_THAT(csv.str(), Catch::Contains("\nr1,1,m,h3,eth1,unseen,"));
}

// A capture without commands is cut where a layer goes down. The live bit usually goes down
// before the kernel announces it (a poll before linkwatch ran, or the same event seen 0.1 ms
// apart): the cut must not leave the bit's down edge in the iteration before.
TEST_CASE("a capture cut at layer edges keeps a live-bit down that came before the announcement") {
  Capture c;
  c.row(kT0, "h1", "carrier", "ca0", "carrier", "1");
  c.row(kT0, "h1", "carrier", "ca0", "carrier_bit", "1");
  for (int k = 0; k < 2; ++k) {
    const int64_t t = kT0 + (1 + 2 * k) * kS;
    c.row(t, "h1", "carrier", "ca0", "carrier_bit", "0");
    c.row(t + kMs / 10, "h1", "carrier", "ca0", "carrier", "0");
    c.row(t + 200 * kMs, "h1", "carrier", "ca0", "carrier_bit", "1");
    c.row(t + 202 * kMs, "h1", "carrier", "ca0", "carrier", "1");
  }
  Breakdown b = analyze(c.text);
  CHECK(b.iterations_from == "layer edges");
  REQUIRE(b.rows.size() == 2);
  for (int k = 0; k < 2; ++k) {
    INFO("iteration " << k + 1);
    const int64_t t = kT0 + (1 + 2 * k) * kS;
    CHECK(b.rows[k].status == Status::kOk);
    CHECK(b.rows[k].edges[kCarrierBitDown] == t);
    CHECK(b.rows[k].edges[kCarrierBitUp] == t + 200 * kMs);
    CHECK(b.rows[k].edges[kCarrierDown] == t + kMs / 10);
    CHECK(b.rows[k].edges[kCarrierUp] == t + 202 * kMs);
  }
}
