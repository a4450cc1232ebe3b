// Fault localisation over synthetic timelines whose every edge and line number is known: the
// port named, its layer, the evidence rows and what the other ports did, exactly.
#include <catch2/catch.hpp>

#include <fmt/format.h>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "ocslab/analysis/breakdown.h"
#include "ocslab/analysis/localisation.h"
#include "ocslab/analysis/summary.h"
#include "ocslab/analysis/timeline.h"

using namespace ocslab::analysis;

// Failures show the evidence itself.
template <>
struct Catch::StringMaker<Evidence> {
  static std::string convert(const Evidence& e) { return fmt::format("{{{}, \"{}\"}}", e.line, e.text); }
};

namespace {

constexpr int64_t kLocMs = 1'000'000;
constexpr int64_t kLocT0 = 1'763'900'000'000'000'000;

// A runner timeline that knows the line number of every row it adds (the header is line 1).
struct LineTimeline {
  std::string text = "t_ns,host,source,subject,signal,value,unit,run,iteration\n";
  uint32_t lines = 1;
  uint32_t row(int64_t t, const std::string& host, const std::string& source, const std::string& subject,
               const std::string& signal, int value, int iteration = 1) {
    text += fmt::format("{},{},{},{},{},{},bool,r1,{}\n", t, host, source, subject, signal, value, iteration);
    return ++lines;
  }
};

// One reconfiguration to mapping "b" of h1..h4/eth1: every port loses light, firmware link and
// carrier at +2/+3/+4 ms and gets them back at +30/+130/+140 ms plus its index, except where
// `held` says a layer ("light", "link", "carrier") of a host stays down. Returns the line of
// each host's rows by "host signal value".
std::map<std::string, uint32_t> four_hosts(LineTimeline& tl, const std::map<std::string, std::string>& held,
                                           bool ack = true) {
  std::map<std::string, uint32_t> at;
  at["command"] = tl.row(kLocT0, "switch", "ocs", "b", "command", 1);
  const char* hosts[] = {"h1", "h2", "h3", "h4"};
  for (const char* h : hosts) {
    at[std::string(h) + " light 0"] = tl.row(kLocT0 + 2 * kLocMs, h, "emulator", "eth1", "light", 0);
    at[std::string(h) + " link 0"] = tl.row(kLocT0 + 3 * kLocMs, h, "emulator", "eth1", "link", 0);
    at[std::string(h) + " carrier 0"] = tl.row(kLocT0 + 4 * kLocMs, h, "carrier", "eth1", "carrier", 0);
  }
  at["ack"] = tl.row(kLocT0 + 5 * kLocMs, "switch", "ocs", "b", "ack", ack ? 1 : 0);
  for (int k = 0; k < 4; ++k) {
    const std::string h = hosts[k];
    auto it = held.find(h);
    const std::string stop = it == held.end() ? "" : it->second;
    // A layer held down keeps every layer above it down too.
    if (stop == "light") continue;
    at[h + " light 1"] = tl.row(kLocT0 + (30 + k) * kLocMs, h, "emulator", "eth1", "light", 1);
    if (stop == "link") continue;
    at[h + " link 1"] = tl.row(kLocT0 + (130 + k) * kLocMs, h, "emulator", "eth1", "link", 1);
    if (stop == "carrier") continue;
    at[h + " carrier 1"] = tl.row(kLocT0 + (140 + k) * kLocMs, h, "carrier", "eth1", "carrier", 1);
  }
  return at;
}

}  // namespace

