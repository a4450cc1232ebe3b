// Host-side failure detection (phase/nic_watch.h): the judgement on its own (readings against a
// rail's circuits, on a clock the test sets), then detection -> masking -> recovery against the OCS
// emulator over real TCP, where the switch sees every circuit lit and only the host's reading of
// its NIC's link says that rank 2's slot is dead.
#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <thread>

#include "ocslab/common/clock.h"
#include "ocslab/phase/nic_watch.h"
#include "ocslab/phase/shim.h"
#include "ocslab/testing/phase_lab.h"
#include "ocslab/testing/wait.h"

using namespace phase_test;
using namespace ocslab::phase;
using ocslab::ocs::Circuit;
using Kind = ControllerEvent::Kind;

namespace {

constexpr int64_t kMs = 1'000'000;

// Slots 1..5 of a 64x64 switch (egress = 64 + ingress), NIC eth1 of host h<slot>; h3's is a bond
// member, so its probes name it eth1p.
std::vector<WatchedNic> nics_of_slots() {
  std::vector<WatchedNic> out;
  for (int s = 1; s <= 5; ++s)
    out.push_back({Slot{static_cast<ocslab::ocs::Port>(s), static_cast<ocslab::ocs::Port>(64 + s)},
                   "h" + std::to_string(s), "eth1", s == 3 ? "eth1p" : "eth1"});
  return out;
}

}  // namespace

