// OcsPowerMonitor's emission rules over a scripted driver: which readings become power_dbm and
// light samples, what a run of failures does, and which clock stamp a sample carries.
#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <cmath>
#include <limits>
#include <mutex>
#include <optional>
#include <thread>
#include <variant>

#include "ocslab/ocsctl/errors.h"
#include "ocslab/runner/ocs_power_monitor.h"
#include "ocslab/testing/wait.h"

using namespace ocslab;
using namespace ocslab::runner;
using namespace std::chrono_literals;

namespace {

// One scripted reply per poll: a reading for port 9, a connection failure, or a reply that
// lacks the port. After the script the last step repeats.
struct Fail {};
struct Missing {};
using Step = std::variant<double, Fail, Missing>;

class ScriptedDriver final : public ocs::OcsDriver {
 public:
  explicit ScriptedDriver(std::vector<Step> script)
      : OcsDriver(ocs::SwitchUrl::parse("tl1://admin@127.0.0.1:1"), {}), script_(std::move(script)) {}

  size_t polls() const {
    std::lock_guard lock(mutex_);
    return next_;
  }
  // The driver's acked stamp of every answered poll, in order.
  std::vector<int64_t> acked() const {
    std::lock_guard lock(mutex_);
    return acked_;
  }

 protected:
  void do_open() override {}
  void do_close() override {}
  ocs::SwitchInfo do_info() override { return {"TEST", "1", "", "", 8, 8}; }
  std::vector<ocs::Circuit> do_list() override { return {}; }
  void do_connect(const std::vector<ocs::Circuit>&) override {}
  void do_disconnect(const std::vector<ocs::Port>&) override {}
  std::vector<ocs::PortPower> do_power(const std::vector<ocs::Port>& ports) override {
    Step step;
    {
      std::lock_guard lock(mutex_);
      step = script_[std::min(next_, script_.size() - 1)];
      ++next_;
    }
    stamp_issued("RTRV-PORT-POWER");
    if (std::holds_alternative<Fail>(step)) throw ocs::ConnectionError("scripted: connection refused");
    Timestamp t = stamp_acked();
    {
      std::lock_guard lock(mutex_);
      acked_.push_back(t.monotonic_ns);
    }
    if (std::holds_alternative<Missing>(step)) return {};
    std::vector<ocs::PortPower> out;
    for (auto p : ports) out.push_back({p, std::get<double>(step)});
    return out;
  }

 private:
  mutable std::mutex mutex_;
  std::vector<Step> script_;
  size_t next_ = 0;
  std::vector<int64_t> acked_;
};

struct Run {
  std::vector<Sample> samples;
  PowerMonitorStats stats;
  std::vector<int64_t> acked;
};

Run run_script(std::vector<Step> script) {
  size_t steps = script.size();
  auto driver = std::make_unique<ScriptedDriver>(std::move(script));
  ScriptedDriver* d = driver.get();
  std::mutex m;
  Run r;
  PowerMonitorOptions o;
  o.interval = 1ms;
  OcsPowerMonitor mon(
      std::move(driver), {{9, "h1", "eth1"}},
      [&](const Sample& s) {
        std::lock_guard lock(m);
        r.samples.push_back(s);
      },
      o);
  mon.start();
  // Every step taken, then the last one repeated a few times (it must add nothing).
  ocslab::testing::poll_until([&] { return d->polls() >= steps + 5; }, 4000ms, 2ms);
  mon.stop();
  REQUIRE(d->polls() >= steps + 5);
  r.stats = mon.stats();
  r.acked = d->acked();
  return r;
}

std::vector<double> values(const Run& r, const std::string& signal) {
  std::vector<double> out;
  for (const auto& s : r.samples) {
    if (s.signal == signal) out.push_back(s.value);
  }
  return out;
}

}  // namespace

TEST_CASE("ocs_power monitor: power_dbm on moves over 0.5 dB, light at the -25 dBm threshold", "[runner][power]") {
  auto r = run_script({-60.0, -59.8, -59.4, -3.0, -3.2, -24.9, -25.1, -25.0});
  CHECK(values(r, "power_dbm") == std::vector<double>{-60.0, -59.4, -3.0, -24.9});
  CHECK(values(r, "light") == std::vector<double>{0, 1, 0, 1});  // -25.0 is light again (at or above)
  CHECK(r.stats.failed_polls == 0);
  CHECK(r.stats.samples == r.samples.size());
  for (const auto& s : r.samples) {
    CHECK(s.source == "ocs_power");
    CHECK(s.host == "h1");
    CHECK(s.subject == "eth1");
    CHECK(s.unit == (s.signal == "light" ? "bool" : "dBm"));
  }
  // Each sample carries the driver's own acked stamp of the reply it came from.
  for (const auto& s : r.samples) {
    CHECK(std::find(r.acked.begin(), r.acked.end(), s.mono_ns) != r.acked.end());
  }
}

TEST_CASE("ocs_power monitor: a run of failures is counted once and power is re-emitted after it", "[runner][power]") {
  auto r = run_script({-3.0, Fail{}, Fail{}, Fail{}, -3.0, Missing{}, -3.1});
  CHECK(r.stats.failed_polls == 4);  // three refused, one reply without the port
  CHECK(r.stats.failure_runs == 2);
  CHECK_THAT(r.stats.last_error, Catch::Contains("no reading for port 9"));
  CHECK(values(r, "power_dbm") == std::vector<double>{-3.0, -3.0, -3.1});  // re-emitted after each gap
  CHECK(values(r, "light") == std::vector<double>{1});                     // never changed
}

TEST_CASE("ocs_power monitor: non-finite readings", "[runner][power]") {
  const double inf = std::numeric_limits<double>::infinity();
  auto r = run_script({-3.0, -inf, -inf, -3.0});
  auto p = values(r, "power_dbm");
  REQUIRE(p.size() == 3);
  CHECK(p[1] == -inf);
  CHECK(values(r, "light") == std::vector<double>{1, 0, 1});
}