TEST_CASE("a NIC link held down after a reconfiguration: localised to that host and NIC at the firmware layer") {
  LineTimeline tl;
  auto at = four_hosts(tl, {{"h3", "link"}});
  Timeline t = parse_timeline(tl.text, "t.csv");
  Breakdown b = compute_breakdown(t);
  std::map<Endpoint, SwitchPorts> ports = {{{"h3", "eth1"}, {3, 19}}};
  auto faults = localise(b, &t, &ports);
  REQUIRE(faults.size() == 1);
  const Localisation& l = faults[0];
  CHECK(l.run == "r1");
  CHECK(l.iteration == 1);
  CHECK(l.mapping == "b");
  CHECK(l.host == "h3");
  CHECK(l.interface == "eth1");
  CHECK(l.port == SwitchPorts{3, 19});
  CHECK(l.layer == ChainLayer::kFirmware);
  CHECK_FALSE(l.common);
  CHECK(l.ports == 4);
  CHECK(l.resumed == 3);
  CHECK(l.t0_ns == kLocT0);
  CHECK(l.stopped == std::vector<StoppedPort>{{"h3", "eth1", ChainLayer::kFirmware, kLocT0 + 32 * kLocMs}});
  CHECK(l.verdict == "h3/eth1 (switch ports tx 3 rx 19) stopped at firmware; 3 of 4 port(s) resumed");
  CHECK(l.evidence == std::vector<Evidence>{
                          {at["h3 light 1"], "h3/eth1 light lost at +2.000 ms, back at +32.000 ms"},
                          {at["h3 link 0"], "h3/eth1 firmware down at +3.000 ms, never up in the reconfiguration"},
                          {0, "3 of 3 other port(s) reached firmware up at +130.000..+133.000 ms; h3/eth1 never did"},
                      });
  CHECK(fault_headline(l) ==
        "reconfiguration 1 (run r1, mapping b): h3/eth1 (switch ports tx 3 rx 19) stopped at firmware; 3 of 4 "
        "port(s) resumed");

  // Without the timeline the same localisation, with no line numbers; without ports, no port.
  auto bare = localise(b);
  REQUIRE(bare.size() == 1);
  CHECK(bare[0].host == "h3");
  CHECK_FALSE(bare[0].port);
  CHECK(bare[0].evidence[1] == Evidence{0, "h3/eth1 firmware down at +3.000 ms, never up in the reconfiguration"});

  // summary.txt's section and summary.json's `faults`.
  SummaryContext c{"t.csv", t.rows, t.events.size(), -30, &faults, nullptr};
  std::string text = summary_text(b, summarize(b), c);
  const std::string section = fmt::format(
      "\nfault localisation: 1 reconfiguration(s) did not complete\n"
      "reconfiguration 1 (run r1, mapping b): h3/eth1 (switch ports tx 3 rx 19) stopped at firmware; 3 of 4 port(s) "
      "resumed\n"
      "  t.csv:{}  h3/eth1 light lost at +2.000 ms, back at +32.000 ms\n"
      "  t.csv:{}  h3/eth1 firmware down at +3.000 ms, never up in the reconfiguration\n"
      "  3 of 3 other port(s) reached firmware up at +130.000..+133.000 ms; h3/eth1 never did\n",
      at["h3 light 1"], at["h3 link 0"]);
  CHECK(text.ends_with(section));
  auto j = summary_json(b, summarize(b), c);
  REQUIRE(j["faults"].size() == 1);
  const auto& f = j["faults"][0];
  CHECK(f["host"] == "h3");
  CHECK(f["interface"] == "eth1");
  CHECK(f["layer"] == "firmware");
  CHECK(f["port"] == nlohmann::ordered_json{{"tx", 3}, {"rx", 19}});
  CHECK(f["common"] == false);
  CHECK(f["ports"] == 4);
  CHECK(f["resumed"] == 3);
  CHECK(f["stopped"][0]["last_edge_ns"] == kLocT0 + 32 * kLocMs);
  CHECK(f["evidence"][1]["line"] == at["h3 link 0"]);
  CHECK(f["evidence"][2]["line"].is_null());
  // The keys that were there before come first, unchanged.
  std::vector<std::string> keys;
  for (const auto& [k, v] : j.items()) keys.push_back(k);
  CHECK(keys == std::vector<std::string>{"timeline", "timeline_rows", "rows_read", "dark_dbm", "iterations_from",
                                         "reconfigurations", "rows", "status", "durations_ms", "faults"});

  // The summary localises by itself when the caller did not (line numbers from timeline_data).
  SummaryContext own{"t.csv", t.rows, t.events.size(), -30, nullptr, &t};
  CHECK(summary_text(b, summarize(b), own).find(fmt::format("  t.csv:{}  h3/eth1 firmware down", at["h3 link 0"])) !=
        std::string::npos);
}

