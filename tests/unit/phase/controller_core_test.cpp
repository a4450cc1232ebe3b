// The controller's logic driven by hand, without a socket, a thread or a timer: protocol lines
// in, CoreActions recorded, rail results and timer expiries fed back when the test says so.
// The same logic runs behind real sockets in tests/integration/phase (controller_test.cpp).
#include <algorithm>
#include <catch2/catch.hpp>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "ocslab/common/clock.h"
#include "ocslab/phase/controller_core.h"

namespace controller_core_test {

using namespace ocslab::phase;
using Kind = ControllerEvent::Kind;

// Two pipeline stages of two DP ranks each (ranks 0,1 | 2,3); digit 0 = pp, 1 = dp.
JobLayout layout() { return JobLayout{"job", 2, {{"dp", 2}}}; }

struct Recorder : CoreActions {
  ControllerCore* core = nullptr;
  std::map<ConnId, std::vector<Message>> sent;
  std::vector<size_t> reprograms;                    // rails, in order asked
  std::map<std::pair<uint64_t, size_t>, int> armed;  // (reconfig, rail) -> attempt
  std::vector<size_t> rings;
  std::set<ConnId> closing;

  void send(ConnId c, const Message& m) override { sent[c].push_back(m); }
  void close(ConnId c) override { core->closed(c, "bye", false); }
  void close_after_send(ConnId c) override { closing.insert(c); }
  void reprogram(size_t rail) override { reprograms.push_back(rail); }
  void arm_timer(uint64_t id, size_t rail, int attempt, std::chrono::milliseconds) override {
    armed[{id, rail}] = attempt;
  }
  void cancel_timer(uint64_t id, size_t rail) override { armed.erase({id, rail}); }
  void build_ring(size_t rail) override { rings.push_back(rail); }
  void mask(size_t rail, int port) override { masks.emplace_back(rail, port); }
  std::vector<std::pair<size_t, int>> masks;  // (rail, port), in order asked
};

struct Harness {
  explicit Harness(int rails = 1, int max_retries = 2) : core(config(rails, max_retries), act) { act.core = &core; }

  static CoreConfig config(int rails, int max_retries) {
    CoreConfig c;
    c.layout = layout();
    for (int k = 0; k < rails; ++k) {
      c.rails.push_back("rail" + std::to_string(k));
      c.initial.push_back(TopoId::uniform(c.layout, 1));  // "11": both stages on their DP rings
    }
    c.max_retries = max_retries;
    return c;
  }
  static ConnId conn(int rank) { return static_cast<ConnId>(rank) + 1; }

  void send(int rank, Message m) { core.on_line(conn(rank), encode(m)); }
  // hello + register of the rank's groups: dp-s<stage> and, for local rank 0, pp-0 (ranks 0, 2).
  void join(int rank) {
    core.opened(conn(rank), "127.0.0.1:" + std::to_string(40000 + rank));
    Message h;
    h.type = MsgType::kHello;
    h.job = "job";
    h.rank = rank;
    h.world = 4;
    send(rank, h);
    int stage = rank / 2;
    reg(rank, "dp-s" + std::to_string(stage), "dp", {stage * 2, stage * 2 + 1});
    if (rank % 2 == 0) reg(rank, "pp-0", "pp", {0, 2});
  }
  void reg(int rank, const std::string& group, const std::string& dim, std::vector<int> ranks) {
    Message m;
    m.type = MsgType::kRegister;
    m.group = group;
    m.dim = dim;
    m.ranks = std::move(ranks);
    send(rank, m);
  }
  void request(int rank, const std::string& group, int64_t seq, std::optional<int> digit = std::nullopt,
               int64_t run = 0) {
    Message m;
    m.type = MsgType::kRequest;
    m.group = group;
    m.seq = seq;
    m.op = seq;
    m.digit = digit;
    m.run = run;
    send(rank, m);
  }
  void done(int rank, const std::string& group, int64_t seq) {
    Message m;
    m.type = MsgType::kDone;
    m.group = group;
    m.seq = seq;
    send(rank, m);
  }
  // Messages of one type the rank got since the last call (all others are dropped).
  std::vector<Message> take(int rank, MsgType type) {
    std::vector<Message> out;
    for (auto& m : act.sent[conn(rank)])
      if (m.type == type) out.push_back(m);
    act.sent[conn(rank)].clear();
    return out;
  }
  // The rail worker finishing what it was last asked: the core's intention when it runs.
  void rail_confirms(size_t rail, bool ok = true, const std::string& error = "") {
    auto [topo, version] = core.intended(rail);
    core.on_rail_result(rail, version, ok, error, topo);
  }
  size_t count(Kind k) const {
    size_t n = 0;
    for (const auto& e : core.events()) n += e.kind == k;
    return n;
  }

