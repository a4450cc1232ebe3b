// The TCP bootstrap over real loopback sockets, one thread per rank.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <catch2/catch.hpp>

#include <atomic>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include "ocslab/common/error.h"
#include "ocslab/common/process.h"
#include "ocslab/workloads/rendezvous.h"

using namespace ocslab;
using namespace ocslab::workloads;
using namespace std::chrono_literals;
using Catch::Matchers::Contains;

TEST_CASE("ranks all-gather their blobs through rank 0 whatever order they start in", "[workloads]") {
  int port = free_loopback_port(SOCK_STREAM);
  std::string addr = "127.0.0.1:" + std::to_string(port);
  const int n = 4;
  std::vector<std::future<std::vector<std::string>>> ranks;
  for (int r = n - 1; r >= 0; --r) {  // rank 0 last: the others retry until it listens
    ranks.push_back(std::async(std::launch::async, [r, addr] {
      Rendezvous rv(r, n, addr, "tag", 10s);
      auto first = rv.all_gather("rank" + std::to_string(r));
      rv.barrier();
      auto second = rv.all_gather(std::string(static_cast<size_t>(r) * 1000, 'x'));
      REQUIRE(second[3].size() == 3000);
      return first;
    }));
    // load-safe: staggers the starts so rank 0 likely comes last; any order must pass, so a late start cannot fail it.
    std::this_thread::sleep_for(50ms);  // kept: staggers the starts so rank 0 really comes last
  }
  for (auto& f : ranks) {
    auto all = f.get();
    CHECK(all == std::vector<std::string>{"rank0", "rank1", "rank2", "rank3"});
  }
}

TEST_CASE("rendezvous refuses a rank with another world size or schedule, and times out naming who", "[workloads]") {
  int port = free_loopback_port(SOCK_STREAM);
  std::string addr = "127.0.0.1:" + std::to_string(port);
  SECTION("world size") {
    auto root = std::async(std::launch::async, [&] { Rendezvous rv(0, 2, addr, "tag", 10s); });
    CHECK_THROWS_WITH(
        Rendezvous(1, 3, addr, "tag", 10s),
        Contains("refused rank 1: error: rank 1 from 127.0.0.1 says the world has 3 ranks, rank 0 has 2"));
    CHECK_THROWS_WITH(root.get(), Contains("rank 1 from 127.0.0.1 says the world has 3 ranks"));
  }
  SECTION("schedule") {
    auto root = std::async(std::launch::async, [&] { Rendezvous rv(0, 2, addr, "verbs a", 10s); });
    CHECK_THROWS_WITH(Rendezvous(1, 2, addr, "verbs b", 10s),
                      Contains("rank 1 from 127.0.0.1 runs 'verbs b', rank 0 runs 'verbs a'"));
    CHECK_THROWS(root.get());
  }
  SECTION("nobody at the address") {
    CHECK_THROWS_WITH(Rendezvous(1, 2, addr, "t", 300ms), Contains("rank 1 could not reach rank 0 at " + addr));
  }
  SECTION("a rank that never comes") {
    CHECK_THROWS_WITH(Rendezvous(0, 3, addr, "t", 300ms), Contains("timed out waiting for 2 more rank(s) to join"));
  }
  SECTION("a rank that leaves") {
    auto root = std::async(std::launch::async, [&] {
      Rendezvous rv(0, 2, addr, "t", 10s);
      rv.all_gather("x");
    });
    { Rendezvous gone(1, 2, addr, "t", 10s); }
    CHECK_THROWS_WITH(root.get(), Contains("rendezvous: rank 1 closed the connection"));
  }
  CHECK_THROWS_WITH(Rendezvous(0, 2, "nohostport", "t", 1s), Contains("bad rendezvous address 'nohostport'"));
  CHECK_THROWS_WITH(Rendezvous(0, 2, "h:99999", "t", 1s), Contains("bad port in rendezvous address 'h:99999'"));
}