TEST_CASE("the earliest divergence: the lowest layer first, then the earliest last edge") {
  SECTION("h4 stopped at firmware, h1 at carrier: h4, though h1 sorts first") {
    LineTimeline tl;
    four_hosts(tl, {{"h1", "carrier"}, {"h4", "link"}});
    auto faults = localise(compute_breakdown(parse_timeline(tl.text, "t.csv")));
    REQUIRE(faults.size() == 1);
    CHECK(faults[0].host == "h4");
    CHECK(faults[0].layer == ChainLayer::kFirmware);
    CHECK(faults[0].resumed == 2);
    CHECK(faults[0].stopped == std::vector<StoppedPort>{{"h4", "eth1", ChainLayer::kFirmware, kLocT0 + 33 * kLocMs},
                                                        {"h1", "eth1", ChainLayer::kCarrier, kLocT0 + 130 * kLocMs}});
    CHECK(faults[0].verdict == "h4/eth1 stopped at firmware; 2 of 4 port(s) resumed, 1 more stopped");
    CHECK(faults[0].evidence.back() == Evidence{0, "also stopped: h1/eth1 at carrier"});
    CHECK(faults[0].evidence[2] ==
          Evidence{0, "3 of 3 other port(s) reached firmware up at +130.000..+132.000 ms; h4/eth1 never did"});
  }
  SECTION("h2 and h4 both at firmware: h2, whose light came back first (its last edge)") {
    LineTimeline tl;
    four_hosts(tl, {{"h4", "link"}, {"h2", "link"}});
    auto faults = localise(compute_breakdown(parse_timeline(tl.text, "t.csv")));
    REQUIRE(faults.size() == 1);
    CHECK(faults[0].host == "h2");
    CHECK(faults[0].stopped.size() == 2);
    CHECK(faults[0].stopped[1].host == "h4");
    CHECK_FALSE(faults[0].common);  // two of four ports resumed
  }
}

TEST_CASE("every port stopped at the same layer: a shared cause, not one host") {
  LineTimeline tl;
  auto at = four_hosts(tl, {{"h1", "light"}, {"h2", "light"}, {"h3", "light"}, {"h4", "light"}});
  Timeline t = parse_timeline(tl.text, "t.csv");
  auto faults = localise(compute_breakdown(t), &t);
  REQUIRE(faults.size() == 1);
  const Localisation& l = faults[0];
  CHECK(l.common);
  CHECK(l.layer == ChainLayer::kLight);
  CHECK(l.host == "h1");  // every last edge at +4 ms: host order
  CHECK(l.resumed == 0);
  CHECK(l.verdict ==
        "every one of the 4 ports stopped at light, h1/eth1 first: a cause they share (the switch, the light path), "
        "not one host");
  CHECK(l.evidence == std::vector<Evidence>{
                          {at["h1 light 0"], "h1/eth1 light lost at +2.000 ms, never back in the reconfiguration"},
                          {0, "none of the 3 other port(s) reached light back either"},
                          {0, "also stopped: h2/eth1 at light, h3/eth1 at light, h4/eth1 at light"},
                      });
}

TEST_CASE("a reconfiguration the switch refused: the switch, with its command and ack rows") {
  LineTimeline tl;
  auto at = four_hosts(tl, {}, false);
  Timeline t = parse_timeline(tl.text, "t.csv");
  auto faults = localise(compute_breakdown(t), &t);
  REQUIRE(faults.size() == 1);
  const Localisation& l = faults[0];
  CHECK(l.layer == ChainLayer::kSwitch);
  CHECK(l.common);
  CHECK(l.ports == 4);
  CHECK(l.stopped.size() == 4);
  CHECK(l.verdict == "the switch did not acknowledge the command: all 4 port(s) failed; not one host's fault");
  CHECK(l.evidence == std::vector<Evidence>{{at["command"], "command to 'b' issued at +0.000 ms"},
                                            {at["ack"], "the switch answered ack 0 at +5.000 ms"}});
  // Without the timeline the ack is not known: none is claimed either way.
  CHECK(localise(compute_breakdown(t))[0].evidence[1] == Evidence{0, "no ack from the switch in the reconfiguration"});
}

