// ScpiDriver end to end over loopback TCP against the SCPI grammar peer.
#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>

#include "ocslab/ocsctl/scpi_driver.h"
#include "ocslab/testing/peers.h"

using namespace ocslab;
using namespace ocslab::ocs;
using namespace ocslab::testing;
using Circuits = std::vector<Circuit>;

namespace {

SwitchUrl url_of(TcpPeer& peer) { return SwitchUrl::parse("scpi://127.0.0.1:" + std::to_string(peer.port())); }

DriverOptions quick_options() {
  DriverOptions o;
  o.reply_timeout = std::chrono::milliseconds(2000);
  o.connect_timeout = std::chrono::milliseconds(2000);
  return o;
}

// Requests the peer received whose header starts with `prefix` (as the driver spells it).
std::vector<std::string> sent(const PeerSwitch& sw, const std::string& prefix) {
  std::vector<std::string> out;
  for (const auto& h : sw.history()) {
    if (h.rfind(prefix, 0) == 0) out.push_back(h);
  }
  return out;
}

}  // namespace

TEST_CASE("scpi driver: info, connect, list, disconnect, power") {
  PeerSwitch sw(16, 16);
  TcpPeer peer(PeerProtocol::kScpi, sw);
  std::vector<CallTiming> timings;
  auto opts = quick_options();
  opts.on_timing = [&](const CallTiming& t) { timings.push_back(t); };
  ScpiDriver drv(url_of(peer), opts);

  auto info = drv.info();
  CHECK(info.vendor == "Polatis");
  CHECK(info.model == "Series 6000 16x16");
  CHECK(info.serial == "OCSLAB-PEER-0001");
  CHECK(info.version == "7.1.2");
  CHECK(info.ingress_ports == 16);
  CHECK(info.egress_ports == 16);
  // Opening clears the error queue and checks identity in one line; the first info reuses it.
  auto h = sw.history();
  REQUIRE(h.size() >= 3);
  CHECK(h[0] == "*CLS");
  CHECK(h[1] == "*IDN?");
  CHECK(h[2] == ":OXC:SWITch:SIZE?");

  sw.clear_history();
  timings.clear();
  drv.connect({{1, 17}, {2, 18}, {3, 19}, {5, 21}});
  CHECK(sw.circuits() == Circuits{{1, 17}, {2, 18}, {3, 19}, {5, 21}});
  // One ADD for all circuits, followed in the same write by the operation-complete query (the
  // ack waits for the end of switching) and the error query.
  CHECK(sw.history() ==
        std::vector<std::string>{":OXC:SWITch:CONNect:ADD (@1:3,5),(@17:19,21)", "*OPC?", ":SYST:ERR?"});
  REQUIRE(timings.size() == 1);
  CHECK(timings[0].op == "connect");
  CHECK(timings[0].command == ":OXC:SWITch:CONNect:ADD (@1:3,5),(@17:19,21)");
  CHECK(timings[0].ok);
  CHECK(timings[0].issued.monotonic_ns < timings[0].acked.monotonic_ns);
  CHECK(timings[0].issued.realtime_ns <= timings[0].acked.realtime_ns);

  CHECK(drv.list() == Circuits{{1, 17}, {2, 18}, {3, 19}, {5, 21}});
  CHECK(drv.last_timing()->command == ":OXC:SWITch:CONNect:STATe?");
  CHECK(drv.last_timing()->op == "list");

  sw.clear_history();
  drv.disconnect({2, 19});  // an ingress and an egress port: two circuits go
  CHECK(sw.circuits() == Circuits{{1, 17}, {5, 21}});
  CHECK(sent(sw, ":OXC:SWITch:CONNect:SUB") == std::vector<std::string>{":OXC:SWITch:CONNect:SUB (@2,3),(@18,19)"});

  sw.clear_history();
  drv.disconnect({4});  // nothing on port 4: nothing to send after the read
  CHECK(sent(sw, ":OXC:SWITch:CONNect:SUB").empty());
  CHECK(sw.circuits() == Circuits{{1, 17}, {5, 21}});

  auto p = drv.power({17, 20, 1});
  REQUIRE(p.size() == 3);
  CHECK(p[0].port == 17);
  CHECK(p[0].dbm == Approx(-3.7));
  CHECK(p[1].port == 20);
  CHECK(p[1].dbm == Approx(-60.0));
  CHECK(p[2].port == 1);
  CHECK(p[2].dbm == Approx(-3.1));
  CHECK(drv.last_timing()->command == ":PMON:POW? (@17,20,1)");
  CHECK(drv.power({}).empty());

  // Every call reused the one connection.
  CHECK(peer.server().accepted() == 1);
}

