#include "ocslab/emulator/nic_link_model.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <memory>
#include <vector>

#include "ocslab/common/clock.h"
#include "ocslab/common/error.h"
#include "ocslab/testing/io_run.h"

using namespace ocslab;
using namespace ocslab::emu;

namespace {

// Test double of the carrier actuator: records each call with its monotonic time.
struct Call {
  bool up;
  int64_t mono_ns;
};
struct RecordingDriver : LinkDriver {
  explicit RecordingDriver(std::shared_ptr<std::vector<Call>> calls, bool fail = false)
      : calls_(std::move(calls)), fail_(fail) {}
  void set_link(bool up) override {
    calls_->push_back({up, monotonic_ns()});
    if (fail_) throw Error("TAP t0: cannot set carrier (test)");
  }
  std::string describe() const override { return "recording driver"; }
  std::shared_ptr<std::vector<Call>> calls_;
  bool fail_;
};

struct Fixture {
  boost::asio::io_context io;
  GroundTruth truth{"ocs1"};
  std::shared_ptr<std::vector<Call>> calls = std::make_shared<std::vector<Call>>();
  std::vector<bool> told;  // what the data plane was told
  std::unique_ptr<NicLinkModel> model;

  explicit Fixture(NicLinkParams p, bool failing_driver = false) {
    model = std::make_unique<NicLinkModel>(
        io, "h1-eth1", std::move(p), std::make_unique<RecordingDriver>(calls, failing_driver), truth,
        [this](bool up) { told.push_back(up); }, 1234);
  }
  // Runs the event loop until pred holds or timeout_ms passes; returns pred(). timeout_ms is a
  // hang guard: pred is the event.
  template <class Pred>
  bool run_until(Pred pred, int timeout_ms) {
    int64_t end = monotonic_ns() + int64_t{timeout_ms} * 1'000'000;
    while (!pred() && monotonic_ns() < end) {
      io.restart();
      // load-safe: one slice of the event wait above; pred is asked after each.
      io.run_for(std::chrono::milliseconds(2));
    }
    return pred();
  }
  // Every timer due within ms has run, however late this thread ran (testing::run_through); a
  // wall-clock window (io.run_for) can end before a due timer's handler on a loaded machine.
  void run_through(int ms) { ocslab::testing::run_through(io, std::chrono::milliseconds(ms)); }
  std::vector<bool> driver_states() const {
    std::vector<bool> v;
    for (const auto& c : *calls) v.push_back(c.up);
    return v;
  }
  std::vector<std::pair<std::string, double>> truth_events() const {
    std::vector<std::pair<std::string, double>> v;
    for (const auto& s : truth.samples()) v.emplace_back(s.signal, s.value);
    return v;
  }
};

NicLinkParams fixed_params(double los_ms, double up_ms) {
  NicLinkParams p;
  p.los_ms = los_ms;
  p.firmware_up = Distribution::fixed(up_ms);
  return p;
}

double ms_since(int64_t from_ns, int64_t to_ns) { return static_cast<double>(to_ns - from_ns) / 1e6; }

}  // namespace

TEST_CASE("ideal NICs follow the light at once") {
  Fixture f(NicLinkParams::preset("ideal"));
  f.model->force(true);
  CHECK(f.model->link_up());
  f.model->on_light(false);
  CHECK_FALSE(f.model->link_up());  // no timer involved
  f.model->on_light(true);
  CHECK(f.model->link_up());
  CHECK(f.driver_states() == std::vector<bool>{true, false, true});
  CHECK(f.told == std::vector<bool>{true, false, true});
}

