// ScpiSession and NetconfSession as state machines on a real io_context: compound lines,
// mnemonic forms, the error queue, *OPC? held until the mirrors settle, NETCONF hello and
// framing negotiation, edits, rpc-errors and broken frames.
#include <boost/asio/io_context.hpp>
#include <catch2/catch.hpp>

#include <memory>

#include "ocslab/emulator/netconf_session.h"
#include "ocslab/emulator/scpi_session.h"
#include "ocslab/testing/io_run.h"

using namespace ocslab;
using namespace ocslab::emu;
using namespace std::chrono_literals;

namespace {

struct Rig {
  explicit Rig(double switching_ms = 0, bool settle = true) : model(io, params(switching_ms, settle), truth) {}
  static SwitchParams params(double ms, bool settle) {
    SwitchParams p;
    p.ingress_ports = 8;
    p.egress_ports = 8;
    p.switching = Distribution::fixed(ms);
    p.ack_after_settle = settle;
    return p;
  }
  void run(std::chrono::milliseconds d = 5ms) { ocslab::testing::run_through(io, d); }
  boost::asio::io_context io;
  GroundTruth truth{"ocs"};
  SwitchModel model;
  ControlPlaneConfig config;
  std::string out;
  bool closed = false;
};

}  // namespace

TEST_CASE("SCPI compound lines, short and long mnemonics, split input", "[scpi_session]") {
  Rig r;
  ScpiSession s(r.model, r.truth, r.config, [&](std::string x) { r.out += x; });
  std::string line = "*CLS;*IDN?\r\n:oxc:swit:conn:add (@1,2),(@9,10);:OXC:SWITch:CONNect:STATe?\r\n";
  for (char c : line) s.on_bytes(std::string_view(&c, 1));
  r.run();
  CHECK(r.out == "POLATIS,6000,OCSLAB-EMU-0001,ocslab-emulator\r\n(@1,2),(@9,10)\r\n");
  r.out.clear();
  s.on_bytes(":OXC:SWIT:SIZE?;:OXC:SWIT:CONN:PORT? 10;:PMON:POW? (@9,11)\r\n");
  CHECK(r.out == "8,8;\"2\";(-1.50,-60.00)\r\n");
}

TEST_CASE("SCPI errors go to the queue with the device's text", "[scpi_session]") {
  Rig r;
  ScpiSession s(r.model, r.truth, r.config, [&](std::string x) { r.out += x; });
  s.on_bytes(":OXC:SWIT:CONN:ADD (@1),(@9)\r\n:OXC:SWIT:CONN:ADD (@2),(@9)\r\n:SYST:ERR?\r\n:SYST:ERR?\r\n");
  r.run();
  CHECK(r.out == "-200,\"Execution error; Port already connected: 9\"\r\n0,\"No error\"\r\n");
  r.out.clear();
  s.on_bytes(":OXC:SWIT:CONN:ADD (@1),(@99)\r\n:FROB\r\n((\r\n:SYST:ERR?;:SYST:ERR?;:SYST:ERR?\r\n");
  CHECK(r.out == "-222,\"Data out of range; Invalid OXC port: 99\";-113,\"Undefined header\";-102,\"Syntax error\"\r\n");
  for (int i = 0; i < 20; ++i) s.on_bytes(":FROB\r\n");
  CHECK(s.queued_errors() == ScpiSession::kQueueDepth);
}