TEST_CASE("scpi driver: apply merges and replaces through the base class") {
  PeerSwitch sw(16, 16);
  TcpPeer peer(PeerProtocol::kScpi, sw);
  ScpiDriver drv(url_of(peer), quick_options());
  drv.connect({{1, 17}, {2, 18}, {3, 19}, {4, 20}});

  auto r = drv.apply({{1, 17}, {2, 19}, {5, 21}}, ApplyMode::kMerge);
  CHECK(r.diff.keep == Circuits{{1, 17}});
  CHECK(r.diff.remove == Circuits{{2, 18}, {3, 19}});
  CHECK(r.diff.add == Circuits{{2, 19}, {5, 21}});
  CHECK(sw.circuits() == Circuits{{1, 17}, {2, 19}, {4, 20}, {5, 21}});
  std::vector<std::string> cmds;
  for (const auto& c : r.calls) cmds.push_back(c.op + " " + c.command);
  CHECK(cmds == std::vector<std::string>{"list :OXC:SWITch:CONNect:STATe?", "list :OXC:SWITch:CONNect:STATe?",
                                         "disconnect :OXC:SWITch:CONNect:SUB (@2,3),(@18,19)",
                                         "connect :OXC:SWITch:CONNect:ADD (@2,5),(@19,21)"});
  CHECK(r.started.monotonic_ns == r.calls.front().issued.monotonic_ns);
  CHECK(r.finished.monotonic_ns == r.calls.back().acked.monotonic_ns);

  r = drv.apply({{6, 22}}, ApplyMode::kReplace);
  CHECK(r.diff.remove == Circuits{{1, 17}, {2, 19}, {4, 20}, {5, 21}});
  CHECK(sw.circuits() == Circuits{{6, 22}});

  sw.clear_history();
  r = drv.apply({{6, 22}}, ApplyMode::kReplace);
  CHECK(r.diff.empty());
  CHECK(r.calls.size() == 1);
  CHECK(sw.history() == std::vector<std::string>{":OXC:SWITch:CONNect:STATe?"});

  r = drv.clear();
  CHECK(sw.circuits().empty());
}

TEST_CASE("scpi driver: switch errors become DenyError with the code and the switch's text") {
  PeerSwitch sw(16, 16);
  TcpPeer peer(PeerProtocol::kScpi, sw);
  std::vector<CallTiming> timings;
  auto opts = quick_options();
  opts.on_timing = [&](const CallTiming& t) { timings.push_back(t); };
  ScpiDriver drv(url_of(peer), opts);
  drv.connect({{1, 18}});
  timings.clear();

  try {
    drv.connect({{1, 17}});  // ingress 1 is already patched; this peer refuses instead of replacing
    FAIL("no DenyError");
  } catch (const DenyError& e) {
    CHECK(e.code() == "-200");
    CHECK(e.text() == "Execution error; Port already connected: 1");
    std::string what = e.what();
    CHECK_THAT(what, Catch::StartsWith(drv.name() + ": connect (:OXC:SWITch:CONNect:ADD (@1),(@17)): "));
    CHECK_THAT(what, Catch::Contains("-200") && Catch::Contains("Port already connected: 1"));
  }
  // The refusal is read from the error query sent with the ADD (after *OPC?, which a refused
  // command does not hold up); one more query confirms the queue is empty, so the next
  // command is not blamed for this one's leftovers.
  CHECK(sw.history() == std::vector<std::string>{"*CLS", "*IDN?", ":OXC:SWITch:SIZE?",
                                                 ":OXC:SWITch:CONNect:ADD (@1),(@18)", "*OPC?", ":SYST:ERR?",
                                                 ":OXC:SWITch:CONNect:ADD (@1),(@17)", "*OPC?", ":SYST:ERR?",
                                                 ":SYST:ERR?"});
  REQUIRE(timings.size() == 1);
  CHECK_FALSE(timings[0].ok);
  CHECK(timings[0].command == ":OXC:SWITch:CONNect:ADD (@1),(@17)");
  CHECK_THAT(timings[0].error, Catch::Contains("Port already connected"));
  CHECK(sw.circuits() == Circuits{{1, 18}});

  // The refusal left no stale entry behind: the next command succeeds on the same session.
  drv.connect({{2, 17}});
  CHECK(sw.circuits() == Circuits{{1, 18}, {2, 17}});
  CHECK(peer.server().accepted() == 1);

  peer.quirks().replace_patched = true;  // a switch that replaces: takes effect on a new session
  drv.close();
  drv.connect({{1, 17}});
  CHECK(sw.circuits() == Circuits{{1, 17}});
}

