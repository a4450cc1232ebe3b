// HandshakeGate: at most limit() tickets out at once, first come first served, slots given
// back by the ticket's destructor (also when the handshake throws).
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <vector>

#include "ocslab/common/error.h"
#include "ocslab/runner/handshake_gate.h"
#include "ocslab/testing/wait.h"

using namespace ocslab;
using namespace ocslab::runner;
using namespace std::chrono_literals;

namespace handshake_gate_test {

// Threads that each take a ticket, record how many hold one, hold it until released.
struct Crowd {
  explicit Crowd(HandshakeGate& g) : gate(g) {}
  HandshakeGate& gate;
  std::atomic<int> holding{0}, most{0}, done{0};
  std::atomic<bool> go{false};
  std::mutex order_mutex;
  std::vector<int> order;  // the callers in the order they entered
  std::vector<std::thread> threads;

  void add(int id) {
    threads.emplace_back([this, id] {
      HandshakeGate::Ticket t = gate.enter();
      {
        std::lock_guard lock(order_mutex);
        order.push_back(id);
      }
      int now = ++holding;
      int m = most.load();
      while (now > m && !most.compare_exchange_weak(m, now)) {
      }
      while (!go.load()) std::this_thread::yield();
      --holding;
      ++done;
    });
  }
  ~Crowd() {
    go = true;
    for (auto& t : threads) t.join();
  }
};

}  // namespace handshake_gate_test

using handshake_gate_test::Crowd;

TEST_CASE("the handshake gate lets at most its limit through and the rest follow as slots come back",
          "[runner][gate]") {
  HandshakeGate gate(3);
  Crowd crowd(gate);
  for (int i = 0; i < 12; ++i) crowd.add(i);
  // Three get in; the other nine wait for as long as those hold their tickets.
  REQUIRE(testing::poll_until([&] { return crowd.holding.load() == 3; }, 5000ms));
  // load-safe: time for a fourth to slip through a leaking gate; a slow machine can only hide a fault, not fail the
  // case.
  std::this_thread::sleep_for(100ms);  // kept: time for a fourth to slip through if the gate leaked
  CHECK(crowd.holding.load() == 3);
  CHECK(gate.in_flight() == 3);
  CHECK(gate.entered() == 3);
  crowd.go = true;
  for (auto& t : crowd.threads) t.join();
  crowd.threads.clear();
  CHECK(crowd.done.load() == 12);
  CHECK(crowd.most.load() <= 3);
  CHECK(gate.peak() == 3);
  CHECK(gate.in_flight() == 0);
  CHECK(gate.entered() == 12);
}

TEST_CASE("the handshake gate admits in order of arrival", "[runner][gate]") {
  HandshakeGate gate(1);
  HandshakeGate::Ticket first = gate.enter();
  Crowd crowd(gate);
  crowd.go = true;  // each releases at once once in
  // Callers arrive one after the other (each queued before the next starts).
  for (int i = 0; i < 6; ++i) {
    crowd.add(i);
    REQUIRE(testing::poll_until([&] { return gate.waiting() == i + 1; }, 5000ms));
  }
  first.release();
  for (auto& t : crowd.threads) t.join();
  crowd.threads.clear();
  CHECK(crowd.order == std::vector<int>{0, 1, 2, 3, 4, 5});
  CHECK(gate.peak() == 1);
}

TEST_CASE("a ticket gives its slot back when the handshake throws, and a moved ticket only once", "[runner][gate]") {
  HandshakeGate gate(2);
  try {
    HandshakeGate::Ticket t = gate.enter();
    CHECK(gate.in_flight() == 1);
    throw std::runtime_error("auth refused");
  } catch (const std::runtime_error&) {
  }
  CHECK(gate.in_flight() == 0);
  {
    HandshakeGate::Ticket a = gate.enter();
    HandshakeGate::Ticket b = std::move(a);
    CHECK(gate.in_flight() == 1);
    HandshakeGate::Ticket c = gate.enter();
    CHECK(gate.in_flight() == 2);
    c = std::move(b);  // c's own slot goes back, b's moves in
    CHECK(gate.in_flight() == 1);
  }
  CHECK(gate.in_flight() == 0);
  CHECK(gate.entered() == 3);
}

TEST_CASE("a handshake gate needs at least one slot", "[runner][gate]") {
  CHECK_THROWS_AS(HandshakeGate(0), Error);
  CHECK_THROWS_WITH(HandshakeGate(-3), Catch::Contains("connect_concurrency must be at least 1, got -3"));
}
