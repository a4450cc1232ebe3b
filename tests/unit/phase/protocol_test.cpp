// The controller wire protocol (v2, JSON lines) and the shim's phase-table file: every message
// round-trips, and malformed input is refused naming the field or file:line.
#include <catch2/catch.hpp>

#include <cstdio>
#include <fstream>

#include "ocslab/phase/protocol.h"
#include "ocslab/phase/shim.h"

using namespace ocslab::phase;

TEST_CASE("every message type round-trips through one JSON line", "[phase][protocol]") {
  Message m;
  m.type = MsgType::kRequest;
  m.group = "dp0";
  m.seq = 7;
  m.op = 3;
  m.provision = true;
  m.digit = 2;
  auto line = encode(m);
  CHECK(line.find('\n') == std::string::npos);
  CHECK(line == R"({"digit":2,"group":"dp0","op":3,"provision":true,"seq":7,"type":"request","v":2})");
  auto d = decode(line);
  CHECK(d.type == MsgType::kRequest);
  CHECK(d.group == "dp0");
  CHECK(d.seq == 7);
  CHECK(d.op == 3);
  CHECK(d.provision);
  CHECK(d.digit == 2);

  Message a;
  a.type = MsgType::kAck;
  a.group = "pp1";
  a.seq = 1;
  a.topo = {{"rail0", "012"}, {"rail1", "012"}};
  a.reconfigured = true;
  a.wait_us = 1500;
  auto da = decode(encode(a));
  CHECK(da.topo == a.topo);
  CHECK(da.reconfigured);
  CHECK_FALSE(da.fallback);
  CHECK(da.wait_us == 1500);

  for (auto t : {MsgType::kHello, MsgType::kRegister, MsgType::kDone, MsgType::kBye, MsgType::kWelcome,
                 MsgType::kRegistered, MsgType::kFallback, MsgType::kPeerLost, MsgType::kMasked, MsgType::kError}) {
    Message x;
    x.type = t;
    x.job = "j";
    x.rank = 1;
    x.world = 2;
    x.group = "g";
    x.dim = "dp";
    x.ranks = {0, 1};
    x.seq = 1;
    x.reason = "r";
    x.message = "m";
    x.rail = "rail1";
    x.port = 19;
    x.ingress = 5;
    x.egress = 21;
    INFO(to_string(t));
    CHECK(decode(encode(x)).type == t);
  }
}

TEST_CASE("masked names the rail, the failed port and the rank's new slot", "[phase][protocol]") {
  Message m;
  m.type = MsgType::kMasked;
  m.rail = "rail0";
  m.rank = 2;
  m.port = 19;
  m.ingress = 5;
  m.egress = 21;
  m.reason = "no light on port 19";
  const auto line = encode(m);
  CHECK(
      line ==
      R"({"egress":21,"ingress":5,"port":19,"rail":"rail0","rank":2,"reason":"no light on port 19","type":"masked","v":2})");
  CHECK(decode(line) == m);
  CHECK_THROWS_WITH(decode(R"({"egress":21,"ingress":5,"port":0,"rail":"rail0","rank":2,"type":"masked","v":2})"),
                    Catch::Contains("field 'port' = 0 is outside 1..1048576"));
  CHECK_THROWS_WITH(decode(R"({"egress":21,"port":19,"rail":"rail0","rank":2,"type":"masked","v":2})"),
                    Catch::Contains("'ingress'"));
}

TEST_CASE("a request declares its run and an ACK grants it; both are left out when 0", "[phase][protocol]") {
  Message m;
  m.type = MsgType::kRequest;
  m.group = "dp-s0";
  m.seq = 4;
  m.op = 4;
  m.run = 2;
  auto line = encode(m);
  CHECK(line == R"({"group":"dp-s0","op":4,"provision":false,"run":2,"seq":4,"type":"request","v":2})");
  CHECK(decode(line).run == 2);
  m.run = 0;
  CHECK(encode(m).find("run") == std::string::npos);
  CHECK(decode(encode(m)).run == 0);
  Message a;
  a.type = MsgType::kAck;
  a.group = "dp-s0";
  a.seq = 4;
  a.topo = {{"rail0", "10"}};
  a.keep = 2;
  CHECK(decode(encode(a)).keep == 2);
  a.keep = 0;
  CHECK(encode(a).find("keep") == std::string::npos);
  CHECK_THROWS_WITH(decode(R"({"v":2,"type":"request","group":"g","seq":1,"provision":false,"run":-1})"),
                    Catch::Contains("'run'"));
}