TEST_CASE("ports meant to go dark are not faults; a port coming up is named at its first awaited layer") {
  // a: h1-h2, h3-h4. b: h1-h3. Then a again: h2 and h4 come up; h4's carrier does not (h4 has
  // no firmware probe, so firmware is not awaited).
  LineTimeline tl;
  for (const char* h : {"h1", "h2", "h3", "h4"}) {
    tl.row(kLocT0 - 1000 * kLocMs, h, "emulator", "eth1", "light", 1, 0);
    tl.row(kLocT0 - 1000 * kLocMs, h, "carrier", "eth1", "carrier", 1, 0);
  }
  for (int it = 1; it <= 2; ++it) {
    const int64_t t0 = kLocT0 + (it - 1) * 10'000 * kLocMs;
    tl.row(t0, "switch", "ocs", it == 1 ? "b" : "a", "command", 1, it);
    tl.row(t0 + 20 * kLocMs, "switch", "ocs", it == 1 ? "b" : "a", "ack", 1, it);
    for (const char* h : {"h1", "h3"}) {
      tl.row(t0 + 5 * kLocMs, h, "emulator", "eth1", "light", 0, it);
      tl.row(t0 + 6 * kLocMs, h, "carrier", "eth1", "carrier", 0, it);
      tl.row(t0 + 40 * kLocMs, h, "emulator", "eth1", "light", 1, it);
      tl.row(t0 + 140 * kLocMs, h, "carrier", "eth1", "carrier", 1, it);
    }
    if (it == 1) {
      for (const char* h : {"h2", "h4"}) {
        tl.row(t0 + 5 * kLocMs, h, "emulator", "eth1", "light", 0, it);
        tl.row(t0 + 6 * kLocMs, h, "carrier", "eth1", "carrier", 0, it);
      }
    } else {
      tl.row(t0 + 45 * kLocMs, "h2", "emulator", "eth1", "light", 1, it);
      tl.row(t0 + 160 * kLocMs, "h2", "carrier", "eth1", "carrier", 1, it);
      tl.row(t0 + 45 * kLocMs, "h4", "emulator", "eth1", "light", 1, it);
    }
  }
  std::map<std::string, MappingLinks> mappings = {
      {"a", {"a", {{{"h1", "eth1"}, {"h2", "eth1"}}, {{"h3", "eth1"}, {"h4", "eth1"}}}}},
      {"b", {"b", {{{"h1", "eth1"}, {"h3", "eth1"}}}}}};
  Intents in = derive_intents(mappings, "a", {{1, "b", true}, {2, "a", true}});
  Timeline t = parse_timeline(tl.text, "t.csv");
  Breakdown b = compute_breakdown(t, {}, &in);
  auto faults = localise(b, &t);
  // 1: h2 and h4 went dark on purpose, h1 and h3 moved: nothing to localise.
  REQUIRE(faults.size() == 1);
  const Localisation& l = faults[0];
  CHECK(l.iteration == 2);
  CHECK(l.host == "h4");
  CHECK(l.layer == ChainLayer::kCarrier);
  CHECK(l.ports == 4);
  CHECK(l.resumed == 3);
  CHECK(l.evidence[0].text == "h4/eth1 light back at +45.000 ms");
  CHECK(l.evidence[0].line > 0);
  CHECK(l.evidence[1] == Evidence{0, "h4/eth1 carrier never came up after the command (the port was coming up)"});
  CHECK(l.evidence[2] ==
        Evidence{0, "3 of 3 other port(s) reached carrier up at +140.000..+160.000 ms; h4/eth1 never did"});
  for (const auto& r : b.rows) {
    if (r.host == "h4" && r.iteration == 2) CHECK(r.awaited == (kAwaitedLight | kAwaitedCarrier));
    if (r.intent != Intent::kUp) CHECK(r.awaited == 0);
  }

  // Without intents the ports that went dark read as incomplete: iteration 1 is localised
  // instead, at light (h2 and h4's light never came back), which is what intents are for; in 2
  // the ports coming up have no down edge, so they read as unaffected.
  auto without = localise(compute_breakdown(t));
  REQUIRE(without.size() == 1);
  CHECK(without[0].iteration == 1);
  CHECK(without[0].host == "h2");
  CHECK(without[0].layer == ChainLayer::kLight);
}

