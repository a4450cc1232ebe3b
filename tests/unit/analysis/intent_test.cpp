// Intents: what each reconfiguration meant to do to each port (move, come up, go dark, stay),
// derived from the mappings, and how the breakdown reports each with its own status and timings.
#include <catch2/catch.hpp>

#include <fmt/format.h>
#include <sstream>
#include <string>

#include "ocslab/analysis/breakdown.h"
#include "ocslab/analysis/summary.h"
#include "ocslab/analysis/timeline.h"

using namespace ocslab::analysis;

namespace {

constexpr int64_t kIms = 1'000'000;
constexpr int64_t kIs = 1'000'000'000;
constexpr int64_t kIt0 = 1'763'800'000'000'000'000;

struct IntentTimeline {
  std::string text = "t_ns,host,source,subject,signal,value,unit,run,iteration\n";
  void row(int64_t t, const std::string& host, const std::string& source, const std::string& subject,
           const std::string& signal, const std::string& value, int iteration, const std::string& unit = "bool") {
    text += fmt::format("{},{},{},{},{},{},{},r1,{}\n", t, host, source, subject, signal, value, unit, iteration);
  }
};

MappingLinks mapping(const std::string& name, std::vector<std::pair<std::string, std::string>> links) {
  MappingLinks m{name, {}};
  for (const auto& [a, b] : links) m.links.push_back({{a, "eth1"}, {b, "eth1"}});
  return m;
}

// A: h1-h2, h4-h5 (h3, h6 dark). B: h1-h3, h4-h5, h6-h7 (h2 dark).
const MappingLinks kA = mapping("A", {{"h1", "h2"}, {"h4", "h5"}});
const MappingLinks kB = mapping("B", {{"h1", "h3"}, {"h4", "h5"}, {"h6", "h7"}});

Intents a_to_b() {
  Intents in = derive_intents({{"A", kA}, {"B", kB}}, "A", {{1, "B", true}});
  in.from = "meta.json";
  return in;
}

const BreakdownRow& row(const Breakdown& b, int iteration, const std::string& host) {
  for (const auto& r : b.rows)
    if (r.iteration == iteration && r.host == host) return r;
  FAIL("no row for iteration " << iteration << " host " << host);
  return b.rows.front();
}

std::string dur(const BreakdownRow& r, Duration d) {
  auto v = r.duration_ns(d);
  return v ? format_ms(*v) : "";
}

// Warm-up on mapping A, then iteration 1 applies B at kIt0 (acked):
//   h1 moves (every layer down and back), h2 goes dark, h3 comes up from dark with every layer
//   and RDMA's first traffic, h4 stays, h6 should come up but only its light does, h7 should
//   come up and nothing happens.
IntentTimeline a_to_b_timeline() {
  IntentTimeline tl;
  const int64_t w = kIt0 - 3 * kIs;  // warm-up
  for (const char* h : {"h1", "h2", "h4"}) {
    tl.row(w, h, "emulator", "eth1", "light", "1", 0);
    tl.row(w, h, "emulator", "eth1", "link", "1", 0);
    tl.row(w, h, "carrier", "eth1", "carrier", "1", 0);
  }
  for (const char* h : {"h3", "h6", "h7"}) {
    tl.row(w, h, "emulator", "eth1", "light", "0", 0);
    tl.row(w, h, "emulator", "eth1", "link", "0", 0);
    tl.row(w, h, "carrier", "eth1", "carrier", "0", 0);
  }
  // h3's RDMA pair (to h1) is dark from the probe's start: its first traffic is a resume.
  tl.row(kIt0 - 100 * kIms, "h3", "carrier", "eth1", "carrier", "0", 1);  // a reading before the command
  tl.row(kIt0, "switch", "ocs", "B", "command", "1", 1);
  tl.row(kIt0 + 2 * kIms, "h1", "emulator", "eth1", "light", "0", 1);
  tl.row(kIt0 + 2 * kIms, "h2", "emulator", "eth1", "light", "0", 1);
  tl.row(kIt0 + 3 * kIms, "h1", "emulator", "eth1", "link", "0", 1);
  tl.row(kIt0 + 3 * kIms, "h2", "emulator", "eth1", "link", "0", 1);
  tl.row(kIt0 + 4 * kIms, "h1", "carrier", "eth1", "carrier", "0", 1);
  tl.row(kIt0 + 4 * kIms, "h2", "carrier", "eth1", "carrier", "0", 1);
  tl.row(kIt0 + 5 * kIms, "switch", "ocs", "B", "ack", "1", 1);
  tl.row(kIt0 + 30 * kIms, "h1", "emulator", "eth1", "light", "1", 1);
  tl.row(kIt0 + 31 * kIms, "h3", "emulator", "eth1", "light", "1", 1);
  tl.row(kIt0 + 32 * kIms, "h6", "emulator", "eth1", "light", "1", 1);
  tl.row(kIt0 + 130 * kIms, "h1", "emulator", "eth1", "link", "1", 1);
  tl.row(kIt0 + 131 * kIms, "h3", "emulator", "eth1", "link", "1", 1);
  tl.row(kIt0 + 133 * kIms, "h1", "carrier", "eth1", "carrier", "1", 1);
  tl.row(kIt0 + 134 * kIms + 500'000, "h3", "carrier", "eth1", "carrier", "1", 1);
  tl.row(kIt0 + 150 * kIms, "h3", "rdma", "rxe_eth1/eth1@h1", "stalled", "1", 1);  // with its resume
  tl.row(kIt0 + 150 * kIms, "h3", "rdma", "rxe_eth1/eth1@h1", "resumed", "3150", 1, "ms");
  return tl;
}

}  // namespace

TEST_CASE("intents_between: move, up, dark and stay from the mappings before and after") {
  auto i = intents_between(kA, kB);
  CHECK(i.at({"h1", "eth1"}) == Intent::kMove);
  CHECK(i.at({"h2", "eth1"}) == Intent::kDark);
  CHECK(i.at({"h3", "eth1"}) == Intent::kUp);
  CHECK(i.at({"h4", "eth1"}) == Intent::kStay);
  CHECK(i.at({"h5", "eth1"}) == Intent::kStay);
  CHECK(i.at({"h6", "eth1"}) == Intent::kUp);
  CHECK(i.at({"h7", "eth1"}) == Intent::kUp);
  CHECK(i.size() == 7);
  // The way back: h3, h6, h7 go dark, h2 comes up, h1 moves.
  auto back = intents_between(kB, kA);
  CHECK(back.at({"h1", "eth1"}) == Intent::kMove);
  CHECK(back.at({"h2", "eth1"}) == Intent::kUp);
  CHECK(back.at({"h3", "eth1"}) == Intent::kDark);
  CHECK(back.at({"h7", "eth1"}) == Intent::kDark);
  // A link written the other way round is the same circuit.
  CHECK(intents_between(kA, mapping("A2", {{"h2", "h1"}, {"h5", "h4"}})).at({"h1", "eth1"}) == Intent::kStay);
  // Another interface of the same host is another port.
  MappingLinks two{"two", {{{"h1", "eth2"}, {"h2", "eth1"}}}};
  auto t = intents_between(kA, two);
  CHECK(t.at({"h1", "eth1"}) == Intent::kDark);
  CHECK(t.at({"h1", "eth2"}) == Intent::kUp);
  CHECK(t.at({"h2", "eth1"}) == Intent::kMove);
  for (Intent x : {Intent::kUnknown, Intent::kMove, Intent::kUp, Intent::kDark, Intent::kStay})
    CHECK(std::string(intent_name(x)) != "?");
  CHECK(std::string(intent_name(Intent::kUp)) == "up");
  CHECK(std::string(status_name(Status::kDisconnected)) == "disconnected");
}

TEST_CASE("derive_intents follows the schedule; after a failed reconfiguration the state is unknown") {
  std::map<std::string, MappingLinks> m = {{"A", kA}, {"B", kB}};
  Intents in = derive_intents(m, "A",
                              {{1, "B", true},
                               {2, "A", false},
                               {3, "B", true},
                               {4, "A", true},
                               {5, "C", true},
                               {6, "B", true},
                               {7, "A", true}});
  CHECK(in.iterations.count(1) == 1);
  CHECK(in.at("any", 1, "B", "h3", "eth1") == Intent::kUp);  // no run given: every run
  CHECK(in.at("", 1, "B", "h2", "eth1") == Intent::kDark);
  CHECK(in.at("", 1, "B", "h9", "eth1") == Intent::kStay);     // in neither mapping: dark before and after
  CHECK(in.at("", 1, "", "h3", "eth1") == Intent::kUp);        // no command row: no mapping to check
  CHECK(in.at("", 1, "A", "h3", "eth1") == Intent::kUnknown);  // the command named another mapping
  // 2 (B -> A) was refused: its intents are known, but the state after it is not.
  CHECK(in.at("", 2, "A", "h2", "eth1") == Intent::kUp);
  CHECK(in.iterations.count(3) == 0);
  CHECK(in.at("", 3, "B", "h3", "eth1") == Intent::kUnknown);
  // 3 succeeded: 4 knows B was on the switch.
  CHECK(in.at("", 4, "A", "h3", "eth1") == Intent::kDark);
  // A mapping not in the list: 5 and the one after it are unknown; 7 knows 6's B again.
  CHECK(in.iterations.count(5) == 0);
  CHECK(in.iterations.count(6) == 0);
  CHECK(in.at("", 7, "A", "h2", "eth1") == Intent::kUp);
  CHECK(in.at("", 8, "B", "h2", "eth1") == Intent::kUnknown);  // beyond the schedule
  // An unknown initial mapping: the first reconfiguration's intents are unknown.
  CHECK(derive_intents(m, "nope", {{1, "B", true}, {2, "A", true}}).iterations.count(1) == 0);
  CHECK(derive_intents(m, "nope", {{1, "B", true}, {2, "A", true}}).iterations.count(2) == 1);
  // A run given: rows of other runs are unknown.
  Intents r = derive_intents(m, "A", {{1, "B", true}}, "r1");
  CHECK(r.at("r1", 1, "B", "h3", "eth1") == Intent::kUp);
  CHECK(r.at("r2", 1, "B", "h3", "eth1") == Intent::kUnknown);
}

TEST_CASE("with intents: a port coming up is measured from the command, a removed circuit is disconnected") {
  IntentTimeline tl = a_to_b_timeline();
  Intents in = a_to_b();
  Breakdown b = compute_breakdown(parse_timeline(tl.text, "t.csv"), {}, &in);
  CHECK(b.has_intents);
  REQUIRE(b.rows.size() == 6);  // h1 h2 h3 h4 h6 h7

  // h1 moved: as without intents.
  const BreakdownRow& h1 = row(b, 1, "h1");
  CHECK(h1.intent == Intent::kMove);
  CHECK(h1.status == Status::kOk);
  CHECK(h1.edges[kLightLost] == kIt0 + 2 * kIms);
  CHECK(h1.edges[kLightBack] == kIt0 + 30 * kIms);
  CHECK(dur(h1, kTotal) == "133.000000");

  // h2's circuit was removed on purpose: disconnected, its down edges recorded.
  const BreakdownRow& h2 = row(b, 1, "h2");
  CHECK(h2.intent == Intent::kDark);
  CHECK(h2.status == Status::kDisconnected);
  CHECK(h2.edges[kLightLost] == kIt0 + 2 * kIms);
  CHECK(h2.edges[kFirmwareDown] == kIt0 + 3 * kIms);
  CHECK(h2.edges[kCarrierDown] == kIt0 + 4 * kIms);
  CHECK_FALSE(h2.edges[kLightBack]);
  CHECK_FALSE(h2.edges[kCarrierUp]);

  // h3 came up from dark: every up edge and the durations from the command, no down edges
  // (the reading of 0 before the command is not one).
  const BreakdownRow& h3 = row(b, 1, "h3");
  CHECK(h3.intent == Intent::kUp);
  CHECK(h3.status == Status::kOk);
  CHECK(h3.edges[kIssued] == kIt0);
  CHECK(h3.edges[kAcked] == kIt0 + 5 * kIms);
  CHECK(h3.edges[kLightBack] == kIt0 + 31 * kIms);
  CHECK(h3.edges[kFirmwareUp] == kIt0 + 131 * kIms);
  CHECK(h3.edges[kCarrierUp] == kIt0 + 134 * kIms + 500'000);
  CHECK(h3.edges[kRdmaResumed] == kIt0 + 150 * kIms);
  for (Edge e : {kLightLost, kFirmwareDown, kCarrierDown, kRdmaStalled}) CHECK_FALSE(h3.edges[e]);
  CHECK(dur(h3, kSwitching) == "31.000000");
  CHECK(dur(h3, kFirmware) == "100.000000");
  CHECK(dur(h3, kCarrier) == "103.500000");
  CHECK(dur(h3, kKernel) == "3.500000");
  CHECK(dur(h3, kRdma) == "15.500000");
  CHECK(dur(h3, kTotal) == "150.000000");
  CHECK(dur(h3, kDark) == "");
  CHECK(dur(h3, kOutage) == "");

  // h4 kept its circuit and nothing changed.
  const BreakdownRow& h4 = row(b, 1, "h4");
  CHECK(h4.intent == Intent::kStay);
  CHECK(h4.status == Status::kUnaffected);

  // h6 should have come up: light did, firmware and carrier did not.
  const BreakdownRow& h6 = row(b, 1, "h6");
  CHECK(h6.intent == Intent::kUp);
  CHECK(h6.status == Status::kIncomplete);
  CHECK(h6.edges[kLightBack] == kIt0 + 32 * kIms);
  CHECK_FALSE(h6.edges[kCarrierUp]);
  // h7 should have come up: nothing did.
  const BreakdownRow& h7 = row(b, 1, "h7");
  CHECK(h7.intent == Intent::kUp);
  CHECK(h7.status == Status::kIncomplete);
  for (const auto& e : h7.edges) CHECK((!e || e == kIt0 || e == kIt0 + 5 * kIms));

  // The summary counts the new status and the intents; the statistics take both ok rows.
  auto stats = summarize(b);
  CHECK(stats[kSwitching].count == 2);
  CHECK(stats[kSwitching].min == Approx(30.0));
  CHECK(stats[kSwitching].max == Approx(31.0));
  SummaryContext c;
  c.timeline = "t.csv";
  std::string text = summary_text(b, stats, c);
  CHECK(text.find("6 host/interface rows: 2 ok, 0 failed, 1 unaffected, 2 incomplete, 1 disconnected\n") !=
        std::string::npos);
  CHECK(text.find("intents      from meta.json: 1 move, 3 up, 1 dark, 1 stay, 0 unknown\n") != std::string::npos);
  auto j = summary_json(b, stats, c);
  CHECK(j["status"]["disconnected"] == 1);
  CHECK(j["status"]["incomplete"] == 2);
  CHECK(j["intents"]["from"] == "meta.json");
  CHECK(j["intents"]["up"] == 3);
  CHECK(j["intents"]["unknown"] == 0);

  // breakdown.csv: the intent as a last column.
  std::ostringstream csv;
  write_breakdown_csv(b, csv);
  std::string s = csv.str();
  CHECK(s.substr(0, s.find('\n')).ends_with(",total_ms,intent"));
  CHECK(s.find("\nr1,1,B,h2,eth1,disconnected,") != std::string::npos);
  CHECK(s.find(",150.000000,up\n") != std::string::npos);  // h3's total, then its intent
  CHECK(s.find(",dark\n") != std::string::npos);
}

TEST_CASE("without intents the same timeline is judged by its edges alone, as before") {
  IntentTimeline tl = a_to_b_timeline();
  Breakdown b = compute_breakdown(parse_timeline(tl.text, "t.csv"));
  CHECK_FALSE(b.has_intents);
  CHECK(row(b, 1, "h1").status == Status::kOk);
  CHECK(row(b, 1, "h2").status == Status::kIncomplete);  // the removed circuit reads as a failure to come back
  CHECK(row(b, 1, "h3").status == Status::kOk);          // its carrier reading of 0 before the command
  CHECK(row(b, 1, "h3").edges[kCarrierDown] == kIt0 - 100 * kIms);
  CHECK_FALSE(row(b, 1, "h3").edges[kLightBack]);        // light had no down edge: not measured
  CHECK(row(b, 1, "h7").status == Status::kUnaffected);  // nothing happened, nothing expected
  for (const auto& r : b.rows) CHECK(r.intent == Intent::kUnknown);
  std::ostringstream csv;
  write_breakdown_csv(b, csv);
  CHECK(csv.str().substr(0, csv.str().find('\n')).ends_with(",total_ms"));
  std::string text = summary_text(b, summarize(b), {});
  CHECK(text.find("intents") == std::string::npos);
  CHECK(summary_json(b, summarize(b), {}).contains("intents") == false);
}

TEST_CASE("with intents: a refused reconfiguration is failed whatever each port was meant to do") {
  IntentTimeline tl = a_to_b_timeline();
  // Iteration 2 goes back to A and is refused: nothing moves.
  tl.row(kIt0 + 10 * kIs, "switch", "ocs", "A", "command", "1", 2);
  tl.row(kIt0 + 10 * kIs + 5 * kIms, "switch", "ocs", "A", "ack", "0", 2);
  Intents in = derive_intents({{"A", kA}, {"B", kB}}, "A", {{1, "B", true}, {2, "A", false}});
  Breakdown b = compute_breakdown(parse_timeline(tl.text, "t.csv"), {}, &in);
  CHECK(row(b, 2, "h2").intent == Intent::kUp);
  CHECK(row(b, 2, "h3").intent == Intent::kDark);
  for (const auto& r : b.rows)
    if (r.iteration == 2) CHECK(r.status == Status::kFailed);
}

TEST_CASE("a port coming up: a reading of light before the command is no edge; a layer already up is not awaited") {
  IntentTimeline tl;
  tl.row(kIt0 - 2 * kIs, "h3", "rx_power", "eth1", "rx_power_dbm", "-40", 0, "dBm");
  tl.row(kIt0 - 50 * kIms, "h3", "rx_power", "eth1", "rx_power_dbm", "-3", 1, "dBm");  // stray light
  tl.row(kIt0, "switch", "ocs", "B", "command", "1", 1);
  tl.row(kIt0 + 1 * kIms, "switch", "ocs", "B", "ack", "1", 1);
  tl.row(kIt0 + 5 * kIms, "h3", "rx_power", "eth1", "rx_power_dbm", "-3", 1, "dBm");  // still the stray light
  tl.row(kIt0 + 10 * kIms, "h3", "rx_power", "eth1", "rx_power_dbm", "-40", 1, "dBm");
  tl.row(kIt0 + 40 * kIms, "h3", "rx_power", "eth1", "rx_power_dbm", "-3", 1, "dBm");
  tl.row(kIt0 + 41 * kIms, "h3", "rx_power", "eth1", "rx_power_dbm", "-3", 1, "dBm");
  // h6's light and carrier were up before the command and stay (a loopback): nothing to bring
  // up and nothing came up.
  tl.row(kIt0 - 2 * kIs, "h6", "rx_power", "eth1", "rx_power_dbm", "-3", 0, "dBm");
  tl.row(kIt0 - 2 * kIs, "h6", "carrier", "eth1", "carrier", "1", 0);
  tl.row(kIt0 + 20 * kIms, "h6", "rx_power", "eth1", "rx_power_dbm", "-3", 1, "dBm");
  // h7's carrier is always up (a loopback), its light comes: ok, measured by its light alone.
  tl.row(kIt0 - 2 * kIs, "h7", "carrier", "eth1", "carrier", "1", 0);
  tl.row(kIt0 - 2 * kIs, "h7", "rx_power", "eth1", "rx_power_dbm", "-40", 0, "dBm");
  tl.row(kIt0 + 25 * kIms, "h7", "rx_power", "eth1", "rx_power_dbm", "-3", 1, "dBm");
  Intents in = a_to_b();
  Breakdown b = compute_breakdown(parse_timeline(tl.text, "t.csv"), {}, &in);
  REQUIRE(b.rows.size() == 3);
  CHECK(row(b, 1, "h3").status == Status::kOk);
  CHECK(row(b, 1, "h3").edges[kLightBack] == kIt0 + 40 * kIms);
  CHECK(dur(row(b, 1, "h3"), kSwitching) == "40.000000");
  CHECK(dur(row(b, 1, "h3"), kTotal) == "");  // no carrier probe: no total
  CHECK(row(b, 1, "h6").intent == Intent::kUp);
  CHECK(row(b, 1, "h6").status == Status::kUnaffected);
  CHECK_FALSE(row(b, 1, "h6").edges[kLightBack]);
  CHECK(row(b, 1, "h7").status == Status::kOk);
  CHECK(dur(row(b, 1, "h7"), kSwitching) == "25.000000");
  CHECK_FALSE(row(b, 1, "h7").edges[kCarrierUp]);
}

TEST_CASE("with intents on a capture without an iteration column: cut by commands, intents by their order") {
  std::string text = "t_ns,host,source,subject,signal,value,unit\n";
  auto add = [&](int64_t t, const char* h, const char* src, const char* subj, const char* sig, const char* v) {
    text += fmt::format("{},{},{},{},{},{},bool\n", t, h, src, subj, sig, v);
  };
  add(kIt0 - 2 * kIs, "h3", "carrier", "eth1", "carrier", "0");
  add(kIt0 - 2 * kIs, "h2", "carrier", "eth1", "carrier", "1");
  add(kIt0, "switch", "ocs", "B", "command", "1");
  add(kIt0 + kIms, "switch", "ocs", "B", "ack", "1");
  add(kIt0 + 3 * kIms, "h2", "carrier", "eth1", "carrier", "0");
  add(kIt0 + 90 * kIms, "h3", "carrier", "eth1", "carrier", "1");
  Intents in = a_to_b();
  Breakdown b = compute_breakdown(parse_timeline(text, "c.csv"), {}, &in);
  CHECK(b.iterations_from == "ocs commands");
  REQUIRE(b.rows.size() == 2);
  CHECK(row(b, 1, "h2").status == Status::kDisconnected);
  CHECK(row(b, 1, "h3").status == Status::kOk);
  CHECK(dur(row(b, 1, "h3"), kTotal) == "90.000000");
}

// h1 moves from h2 (mapping A) to h3 (mapping B) and runs a queue pair to each on eth1 (the
// RDMA probe's pairs: mappings). The pair to h2 jitters while its circuit works (a stall at -60 ms
// and its resume at -45 ms, as TCG guests do), then its real last completion is at +2 ms; the
// pair to h3 carries its first traffic at +150 ms, after carrier. With intents the row takes the
// stall of the pair to the old partner and the resume of the pair to the new one; without, the
// first stall and the resume after it, whatever pair: the jitter, before the command.
TEST_CASE("with intents a port's RDMA stall and resume come from its old and new partner's queue pairs") {
  IntentTimeline tl;
  const int64_t w = kIt0 - 3 * kIs;
  tl.row(w, "h1", "carrier", "eth1", "carrier", "1", 0);
  tl.row(kIt0 - 60 * kIms, "h1", "rdma", "rxe_eth1/eth1@h2", "stalled", "1", 1);
  tl.row(kIt0 - 45 * kIms, "h1", "rdma", "rxe_eth1/eth1@h2", "resumed", "15", 1, "ms");
  tl.row(kIt0, "switch", "ocs", "B", "command", "1", 1);
  tl.row(kIt0 + 2 * kIms, "h1", "rdma", "rxe_eth1/eth1@h2", "stalled", "1", 1);
  tl.row(kIt0 + 4 * kIms, "h1", "carrier", "eth1", "carrier", "0", 1);
  tl.row(kIt0 + 5 * kIms, "switch", "ocs", "B", "ack", "1", 1);
  tl.row(kIt0 + 133 * kIms, "h1", "carrier", "eth1", "carrier", "1", 1);
  tl.row(kIt0 + 150 * kIms, "h1", "rdma", "rxe_eth1/eth1@h3", "stalled", "1", 1);  // with its resume
  tl.row(kIt0 + 150 * kIms, "h1", "rdma", "rxe_eth1/eth1@h3", "resumed", "5150", 1, "ms");
  Intents in = a_to_b();
  Timeline t = parse_timeline(tl.text, "t.csv");

  Breakdown with = compute_breakdown(t, {}, &in);
  const BreakdownRow& r = row(with, 1, "h1");
  CHECK(r.intent == Intent::kMove);
  CHECK(r.status == Status::kOk);
  CHECK(r.edges[kRdmaStalled] == kIt0 + 2 * kIms);
  CHECK(r.edges[kRdmaResumed] == kIt0 + 150 * kIms);
  CHECK(dur(r, kRdma) == "17.000000");
  CHECK(dur(r, kOutage) == "148.000000");

  Breakdown without = compute_breakdown(t);
  const BreakdownRow& o = row(without, 1, "h1");
  CHECK(o.edges[kRdmaStalled] == kIt0 - 60 * kIms);
  CHECK(o.edges[kRdmaResumed] == kIt0 - 45 * kIms);
  CHECK(dur(o, kRdma) == "-178.000000");

  // A pair whose circuit never comes back leaves the row incomplete, however the other pair does.
  IntentTimeline lost = tl;
  lost.text = lost.text.substr(0, lost.text.rfind(fmt::format("{},h1,rdma,rxe_eth1/eth1@h3,stalled", kIt0 + 150 * kIms)));
  lost.row(kIt0 + 150 * kIms, "h1", "rdma", "rxe_eth1/eth1@h2", "resumed", "148", 1, "ms");  // the old partner's
  Breakdown l = compute_breakdown(parse_timeline(lost.text, "t.csv"), {}, &in);
  CHECK(row(l, 1, "h1").edges[kRdmaStalled] == kIt0 + 2 * kIms);
  CHECK_FALSE(row(l, 1, "h1").edges[kRdmaResumed].has_value());
  CHECK(row(l, 1, "h1").status == Status::kIncomplete);
}