TEST_CASE("rendezvous frames: hello and all-gather parsing refuse anything else", "[workloads][rendezvous]") {
  auto h = parse_rendezvous_hello("ocslab-collbench 1 rank=3 nranks=4 tag=dp-pp 4");
  REQUIRE(h);
  CHECK(h->rank == 3);
  CHECK(h->nranks == 4);
  CHECK(h->tag == "dp-pp 4");
  for (std::string bad : std::vector<std::string>{
           "", "ocslab-collbench 1 rank=3 nranks=4 tag=", "ocslab-collbench 2 rank=3 nranks=4 tag=t",
           "ocslab-collbench 1 rank=-1 nranks=4 tag=t", "ocslab-collbench 1 rank=3 nranks=4 tag=a\nb",
           std::string("ocslab-collbench 1 rank=3 nranks=4 tag=a\0b", 42)}) {
    INFO(bad);
    CHECK_FALSE(parse_rendezvous_hello(bad));
  }
  CHECK(frame_length(std::string("\0\0\4\0", 4), kMaxHelloFrame) == std::optional<uint32_t>(1024));
  CHECK_FALSE(frame_length(std::string("\0\0\4\1", 4), kMaxHelloFrame));
  CHECK_FALSE(frame_length("abc", kMaxHelloFrame));
  std::string packed = std::string("\0\0\0\2", 4) + "ab" + std::string("\0\0\0\0", 4);
  CHECK(unpack_all_gather(packed, 2, "r0") == std::vector<std::string>{"ab", ""});
  CHECK_THROWS_WITH(unpack_all_gather(packed, 3, "r0"), Contains("short all-gather reply from r0"));
  CHECK_THROWS_WITH(unpack_all_gather(packed + "x", 2, "r0"), Contains("bytes past its last rank"));
  CHECK_THROWS_WITH(unpack_all_gather(std::string("\xff\xff\xff\xff", 4), 1, "r0"), Contains("short"));
}

// A stranger at rank 0's port: a 100 MB hello or a byte a second ends the rendezvous with a
// clear error at the size limit or the (absolute) deadline, not after 100 MB or never.
TEST_CASE("rendezvous: an oversized or trickled hello is refused within the limits", "[workloads][rendezvous]") {
  auto connect_raw = [](int port) {
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    for (int i = 0; i < 3000 && ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0; ++i)
      // load-safe: retries until the listener is up; 3,000 tries (60 s) are a hang guard.
      std::this_thread::sleep_for(20ms);
    return fd;
  };
  SECTION("100 MB announced and sent") {
    int port = free_loopback_port(SOCK_STREAM);
    auto root =
        std::async(std::launch::async, [&] { Rendezvous rv(0, 2, "127.0.0.1:" + std::to_string(port), "t", 5s); });
    int fd = connect_raw(port);
    uint32_t len = htonl(100u << 20);
    std::string chunk(1 << 20, 'x');
    (void)::send(fd, &len, sizeof(len), MSG_NOSIGNAL);
    size_t sent = 0;
    auto t0 = std::chrono::steady_clock::now();
    while (sent < (100u << 20)) {
      ssize_t n = ::send(fd, chunk.data(), chunk.size(), MSG_NOSIGNAL);
      if (n <= 0) break;
      sent += static_cast<size_t>(n);
    }
    CHECK_THROWS_WITH(root.get(), Contains("more than the 1024 allowed"));
    ::close(fd);
    CHECK(sent < (100u << 20));
    CHECK(std::chrono::steady_clock::now() - t0 < 3s);
  }
  SECTION("a byte a second") {
    int port = free_loopback_port(SOCK_STREAM);
    auto t0 = std::chrono::steady_clock::now();
    auto root =
        std::async(std::launch::async, [&] { Rendezvous rv(0, 2, "127.0.0.1:" + std::to_string(port), "t", 1500ms); });
    int fd = connect_raw(port);
    std::string text = "ocslab-collbench 1 rank=1 nranks=2 tag=t";
    std::string hello = std::string("\0\0\0", 3) + static_cast<char>(text.size()) + text;
    std::atomic<bool> stop{false};
    auto sender = std::thread([&] {
      for (char c : hello) {
        if (::send(fd, &c, 1, MSG_NOSIGNAL) != 1) break;
        // load-safe: paces the slow sender (a byte a second); slower only strengthens the case.
        for (int i = 0; i < 10 && !stop; ++i) std::this_thread::sleep_for(100ms);  // a byte a second
        if (stop) break;
      }
    });
    CHECK_THROWS_WITH(root.get(), Contains("timed out"));
    auto took = std::chrono::steady_clock::now() - t0;
    CHECK(took < 2500ms);
    stop = true;
    sender.join();
    ::close(fd);
  }
}