TEST_CASE("the hello carries the controller token, and only when there is one", "[phase][protocol]") {
  Message h;
  h.type = MsgType::kHello;
  h.job = "j";
  h.rank = 0;
  h.world = 2;
  CHECK(encode(h).find("token") == std::string::npos);
  h.token = "c0ffee";
  auto d = decode(encode(h));
  CHECK(d.token == "c0ffee");
  CHECK(decode(R"({"v":2,"type":"hello","job":"j","rank":0,"world":2})").token.empty());
  CHECK_THROWS_WITH(decode(R"({"v":2,"type":"hello","job":"j","rank":0,"world":2,"token":7})"),
                    Catch::Contains("field 'token' must be a string"));
}

TEST_CASE("malformed messages are refused naming the field", "[phase][protocol]") {
  CHECK_THROWS_WITH(decode("not json", "rank 3"), Catch::Contains("rank 3: not a JSON object"));
  CHECK_THROWS_WITH(decode(R"({"type":"hello"})"), Catch::Contains("field 'v' is missing"));
  CHECK_THROWS_WITH(decode(R"({"v":1,"type":"hello"})"), Catch::Contains("protocol version 1 (this side speaks 2)"));
  CHECK_THROWS_WITH(decode(R"({"v":2,"type":"jump"})"), Catch::Contains("unknown message type 'jump'"));
  CHECK_THROWS_WITH(decode(R"({"v":2,"type":"hello","job":"j","rank":-1,"world":2})"),
                    Catch::Contains("field 'rank' = -1 is outside 0..1048576"));
  CHECK_THROWS_WITH(decode(R"({"v":2,"type":"request","group":"g","seq":1,"digit":10})"),
                    Catch::Contains("field 'digit' = 10 is outside 0..9"));
  CHECK_THROWS_WITH(decode(R"({"v":2,"type":"register","group":"g","dim":"dp","ranks":[0,"x"]})"),
                    Catch::Contains("field 'ranks' must be a list of integers"));
  CHECK_THROWS_WITH(decode(R"({"v":2,"type":"request","group":"","seq":1})"),
                    Catch::Contains("field 'group' must not be empty"));
  CHECK_THROWS_WITH(decode(std::string(kMaxLine + 1, ' ')), Catch::Contains("exceeds"));
}

TEST_CASE("phase tables load from CSV and refuse bad rows with file:line", "[phase][shim]") {
  auto path = std::string("/tmp/ocslab_phase_table_test_") + std::to_string(::getpid()) + ".csv";
  PhaseTable t;
  t.ops = {{0, "pp0", "send", 1024}, {1, "dp0s0", "allreduce", 1 << 20}, {2, "world", "barrier", 0}};
  t.save(path);
  CHECK(PhaseTable::load(path).ops == t.ops);
  auto write = [&](const std::string& text) { std::ofstream(path) << text; };
  write("index,group,type,bytes\n0,dp0,allreduce,12\n2,dp0,allreduce,12\n");
  CHECK_THROWS_WITH(PhaseTable::load(path), Catch::Contains(path + ":3:1: op index 2 out of order (expected 1)"));
  write("index,group,type,bytes\n0,dp0,allreduce,-5\n");
  CHECK_THROWS_WITH(PhaseTable::load(path), Catch::Contains(":2:1: index and bytes must be non-negative integers"));
  write("index,group,type\n");
  CHECK_THROWS_WITH(PhaseTable::load(path), Catch::Contains(":1:1: header must be 'index,group,type,bytes'"));
  write("index,group,type,bytes\n0,dp0\n");
  CHECK_THROWS_WITH(PhaseTable::load(path), Catch::Contains(":2:1: expected 4 fields"));
  write("index,group,type,bytes\n");
  CHECK_THROWS_WITH(PhaseTable::load(path), Catch::Contains("phase table has no ops"));
  std::remove(path.c_str());
  CHECK_THROWS_WITH(PhaseTable::load(path), Catch::Contains("cannot open phase table"));
}
