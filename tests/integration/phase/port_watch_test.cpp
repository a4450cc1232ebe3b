// Detection -> masking -> recovery against the OCS emulator over real TCP: a PortWatch reads the
// switch's power monitors on its own TL1 session, a port's shutter is closed in the emulator, the
// watch reports the port, the controller masks it (the rank moves to the rail's spare slot and
// its circuits are re-made there, checked in the emulator's own record) and every shim is told.
#include <catch2/catch.hpp>

#include <algorithm>
#include <future>
#include <mutex>
#include <thread>

#include "ocslab/common/clock.h"
#include "ocslab/phase/port_watch.h"
#include "ocslab/phase/shim.h"
#include "ocslab/testing/phase_lab.h"
#include "ocslab/testing/wait.h"

using namespace phase_test;
using namespace ocslab::phase;
using ocslab::ocs::Circuit;
using Kind = ControllerEvent::Kind;

namespace {

// On the emulator's own thread, as its control plane would; false when the model refused.
bool close_shutter(Lab& lab, int port) {
  std::promise<bool> done;
  boost::asio::post(lab.io, [&] { done.set_value(!lab.model.set_shutter({port}, true).has_value()); });
  return done.get_future().get();
}

}  // namespace

TEST_CASE(
    "a dark egress port is detected from the switch's power readings, masked onto the spare slot and "
    "announced to every shim",
    "[phase][controller][mask]") {
  constexpr double kSwitchMs = 100;
  Lab lab(phase_switch(kSwitchMs));
  // Four ranks in one DP ring on slots 1..4 (egress 65..68); slot 5 (5 -> 69) is the spare.
  JobLayout L{"j", 1, {{"dp", 4}}};
  auto rail = std::make_shared<Orchestrator>("rail0", lab.slots(1, 5), lab.driver());
  rail->add_job(L, TopoId::uniform(L, 1));
  REQUIRE(lab.sorted_circuits() == std::vector<Circuit>{{1, 66}, {2, 67}, {3, 68}, {4, 65}});

  auto co = controller_options(L, {rail});
  std::vector<MaskReport> reports;
  std::mutex mu;
  co.on_mask = [&](const std::string&, const MaskReport& m) {
    std::lock_guard lock(mu);
    reports.push_back(m);
  };
  Controller ctl(co);
  ctl.start();

  RingShims ring(ctl.port(), "j", 4);
  auto& shims = ring.shims;
  auto step = [&](int index) { ring.step(index); };
  step(0);

  std::vector<PortFailure> failures;
  PortWatchOptions wo;
  wo.interval = std::chrono::milliseconds(10);
  wo.dark_polls = 2;
  PortWatch watch(
      rail, lab.driver(),
      [&](const PortFailure& f) {
        {
          std::lock_guard lock(mu);
          failures.push_back(f);
        }
        ctl.port_failed(f.rail, f.port, f.evidence, f.seen_mono_ns);
      },
      wo);
  watch.start();
  // Every circuit lit: a few polls find nothing.
  // load-safe: time for polls that must find nothing; a slow machine can only hide a fault, not fail the case.
  std::this_thread::sleep_for(std::chrono::milliseconds(150));
  {
    std::lock_guard lock(mu);
    CHECK(failures.empty());
  }
  CHECK(watch.polls() >= 3);

  // Rank 2's receive port fails: light still enters at 2, none leaves at 67.
  const int64_t closed_ns = ocslab::now().monotonic_ns;
  REQUIRE(close_shutter(lab, 67));
  // load-safe: the ceiling of a wait for the mask (the event); a hang guard.
  const bool masked = ocslab::testing::poll_until(
      [&] {
        for (const auto& e : ctl.events())
          if (e.kind == Kind::kMasked) return true;
        return false;
      },
      std::chrono::seconds(10), std::chrono::milliseconds(5));
  watch.stop();
  REQUIRE(masked);

  {
    std::lock_guard lock(mu);
    REQUIRE(failures.size() == 1);  // reported once, and only the failed port
    CHECK(failures[0].rail == "rail0");
    CHECK(failures[0].port == 67);
    CHECK_THAT(failures[0].evidence, Catch::Contains("no light leaves egress port 67 of circuit 2->67"));
    CHECK(failures[0].seen_mono_ns >= closed_ns);
    REQUIRE(reports.size() == 1);
    CHECK(reports[0].rank == 2);
    REQUIRE(reports[0].to.has_value());
    CHECK(*reports[0].to == Slot{5, 69});
  }
  // The switch's own record: rank 2's circuits moved to the spare, nothing left on 3 or 67.
  CHECK(lab.sorted_circuits() == std::vector<Circuit>{{1, 66}, {2, 69}, {4, 65}, {5, 68}});
  CHECK(rail->masked() == std::set<ocslab::ocs::Port>{67});

  // Detected within two switch-times of the first dark reading; recovered (circuits re-made on
  // the spare) after one more switch-time at least, the switch acknowledging only once settled.
  const auto ev = ctl.events();
  auto find = [&](Kind k) {
    return std::find_if(ev.begin(), ev.end(), [k](const ControllerEvent& e) { return e.kind == k; });
  };
  auto failed = find(Kind::kPortFailed);
  auto mask = find(Kind::kMasked);
  REQUIRE(failed != ev.end());
  REQUIRE(mask != ev.end());
  CHECK(failed->value == 67);
  const double detect_ms = static_cast<double>(failed->mono_ns - failures[0].seen_mono_ns) / 1e6;
  INFO("detect " << detect_ms << " ms, recover " << mask->value << " ms");
  CHECK(detect_ms >= 0);
  CHECK(detect_ms < 2 * kSwitchMs);
  CHECK(mask->rank == 2);
  CHECK(mask->value >= kSwitchMs);
  CHECK(mask->detail == "port 67 masked; rank 2 moved from slot 3/67 to 5/69");

  // Every shim hears of it by its next op, and the job goes on: no fallback.
  step(1);
  for (const auto& s : shims) {
    REQUIRE(s->slot_moves().size() == 1);
    const auto& m = s->slot_moves()[0];
    CHECK(m.rail == "rail0");
    CHECK(m.rank == 2);
    CHECK(m.port == 67);
    CHECK(m.ingress == 5);
    CHECK(m.egress == 69);
    CHECK_THAT(m.reason, Catch::Contains("no light leaves egress port 67"));
    CHECK_FALSE(s->in_fallback());
  }
  for (auto& s : shims) s->close();
  ctl.stop();
  CHECK_FALSE(ctl.in_fallback());
}

