// The controller's network surface, over real loopback sockets with the OCS emulator behind
// it: a client without the token is refused and the switch sees no command; a client that
// floods a line without '\n' or trickles a byte a second is dropped within the (absolute)
// deadline while the controller's memory stays put; a real shim with the token still gets
// through; a non-loopback listen without a token is refused.
#include <catch2/catch.hpp>

#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <future>
#include <string>
#include <thread>

#include "ocslab/phase/controller.h"
#include "ocslab/phase/protocol.h"
#include "ocslab/phase/shim.h"
#include "ocslab/testing/phase_lab.h"
#include "ocslab/testing/tcp_server.h"

using namespace phase_test;
using namespace ocslab::phase;
using Catch::Matchers::Contains;
using Clock = std::chrono::steady_clock;

namespace {

const std::string kToken = "7f3a9c2e51d04b8e9a6f0c1d2e3b4a59";

JobLayout job() { return JobLayout{"job", 2, {{"dp", 2}}}; }  // 4 ranks: pp groups {0,2} {1,3}

long rss_kb() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6));
  }
  return -1;
}

int connect_to(int port) { return ocslab::testing::connect_loopback(port); }

bool send_text(int fd, const std::string& s) {
  return ::send(fd, s.data(), s.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(s.size());
}

// Everything the controller sends until it closes the connection; nullopt if it is still
// open after `limit`.
std::optional<std::string> read_until_closed(int fd, std::chrono::milliseconds limit) {
  std::string got;
  // load-safe: the ceiling of a wait for the close (the event); a hang guard.
  auto end = Clock::now() + limit;
  while (Clock::now() < end) {
    pollfd p{fd, POLLIN, 0};
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end - Clock::now()).count();
    if (::poll(&p, 1, static_cast<int>(std::max<long long>(left, 0))) <= 0) continue;
    char buf[4096];
    ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) return got;
    got.append(buf, static_cast<size_t>(n));
  }
  return std::nullopt;
}

// Sends one byte a second until the controller closes the connection; the time that took.
std::chrono::milliseconds trickle(int fd, std::chrono::milliseconds limit) {
  auto t0 = Clock::now();
  while (Clock::now() - t0 < limit) {
    if (!send_text(fd, "{")) break;
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 1000) > 0) {
      char c;
      if (::recv(fd, &c, 1, MSG_DONTWAIT) <= 0) break;
    }
  }
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0);
}

std::string hello_line(int rank, const std::string& token) {
  Message h;
  h.type = MsgType::kHello;
  h.job = "job";
  h.rank = rank;
  h.world = 4;
  h.token = token;
  return encode(h) + "\n";
}

ShimOptions shim_options(int port, int rank, const std::string& token) {
  ShimOptions o;
  o.port = port;
  o.job = "job";
  o.rank = rank;
  o.world = 4;
  o.token = token;
  o.ack_wait = 10s;
  return o;
}

ControllerOptions secured(Lab& lab) {
  auto L = job();
  auto co = controller_options(L, {lab.rail(L, TopoId::uniform(L, 1))});
  co.token = kToken;
  co.hello_timeout = 1500ms;
  co.line_timeout = 1500ms;
  return co;
}

// Ranks 0 and 2 (group pp0) ask for a PP op: the controller must rewire the switch for it.
std::pair<Decision, Decision> pp_op(int port) {
  auto one = [port](int rank) {
    Shim s(shim_options(port, rank, kToken));
    s.add_group("pp0", "pp", {0, 2});
    return s.pre_communication({"pp0", rank == 0 ? "send" : "recv", 1024, 0});
  };
  auto a = std::async(std::launch::async, one, 0);
  auto b = std::async(std::launch::async, one, 2);
  return {a.get(), b.get()};
}

}  // namespace

TEST_CASE("controller: a client without the token is dropped and the switch sees no command",
          "[phase][controller][security]") {
  Lab lab;
  Controller ctl(secured(lab));
  ctl.start();
  const size_t mark = lab.mark();
  // A raw client that says everything a rank would to get a PP reconfiguration, without the
  // token; another with a wrong one.
  const std::string rest = R"({"v":2,"type":"register","group":"pp0","dim":"pp","ranks":[0,2]})"
                           "\n"
                           R"({"v":2,"type":"request","group":"pp0","seq":1,"op":0})"
                           "\n";
  for (const std::string& token : {std::string(), std::string("0000000000000000000000000000000f")}) {
    int fd = connect_to(ctl.port());
    REQUIRE(send_text(fd, hello_line(0, token) + rest));
    auto reply = read_until_closed(fd, 3s);
    ::close(fd);
    REQUIRE(reply);
    CHECK_THAT(*reply, Contains(token.empty() ? "hello without the controller's token" : "with a wrong"));
    CHECK(reply->find(kToken) == std::string::npos);
  }
  // A shim with a wrong token is told so.
  CHECK_THROWS_WITH(Shim(shim_options(ctl.port(), 1, "not-the-token-at-all-0123456789")), Contains("token"));
  // load-safe: time for a fault the strangers must not set off; a slow machine can only hide it, not fail the case.
  std::this_thread::sleep_for(200ms);  // anything the strangers could have set off would have started
  CHECK(lab.ports_touched(mark).empty());
  for (const auto& e : ctl.events()) {
    INFO(to_string(e.kind) << " " << e.detail);
    CHECK(e.kind == ControllerEvent::Kind::kRejected);
  }
  // The ranks with the token get their reconfiguration.
  auto [d0, d2] = pp_op(ctl.port());
  CHECK(d0.reconfigured);
  CHECK(d2.reconfigured);
  CHECK_FALSE(lab.ports_touched(mark).empty());
}