TEST_CASE("scpi driver: the allow-list refuses before anything is sent") {
  PeerSwitch sw(16, 16);
  TcpPeer peer(PeerProtocol::kScpi, sw);
  auto opts = quick_options();
  opts.allow = PortSet::parse("1..4,17..20");
  ScpiDriver drv(url_of(peer), opts);
  drv.open();
  sw.connect({{1, 25}}, false);  // made by someone else: its far end is not ours
  sw.clear_history();

  CHECK_THROWS_WITH(drv.connect({{5, 21}}),
                    Catch::Contains("port 5 is outside the allow-list") && Catch::Contains("nothing was sent"));
  CHECK(sw.history().empty());

  CHECK_THROWS_AS(drv.disconnect({1}), PortError);
  // Only the read that found the far end; no SUB.
  CHECK(sw.history() == std::vector<std::string>{":OXC:SWITch:CONNect:STATe?"});
  CHECK(sw.circuits() == Circuits{{1, 25}});

  CHECK_THROWS_WITH(drv.connect({{40, 17}}), Catch::Contains("unknown port 40"));
  CHECK(sw.history().size() == 1);
}

TEST_CASE("scpi driver: bare LF, split writes and slow replies") {
  PeerQuirks q;
  SECTION("bare LF") { q.bare_lf = true; }
  SECTION("split writes") { q.split_writes = true; }
  SECTION("delayed replies") { q.reply_delay_ms = 30; }
  SECTION("all at once") {
    q.bare_lf = true;
    q.split_writes = true;
    q.reply_delay_ms = 10;
  }
  PeerSwitch sw(8, 8);
  TcpPeer peer(PeerProtocol::kScpi, sw, q);
  ScpiDriver drv(url_of(peer), quick_options());
  auto info = drv.info();
  CHECK(info.ingress_ports == 8);
  CHECK(info.model == "Series 6000 8x8");
  drv.connect({{1, 9}, {2, 10}});
  CHECK(drv.list() == Circuits{{1, 9}, {2, 10}});
  auto p = drv.power({9, 16});
  REQUIRE(p.size() == 2);
  CHECK(p[0].dbm == Approx(-3.9));
  CHECK(p[1].dbm == Approx(-60.0));
  CHECK_THROWS_AS(drv.connect({{1, 11}}), DenyError);
  drv.disconnect({1, 2});
  CHECK(sw.circuits().empty());
  if (q.reply_delay_ms > 0) CHECK(drv.last_timing()->latency_ms() >= q.reply_delay_ms);
  CHECK(peer.server().accepted() == 1);
}

TEST_CASE("scpi driver: a connection dropped mid-command is reported and the next call reconnects") {
  PeerSwitch sw(16, 16);
  PeerQuirks q;
  q.drop_on = "CONNect:ADD";
  TcpPeer peer(PeerProtocol::kScpi, sw, q);
  ScpiDriver drv(url_of(peer), quick_options());
  drv.open();
  REQUIRE(peer.server().accepted() == 1);

  try {
    drv.connect({{1, 17}});
    FAIL("no ConnectionError");
  } catch (const ConnectionError& e) {
    std::string what = e.what();
    CHECK_THAT(what, Catch::Contains("scpi://127.0.0.1:" + std::to_string(peer.port())));
    CHECK_THAT(what, Catch::Contains("connect (:OXC:SWITch:CONNect:ADD (@1),(@17))"));
    CHECK_THAT(what, Catch::Contains("connection closed"));
  }
  CHECK_FALSE(drv.is_open());
  CHECK(sw.circuits().empty());

  CHECK(drv.list().empty());
  CHECK(drv.is_open());
  CHECK(peer.server().accepted() == 2);
}

