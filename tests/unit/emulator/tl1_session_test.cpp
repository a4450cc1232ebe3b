// Tl1Session as a state machine: bytes in on a real io_context, replies out through the send
// callback. Covers framing (split input, several commands per read, CR/LF), login rules,
// replies held back until the mirrors settle, autonomous messages and garbage.
#include <boost/asio/io_context.hpp>
#include <catch2/catch.hpp>

#include "ocslab/emulator/tl1_session.h"
#include "ocslab/testing/io_run.h"

// This file's helpers in a namespace of its own: the unity build compiles it together with
// the other tests of its binary.
namespace tl1_session_test {

using namespace ocslab;
using namespace ocslab::emu;
using namespace std::chrono_literals;

namespace {

struct Rig {
  explicit Rig(double switching_ms = 0, bool settle = true, ControlPlaneConfig cfg = {})
      : model(io, params(switching_ms, settle), truth), config(std::move(cfg)) {
    model.on_light([this](Port e, bool l, double d) { events->publish(e, l, d); });
  }
  static SwitchParams params(double ms, bool settle) {
    SwitchParams p;
    p.name = "UNIT-OCS";
    p.ingress_ports = 8;
    p.egress_ports = 8;
    p.switching = Distribution::fixed(ms);
    p.ack_after_settle = settle;
    return p;
  }
  std::unique_ptr<Tl1Session> session(bool logged_in = false) {
    return std::make_unique<Tl1Session>(model, truth, config, [this](std::string s) { out += s; },
                                        Tl1SessionOptions{logged_in, events});
  }
  void run(std::chrono::milliseconds d = 5ms) { ocslab::testing::run_through(io, d); }
  boost::asio::io_context io;
  GroundTruth truth{"UNIT-OCS"};
  SwitchModel model;
  ControlPlaneConfig config;
  std::shared_ptr<LightEvents> events = std::make_shared<LightEvents>();
  std::string out;
};

}  // namespace

TEST_CASE("TL1 refuses everything but ACT-USER before login", "[tl1_session]") {
  Rig r;
  auto s = r.session();
  s->on_bytes("RTRV-PATCH:::1:;");
  CHECK_THAT(r.out, Catch::Matchers::Contains("M  1 DENY\r\n   PICC\r\n   /* Not logged in */\r\n;\r\n"));
  r.out.clear();
  s->on_bytes("ACT-USER::admin:2::wrong;");
  CHECK_THAT(r.out, Catch::Matchers::Contains("M  2 DENY"));
  CHECK_FALSE(s->logged_in());
  r.out.clear();
  s->on_bytes("act-user::admin:3::root;");  // verbs are case-insensitive
  CHECK_THAT(r.out, Catch::Matchers::StartsWith("   UNIT-OCS "));
  CHECK_THAT(r.out, Catch::Matchers::Contains("M  3 COMPLD\r\n;\r\n"));
  CHECK(s->logged_in());
  s->on_bytes("CANC-USER::admin:4:;");
  CHECK_FALSE(s->logged_in());
}

TEST_CASE("TL1 over SSH starts logged in and still accepts ACT-USER", "[tl1_session]") {
  Rig r;
  auto s = r.session(true);
  s->on_bytes("RTRV-HDR:::1;ACT-USER::admin:2::root;");
  CHECK_THAT(r.out, Catch::Matchers::Contains("M  1 COMPLD"));
  CHECK_THAT(r.out, Catch::Matchers::Contains("M  2 COMPLD"));
}

TEST_CASE("TL1 commands split across reads and several per read", "[tl1_session]") {
  Rig r;
  auto s = r.session(true);
  std::string text = "\r\nENT-PATCH::1&2,9&10:5:;\r\nRTRV-PATCH:::6:;RTRV-EQPT::SYSTEM:7:::PARAMETER=SIZE;";
  for (char c : text) s->on_bytes(std::string_view(&c, 1));
  r.run();
  auto p5 = r.out.find("M  5 COMPLD"), p6 = r.out.find("M  6 COMPLD"), p7 = r.out.find("M  7 COMPLD");
  REQUIRE(p5 != std::string::npos);
  REQUIRE(p6 != std::string::npos);
  REQUIRE(p7 != std::string::npos);
  CHECK(p5 < p6);
  CHECK(p6 < p7);
  CHECK_THAT(r.out, Catch::Matchers::Contains("   \"1,9\"\r\n   \"2,10\"\r\n"));
  CHECK_THAT(r.out, Catch::Matchers::Contains("\"SYSTEM:SIZE=8x8\""));
}

TEST_CASE("TL1 ENT-PATCH answers after the mirrors settle, and later commands wait", "[tl1_session]") {
  Rig r(60);
  auto s = r.session(true);
  s->on_bytes("ENT-PATCH::1,9:1:;RTRV-HDR:::2;");
  CHECK(r.out.empty());  // neither reply before the settle
  r.run(30ms);
  CHECK(r.out.empty());
  r.run(100ms);
  auto p1 = r.out.find("M  1 COMPLD"), p2 = r.out.find("M  2 COMPLD");
  REQUIRE(p1 != std::string::npos);
  REQUIRE(p2 != std::string::npos);
  CHECK(p1 < p2);
  CHECK(r.model.lit(9));
}

TEST_CASE("TL1 ENT-PATCH answers at once without ack_after_settle", "[tl1_session]") {
  Rig r(60, false);
  auto s = r.session(true);
  s->on_bytes("ENT-PATCH::1,9:1:;");
  CHECK_THAT(r.out, Catch::Matchers::Contains("M  1 COMPLD"));
  CHECK_FALSE(r.model.lit(9));
}

TEST_CASE("TL1 refusals carry the device's code and text", "[tl1_session]") {
  Rig r;
  auto s = r.session(true);
  s->on_bytes("ENT-PATCH::1,9:1:;");
  r.run();
  r.out.clear();
  s->on_bytes("ENT-PATCH::2,9:2:;");
  CHECK_THAT(r.out, Catch::Matchers::Contains("M  2 DENY\r\n   IDNV\r\n   /* Port already connected: 9 */"));
  s->on_bytes("ENT-PATCH::1,1000:3:;");
  CHECK_THAT(r.out, Catch::Matchers::Contains("M  3 DENY\r\n   IDNV\r\n   /* Invalid OXC port: 1000 */"));
  s->on_bytes("DLT-PATCH::1&&2000000000:4:;");  // a huge range is refused, not expanded
  CHECK_THAT(r.out, Catch::Matchers::Contains("M  4 DENY\r\n   IDNV\r\n   /* Invalid OXC port: 2000000000 */"));
  s->on_bytes("FROB-PORT:::5:;");
  CHECK_THAT(r.out, Catch::Matchers::Contains("M  5 DENY\r\n   ICNV"));
  s->on_bytes("\x01\x02garbage:::;");
  CHECK_THAT(r.out, Catch::Matchers::Contains("IICT"));
  CHECK(r.model.circuits() == std::vector<Circuit>{{1, 9}});
}

TEST_CASE("TL1 power, PMON, shutters and delete", "[tl1_session]") {
  Rig r;
  auto s = r.session(true);
  s->on_bytes("ENT-PATCH::1,9:1:;");
  r.run();
  r.out.clear();
  s->on_bytes("RTRV-PORT-POWER::9&10:2:;");
  CHECK_THAT(r.out, Catch::Matchers::Contains("   \"9:-1.50\"\r\n   \"10:-60.00\"\r\n"));
  s->on_bytes("SET-PORT-PMON::9:3:::WAVE=1310;RTRV-PORT-PMON::9:4:;");
  CHECK_THAT(r.out, Catch::Matchers::Contains("\"9:WAVE=1310\""));
  s->on_bytes("OPR-PORT-SHUTTER::1:5:;RTRV-PORT-SHUTTER::1:6:;");
  CHECK_THAT(r.out, Catch::Matchers::Contains("\"1:CLOSED\""));
  CHECK_FALSE(r.model.lit(9));
  s->on_bytes("RLS-PORT-SHUTTER::1:7:;DLT-PATCH::ALL:8:;RTRV-PATCH:::9:;");
  CHECK_THAT(r.out, Catch::Matchers::Contains("M  9 COMPLD\r\n;"));
  CHECK(r.model.circuits().empty());
}

TEST_CASE("TL1 discards a command over 64 KiB and goes on", "[tl1_session]") {
  Rig r;
  auto s = r.session(true);
  s->on_bytes(std::string(Tl1Session::kMaxCommand + 10, 'X'));
  s->on_bytes("still the same command;RTRV-HDR:::8;");
  CHECK_THAT(r.out, Catch::Matchers::Contains("M  0 DENY\r\n   IICT"));
  CHECK_THAT(r.out, Catch::Matchers::Contains("M  8 COMPLD"));
}

TEST_CASE("TL1 prompt and autonomous messages are optional", "[tl1_session]") {
  ControlPlaneConfig cfg;
  cfg.prompt = true;
  cfg.autonomous = true;
  Rig r(0, true, cfg);
  auto s = r.session(true);
  s->on_bytes("ENT-PATCH::1,9:1:;");
  r.run();
  CHECK_THAT(r.out, Catch::Matchers::Contains(";\r\n<"));
  CHECK_THAT(r.out, Catch::Matchers::Contains("REPT EVT PORT\r\n   \"9:LIGHT,-1.50\""));
  CHECK(r.events->size() == 1);
  s->closed();
  CHECK(r.events->size() == 0);  // a closed session leaves the fan-out
}

TEST_CASE("TL1 records command and ack samples", "[tl1_session]") {
  Rig r;
  auto s = r.session();
  s->on_bytes("ACT-USER::admin:1::root;ENT-PATCH::1,99:2:;");
  int cmd = 0, ok = 0, refused = 0;
  for (const auto& x : r.truth.samples()) {
    if (x.source != "tl1") continue;
    cmd += x.signal == "command";
    ok += x.signal == "ack" && x.value == 1;
    refused += x.signal == "ack" && x.value == 0 && x.subject == "ENT-PATCH";
  }
  CHECK(cmd == 2);
  CHECK(ok == 1);
  CHECK(refused == 1);
}

}  // namespace tl1_session_test