TEST_CASE("controller: a 100 MB line and a byte-a-second client are dropped within the deadline; memory stays put",
          "[phase][controller][security]") {
  Lab lab;
  auto co = secured(lab);
  Controller ctl(co);
  ctl.start();
  const size_t mark = lab.mark();
  const long rss_before = rss_kb();

  // Trickling strangers and a joined rank trickling a line, all at once: each deadline is
  // absolute, so a byte a second (more often than the 1.5 s deadline) does not keep any alive.
  auto stranger = std::async(std::launch::async, [&] {
    int fd = connect_to(ctl.port());
    auto took = trickle(fd, 6s);
    ::close(fd);
    return took;
  });
  auto joined = std::async(std::launch::async, [&] {
    int fd = connect_to(ctl.port());
    send_text(fd, hello_line(3, kToken));
    auto took = trickle(fd, 6s);  // the welcome is read (and ignored) along the way
    ::close(fd);
    return took;
  });

  // 100 MB without a newline, as fast as loopback takes it.
  int fd = connect_to(ctl.port());
  std::string chunk(1 << 20, 'x');
  size_t sent = 0;
  auto t0 = Clock::now();
  while (sent < (100u << 20)) {
    ssize_t n = ::send(fd, chunk.data(), chunk.size(), MSG_NOSIGNAL);
    if (n <= 0) break;
    sent += static_cast<size_t>(n);
  }
  auto flood_ms = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count();
  ::close(fd);
  INFO("flood: " << sent << " bytes accepted in " << flood_ms << " ms");
  CHECK(sent < (100u << 20));  // the controller hung up long before the 100 MB were through
  CHECK(flood_ms < 2000);

  auto s_ms = stranger.get().count();
  auto j_ms = joined.get().count();
  INFO("stranger dropped after " << s_ms << " ms, joined rank after " << j_ms << " ms");
  CHECK(s_ms >= 1400);
  CHECK(s_ms < 1500 + 1200);
  CHECK(j_ms >= 1400);
  CHECK(j_ms < 1500 + 1200);
  // The client sees the close a moment before the controller has recorded why.
  bool line_deadline = false;
  // load-safe: polls for the recorded problem (the event); 30 s are a hang guard.
  for (auto until = Clock::now() + 30s; !line_deadline && Clock::now() < until; std::this_thread::sleep_for(10ms)) {
    for (const auto& p : ctl.problems()) line_deadline |= p.find("rank 3 disconnected (a line still incomplete") == 0;
  }
  CHECK(line_deadline);  // the joined rank hit the line deadline, not the hello's

  const long rss_after = rss_kb();
  INFO("VmRSS " << rss_before << " kB -> " << rss_after << " kB");
  CHECK(rss_after - rss_before < 16 * 1024);
  CHECK(lab.ports_touched(mark).empty());

  // A real shim with the token still gets through (the dropped rank 3 may join again too).
  auto [d0, d2] = pp_op(ctl.port());
  CHECK(d0.reconfigured);
  CHECK_FALSE(lab.ports_touched(mark).empty());
}

TEST_CASE("controller: more strangers than allowed are closed at once", "[phase][controller][security]") {
  Lab lab;
  auto co = secured(lab);
  co.max_strangers = 2;
  Controller ctl(co);
  ctl.start();
  int a = connect_to(ctl.port()), b = connect_to(ctl.port());
  // load-bound: assumes the controller accepted a and b within 100 ms, before c connects.
  std::this_thread::sleep_for(100ms);  // both accepted
  int c = connect_to(ctl.port());
  auto closed = read_until_closed(c, 1000ms);
  CHECK(closed);                             // closed well before the 1.5 s hello deadline
  CHECK_FALSE(read_until_closed(a, 200ms));  // the first two wait for their deadline
  for (int fd : {a, b, c}) ::close(fd);
}

TEST_CASE("controller: refuses to listen beyond loopback without a token", "[phase][controller][security]") {
  Lab lab;
  auto L = job();
  auto co = controller_options(L, {lab.rail(L, TopoId::uniform(L, 1))});
  co.listen_host = "0.0.0.0";
  Controller open(co);
  CHECK_THROWS_WITH(open.start(), Contains("refusing to listen on 0.0.0.0 without a token"));
  co.token = kToken;  // the same address with a token is fine
  Controller guarded(co);
  CHECK_NOTHROW(guarded.start());
  guarded.stop();
}