TEST_CASE("a run where every reconfiguration completed: no faults, and the summary says so") {
  LineTimeline tl;
  four_hosts(tl, {});
  Timeline t = parse_timeline(tl.text, "t.csv");
  Breakdown b = compute_breakdown(t);
  CHECK(localise(b, &t).empty());
  SummaryContext c{"t.csv", t.rows, t.events.size(), -30, nullptr, &t};
  CHECK(summary_text(b, summarize(b), c)
            .ends_with("\nfault localisation: none (every reconfiguration completed on every port that took part)\n"));
  CHECK(summary_json(b, summarize(b), c)["faults"] == nlohmann::ordered_json::array());
}

TEST_CASE("stopped_layer follows each status's rule") {
  BreakdownRow r;
  r.status = Status::kOk;
  CHECK_FALSE(stopped_layer(r));
  r.status = Status::kDisconnected;
  r.edges[kLightLost] = 1;
  CHECK_FALSE(stopped_layer(r));
  r.status = Status::kFailed;
  CHECK(stopped_layer(r) == ChainLayer::kSwitch);
  r.status = Status::kIncomplete;
  r.edges[kLightBack] = 2;
  r.edges[kRdmaStalled] = 1;
  CHECK(stopped_layer(r) == ChainLayer::kRdma);  // light came back; rdma did not resume
  r.edges[kCarrierDown] = 3;
  CHECK(stopped_layer(r) == ChainLayer::kCarrier);
  r = BreakdownRow{};
  r.status = Status::kIncomplete;
  r.intent = Intent::kUp;
  r.awaited = kAwaitedFirmware | kAwaitedRdma;
  r.edges[kFirmwareUp] = 5;
  CHECK(stopped_layer(r) == ChainLayer::kRdma);  // light and carrier were not awaited
  CHECK(std::string(chain_layer_name(ChainLayer::kFirmware)) == "firmware");
}