TEST_CASE("loss of light takes the link down after LOS, light back brings it up after the firmware delay") {
  Fixture f(fixed_params(20, 250));
  f.model->force(true);

  int64_t dark = monotonic_ns();
  f.model->on_light(false);
  CHECK(f.model->link_up());  // not before LOS
  REQUIRE(f.run_until([&] { return !f.model->link_up(); }, 2000));
  double los = ms_since(dark, f.calls->back().mono_ns);
  INFO("LOS took " << los << " ms, configured 20");
  CHECK(los >= 19.5);
  CHECK(los < 120);

  int64_t lit = monotonic_ns();
  f.model->on_light(true);
  CHECK_FALSE(f.model->link_up());
  REQUIRE(f.run_until([&] { return f.model->link_up(); }, 3000));
  double up = ms_since(lit, f.calls->back().mono_ns);
  INFO("link-up took " << up << " ms, configured 250");
  CHECK(up >= 249.5);
  CHECK(up < 400);

  f.run_through(100);
  CHECK(f.driver_states() == std::vector<bool>{true, false, true});  // no duplicates
  CHECK(f.told == std::vector<bool>{true, false, true});

  auto samples = f.truth.samples();
  std::vector<std::pair<std::string, double>> expect = {
      {"light", 1}, {"link", 1}, {"light", 0}, {"link", 0}, {"light", 1}, {"firmware_delay", 250}, {"link", 1}};
  CHECK(f.truth_events() == expect);
  for (const auto& s : samples) {
    CHECK(s.host == "ocs1");
    CHECK(s.source == "emulator");
    CHECK(s.subject == "h1-eth1");
    CHECK(s.unit == (s.signal == "firmware_delay" ? "ms" : "bool"));
  }
  // The delay is drawn when the light returns; the link-up sample is stamped when it happened.
  CHECK(ms_since(samples[4].mono_ns, samples[5].mono_ns) < 50);
  CHECK(ms_since(samples[4].mono_ns, samples[6].mono_ns) >= 249.5);
}

TEST_CASE("light lost while the firmware is still bringing the link up cancels the pending up") {
  Fixture f(fixed_params(0, 300));
  f.model->force(false);
  f.model->on_light(true);
  f.run_through(100);
  f.model->on_light(false);  // flap before the firmware finished
  f.run_through(400);
  CHECK_FALSE(f.model->link_up());
  CHECK(f.driver_states() == std::vector<bool>{false});  // only force(false), never up

  // A second light-back starts a fresh wait measured from itself.
  int64_t lit = monotonic_ns();
  f.model->on_light(true);
  REQUIRE(f.run_until([&] { return f.model->link_up(); }, 3000));
  double up = ms_since(lit, f.calls->back().mono_ns);
  CHECK(up >= 299.5);
  CHECK(up < 450);
  CHECK(f.driver_states() == std::vector<bool>{false, true});
}

TEST_CASE("a dark blip shorter than LOS never takes the link down") {
  Fixture f(fixed_params(200, 1000));
  f.model->force(true);
  f.model->on_light(false);
  f.run_through(50);
  f.model->on_light(true);
  f.run_through(400);
  CHECK(f.model->link_up());
  CHECK(f.driver_states() == std::vector<bool>{true});
  std::vector<std::pair<std::string, double>> expect = {{"light", 1}, {"link", 1}, {"light", 0}, {"light", 1}};
  CHECK(f.truth_events() == expect);
  // Repeated reports of the same light state are not transitions.
  f.model->on_light(true);
  CHECK(f.truth.samples().size() == 4);
}

