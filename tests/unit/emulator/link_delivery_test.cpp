#include "ocslab/emulator/link_delivery.h"

#include <catch2/catch.hpp>

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "ocslab/common/error.h"
#include "ocslab/testing/wait.h"

using namespace ocslab;
using namespace ocslab::emu;
using namespace std::chrono_literals;

namespace {

// A host that answers only when the test lets it: each set_link waits until `open` is set
// (a QEMU whose main loop is busy), then records the state. Failing calls throw once recorded.
struct Gate {
  std::mutex m;
  std::condition_variable cv;
  bool open = true;
  bool fail = false;
  std::vector<bool> delivered;
  int entered = 0;  // calls that reached the host, answered or not

  void set_open(bool o) {
    {
      std::lock_guard lock(m);
      open = o;
    }
    cv.notify_all();
  }
  template <class Pred>
  bool wait_until(Pred pred) {
    std::unique_lock lock(m);
    // load-safe: an event wait (pred); the 10 s are a hang guard.
    return cv.wait_for(lock, std::chrono::seconds(10), [&] { return pred(); });
  }
};

struct GatedDriver : LinkDriver {
  explicit GatedDriver(std::shared_ptr<Gate> g) : gate(std::move(g)) {}
  void set_link(bool up) override {
    std::unique_lock lock(gate->m);
    ++gate->entered;
    gate->cv.notify_all();
    gate->cv.wait(lock, [&] { return gate->open; });
    gate->delivered.push_back(up);
    gate->cv.notify_all();
    if (gate->fail) throw Error("QMP h1 netdev n0: set_link refused (test)");
  }
  std::string describe() const override { return "gated driver"; }
  std::shared_ptr<Gate> gate;
};

std::vector<std::pair<std::string, double>> rows(const GroundTruth& truth, const std::string& signal) {
  std::vector<std::pair<std::string, double>> out;
  for (const auto& s : truth.samples()) {
    if (s.signal == signal) out.emplace_back(s.subject, s.value);
  }
  return out;
}

}  // namespace

TEST_CASE("async link delivery: the first change is delivered before set_link returns, and its failure thrown") {
  auto gate = std::make_shared<Gate>();
  GroundTruth truth("ocs1");
  gate->fail = true;
  auto d = make_async_link_driver(std::make_unique<GatedDriver>(gate), truth, "h1-eth1");
  CHECK_THROWS_WITH(d->set_link(false), Catch::Contains("set_link refused"));
  CHECK(gate->delivered == std::vector<bool>{false});
  CHECK(rows(truth, "link_driver_error").empty());  // the caller got it, not the log
  gate->fail = false;
  d->set_link(false);  // still the first successful one: synchronous
  CHECK(gate->delivered == std::vector<bool>{false, false});
  REQUIRE(rows(truth, "link_delivery").size() == 1);
  CHECK(rows(truth, "link_delivery")[0].first == "h1-eth1");
  CHECK_THAT(d->describe(), Catch::Contains("gated driver"));
}

TEST_CASE("async link delivery: a host that does not answer delays only its own changes, which arrive in order") {
  auto gate = std::make_shared<Gate>();
  GroundTruth truth("ocs1");
  auto d = make_async_link_driver(std::make_unique<GatedDriver>(gate), truth, "h1-eth1");
  d->set_link(false);  // the synchronous start
  gate->set_open(false);
  // The host is stuck: these return although none of them can be answered.
  d->set_link(true);
  d->set_link(false);
  d->set_link(true);
  REQUIRE(gate->wait_until([&] { return gate->entered == 2; }));  // the first queued one is at the host
  {
    std::lock_guard lock(gate->m);
    CHECK(gate->delivered == std::vector<bool>{false});
  }
  gate->set_open(true);
  REQUIRE(gate->wait_until([&] { return gate->delivered.size() == 4; }));
  CHECK(gate->delivered == std::vector<bool>{false, true, false, true});
  // Each delivery is a row once the host answered (the last may follow its answer by a moment).
  testing::poll_until([&] { return rows(truth, "link_delivery").size() >= 4; }, 1000ms);
  auto delivery = rows(truth, "link_delivery");
  REQUIRE(delivery.size() == 4);
  for (const auto& [subject, ms] : delivery) {
    CHECK(subject == "h1-eth1");
    CHECK(ms >= 0);
  }
}

TEST_CASE("async link delivery: a later failure is a ground-truth row, not an exception, and delivery goes on") {
  auto gate = std::make_shared<Gate>();
  GroundTruth truth("ocs1");
  auto d = make_async_link_driver(std::make_unique<GatedDriver>(gate), truth, "h2-eth1");
  d->set_link(false);
  {
    std::lock_guard lock(gate->m);
    gate->fail = true;
  }
  CHECK_NOTHROW(d->set_link(true));
  testing::poll_until([&] { return !rows(truth, "link_driver_error").empty(); }, 10000ms);
  CHECK(rows(truth, "link_driver_error") == std::vector<std::pair<std::string, double>>{{"h2-eth1", 1}});
  {
    std::lock_guard lock(gate->m);
    gate->fail = false;
  }
  d->set_link(false);
  REQUIRE(gate->wait_until([&] { return gate->delivered.size() == 3; }));
  CHECK(gate->delivered == std::vector<bool>{false, true, false});
}

TEST_CASE("async link delivery: destroying it waits for the change at the host, and nothing arrives after") {
  auto gate = std::make_shared<Gate>();
  GroundTruth truth("ocs1");
  auto d = make_async_link_driver(std::make_unique<GatedDriver>(gate), truth, "h1-eth1");
  d->set_link(false);
  gate->set_open(false);
  d->set_link(true);
  d->set_link(false);
  REQUIRE(gate->wait_until([&] { return gate->entered == 2; }));
  // The host answers a moment later; whether the destructor has begun by then is up to the
  // scheduler, so the queued change may or may not be delivered; nothing may come after.
  std::thread opener([&] {
    // load-safe: either outcome is accepted (see above); the delay only makes the destructor's side likelier.
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    gate->set_open(true);
  });
  d.reset();  // returns once the host answered the change in progress
  opener.join();
  std::vector<bool> at_reset;
  {
    std::lock_guard lock(gate->m);
    at_reset = gate->delivered;
  }
  REQUIRE(at_reset.size() >= 2);
  CHECK(std::vector<bool>(at_reset.begin(), at_reset.begin() + 2) == std::vector<bool>{false, true});
  // load-safe: time for a delivery that must not come; a slow machine can only hide a fault, not fail the case.
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  std::lock_guard lock(gate->m);
  CHECK(gate->delivered == at_reset);
}