namespace {

int connect_loopback(int port, const char* ip = "127.0.0.1") {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  ::inet_pton(AF_INET, ip, &a.sin_addr);
  for (int i = 0; i < 3000 && ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0; ++i)
    // load-safe: retries until the listener is up; 3,000 tries (60 s) are a hang guard.
    std::this_thread::sleep_for(20ms);
  return fd;
}

std::string frame(const std::string& text) {
  uint32_t len = htonl(static_cast<uint32_t>(text.size()));
  return std::string(reinterpret_cast<const char*>(&len), 4) + text;
}

// A rendezvous with the run's token (64 'a's) and this hello deadline.
RendezvousOptions with_token(std::chrono::milliseconds hello_timeout) {
  RendezvousOptions opts;
  opts.token = std::string(64, 'a');
  opts.hello_timeout = hello_timeout;
  return opts;
}

}  // namespace

TEST_CASE("rendezvous with the run's token: strangers are dropped and the real ranks still meet",
          "[workloads][rendezvous]") {
  const RendezvousOptions opts = with_token(400ms);
  int port = free_loopback_port(SOCK_STREAM);
  std::string addr = "127.0.0.1:" + std::to_string(port);
  std::vector<std::string> dropped;
  auto root = std::async(std::launch::async, [&] {
    Rendezvous rv(0, 2, addr, "t", 20s, opts);
    dropped = rv.notes();
    return rv.all_gather("from0");
  });
  // 1. A hello with the wrong token gets the reason and nothing else.
  {
    int fd = connect_loopback(port);
    std::string hello = frame("ocslab-collbench 1 rank=1 nranks=2 auth=" + std::string(64, 'b') + " tag=t");
    REQUIRE(::send(fd, hello.data(), hello.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(hello.size()));
    char buf[256];
    ssize_t n = ::recv(fd, buf, sizeof(buf), MSG_WAITALL);
    REQUIRE(n > 4);
    CHECK_THAT(std::string(buf + 4, static_cast<size_t>(n) - 4), Contains("not authenticated"));
    ::close(fd);
  }
  // 2. A rank started without the token is told why, and rank 0 keeps waiting.
  CHECK_THROWS_WITH(Rendezvous(1, 2, addr, "t", 5s), Contains("refused rank 1: error: not authenticated"));
  // 3. 100 MB announced: refused at the 1 KiB hello limit, not read.
  {
    int fd = connect_loopback(port);
    uint32_t len = htonl(100u << 20);
    (void)::send(fd, &len, sizeof(len), MSG_NOSIGNAL);
    std::string chunk(1 << 16, 'x');
    size_t sent = 0;
    for (int i = 0; i < 1600; ++i) {  // at most 100 MB; the dropped socket stops it far earlier
      ssize_t n = ::send(fd, chunk.data(), chunk.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n <= 0) {
        if (n < 0 && errno == EAGAIN) {
          // load-safe: the retry interval of a non-blocking read loop that waits for the bytes.
          std::this_thread::sleep_for(10ms);
          continue;
        }
        break;
      }
      sent += static_cast<size_t>(n);
    }
    CHECK(sent < (100u << 20));
    ::close(fd);
  }
  // 4. A trickler (one byte, then silence) costs hello_timeout, then is dropped.
  auto t0 = std::chrono::steady_clock::now();
  {
    int fd = connect_loopback(port);
    (void)::send(fd, "\0", 1, MSG_NOSIGNAL);
    char c;
    CHECK(::recv(fd, &c, 1, 0) == 0);  // rank 0 closes it
    CHECK(std::chrono::steady_clock::now() - t0 < 3s);
    ::close(fd);
  }
  // 5. The real rank joins after all that, and the all-gather works.
  Rendezvous one(1, 2, addr, "t", 20s, opts);
  CHECK(one.all_gather("from1") == std::vector<std::string>{"from0", "from1"});
  CHECK(root.get() == std::vector<std::string>{"from0", "from1"});
  REQUIRE(dropped.size() == 4);
  CHECK_THAT(dropped[0], Contains("from 127.0.0.1: wrong or missing token"));
  CHECK_THAT(dropped[1], Contains("wrong or missing token"));
  CHECK_THAT(dropped[2], Contains("more than the 1024 allowed"));
  CHECK_THAT(dropped[3], Contains("timed out"));
}

namespace {

// True while rank 0 keeps the connection open without a word (nothing to read, not closed).
bool held_open(int fd) {
  char c;
  ssize_t n = ::recv(fd, &c, 1, MSG_DONTWAIT);
  return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
}

// Waits until rank 0 has closed fd (recv reads the end); false after the hang guard.
bool closed_by_peer(int fd) {
  timeval tv{60, 0};  // a hang guard only: rank 0 closes at once
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  char c;
  return ::recv(fd, &c, 1, 0) == 0;
}

}  // namespace

// Rank 0 read hellos one at a time, each for up to hello_timeout: three silent strangers ahead
// of the real ranks held them 3 x 5 s. Now every pending hello is read as it arrives.
TEST_CASE("rendezvous: silent strangers hold up no rank; beyond the cap a connection is closed at once",
          "[workloads][rendezvous]") {
  const RendezvousOptions opts = with_token(std::chrono::minutes(10));  // a stranger would hold a one-at-a-time rank 0 this long
  int port = free_loopback_port(SOCK_STREAM);
  std::string addr = "127.0.0.1:" + std::to_string(port);
  std::vector<std::string> notes;
  auto root = std::async(std::launch::async, [&] {
    Rendezvous rv(0, 3, addr, "t", std::chrono::minutes(10), opts);
    notes = rv.notes();
    return rv.all_gather("from0");
  });
  // Strangers up to the cap: connected, silent or one byte in.
  std::vector<int> strangers;
  for (size_t i = 0; i < kMaxPendingHellos; ++i) {
    strangers.push_back(connect_loopback(port));
    if (i % 2) (void)::send(strangers.back(), "\0", 1, MSG_NOSIGNAL);
  }
  // One more is closed at once; the ones already waiting stay.
  int extra = connect_loopback(port);
  CHECK(closed_by_peer(extra));
  ::close(extra);
  CHECK(held_open(strangers.front()));
  // Two strangers leave; two real ranks take their places and join while the others still wait.
  ::close(strangers[0]);
  ::close(strangers[1]);
  strangers.erase(strangers.begin(), strangers.begin() + 2);
  auto one = std::async(std::launch::async, [&] {
    Rendezvous rv(1, 3, addr, "t", std::chrono::minutes(10), opts);
    return rv.all_gather("from1");
  });
  // Rank 1's hello is taken while every remaining stranger is still pending: rank 2 has not
  // come, so rank 0 cannot have finished and dropped them.
  Rendezvous two(2, 3, addr, "t", std::chrono::minutes(10), opts);
  CHECK(two.all_gather("from2") == std::vector<std::string>{"from0", "from1", "from2"});
  CHECK(one.get() == std::vector<std::string>{"from0", "from1", "from2"});
  CHECK(root.get() == std::vector<std::string>{"from0", "from1", "from2"});
  // Once every rank joined, the strangers are let go.
  size_t closed = 0;
  for (int fd : strangers) {
    closed += closed_by_peer(fd) ? 1 : 0;
    ::close(fd);
  }
  CHECK(closed == strangers.size());
  size_t cap_notes = 0, left_notes = 0;
  for (const auto& n : notes) {
    if (n.find("connections are already sending their hellos") != std::string::npos) ++cap_notes;
    if (n.find("no hello before every rank had joined") != std::string::npos) ++left_notes;
  }
  CHECK(cap_notes == 1);
  CHECK(left_notes == strangers.size());
}

TEST_CASE("rendezvous: rank 0 listens on the rendezvous host only, unless told otherwise", "[workloads][rendezvous]") {
  int port = free_loopback_port(SOCK_STREAM);
  SECTION("the address the ranks use, not every address") {
    auto root =
        std::async(std::launch::async, [&] { Rendezvous rv(0, 2, "127.0.0.1:" + std::to_string(port), "t", 1500ms); });
    // load-safe: time for rank 0 to listen; a late listener can only hide a fault (the refused connect), and rank
    // 0's 1.5 s end is its own timeout.
    std::this_thread::sleep_for(200ms);
    // 127.0.0.2 is this machine too (all of 127/8 is on lo): a wildcard listener would take it.
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    ::inet_pton(AF_INET, "127.0.0.2", &a.sin_addr);
    CHECK(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0);
    ::close(fd);
    CHECK_THROWS_WITH(root.get(), Contains("timed out waiting for 1 more rank(s)"));
  }
  SECTION("--rendezvous-listen 0.0.0.0 when asked") {
    RendezvousOptions opts;
    opts.listen = "0.0.0.0";
    auto root = std::async(std::launch::async, [&] {
      return Rendezvous(0, 2, "127.0.0.1:" + std::to_string(port), "t", 10s, opts).nranks();
    });
    Rendezvous one(1, 2, "127.0.0.2:" + std::to_string(port), "t", 10s);
    CHECK(root.get() == 2);
  }
  SECTION("an address that is not this machine's") {
    RendezvousOptions opts;
    opts.listen = "192.0.2.1";  // TEST-NET-1: never local
    CHECK_THROWS_WITH(Rendezvous(0, 2, "127.0.0.1:" + std::to_string(port), "t", 1s, opts),
                      Contains("192.0.2.1 is not an address of this machine"));
  }
  SECTION("a malformed token") {
    RendezvousOptions opts;
    opts.token = "not-hex";
    CHECK_THROWS_WITH(Rendezvous(0, 2, "127.0.0.1:" + std::to_string(port), "t", 1s, opts),
                      Contains("lowercase hex digits"));
  }
}

TEST_CASE("rendezvous hello: the token field", "[workloads][rendezvous]") {
  auto h = parse_rendezvous_hello("ocslab-collbench 1 rank=1 nranks=2 auth=00ff tag=t x");
  REQUIRE(h);
  CHECK(h->auth == "00ff");
  CHECK(h->tag == "t x");
  CHECK(parse_rendezvous_hello("ocslab-collbench 1 rank=1 nranks=2 tag=t")->auth.empty());
  for (const std::string& bad : std::vector<std::string>{
           "ocslab-collbench 1 rank=1 nranks=2 auth= tag=t", "ocslab-collbench 1 rank=1 nranks=2 auth=00FF tag=t",
           "ocslab-collbench 1 rank=1 nranks=2 auth=00ff",
           "ocslab-collbench 1 rank=1 nranks=2 auth=" + std::string(129, 'a') + " tag=t"}) {
    INFO(bad);
    CHECK_FALSE(parse_rendezvous_hello(bad));
  }
  // A rank with a token and a rank 0 without one disagree: the rendezvous says so.
  int port = free_loopback_port(SOCK_STREAM);
  std::string addr = "127.0.0.1:" + std::to_string(port);
  auto root = std::async(std::launch::async, [&] { Rendezvous rv(0, 2, addr, "t", 10s); });
  RendezvousOptions opts;
  opts.token = "abcd";
  CHECK_THROWS_WITH(Rendezvous(1, 2, addr, "t", 10s, opts), Contains("carries a token, rank 0 runs without one"));
  CHECK_THROWS(root.get());
}