  Recorder act;
  ControllerCore core;
};

TEST_CASE("controller core: a barrier reconfigures once every rank asked, and ACKs after the rail confirmed",
          "[phase][core]") {
  Harness h;
  for (int r = 0; r < 4; ++r) h.join(r);
  for (int r = 0; r < 4; ++r) CHECK(h.take(r, MsgType::kWelcome).size() == 1);
  // The PP op of ranks 0 and 2 needs digit 0 on both stages ("00"): nothing moves on the first request.
  h.request(0, "pp-0", 1);
  CHECK(h.act.reprograms.empty());
  CHECK(h.take(0, MsgType::kAck).empty());
  h.request(2, "pp-0", 1);
  REQUIRE(h.act.reprograms == std::vector<size_t>{0});
  CHECK(h.core.intended(0).first.str() == "00");
  CHECK(h.act.armed.size() == 1);
  // G1: no ACK before the rail confirmed.
  CHECK(h.take(0, MsgType::kAck).empty());
  CHECK(h.take(2, MsgType::kAck).empty());
  h.rail_confirms(0);
  auto a0 = h.take(0, MsgType::kAck);
  auto a2 = h.take(2, MsgType::kAck);
  REQUIRE(a0.size() == 1);
  REQUIRE(a2.size() == 1);
  CHECK(a0[0].reconfigured);
  CHECK(a0[0].topo.at("rail0") == "00");
  CHECK_FALSE(a0[0].fallback);
  CHECK(h.act.armed.empty());  // the confirmation cancelled the ack timer
  CHECK(h.count(Kind::kReconfigStart) == 1);
  CHECK(h.count(Kind::kReconfigEnd) == 1);
  // The same digits again: ACKed at once, nothing reprogrammed.
  h.done(0, "pp-0", 1);
  h.done(2, "pp-0", 1);
  h.request(0, "pp-0", 2);
  h.request(2, "pp-0", 2);
  CHECK(h.act.reprograms.size() == 1);
  auto again = h.take(0, MsgType::kAck);
  REQUIRE(again.size() == 1);
  CHECK_FALSE(again[0].reconfigured);
}

TEST_CASE("controller core: G2 holds a reconfiguration until the ops in flight on its stage are done",
          "[phase][core]") {
  Harness h;
  for (int r = 0; r < 4; ++r) h.join(r);
  // Stage 0's DP op is ACKed at once ("11" already) and stays in flight.
  h.request(0, "dp-s0", 1);
  h.request(1, "dp-s0", 1);
  REQUIRE(h.take(0, MsgType::kAck).size() == 1);
  REQUIRE(h.take(1, MsgType::kAck).size() == 1);
  // The PP op needs stage 0 at digit 0: held while dp-s0 seq 1 runs.
  h.request(0, "pp-0", 1);
  h.request(2, "pp-0", 1);
  CHECK(h.act.reprograms.empty());
  h.done(0, "dp-s0", 1);
  CHECK(h.act.reprograms.empty());  // rank 1 still runs it
  h.done(1, "dp-s0", 1);
  REQUIRE(h.act.reprograms == std::vector<size_t>{0});
  CHECK(h.core.intended(0).first.str() == "00");
  // G1: a DP request on stage 0 while it is being rewired gets no ACK.
  h.request(0, "dp-s0", 2);
  h.request(1, "dp-s0", 2);
  CHECK(h.take(1, MsgType::kAck).empty());
  h.rail_confirms(0);
  auto a0 = h.take(0, MsgType::kAck);
  REQUIRE(a0.size() == 1);
  CHECK(a0[0].group == "pp-0");
  CHECK(h.take(2, MsgType::kAck).size() == 1);
  // G2 again: putting stage 0 back on its DP ring waits until both ranks finished pp-0.
  CHECK(h.take(1, MsgType::kAck).empty());
  CHECK(h.act.reprograms.size() == 1);
  h.done(0, "pp-0", 1);
  CHECK(h.act.reprograms.size() == 1);
  h.done(2, "pp-0", 1);
  REQUIRE(h.act.reprograms.size() == 2);
  CHECK(h.core.intended(0).first.str() == "10");
  h.rail_confirms(0);
  CHECK(h.take(1, MsgType::kAck).size() == 1);
  // A done for an op that was never ACKed is refused and releases nothing.
  h.done(3, "dp-s1", 9);
  CHECK(h.take(3, MsgType::kError).size() == 1);
}

TEST_CASE("controller core: a rail that does not confirm is retried, then the job falls back to the giant ring",
          "[phase][core]") {
  Harness h(1, /*max_retries=*/1);
  for (int r = 0; r < 4; ++r) h.join(r);
  h.request(0, "pp-0", 1);
  h.request(2, "pp-0", 1);
  REQUIRE(h.act.armed.size() == 1);
  auto [key, attempt] = *h.act.armed.begin();
  CHECK(attempt == 1);
  // First expiry: a retry (attempt 2), the rail asked again.
  h.core.on_timeout(key.first, key.second, 1);
  CHECK(h.count(Kind::kTimeout) == 1);
  CHECK(h.count(Kind::kRetry) == 1);
  CHECK(h.act.reprograms.size() == 2);
  CHECK(h.act.armed.at(key) == 2);
  // A late expiry of attempt 1 changes nothing.
  h.core.on_timeout(key.first, key.second, 1);
  CHECK(h.count(Kind::kRetry) == 1);
  // Second expiry: retries spent, fallback. No op is in flight, so the ring is wired at once.
  h.core.on_timeout(key.first, key.second, 2);
  CHECK(h.count(Kind::kFallback) == 1);
  CHECK(h.core.in_fallback());
  CHECK(h.act.armed.empty());
  REQUIRE(h.act.rings == std::vector<size_t>{0});
  for (int r = 0; r < 4; ++r) CHECK(h.take(r, MsgType::kFallback).size() == 1);
  // The abandoned request is ACKed once the ring is up, marked fallback, with the rail at "ring".
  CHECK(h.take(0, MsgType::kAck).empty());
  h.core.on_ring_result(0, "");
  auto a = h.take(0, MsgType::kAck);
  REQUIRE(a.size() == 1);
  CHECK(a[0].fallback);
  CHECK_FALSE(a[0].reconfigured);
  CHECK(a[0].topo.at("rail0") == "ring");
  // From now on every request is ACKed without touching the fabric.
  h.done(0, "pp-0", 1);
  h.done(2, "pp-0", 1);
  h.request(0, "dp-s0", 1, 0);
  h.request(1, "dp-s0", 1, 0);
  CHECK(h.take(0, MsgType::kAck).size() == 1);
  CHECK(h.act.reprograms.size() == 2);
  CHECK(h.core.problems().size() == 1);
}

TEST_CASE("controller core: a failed rail result is retried like a timeout; the ring waits for ops in flight",
          "[phase][core]") {
  Harness h(2, /*max_retries=*/0);
  for (int r = 0; r < 4; ++r) h.join(r);
  // dp-s1's op is in flight (no change needed) while pp-0 asks to rewire both stages.
  h.request(2, "dp-s1", 1);
  h.request(3, "dp-s1", 1);
  REQUIRE(h.take(3, MsgType::kAck).size() == 1);
  h.done(2, "dp-s1", 1);
  h.request(0, "pp-0", 1);
  h.request(2, "pp-0", 1);
  CHECK(h.act.reprograms.empty());  // G2: rank 3 still runs dp-s1 on stage 1
  h.done(3, "dp-s1", 1);
  REQUIRE(h.act.reprograms == (std::vector<size_t>{0, 1}));
  h.rail_confirms(0);
  CHECK(h.take(0, MsgType::kAck).empty());  // rail1 has not confirmed
  h.rail_confirms(1, false, "switch said DENY");
  CHECK(h.core.in_fallback());  // no retries allowed
  CHECK(h.act.rings.size() == 2);
  auto problems = h.core.problems();
  REQUIRE(problems.size() == 2);
  CHECK(problems[0] == "rail rail1: reprogramming to 00 failed: switch said DENY");
  // One ring fails: the shims are told the fabric state is unknown, the job still goes on.
  h.core.on_ring_result(0, "");
  h.core.on_ring_result(1, "timeout");
  CHECK(h.count(Kind::kRingReady) == 2);
  CHECK(h.take(1, MsgType::kFallback).size() == 2);
  CHECK(h.take(0, MsgType::kAck).size() == 1);
}

TEST_CASE("controller core: a rank that disconnects fails the barriers it was in and is announced", "[phase][core]") {
  Harness h;
  for (int r = 0; r < 4; ++r) h.join(r);
  h.request(0, "pp-0", 1);  // waits for rank 2
  h.core.closed(Harness::conn(2), "connection reset", false);
  auto err = h.take(0, MsgType::kError);
  REQUIRE(err.size() == 1);
  CHECK(err[0].message ==
        "group pp-0 seq 1 cannot complete: rank 2 disconnected (connection reset); its groups: "
        "dp-s1, pp-0");
  auto lost = h.take(1, MsgType::kPeerLost);
  REQUIRE(lost.size() == 1);
  CHECK(lost[0].rank == 2);
  CHECK(lost[0].groups == std::vector<std::string>{"dp-s1", "pp-0"});
  // A new request in a group with the lost rank is refused naming it.
  h.request(0, "pp-0", 2);
  err = h.take(0, MsgType::kError);
  REQUIRE(err.size() == 1);
  CHECK(err[0].message == "rank 0 group pp-0: rank 2 of the group is disconnected");
  // A rank that says bye is not a failure.
  Message bye;
  bye.type = MsgType::kBye;
  h.send(3, bye);
  CHECK(h.count(Kind::kDisconnect) == 1);
}

TEST_CASE("controller core: bad input is rejected naming rank and group, and a bad client is closed", "[phase][core]") {
  Harness h;
  h.core.opened(Harness::conn(0), "127.0.0.1:40000");
  h.core.on_line(Harness::conn(0), "{not json");
  CHECK(h.act.closing.count(Harness::conn(0)) == 1);
  h.core.opened(Harness::conn(1), "127.0.0.1:40001");
  Message r;
  r.type = MsgType::kRequest;
  r.group = "g";
  r.seq = 1;
  h.send(1, r);  // before hello
  auto err = h.take(1, MsgType::kError);
  REQUIRE(err.size() == 1);
  CHECK(err[0].message == "client 127.0.0.1:40001: 'request' before hello");
  for (int k = 2; k < 4; ++k) h.join(k);
  // A DP group across stages, a group disagreeing with what its other rank registered.
  h.reg(2, "bad", "dp", {1, 2});
  err = h.take(2, MsgType::kError);
  REQUIRE(err.size() == 1);
  CHECK(err[0].message == "rank 2 group bad: a dp group lives in one pipeline stage, these ranks span stages 0,1");
  h.reg(3, "dp-s1", "dp", {2, 3, 1});
  err = h.take(3, MsgType::kError);
  REQUIRE(err.size() == 1);
  CHECK_THAT(err[0].message, Catch::Contains("says size 3") && Catch::Contains("but rank 2 registered size 2"));
  CHECK(h.count(Kind::kRejected) == 4);
}

TEST_CASE("controller core: a hello without the token joins nothing; strangers' refusals are bounded",
          "[phase][core]") {
  auto cfg = Harness::config(1, 2);
  cfg.token = "0123456789abcdef";
  Recorder act;
  ControllerCore core(cfg, act);
  act.core = &core;
  Message h;
  h.type = MsgType::kHello;
  h.job = "job";
  h.world = 4;
  for (ConnId c = 1; c <= 40; ++c) {
    core.opened(c, "10.0.0.9:" + std::to_string(c));
    h.rank = static_cast<int>(c % 4);
    h.token = c % 2 ? "" : "0123456789abcdeX";
    core.on_line(c, encode(h));
    CHECK_FALSE(core.joined(c));
    CHECK(act.closing.count(c) == 1);
    REQUIRE(act.sent[c].size() == 1);
    CHECK_THAT(act.sent[c][0].message, Catch::Contains(c % 2 ? "without the controller's token" : "wrong token"));
  }
  CHECK(core.events().size() == 16);    // the first 16 refusals are recorded ...
  CHECK(core.problems().size() == 17);  // ... then one line says the rest are only counted
  h.token = cfg.token;
  h.rank = 0;
  core.opened(100, "127.0.0.1:1");
  core.on_line(100, encode(h));
  CHECK(core.joined(100));
  REQUIRE(act.sent[100].size() == 1);
  CHECK(act.sent[100][0].type == MsgType::kWelcome);
  CHECK(act.reprograms.empty());
}

TEST_CASE(
    "controller core: a run every member declared is granted with one ACK and holds its stage until the "
    "last done",
    "[phase][core]") {
  Harness h;
  for (int r = 0; r < 4; ++r) h.join(r);
  for (int r = 0; r < 4; ++r) h.take(r, MsgType::kWelcome);
  // Stage 0 to PP first, so that the DP run below is a phase boundary.
  h.request(0, "pp-0", 1);
  h.request(2, "pp-0", 1);
  h.rail_confirms(0);
  h.take(0, MsgType::kAck);
  h.take(2, MsgType::kAck);
  h.done(0, "pp-0", 1);
  h.done(2, "pp-0", 1);
  // dp-s0 seq 1, followed back to back by 2 more on rank 0 but only 1 more on rank 1: keep = 1.
  h.request(0, "dp-s0", 1, std::nullopt, 2);
  h.request(1, "dp-s0", 1, std::nullopt, 1);
  h.rail_confirms(0);
  auto a0 = h.take(0, MsgType::kAck);
  auto a1 = h.take(1, MsgType::kAck);
  REQUIRE(a0.size() == 1);
  REQUIRE(a1.size() == 1);
  CHECK(a0[0].keep == 1);
  CHECK(a1[0].keep == 1);
  CHECK(a0[0].reconfigured);
  CHECK(a0[0].topo.at("rail0") == "10");
  // The granted op is recorded as ACKed with the first, for both ranks, on stage 0.
  size_t granted = 0;
  for (const auto& e : h.core.events()) {
    if (e.kind == Kind::kAck && e.group == "dp-s0" && e.seq == 2) {
      ++granted;
      CHECK(e.stages == std::vector<int>{0});
      CHECK(e.detail == "granted with seq 1");
    }
  }
  CHECK(granted == 2);
  // Requesting a granted op is refused: it runs without one.
  h.request(1, "dp-s0", 2);
  auto err = h.take(1, MsgType::kError);
  REQUIRE(err.size() == 1);
  CHECK(err[0].message.find("already granted") != std::string::npos);
  // G2 over the run: pp-0 wants stage 0 back on "0"; it waits while any op of the run is in
  // flight, i.e. until both ranks' done of the granted seq 2, not of seq 1.
  h.done(0, "dp-s0", 1);
  h.done(1, "dp-s0", 1);
  const size_t before = h.act.reprograms.size();
  h.request(0, "pp-0", 2);
  h.request(2, "pp-0", 2);
  CHECK(h.act.reprograms.size() == before);
  h.done(0, "dp-s0", 2);
  CHECK(h.act.reprograms.size() == before);
  h.done(1, "dp-s0", 2);
  CHECK(h.act.reprograms.size() == before + 1);
  CHECK(h.core.intended(0).first.str() == "00");
  CHECK(h.core.problems().size() == 1);  // only the refused request above
}

TEST_CASE("controller core: no grant when a member declares no run, for pipeline groups, or with a digit override",
          "[phase][core]") {
  Harness h;
  for (int r = 0; r < 4; ++r) h.join(r);
  for (int r = 0; r < 4; ++r) h.take(r, MsgType::kWelcome);
  h.request(0, "dp-s0", 1, std::nullopt, 3);
  h.request(1, "dp-s0", 1, std::nullopt, 0);
  auto a = h.take(0, MsgType::kAck);
  REQUIRE(a.size() == 1);
  CHECK(a[0].keep == 0);
  CHECK_FALSE(a[0].reconfigured);  // "11" already: served without touching the switch
  h.done(0, "dp-s0", 1);
  h.done(1, "dp-s0", 1);
  h.request(0, "pp-0", 1, std::nullopt, 4);
  h.request(2, "pp-0", 1, std::nullopt, 4);
  h.rail_confirms(0);
  a = h.take(0, MsgType::kAck);
  REQUIRE(a.size() == 1);
  CHECK(a[0].keep == 0);  // pipeline groups ask for every op
  a = h.take(2, MsgType::kAck);
  REQUIRE(a.size() == 1);
  CHECK(a[0].keep == 0);
  h.done(0, "pp-0", 1);
  h.done(2, "pp-0", 1);
  h.request(2, "dp-s1", 1, 1, 2);
  h.request(3, "dp-s1", 1, 1, 2);
  h.rail_confirms(0);
  a = h.take(2, MsgType::kAck);
  REQUIRE(a.size() == 1);
  CHECK(a[0].keep == 0);  // an explicit digit is never granted ahead
}

TEST_CASE("controller core: a failed port is masked once and a rank that moved is announced to every shim",
          "[phase][core]") {
  Harness h(2);
  for (int r = 0; r < 4; ++r) h.join(r);
  for (int r = 0; r < 4; ++r) h.take(r, MsgType::kMasked);
  const int64_t seen = ocslab::now().monotonic_ns - 40'000'000;  // first seen 40 ms ago
  h.core.on_port_failed(1, 19, "no light on port 19 (h3:eth2) for 2 polls", seen);
  h.core.on_port_failed(1, 19, "again", 0);  // reported twice: one mask
  h.core.on_port_failed(7, 19, "no such rail", 0);
  REQUIRE(h.act.masks == std::vector<std::pair<size_t, int>>{{1, 19}});
  CHECK(h.count(Kind::kPortFailed) == 1);
  for (int r = 0; r < 4; ++r) CHECK(h.take(r, MsgType::kMasked).empty());  // nothing said before the move

  MaskOutcome o;
  o.rank = 2;
  o.from = Slot{3, 19};
  o.to = Slot{5, 21};
  h.core.on_mask_result(1, 19, o);
  for (int r = 0; r < 4; ++r) {
    auto m = h.take(r, MsgType::kMasked);
    REQUIRE(m.size() == 1);
    CHECK(m[0].rail == "rail1");
    CHECK(m[0].rank == 2);
    CHECK(m[0].port == 19);
    CHECK(m[0].ingress == 5);
    CHECK(m[0].egress == 21);
    CHECK(m[0].reason == "no light on port 19 (h3:eth2) for 2 polls");
  }
  const auto ev = h.core.events();
  auto masked = std::find_if(ev.begin(), ev.end(), [](const ControllerEvent& e) { return e.kind == Kind::kMasked; });
  REQUIRE(masked != ev.end());
  CHECK(masked->rail == "rail1");
  CHECK(masked->rank == 2);
  CHECK(masked->value >= 40.0);  // from the first sight of the failure
  CHECK(masked->detail == "port 19 masked; rank 2 moved from slot 3/19 to 5/21");
  CHECK_FALSE(h.core.in_fallback());
}

TEST_CASE("controller core: a port that cannot be masked is a problem naming it, and no shim is told",
          "[phase][core]") {
  Harness h;
  for (int r = 0; r < 4; ++r) h.join(r);
  for (int r = 0; r < 4; ++r) h.take(r, MsgType::kMasked);
  h.core.on_port_failed(0, 3, "no light", 0);
  MaskOutcome o;
  o.error = "rail rail0: port 3 failed under job job rank 2; no healthy spare slot remains (1 masked)";
  h.core.on_mask_result(0, 3, o);
  for (int r = 0; r < 4; ++r) CHECK(h.take(r, MsgType::kMasked).empty());
  auto problems = h.core.problems();
  REQUIRE_FALSE(problems.empty());
  CHECK_THAT(problems.back(), Catch::Contains("rail rail0: port 3 could not be masked") &&
                                  Catch::Contains("no healthy spare slot remains"));
  const auto ev = h.core.events();
  CHECK(std::count_if(ev.begin(), ev.end(),
                      [](const ControllerEvent& e) { return e.kind == Kind::kMasked && e.rank == -1; }) == 1);
}

}  // namespace controller_core_test