TEST_CASE("a host whose capture ended before the command: its row is lost, localised at the capture, not the light") {
  // h3's agent dies 40 ms before the command: its heartbeats (every 10 ms) stop then. The
  // switch side still sees its light go and come back (emulator rows, as a power monitor's
  // would be), but its firmware and carrier rows never come: they were not captured, not down.
  LineTimeline tl;
  for (int64_t t = -200; t <= 300; t += 10) {
    for (const char* h : {"h1", "h2", "h3", "h4"}) {
      if (std::string(h) == "h3" && t > -40) continue;
      tl.row(kLocT0 + t * kLocMs, h, "heartbeat", "agent", "heartbeat", 1);
    }
  }
  four_hosts(tl, {});
  // four_hosts wrote h3's firmware and carrier rows too: drop them, as a dead agent sends none.
  std::string kept;
  std::istringstream in(tl.text);
  for (std::string line; std::getline(in, line);) {
    if (line.find(",h3,emulator,eth1,link,") != std::string::npos || line.find(",h3,carrier,") != std::string::npos)
      continue;
    kept += line + "\n";
  }
  Timeline t = parse_timeline(kept, "t.csv");
  REQUIRE(t.heartbeats_of("r1", "h3"));
  CHECK(t.heartbeats_of("r1", "h3")->last_ns == kLocT0 - 40 * kLocMs);
  CHECK(t.heartbeats_of("r1", "h3")->gap_ns == 10 * kLocMs);
  CHECK(t.heartbeats_of("r1", "h1")->last_ns == kLocT0 + 300 * kLocMs);
  CHECK_FALSE(t.heartbeats_of("r1", "switch"));
  CHECK_FALSE(t.heartbeats_of("r2", "h1"));
  CHECK(t.capture_lost_at("r1", "h3") == kLocT0 - 40 * kLocMs);  // the others went on 340 ms longer
  CHECK_FALSE(t.capture_lost_at("r1", "h1"));
  Breakdown b = compute_breakdown(t);
  REQUIRE(b.rows.size() == 4);
  for (const auto& r : b.rows) {
    INFO(r.host);
    CHECK(r.status == (r.host == "h3" ? Status::kLost : Status::kOk));
    CHECK(r.capture_end_ns == (r.host == "h3" ? std::optional<int64_t>(kLocT0 - 40 * kLocMs) : std::nullopt));
  }
  CHECK(b.rows[2].edges[kLightBack] == kLocT0 + 32 * kLocMs);  // the switch side's edges are kept

  auto faults = localise(b, &t);
  REQUIRE(faults.size() == 1);
  const Localisation& l = faults[0];
  CHECK(l.host == "h3");
  CHECK(l.layer == ChainLayer::kCapture);
  CHECK_FALSE(l.common);
  CHECK(l.ports == 4);
  CHECK(l.resumed == 3);
  CHECK(l.verdict == "h3/eth1: no capture, h3's agent was lost before the command; 3 of 4 port(s) resumed");
  REQUIRE(l.evidence.size() == 3);
  CHECK(l.evidence[0].text == "h3/eth1 light lost at +2.000 ms, back at +32.000 ms");
  CHECK(l.evidence[0].line > 0);
  CHECK(l.evidence[1] ==
        Evidence{0, "h3's last heartbeat at -40.000 ms, before the command: nothing from h3 after it"});
  CHECK(l.evidence[2] == Evidence{0, "3 of 3 other port(s) were observed through the reconfiguration"});

  // A run whose captures all end together (the last reconfiguration, a heartbeat slower than
  // its dwell) loses no host: every host's last heartbeat may precede the last command.
  {
    LineTimeline slow;
    for (int64_t t3 = -2000; t3 <= -500; t3 += 500) {
      for (const char* h : {"h1", "h2", "h3", "h4"}) slow.row(kLocT0 + t3 * kLocMs, h, "heartbeat", "agent", "heartbeat", 1);
    }
    four_hosts(slow, {});
    Timeline ts = parse_timeline(slow.text, "t.csv");
    for (const auto& r : compute_breakdown(ts).rows) CHECK(r.status == Status::kOk);
  }

  // A port that stopped at a layer of the network is named before a lost one.
  LineTimeline both;
  for (int64_t t2 = -200; t2 <= 300; t2 += 10) {
    for (const char* h : {"h1", "h2", "h3", "h4"}) {
      if (std::string(h) == "h3" && t2 > -40) continue;
      both.row(kLocT0 + t2 * kLocMs, h, "heartbeat", "agent", "heartbeat", 1);
    }
  }
  four_hosts(both, {{"h2", "carrier"}});
  Timeline t2 = parse_timeline(both.text, "t.csv");
  auto f2 = localise(compute_breakdown(t2), &t2);
  REQUIRE(f2.size() == 1);
  CHECK(f2[0].host == "h2");
  CHECK(f2[0].layer == ChainLayer::kCarrier);
  REQUIRE(f2[0].stopped.size() == 2);
  CHECK(f2[0].stopped[1].host == "h3");
  CHECK(f2[0].stopped[1].layer == ChainLayer::kCapture);

  // summary.json counts the lost rows; the text says so only when there are some.
  SummaryContext c{"t.csv", t.rows, t.events.size(), -30, &faults, nullptr};
  CHECK(summary_json(b, summarize(b), c)["status"]["lost"] == 1);
  CHECK_THAT(summary_text(b, summarize(b), c), Catch::Contains("0 disconnected, 1 lost (no capture)\n"));
}
