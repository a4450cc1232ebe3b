// The controller's writes: a line goes out with one non-blocking send when the socket takes it,
// and what it does not take is queued and written later, gathered, in order. A client that reads
// nothing until it has sent everything makes the controller's socket full, so that its replies
// go through the queue, several lines per write: each must still arrive whole and in order.
#include <catch2/catch.hpp>

#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <string>
#include <vector>

#include "ocslab/phase/controller.h"
#include "ocslab/phase/protocol.h"
#include "ocslab/testing/phase_lab.h"
#include "ocslab/testing/tcp_server.h"
#include "ocslab/testing/wait.h"

using namespace phase_test;
using namespace ocslab::phase;
using Clock = std::chrono::steady_clock;

namespace {

// The controller's socket to it fills after a few KB.
int connect_small_window(int port) { return ocslab::testing::connect_loopback(port, 4096); }

void send_all(int fd, const std::string& s) {
  size_t off = 0;
  while (off < s.size()) {
    ssize_t n = ::send(fd, s.data() + off, s.size() - off, MSG_NOSIGNAL);
    REQUIRE(n > 0);
    off += static_cast<size_t>(n);
  }
}

// The lines the controller sent, until `count` arrived or `limit` passed.
std::vector<std::string> read_lines(int fd, size_t count, std::chrono::milliseconds limit) {
  std::vector<std::string> lines;
  std::string buf;
  // load-safe: the ceiling of a wait for count lines (the event); a hang guard.
  const auto end = Clock::now() + limit;
  while (lines.size() < count && Clock::now() < end) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 200) <= 0) continue;
    char chunk[65536];
    ssize_t n = ::recv(fd, chunk, sizeof(chunk), 0);
    if (n <= 0) break;
    buf.append(chunk, static_cast<size_t>(n));
    for (size_t nl = buf.find('\n'); nl != std::string::npos; nl = buf.find('\n')) {
      lines.push_back(buf.substr(0, nl));
      buf.erase(0, nl + 1);
    }
  }
  return lines;
}

}  // namespace

TEST_CASE("controller: replies the socket cannot take at once are queued and arrive whole and in order",
          "[phase][controller]") {
  Lab lab(phase_switch(0));
  JobLayout L{"job", 1, {{"dp", 2}}};
  Controller ctl(controller_options(L, {lab.rail(L, TopoId::uniform(L, 1))}));
  ctl.start();
  int fd = connect_small_window(ctl.port());
  Message h;
  h.type = MsgType::kHello;
  h.job = "job";
  h.rank = 0;
  h.world = 2;
  // 160 registrations with 60 KB group names: ~9.6 MB of replies the client does not read yet,
  // more than a socket buffer holds (net.ipv4.tcp_wmem allows 4 MB at most).
  constexpr int kGroups = 160;
  std::string out = encode(h) + "\n";
  std::vector<std::string> names;
  for (int i = 0; i < kGroups; ++i) {
    names.push_back(std::to_string(i) + "-" + std::string(60000, static_cast<char>('a' + i % 26)));
    Message r;
    r.type = MsgType::kRegister;
    r.group = names.back();
    r.dim = "dp";
    r.ranks = {0, 1};
    out += encode(r) + "\n";
  }
  send_all(fd, out);
  auto lines = read_lines(fd, kGroups + 1, std::chrono::seconds(20));
  CHECK(ctl.problems().empty());  // nothing refused, nobody dropped
  ::close(fd);
  ctl.stop();
  REQUIRE(lines.size() == kGroups + 1);
  CHECK(decode(lines[0]).type == MsgType::kWelcome);
  for (int i = 0; i < kGroups; ++i) {
    INFO("reply " << i);
    auto m = decode(lines[static_cast<size_t>(i) + 1]);
    CHECK(m.type == MsgType::kRegistered);
    CHECK(m.group == names[static_cast<size_t>(i)]);
  }
}

TEST_CASE("controller: a rank that never reads its replies is closed once 16 MiB wait; the others go on",
          "[phase][controller][output-cap]") {
  Lab lab(phase_switch(0));
  JobLayout L{"job", 1, {{"dp", 2}}};
  Controller ctl(controller_options(L, {lab.rail(L, TopoId::uniform(L, 1))}));
  ctl.start();
  int fd = connect_small_window(ctl.port());
  Message h;
  h.type = MsgType::kHello;
  h.job = "job";
  h.rank = 0;
  h.world = 2;
  send_all(fd, encode(h) + "\n");
  // 500 registrations with 60 KB group names: ~30 MB of replies it never reads, beyond the
  // socket buffers (4 MB at most) and the queue's 16 MiB.
  bool closed = false;
  for (int i = 0; i < 500 && !closed; ++i) {
    Message r;
    r.type = MsgType::kRegister;
    r.group = std::to_string(i) + "-" + std::string(60000, static_cast<char>('a' + i % 26));
    r.dim = "dp";
    r.ranks = {0, 1};
    std::string line = encode(r) + "\n";
    for (size_t off = 0; off < line.size() && !closed;) {
      ssize_t n = ::send(fd, line.data() + off, line.size() - off, MSG_NOSIGNAL);
      closed = n <= 0;
      if (n > 0) off += static_cast<size_t>(n);
    }
  }
  // Closed by the controller: the client's unread replies end in an EOF or a reset.
  bool ended = ocslab::testing::poll_until(
      [&] {
        char chunk[65536];
        ssize_t n = ::recv(fd, chunk, sizeof(chunk), MSG_DONTWAIT);
        return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK);
      },
      std::chrono::seconds(20), std::chrono::milliseconds(1));  // load-bound: a few MB to drain on loopback
  CHECK(ended);
  ::close(fd);
  std::string problems;
  ocslab::testing::poll_until(
      [&] {
        problems.clear();
        for (const auto& p : ctl.problems()) problems += p + "\n";
        return problems.find("read nothing of its last") != std::string::npos;
      },
      std::chrono::seconds(10), std::chrono::milliseconds(5));  // load-bound: the close is posted to the loop
  CHECK_THAT(problems, Catch::Contains("rank 0") && Catch::Contains("read nothing of its last"));
  // Another rank is served as before.
  int other = ocslab::testing::connect_loopback(ctl.port(), 0);
  h.rank = 1;
  send_all(other, encode(h) + "\n");
  auto lines = read_lines(other, 1, std::chrono::seconds(10));
  ::close(other);
  ctl.stop();
  REQUIRE(lines.size() == 1);
  CHECK(decode(lines[0]).type == MsgType::kWelcome);
}