TEST_CASE("NIC watch judgement: down for down_for with circuits made, counted from the later of both",
          "[phase][nicwatch]") {
  Lab lab(phase_switch(0));
  auto rail = std::make_shared<Orchestrator>("rail0", lab.slots(1, 5), lab.driver());
  NicWatchOptions o;
  o.down_for = std::chrono::milliseconds(300);
  NicWatch w(rail, nics_of_slots(), nullptr, o);
  // Ranks 0..3 on slots 1..4 in one ring; slot 5 (h5) a spare without circuits.
  const std::vector<Circuit> ring{{1, 66}, {2, 67}, {3, 68}, {4, 65}};
  const int64_t t0 = 1'000'000 * kMs;
  // Every host's stream heard up to t (a heartbeat's sample at t): their readings are complete to there.
  auto fresh = [&](int64_t t) {
    for (const auto& n : nics_of_slots()) w.heard(n.host, t);
    return t;
  };

  SECTION("a NIC down before its circuits were made: counted from when they were first seen") {
    // No reading of a NIC yet: not judged, however long its circuits stand.
    CHECK(w.judge(ring, {}, fresh(t0 - 2000 * kMs), t0).empty());
    // h3's bond member down since t0 - 5 s, on circuits first seen at t0 - 2 s: due at t0 - 1.7 s.
    w.reading("h3", "eth1p", "carrier", false, t0 - 5000 * kMs);
    // The bond itself and another host's eth1p are not watched interfaces: ignored.
    w.reading("h3", "eth1", "carrier", false, t0 - 5000 * kMs);
    w.reading("h4", "eth1p", "carrier", false, t0 - 5000 * kMs);
    CHECK(w.judge(ring, {}, fresh(t0 - 1701 * kMs), 0).empty());
    auto f = w.judge(ring, {}, fresh(t0 - 1700 * kMs), 50 * kMs);
    REQUIRE(f.size() == 1);
    CHECK(f[0].rail == "rail0");
    CHECK(f[0].port == 3);  // the slot's ingress: the NIC's transmit fibre
    CHECK(f[0].seen_mono_ns == 50 * kMs - 300 * kMs);
    CHECK(f[0].evidence ==
          "NIC h3:eth1 (interface eth1p): carrier down for 300 ms with its circuits made (2->67, 3->68)");
    auto e = parse_nic_evidence(f[0].evidence);
    REQUIRE(e.has_value());
    CHECK(e->host == "h3");
    CHECK(e->nic == "eth1");
    CHECK(e->layer == "carrier");
    // Reported once for this set of circuits.
    CHECK(w.judge(ring, {}, fresh(t0), t0).empty());
  }

  SECTION("a NIC that comes back within down_for is no failure; the firmware layer counts alone") {
    CHECK(w.judge(ring, {}, fresh(t0), t0).empty());
    w.reading("h2", "eth1", "carrier", false, t0 + 100 * kMs);
    w.reading("h2", "eth1", "carrier", true, t0 + 399 * kMs);
    w.reading("h1", "eth1", "carrier", true, t0 + 100 * kMs);
    w.reading("h1", "eth1", "firmware", false, t0 + 100 * kMs);
    CHECK(w.judge(ring, {}, fresh(t0 + 399 * kMs), t0).empty());
    auto f = w.judge(ring, {}, fresh(t0 + 400 * kMs), t0);
    REQUIRE(f.size() == 1);
    CHECK(f[0].port == 1);
    CHECK(f[0].evidence == "NIC h1:eth1 (interface eth1): firmware down for 300 ms with its circuits made (1->66, 4->65)");
    CHECK(w.judge(ring, {}, fresh(t0 + 5000 * kMs), t0).empty());  // h2 is up again
  }

  SECTION("circuits re-made start the count again; masked slots and slots without circuits are not judged") {
    w.reading("h2", "eth1", "carrier", false, t0);
    w.reading("h5", "eth1", "carrier", false, t0);
    CHECK(w.judge(ring, {}, fresh(t0), t0).empty());
    CHECK(w.judge(ring, {}, fresh(t0 + 200 * kMs), t0).empty());
    // Slot 2's partner changes at t0 + 250 ms (rank 1 now sends to slot 4's port 68).
    const std::vector<Circuit> other{{1, 67}, {2, 68}, {3, 65}, {4, 66}};
    CHECK(w.judge(other, {}, fresh(t0 + 250 * kMs), t0).empty());
    CHECK(w.judge(other, {}, fresh(t0 + 549 * kMs), t0).empty());
    // Masked: nothing, however long.
    CHECK(w.judge(other, {2}, fresh(t0 + 5000 * kMs), t0).empty());
    // Unmasked again, the circuits count as new from now; h5 (no circuits) never counts.
    CHECK(w.judge(other, {}, fresh(t0 + 6000 * kMs), t0).empty());
    auto f = w.judge(other, {}, fresh(t0 + 6300 * kMs), t0);
    REQUIRE(f.size() == 1);
    CHECK(f[0].port == 2);
  }

  SECTION("a lagging stream delays the judgement, never invents one; an unheard host is not judged") {
    CHECK(w.judge(ring, {}, fresh(t0), t0).empty());
    // h2 went down at t0 + 100 ms and up at t0 + 150 ms, but its stream lags: at t0 + 1 s only
    // samples up to t0 + 120 ms have come, the down reading among them.
    w.reading("h2", "eth1", "carrier", false, t0 + 100 * kMs);
    w.heard("h2", t0 + 120 * kMs);
    CHECK(w.judge(ring, {}, t0 + 1000 * kMs, t0).empty());  // known to t0 + 120 ms: down 20 ms
    w.reading("h2", "eth1", "carrier", true, t0 + 150 * kMs);
    w.heard("h2", t0 + 990 * kMs);
    CHECK(w.judge(ring, {}, t0 + 1000 * kMs, t0).empty());  // the up row came: no failure
    // h4 down at t0 + 100 ms, heard to t0 + 399 ms: not yet; to t0 + 400 ms: failed, the evidence
    // counting to what was heard (300 ms), not to the watch's now (900 ms).
    w.reading("h4", "eth1", "carrier", false, t0 + 100 * kMs);
    w.heard("h4", t0 + 399 * kMs);
    CHECK(w.judge(ring, {}, t0 + 1000 * kMs, t0).empty());
    w.heard("h4", t0 + 400 * kMs);
    w.heard("h4", t0 + 200 * kMs);  // older than heard already: ignored
    auto f = w.judge(ring, {}, t0 + 1000 * kMs, 0);
    REQUIRE(f.size() == 1);
    CHECK(f[0].port == 4);
    CHECK(f[0].seen_mono_ns == -900 * kMs);  // the onset, t0 + 100 ms, on the mono clock (0 at t0 + 1 s)
    CHECK_THAT(f[0].evidence, Catch::Contains("carrier down for 300 ms"));
    // A host never heard from (h5 would be, with circuits): its readings alone are not judged.
    NicWatch quiet(rail, nics_of_slots(), nullptr, o);
    quiet.reading("h1", "eth1", "carrier", false, t0);
    CHECK(quiet.judge(ring, {}, t0 + 5000 * kMs, t0).empty());
  }

  CHECK_FALSE(parse_nic_evidence("no light leaves egress port 67 of circuit 2->67 (-60.0 dBm, 2 readings)"));
  CHECK_FALSE(parse_nic_evidence("NIC h3"));
  CHECK_FALSE(parse_nic_evidence("NIC :eth1 (interface x): carrier down"));
  CHECK_THROWS_WITH(NicWatch(rail, nics_of_slots(), nullptr, NicWatchOptions{std::chrono::milliseconds(0)}),
                    Catch::Contains("down_for must be positive (got 0 ms)"));
}