TEST_CASE("SCPI: a connect is done once accepted; *OPC? and *WAI wait for the mirrors", "[scpi_session]") {
  Rig r(50);
  ScpiSession s(r.model, r.truth, r.config, [&](std::string x) { r.out += x; });
  s.on_bytes(":OXC:SWIT:CONN:ADD (@1),(@9)\r\n:SYST:ERR?\r\n*OPC?\r\n:OXC:SWIT:CONN:STAT?\r\n");
  // Overlapped: the error query right behind the ADD reports its acceptance at once.
  CHECK(r.out == "0,\"No error\"\r\n");
  r.run(20ms);
  CHECK(r.out == "0,\"No error\"\r\n");
  CHECK_FALSE(r.model.lit(9));
  r.run(80ms);
  CHECK(r.out == "0,\"No error\"\r\n1\r\n(@1),(@9)\r\n");
  CHECK(r.model.lit(9));
  // The ground truth: the ADD acknowledged at acceptance, the *OPC? after the mirror settled.
  int64_t add_ack = 0, opc_ack = 0, end = 0;
  for (const auto& x : r.truth.samples()) {
    if (x.source == "scpi" && x.subject == "OXC:SWIT:CONN:ADD" && x.signal == "ack") add_ack = x.mono_ns;
    if (x.source == "scpi" && x.subject == "*OPC?" && x.signal == "ack") opc_ack = x.mono_ns;
    if (x.source == "switch" && x.subject == "1-9" && x.signal == "switch_end") end = x.mono_ns;
  }
  CHECK(add_ack > 0);
  CHECK(add_ack < end);
  CHECK(end <= opc_ack);

  // *WAI holds what follows it the same way; with nothing moving, *OPC? answers at once.
  r.out.clear();
  s.on_bytes(":OXC:SWIT:CONN:ADD (@2),(@10)\r\n*WAI;:PMON:POW? (@10)\r\n");
  r.run(20ms);
  CHECK(r.out.empty());
  r.run(80ms);
  CHECK(r.out == "(-1.50)\r\n");
  s.on_bytes("*OPC?\r\n");
  CHECK(r.out == "(-1.50)\r\n1\r\n");
}

TEST_CASE("SCPI *OPC? answers at once without ack_after_settle", "[scpi_session]") {
  Rig r(50, false);
  ScpiSession s(r.model, r.truth, r.config, [&](std::string x) { r.out += x; });
  s.on_bytes(":OXC:SWIT:CONN:ADD (@1),(@9)\r\n*OPC?\r\n");
  CHECK(r.out == "1\r\n");
  CHECK_FALSE(r.model.lit(9));  // the switch reported completion before the light
  r.run(80ms);
  CHECK(r.model.lit(9));
}

TEST_CASE("SCPI: a session closed while *OPC? waits sends nothing more", "[scpi_session]") {
  Rig r(50);
  auto s = std::make_unique<ScpiSession>(r.model, r.truth, r.config, [&](std::string x) { r.out += x; });
  s->on_bytes(":OXC:SWIT:CONN:ADD (@1),(@9)\r\n*OPC?\r\n");
  s->closed();
  s.reset();  // the settle callback finds the session gone
  r.run(80ms);
  CHECK(r.out.empty());
  CHECK(r.model.lit(9));
}

TEST_CASE("SCPI discards an over-long line and reports the overrun", "[scpi_session]") {
  Rig r;
  ScpiSession s(r.model, r.truth, r.config, [&](std::string x) { r.out += x; });
  s.on_bytes(std::string(ScpiSession::kMaxLine + 5, 'z'));
  s.on_bytes("zz\r\n:SYST:ERR?\r\n");
  CHECK(r.out == "-363,\"Input buffer overrun\"\r\n");
}

namespace {

std::string rpc(uint64_t id, const std::string& body) {
  return ocs::encode_frame(ocs::build_rpc(id, body), ocs::Framing::kChunked);
}

}  // namespace

TEST_CASE("NETCONF hello, chunked framing and edits", "[netconf_session]") {
  Rig r;
  NetconfSession s(r.model, r.truth, r.config, [&](std::string x) { r.out += x; }, [&] { r.closed = true; });
  s.on_open();
  CHECK_THAT(r.out, Catch::Matchers::Contains("urn:ietf:params:netconf:base:1.1"));
  CHECK_THAT(r.out, Catch::Matchers::Contains("module=optical-switch&amp;revision=2018-01-09"));
  CHECK_THAT(r.out, Catch::Matchers::EndsWith("]]>]]>"));
  r.out.clear();
  // The client's hello and its first chunked rpc in one read.
  std::string bytes = ocs::encode_frame(ocs::build_hello({ocs::kNetconfBase10, ocs::kNetconfBase11}),
                                        ocs::Framing::kEndOfMessage) +
                      rpc(1, ocs::build_edit_config(ocs::build_cross_connects({{1, 9}, {2, 10}}, {}, "pair")));
  s.on_bytes(bytes);
  r.run();
  CHECK(s.framing() == ocs::Framing::kChunked);
  CHECK_THAT(r.out, Catch::Matchers::StartsWith("\n#"));
  CHECK_THAT(r.out, Catch::Matchers::Contains("<ok/>"));
  CHECK(r.model.circuits() == std::vector<Circuit>{{1, 9}, {2, 10}});
  r.out.clear();
  // Delete one pair, read back.
  s.on_bytes(rpc(2, ocs::build_edit_config(ocs::build_cross_connects({}, {1}, "pair"))));
  s.on_bytes(rpc(3, ocs::build_get("<cross-connects xmlns=\"http://www.polatis.com/yang/optical-switch\"/>")));
  CHECK_THAT(r.out, Catch::Matchers::Contains("<pair><ingress>2</ingress><egress>10</egress></pair>"));
  CHECK(r.model.circuits() == std::vector<Circuit>{{2, 10}});
  r.out.clear();
  s.on_bytes(rpc(4, ocs::build_get("<product-information xmlns=\"http://www.polatis.com/yang/optical-switch\"/>")));
  CHECK_THAT(r.out, Catch::Matchers::Contains("<model-name>6000-8x8</model-name>"));
  s.on_bytes(rpc(5, "<close-session/>"));
  CHECK(r.closed);
}