TEST_CASE("port watch: the port that takes the blame, the settle time, and one report per failure", "[phase][mask]") {
  Lab lab;
  JobLayout L{"j", 1, {{"dp", 2}}};
  auto rail = std::make_shared<Orchestrator>("rail0", lab.slots(1, 3), lab.driver());
  rail->add_job(L, TopoId::uniform(L, 1));
  PortWatchOptions o;
  o.interval = std::chrono::milliseconds(10);
  o.dark_polls = 2;
  o.settle = std::chrono::milliseconds(50);
  PortWatch w(rail, lab.driver(), nullptr, o);
  const std::vector<Circuit> cs = {{1, 66}, {2, 65}};
  const int64_t ms = 1'000'000;
  const int64_t t0 = 1000 * ms;
  // First sight: every circuit is new, so darkness within the settle time is not judged.
  CHECK(w.judge(cs, {{1, -60}, {66, -60}, {2, -3}, {65, -4}}, t0).empty());
  CHECK(w.judge(cs, {{1, -60}, {66, -60}, {2, -3}, {65, -4}}, t0 + 40 * ms).empty());
  // Settled: ingress 1 dark takes the blame, not its egress 66; two readings make a failure.
  CHECK(w.judge(cs, {{1, -60}, {66, -60}, {2, -3}, {65, -4}}, t0 + 60 * ms).empty());
  auto f = w.judge(cs, {{1, -60}, {66, -60}, {2, -3}, {65, -60}}, t0 + 70 * ms);
  REQUIRE(f.size() == 1);
  CHECK(f[0].rail == "rail0");
  CHECK(f[0].port == 1);
  CHECK(f[0].seen_mono_ns == t0 + 60 * ms);
  CHECK_THAT(f[0].evidence, Catch::Contains("no light enters ingress port 1 of circuit 1->66 (-60.0 dBm, 2 readings)"));
  // Ingress 2 lit and egress 65 dark: 65 takes the blame; port 1 is not reported again.
  f = w.judge(cs, {{1, -60}, {66, -60}, {2, -3}, {65, -60}}, t0 + 80 * ms);
  REQUIRE(f.size() == 1);
  CHECK(f[0].port == 65);
  CHECK(f[0].seen_mono_ns == t0 + 70 * ms);
  CHECK_THAT(f[0].evidence, Catch::Contains("no light leaves egress port 65 of circuit 2->65 (-60.0 dBm while "
                                            "ingress 2 reads -3.0 dBm, 2 readings)"));
  CHECK(w.judge(cs, {{1, -60}, {66, -60}, {2, -3}, {65, -60}}, t0 + 90 * ms).empty());
  // A dark reading between lit ones starts the count again.
  const std::vector<Circuit> moved = {{1, 67}, {2, 65}};  // 1's circuit re-made: a new circuit
  CHECK(w.judge(moved, {{1, -3}, {67, -50}, {2, -3}, {65, -3}}, t0 + 100 * ms).empty());  // settling
  CHECK(w.judge(moved, {{1, -3}, {67, -50}, {2, -3}, {65, -3}}, t0 + 160 * ms).empty());  // dark 1
  CHECK(w.judge(moved, {{1, -3}, {67, -3}, {2, -3}, {65, -3}}, t0 + 170 * ms).empty());   // lit
  CHECK(w.judge(moved, {{1, -3}, {67, -50}, {2, -3}, {65, -3}}, t0 + 180 * ms).empty());  // dark 1 again
  f = w.judge(moved, {{1, -3}, {67, -50}, {2, -3}, {65, -3}}, t0 + 190 * ms);
  REQUIRE(f.size() == 1);
  CHECK(f[0].port == 67);
  CHECK(f[0].seen_mono_ns == t0 + 180 * ms);
}

TEST_CASE("port watch: bad options are refused naming the rail", "[phase][mask]") {
  Lab lab;
  JobLayout L{"j", 1, {{"dp", 2}}};
  auto rail = std::make_shared<Orchestrator>("railA", lab.slots(1, 2), lab.driver());
  PortWatchOptions o;
  o.interval = std::chrono::milliseconds(0);
  CHECK_THROWS_WITH(PortWatch(rail, lab.driver(), nullptr, o),
                    Catch::Contains("port watch railA: the interval must be positive"));
  o.interval = std::chrono::milliseconds(10);
  o.dark_polls = 0;
  CHECK_THROWS_WITH(PortWatch(rail, lab.driver(), nullptr, o), Catch::Contains("dark_polls must be at least 1"));
}