TEST_CASE(
    "a NIC whose link stays down under lit circuits is detected from the host's readings, masked onto "
    "the spare slot and announced to every shim",
    "[phase][controller][mask][nicwatch]") {
  constexpr double kSwitchMs = 100;
  constexpr int kDownMs = 200;
  Lab lab(phase_switch(kSwitchMs));
  JobLayout L{"j", 1, {{"dp", 4}}};
  auto rail = std::make_shared<Orchestrator>("rail0", lab.slots(1, 5), lab.driver());
  rail->add_job(L, TopoId::uniform(L, 1));
  REQUIRE(lab.sorted_circuits() == std::vector<Circuit>{{1, 66}, {2, 67}, {3, 68}, {4, 65}});

  auto co = controller_options(L, {rail});
  Controller ctl(co);
  ctl.start();
  RingShims ring(ctl.port(), "j", 4);
  auto& shims = ring.shims;
  auto step = [&](int index) { ring.step(index); };
  step(0);

  std::mutex mu;
  std::vector<PortFailure> failures;
  NicWatchOptions wo;
  wo.down_for = std::chrono::milliseconds(kDownMs);
  NicWatch watch(
      rail, nics_of_slots(),
      [&](const PortFailure& f) {
        {
          std::lock_guard lock(mu);
          failures.push_back(f);
        }
        ctl.port_failed(f.rail, f.port, f.evidence, f.seen_mono_ns);
      },
      wo);
  for (const auto& n : nics_of_slots()) watch.reading(n.host, n.interface, "carrier", true, ocslab::now().realtime_ns);
  // Every host's heartbeat, as the capture's stream would deliver it: readings complete to now.
  std::atomic<bool> beating{true};
  std::thread heartbeats([&] {
    while (beating) {
      for (const auto& n : nics_of_slots()) watch.heard(n.host, ocslab::now().realtime_ns);
      // load-safe: the heartbeat interval of the simulated host streams.
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  });
  watch.start();
  // Every NIC up: nothing to report.
  // load-safe: time for judgements that must find nothing; a slow machine can only hide a fault.
  std::this_thread::sleep_for(std::chrono::milliseconds(2 * kDownMs));
  {
    std::lock_guard lock(mu);
    CHECK(failures.empty());
  }
  // h3's NIC (rank 2's slot 3/67) loses its link; the switch still sees light on 2->67 and 3->68.
  const auto down = ocslab::now();
  watch.reading("h3", "eth1p", "carrier", false, down.realtime_ns);
  // load-safe: the ceiling of a wait for the mask (the event); a hang guard.
  const bool masked = ocslab::testing::poll_until(
      [&] {
        for (const auto& e : ctl.events())
          if (e.kind == Kind::kMasked) return true;
        return false;
      },
      std::chrono::seconds(10), std::chrono::milliseconds(5));
  watch.stop();
  beating = false;
  heartbeats.join();
  REQUIRE(masked);
  {
    std::lock_guard lock(mu);
    REQUIRE(failures.size() == 1);
    CHECK(failures[0].port == 3);
    CHECK_THAT(failures[0].evidence, Catch::StartsWith("NIC h3:eth1 (interface eth1p): carrier down for "));
    // The onset is the down reading (the circuits were older): seen at it, to the clock's rounding.
    CHECK(std::llabs(failures[0].seen_mono_ns - down.monotonic_ns) < 2 * kMs);
  }
  CHECK(lab.sorted_circuits() == std::vector<Circuit>{{1, 66}, {2, 69}, {4, 65}, {5, 68}});
  CHECK(rail->masked() == std::set<ocslab::ocs::Port>{3});
  const auto ev = ctl.events();
  auto failed = std::find_if(ev.begin(), ev.end(), [](const ControllerEvent& e) { return e.kind == Kind::kPortFailed; });
  auto mask = std::find_if(ev.begin(), ev.end(), [](const ControllerEvent& e) { return e.kind == Kind::kMasked; });
  REQUIRE(failed != ev.end());
  REQUIRE(mask != ev.end());
  const double detect_ms = static_cast<double>(failed->mono_ns - down.monotonic_ns) / 1e6;
  INFO("detect " << detect_ms << " ms, recover " << mask->value << " ms");
  CHECK(detect_ms >= kDownMs);            // never before the NIC was down for down_for
  CHECK(detect_ms < kDownMs + kSwitchMs);  // within a few judgement intervals after
  CHECK(mask->rank == 2);
  CHECK(mask->value >= kDownMs + kSwitchMs);  // onset -> circuits re-made on the spare
  CHECK(mask->detail == "port 3 masked; rank 2 moved from slot 3/67 to 5/69");
  step(1);
  for (const auto& s : shims) {
    REQUIRE(s->slot_moves().size() == 1);
    CHECK(s->slot_moves()[0].rank == 2);
    CHECK(s->slot_moves()[0].ingress == 5);
    CHECK_THAT(s->slot_moves()[0].reason, Catch::Contains("NIC h3:eth1"));
  }
  for (auto& s : shims) s->close();
  ctl.stop();
  CHECK_FALSE(ctl.in_fallback());
}