TEST_CASE("NETCONF rpc-errors, list name by revision, settle-delayed ok", "[netconf_session]") {
  Rig r(40);
  r.config.netconf_revision = "2016-01-01";  // before the rename: the list is "pairs"
  NetconfSession s(r.model, r.truth, r.config, [&](std::string x) { r.out += x; }, [&] { r.closed = true; });
  s.on_open();
  s.on_bytes(ocs::encode_frame(ocs::build_hello({ocs::kNetconfBase10}), ocs::Framing::kEndOfMessage));
  CHECK(s.framing() == ocs::Framing::kEndOfMessage);
  r.out.clear();
  auto eom = [](uint64_t id, const std::string& body) {
    return ocs::encode_frame(ocs::build_rpc(id, body), ocs::Framing::kEndOfMessage);
  };
  s.on_bytes(eom(1, ocs::build_edit_config(ocs::build_cross_connects({{1, 9}}, {}, "pair"))));
  CHECK_THAT(r.out, Catch::Matchers::Contains("unknown-element"));
  s.on_bytes(eom(2, ocs::build_edit_config(ocs::build_cross_connects({{1, 99}}, {}, "pairs"))));
  CHECK_THAT(r.out, Catch::Matchers::Contains("<error-tag>invalid-value</error-tag>"));
  CHECK_THAT(r.out, Catch::Matchers::Contains("Invalid OXC port: 99"));
  s.on_bytes(eom(3, "<reboot/>"));
  CHECK_THAT(r.out, Catch::Matchers::Contains("operation-not-supported"));
  s.on_bytes("<not xml]]>]]>");
  CHECK_THAT(r.out, Catch::Matchers::Contains("malformed-message"));
  r.out.clear();
  s.on_bytes(eom(4, ocs::build_edit_config(ocs::build_cross_connects({{1, 9}}, {}, "pairs"))) + eom(5, "<get/>"));
  CHECK(r.out.empty());  // ok waits for the mirrors, the get waits behind it
  r.run(100ms);
  auto ok = r.out.find("<ok/>"), data = r.out.find("message-id=\"5\"");
  REQUIRE(ok != std::string::npos);
  REQUIRE(data != std::string::npos);
  CHECK(ok < data);
  r.out.clear();
  s.on_bytes(eom(6, ocs::build_edit_config(ocs::build_cross_connects({{2, 9}}, {}, "pairs"))));
  CHECK_THAT(r.out, Catch::Matchers::Contains("<error-tag>in-use</error-tag>"));
  CHECK_FALSE(r.closed);
}

TEST_CASE("NETCONF closes on a bad hello or broken chunk framing", "[netconf_session]") {
  Rig r;
  {
    NetconfSession s(r.model, r.truth, r.config, [&](std::string x) { r.out += x; }, [&] { r.closed = true; });
    s.on_open();
    s.on_bytes("garbage]]>]]>");
    CHECK(r.closed);
  }
  r.closed = false;
  r.out.clear();
  NetconfSession s(r.model, r.truth, r.config, [&](std::string x) { r.out += x; }, [&] { r.closed = true; });
  s.on_open();
  s.on_bytes(ocs::encode_frame(ocs::build_hello({ocs::kNetconfBase11}), ocs::Framing::kEndOfMessage));
  s.on_bytes("\n#zz\n");
  CHECK_THAT(r.out, Catch::Matchers::Contains("malformed-message"));
  CHECK(r.closed);
}