TEST_CASE("scpi driver: no reply within the deadline is a TimeoutError; the next call works") {
  PeerSwitch sw(16, 16);
  PeerQuirks q;
  q.never_reply_to = ":PMON";
  TcpPeer peer(PeerProtocol::kScpi, sw, q);
  auto opts = quick_options();
  opts.reply_timeout = std::chrono::milliseconds(300);
  ScpiDriver drv(url_of(peer), opts);
  drv.open();

  auto t0 = std::chrono::steady_clock::now();
  CHECK_THROWS_WITH(drv.power({17}), Catch::Contains(drv.name() + ": power (:PMON:POW? (@17)): ") &&
                                         Catch::Contains("no reply to :PMON:POW? (@17) within 300 ms"));
  auto took = std::chrono::steady_clock::now() - t0;
  CHECK(took >= std::chrono::milliseconds(300));
  CHECK(took < std::chrono::milliseconds(1500));
  CHECK_FALSE(drv.is_open());

  drv.connect({{1, 17}});
  CHECK(sw.circuits() == Circuits{{1, 17}});
  CHECK(peer.server().accepted() == 2);
}

TEST_CASE("scpi driver: a set command that hangs times out too") {
  PeerSwitch sw(16, 16);
  PeerQuirks q;
  q.never_reply_to = "CONNect:SUB";
  TcpPeer peer(PeerProtocol::kScpi, sw, q);
  auto opts = quick_options();
  opts.reply_timeout = std::chrono::milliseconds(200);
  ScpiDriver drv(url_of(peer), opts);
  drv.connect({{1, 17}});
  CHECK_THROWS_AS(drv.disconnect({1}), TimeoutError);
  CHECK(drv.list() == Circuits{{1, 17}});  // the swallowed SUB was never executed
}

TEST_CASE("scpi driver: a garbage reply is a ProtocolError quoting it") {
  PeerSwitch sw(16, 16);
  PeerQuirks q;
  q.garbage_on = "STATe?";
  TcpPeer peer(PeerProtocol::kScpi, sw, q);
  ScpiDriver drv(url_of(peer), quick_options());
  drv.connect({{1, 17}});
  CHECK_THROWS_WITH(drv.list(), Catch::Contains("list (:OXC:SWITch:CONNect:STATe?)") &&
                                    Catch::Contains("'\\x01\\x7fgarbage#&!\\x02'"));
  CHECK_FALSE(drv.is_open());
  // Garbage in place of the error query's answer is caught too.
  peer.quirks().garbage_on = "CONNect:ADD";
  CHECK_THROWS_AS(drv.connect({{2, 18}}), ProtocolError);
  CHECK(peer.server().accepted() == 2);
  CHECK(drv.power({17})[0].dbm == Approx(-3.7));
  CHECK(peer.server().accepted() == 3);
}

TEST_CASE("scpi driver: no operation complete in time, or a garbled one, fails the call naming the switch") {
  PeerSwitch sw(16, 16);
  PeerQuirks silent;
  silent.never_reply_to = "*OPC";  // a switch that never reports the end of switching
  TcpPeer peer(PeerProtocol::kScpi, sw, silent);
  auto opts = quick_options();
  opts.reply_timeout = std::chrono::milliseconds(300);
  std::vector<CallTiming> timings;
  opts.on_timing = [&](const CallTiming& t) { timings.push_back(t); };
  ScpiDriver drv(url_of(peer), opts);
  drv.open();
  timings.clear();

  CHECK_THROWS_WITH(drv.connect({{1, 17}}),
                    Catch::StartsWith(drv.name() + ": connect (:OXC:SWITch:CONNect:ADD (@1),(@17)): ") &&
                        Catch::Contains("no reply to *OPC? (the end of switching) within 300 ms"));
  CHECK_FALSE(drv.is_open());  // a late "1" must not be read as the next command's answer
  REQUIRE(timings.size() == 1);
  CHECK_FALSE(timings[0].ok);  // never acknowledged: switching was not seen to end

  PeerQuirks garbled;
  garbled.garbage_on = "*OPC";
  TcpPeer peer2(PeerProtocol::kScpi, sw, garbled);
  ScpiDriver drv2(url_of(peer2), quick_options());
  CHECK_THROWS_WITH(drv2.connect({{2, 18}}), Catch::StartsWith(drv2.name() + ": connect (") &&
                                                 Catch::Contains("control characters in *OPC? reply") &&
                                                 Catch::Contains("'\\x01\\x7fgarbage#&!\\x02'"));
  CHECK_FALSE(drv2.is_open());
}

