// The TCP bootstrap over real loopback sockets, one thread per rank.
#include <sys/socket.h>

#include <catch2/catch.hpp>

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