TEST_CASE("a reconfiguration soon after the previous link-up adds the rapid penalty, capped") {
  NicLinkParams p = fixed_params(0, 100);
  p.rapid_window_ms = 1000;
  p.rapid_extra = Distribution::fixed(300);
  Fixture f(p);
  f.model->force(false);

  auto cycle = [&] {  // light back, measure link-up, then dark again
    int64_t lit = monotonic_ns();
    f.model->on_light(true);
    REQUIRE(f.run_until([&] { return f.model->link_up(); }, 3000));
    double up = ms_since(lit, f.calls->back().mono_ns);
    f.model->on_light(false);
    return up;
  };
  double first = cycle();  // no previous link-up: plain firmware delay
  double rapid = cycle();  // right after the first link-up
  f.run_through(1100);     // leave the rapid window
  double calm = cycle();
  INFO("first " << first << " ms, rapid " << rapid << " ms, calm " << calm << " ms");
  CHECK(first >= 99.5);
  CHECK(first < 250);
  CHECK(rapid >= 399.5);
  CHECK(rapid < 550);
  CHECK(calm >= 99.5);
  CHECK(calm < 250);
  std::vector<double> drawn;  // the ground truth says what the model drew, penalty included
  for (const auto& s : f.truth.samples()) {
    if (s.signal == "firmware_delay") drawn.push_back(s.value);
  }
  CHECK(drawn == std::vector<double>{100, 400, 100});

  p.max_up_ms = 250;
  Fixture g(p);
  g.model->force(false);
  g.model->on_light(true);
  REQUIRE(g.run_until([&] { return g.model->link_up(); }, 3000));
  g.model->on_light(false);
  int64_t lit = monotonic_ns();
  g.model->on_light(true);
  REQUIRE(g.run_until([&] { return g.model->link_up(); }, 3000));
  double capped = ms_since(lit, g.calls->back().mono_ns);
  INFO("capped " << capped << " ms");
  CHECK(capped >= 249.5);
  CHECK(capped < 380);
  CHECK(g.truth.samples().at(g.truth.samples().size() - 2).signal == "firmware_delay");
  CHECK(g.truth.samples().at(g.truth.samples().size() - 2).value == 250);
}

TEST_CASE("presets carry the ConnectX-6 Dx figures") {
  CHECK(NicLinkParams::preset_names() == std::vector<std::string>{"ideal", "cx6dx-no-autoneg", "cx6dx-autoneg"});
  auto ideal = NicLinkParams::preset("ideal");
  CHECK(ideal.los_ms == 0);
  CHECK(ideal.firmware_up.mean_ms() == 0);

  auto check = [](const std::string& name, double mean, double floor) {
    auto p = NicLinkParams::preset(name);
    CHECK(p.firmware_up.kind == Distribution::Kind::kNormal);
    CHECK(p.firmware_up.mean_ms() == mean);
    CHECK(p.firmware_up.floor_ms == floor);
    CHECK(p.rapid_window_ms == 5000);
    CHECK(p.max_up_ms == 10000);
    std::mt19937_64 rng(9);
    double lo = 1e9, hi = 0;
    for (int i = 0; i < 5000; ++i) {
      double d = std::min(p.firmware_up.sample_ms(rng) + p.rapid_extra.sample_ms(rng), p.max_up_ms);
      lo = std::min(lo, d);
      hi = std::max(hi, d);
    }
    CHECK(lo >= floor);
    CHECK(hi <= 10000);
    CHECK(hi > mean + 3000);  // the rapid penalty really adds seconds
  };
  check("cx6dx-no-autoneg", 3000, 2500);
  check("cx6dx-autoneg", 6000, 5000);
  CHECK_THROWS_WITH(NicLinkParams::preset("cx7"),
                    "unknown NIC link preset 'cx7' (known: ideal, cx6dx-no-autoneg, cx6dx-autoneg)");
}

TEST_CASE("a failing carrier actuator does not stop the model or the event loop") {
  Fixture f(fixed_params(0, 50), /*failing_driver=*/true);
  // At start the failure reaches the caller: the lab is miswired.
  CHECK_THROWS_WITH(f.model->force(false), Catch::Contains("cannot set carrier"));
  f.model->on_light(true);
  REQUIRE(f.run_until([&] { return f.model->link_up(); }, 2000));  // a throw would have escaped run_for
  CHECK(f.told == std::vector<bool>{true});
  auto ev = f.truth_events();
  CHECK(std::find(ev.begin(), ev.end(), std::pair<std::string, double>{"link_driver_error", 1}) != ev.end());
  CHECK(ev.back() == std::pair<std::string, double>{"link", 1});
}