TEST_CASE("scpi driver: a partial apply reports what was made and removed") {
  PeerSwitch sw(16, 16);
  PeerQuirks q;
  SECTION("the switch refuses the ADD") { q.deny_on = "CONNect:ADD"; }
  SECTION("the connection drops on the ADD") { q.drop_on = "CONNect:ADD"; }
  TcpPeer peer(PeerProtocol::kScpi, sw, q);
  ScpiDriver drv(url_of(peer), quick_options());
  sw.connect({{2, 18}, {3, 19}, {4, 20}}, false);

  try {
    drv.apply({{1, 17}, {2, 19}}, ApplyMode::kMerge);
    FAIL("no ApplyError");
  } catch (const ApplyError& e) {
    CHECK(e.state_known());
    CHECK(e.removed() == Circuits{{2, 18}, {3, 19}});
    CHECK(e.made().empty());
    CHECK(e.not_made() == Circuits{{1, 17}, {2, 19}});
    CHECK_THAT(e.what(), Catch::Contains("at (:OXC:SWITch:CONNect:ADD (@1,2),(@17,19))"));
    CHECK_THAT(e.what(), Catch::Contains("made 0 of 2") && Catch::Contains("removed 2 of 2"));
  }
  // The report matches the switch.
  CHECK(sw.circuits() == Circuits{{4, 20}});
  CHECK(drv.list() == Circuits{{4, 20}});
}

TEST_CASE("scpi peer: other spellings, compound queries and the error queue") {
  // Other clients spell commands differently; the peer (and later the emulator) must accept them.
  PeerSwitch sw(4, 4);
  TcpPeer peer(PeerProtocol::kScpi, sw);
  auto s = tcp_connect("127.0.0.1", peer.port(), std::chrono::milliseconds(2000));
  // load-safe: the ceiling of each read of a reply already on its way; a hang guard.
  auto deadline = [] { return Clock::now() + std::chrono::milliseconds(2000); };
  auto read_line = [&] {
    std::string buf;
    while (buf.find('\n') == std::string::npos) {
      auto c = s->read_some(deadline());
      REQUIRE_FALSE(c.empty());
      buf += c;
    }
    return buf;
  };
  s->write(":oxc:switch:connect:add (@1,2),(@5,6);:OXC:SWIT:CONN:STAT?;*OPC?\r\n");
  CHECK(read_line() == "(@1,2),(@5,6);1\r\n");
  s->write(":OXC:SWIT:CONN:PORT? 2\r\n");
  CHECK(read_line() == "\"6\"\r\n");
  s->write(":OXC:SWIT:CONN:PORT? 3\r\n");
  CHECK(read_line() == "\"0\"\r\n");
  s->write(":OXC:SWITch:CONNect:ONLY (@3),(@8)\r\n:SYST:ERR?\r\n");
  CHECK(read_line() == "0,\"No error\"\r\n");
  CHECK(sw.circuits() == Circuits{{3, 8}});
  s->write(":NOPE:CMD\r\n:OXC:SWIT:CONN:ADD (@9),(@5)\r\n:SYST:ERR?;:SYST:ERR?;:SYST:ERR?\r\n");
  CHECK(read_line() ==
        "-113,\"Undefined header\";-222,\"Data out of range; not an ingress port 9\";0,\"No error\"\r\n");
  s->write(":OXC:SWIT:DISC:ALL\r\n*OPC?\r\n");
  CHECK(read_line() == "1\r\n");
  CHECK(sw.circuits().empty());
  CHECK(sent(sw, ":oxc:switch:connect:add").size() == 1);
}
