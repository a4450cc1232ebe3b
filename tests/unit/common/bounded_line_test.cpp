// BoundedLineReader over real sockets (a socketpair and loopback TCP): lines, the size limit,
// the absolute deadline against a peer trickling bytes, cancellation, and the peer in every error.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <set>
#include <string>
#include <thread>

#include "ocslab/common/bounded_line.h"
#include "ocslab/common/secret.h"

using ocslab::BoundedLineReader;
using ocslab::LineError;
using namespace std::chrono_literals;

namespace {

struct Pair {
  int a = -1, b = -1;
  Pair() { REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, &a) == 0); }
  ~Pair() {
    if (a >= 0) ::close(a);
    if (b >= 0) ::close(b);
  }
  void send(const std::string& s) const { REQUIRE(::send(b, s.data(), s.size(), MSG_NOSIGNAL) == ssize_t(s.size())); }
};

std::string error_of(BoundedLineReader& r, BoundedLineReader::Clock::time_point deadline, int cancel = -1) {
  try {
    r.read_line(deadline, cancel);
  } catch (const LineError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("bounded lines: lines in one read and across reads, EOF", "[common][bounded_line]") {
  Pair p;
  BoundedLineReader r(p.a, "peer-x", 16);
  p.send("one\ntw");
  // load-safe: a hang guard: the bytes are in the socket before the read starts.
  auto deadline = BoundedLineReader::Clock::now() + 2s;
  CHECK(r.read_line(deadline) == std::optional<std::string>("one"));
  std::string line;
  CHECK(r.poll_line(line) == BoundedLineReader::Status::kPending);
  CHECK(r.partial() == 2);
  p.send("o\nthree\n");
  CHECK(r.read_line(deadline) == std::optional<std::string>("two"));
  CHECK(r.read_line(deadline) == std::optional<std::string>("three"));
  CHECK(r.partial() == 0);
  ::shutdown(p.b, SHUT_WR);
  CHECK_FALSE(r.read_line(deadline).has_value());
}

TEST_CASE("bounded lines: a line over the limit is an error naming the peer", "[common][bounded_line]") {
  Pair p;
  BoundedLineReader r(p.a, "peer-x", 16);
  SECTION("exactly the limit is a line") {
    p.send(std::string(16, 'a') + "\n");
    // load-safe: a hang guard: the bytes are in the socket before the read starts.
    CHECK(r.read_line(BoundedLineReader::Clock::now() + 1s)->size() == 16);
  }
  SECTION("one byte more, with its newline") {
    p.send(std::string(17, 'a') + "\n");
    // load-safe: a hang guard: the bytes are in the socket before the read starts.
    std::string e = error_of(r, BoundedLineReader::Clock::now() + 1s);
    CHECK(e.find("peer-x") != std::string::npos);
    CHECK(e.find("longer than 16 bytes") != std::string::npos);
  }
  SECTION("a megabyte without a newline: the buffer never holds more than the limit + 1") {
    std::thread writer([&] {
      std::string chunk(64 * 1024, 'z');
      for (int i = 0; i < 16; ++i)
        if (::send(p.b, chunk.data(), chunk.size(), MSG_NOSIGNAL) < 0) break;
    });
    // load-safe: a hang guard for a read fed by the writer thread; the error is the event.
    std::string e = error_of(r, BoundedLineReader::Clock::now() + 2s);
    CHECK(r.partial() <= 17);
    ::shutdown(p.a, SHUT_RDWR);  // the writer's pending send fails instead of blocking
    writer.join();
    CHECK(e.find("longer than 16 bytes") != std::string::npos);
  }
}

TEST_CASE("bounded lines: the deadline is absolute, not reset by each byte", "[common][bounded_line]") {
  Pair p;
  BoundedLineReader r(p.a, "slow-peer", 4096);
  std::atomic<bool> done{false};
  std::thread trickle([&] {
    // A byte every 50 ms: a per-byte timeout of 300 ms would never fire.
    while (!done) {
      if (::send(p.b, "x", 1, MSG_NOSIGNAL) != 1) break;
      // load-safe: paces the trickling sender; a slower trickle only makes the per-byte timeout it rules out less
      // likely to fire.
      std::this_thread::sleep_for(50ms);
    }
  });
  auto t0 = BoundedLineReader::Clock::now();
  std::string e = error_of(r, t0 + 300ms);
  auto took = BoundedLineReader::Clock::now() - t0;
  done = true;
  trickle.join();
  CHECK(e.find("slow-peer") != std::string::npos);
  CHECK(e.find("deadline") != std::string::npos);
  CHECK(took >= 300ms);
  CHECK(took < 600ms);
  CHECK(r.partial() > 0);
}

TEST_CASE("bounded lines: a cancel fd ends a blocked read at once", "[common][bounded_line]") {
  Pair p;
  BoundedLineReader r(p.a, "idle-peer", 64);
  int ev = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  REQUIRE(ev >= 0);
  std::thread canceller([&] {
    // load-safe: the cancel may come at any time during the read; the read must end on it whenever it comes.
    std::this_thread::sleep_for(50ms);
    uint64_t one = 1;
    REQUIRE(::write(ev, &one, sizeof(one)) == sizeof(one));
  });
  auto t0 = BoundedLineReader::Clock::now();
  std::string e = error_of(r, t0 + 10s, ev);
  auto took = BoundedLineReader::Clock::now() - t0;
  canceller.join();
  ::close(ev);
  CHECK(e.find("cancelled") != std::string::npos);
  CHECK(took < 1s);
}

TEST_CASE("bounded lines: loopback TCP peer names its address", "[common][bounded_line]") {
  int ls = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  REQUIRE(ls >= 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  REQUIRE(::bind(ls, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0);
  REQUIRE(::listen(ls, 1) == 0);
  REQUIRE(::getsockname(ls, reinterpret_cast<sockaddr*>(&a), &len) == 0);
  int c = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  REQUIRE(::connect(c, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0);
  int s = ::accept4(ls, nullptr, nullptr, SOCK_CLOEXEC);
  REQUIRE(s >= 0);
  std::string peer = ocslab::socket_peer_name(s);
  CHECK(peer.rfind("127.0.0.1:", 0) == 0);
  BoundedLineReader r(s, peer, 8);
  REQUIRE(::send(c, "0123456789", 10, MSG_NOSIGNAL) == 10);
  // load-safe: a hang guard: the bytes are in the socket before the read starts.
  std::string e = error_of(r, BoundedLineReader::Clock::now() + 1s);
  CHECK(e.rfind(peer + ": line longer than 8 bytes", 0) == 0);
  for (int fd : {c, s, ls}) ::close(fd);
}

TEST_CASE("secrets: random hex of the asked length, compared by value", "[common][secret]") {
  std::string s = ocslab::random_token(32);
  CHECK(s.size() == 64);
  CHECK(s.find_first_not_of("0123456789abcdef") == std::string::npos);
  std::set<std::string> seen;
  for (int i = 0; i < 8; ++i) seen.insert(ocslab::random_token(32));
  CHECK(seen.size() == 8);
  CHECK(ocslab::constant_time_equal(s, std::string(s)));
  std::string other = s;
  other.back() = other.back() == 'a' ? 'b' : 'a';
  CHECK_FALSE(ocslab::constant_time_equal(s, other));
  CHECK_FALSE(ocslab::constant_time_equal(s, s.substr(0, 63)));
  CHECK_FALSE(ocslab::constant_time_equal(s, ""));
}