TEST_CASE("destroying a model with a transition pending leaves nothing behind") {
  Fixture f(fixed_params(0, 30));
  f.model->force(false);
  f.model->on_light(true);
  f.model.reset();
  f.run_through(100);  // the cancelled handler runs now; under ASan any use of the model would show
  CHECK(f.told == std::vector<bool>{false});
  CHECK(f.driver_states() == std::vector<bool>{false});
}

TEST_CASE("a NIC held down: light back never raises the link, light loss still drops it, release raises it") {
  Fixture f(fixed_params(20, 100));
  f.model->force(true);
  f.model->set_held_down(true);
  CHECK(f.model->held_down());
  f.run_through(50);
  CHECK(f.model->link_up());  // the hold stops the firmware raising the link, not an up link

  f.model->on_light(false);  // a reconfiguration moves this NIC's circuit: dark ...
  REQUIRE(f.run_until([&] { return !f.model->link_up(); }, 2000));
  f.model->on_light(true);  // ... and lit again
  f.run_through(400);       // four firmware delays
  CHECK_FALSE(f.model->link_up());
  CHECK(f.driver_states() == std::vector<bool>{true, false});
  CHECK(f.told == std::vector<bool>{true, false});

  int64_t released = monotonic_ns();
  f.model->set_held_down(false);
  CHECK_FALSE(f.model->link_up());  // not at once: after the firmware delay
  REQUIRE(f.run_until([&] { return f.model->link_up(); }, 3000));
  double up = ms_since(released, f.calls->back().mono_ns);
  INFO("release -> link up took " << up << " ms, configured 100");
  CHECK(up >= 99.5);
  CHECK(up < 250);
  CHECK(f.driver_states() == std::vector<bool>{true, false, true});

  // Every hold and release is in the ground truth; no firmware delay is drawn while held.
  std::vector<std::pair<std::string, double>> expect = {
      {"light", 1}, {"link", 1},      {"held_down", 1},        {"light", 0}, {"link", 0},
      {"light", 1}, {"held_down", 0}, {"firmware_delay", 100}, {"link", 1}};
  CHECK(f.truth_events() == expect);
  for (const auto& s : f.truth.samples()) {
    if (s.signal == "held_down") CHECK(s.unit == "bool");
    CHECK(s.subject == "h1-eth1");
  }
}

TEST_CASE("holding a NIC cancels a link-up the firmware was counting; holding twice records once") {
  Fixture f(fixed_params(0, 200));
  f.model->force(false);
  f.model->on_light(true);  // the firmware starts its 200 ms
  f.run_through(50);
  f.model->set_held_down(true);
  f.model->set_held_down(true);  // the state it has: no second row
  f.run_through(400);
  CHECK_FALSE(f.model->link_up());
  CHECK(f.driver_states() == std::vector<bool>{false});

  // Released while dark: nothing comes up until the light does, then after the firmware delay.
  f.model->on_light(false);
  f.model->set_held_down(false);
  f.model->set_held_down(false);
  f.run_through(300);
  CHECK_FALSE(f.model->link_up());
  int64_t lit = monotonic_ns();
  f.model->on_light(true);
  REQUIRE(f.run_until([&] { return f.model->link_up(); }, 3000));
  CHECK(ms_since(lit, f.calls->back().mono_ns) >= 199.5);

  int holds = 0, releases = 0;
  for (const auto& s : f.truth.samples()) {
    if (s.signal == "held_down") (s.value == 1 ? holds : releases) += 1;
  }
  CHECK(holds == 1);
  CHECK(releases == 1);
}

TEST_CASE("an ideal NIC released with light present comes up at once") {
  Fixture f(NicLinkParams::preset("ideal"));
  f.model->force(false);
  f.model->set_held_down(true);
  f.model->on_light(true);
  CHECK_FALSE(f.model->link_up());
  f.model->set_held_down(false);
  CHECK(f.model->link_up());  // firmware delay 0: no timer involved
  CHECK(f.told == std::vector<bool>{false, true});
}
