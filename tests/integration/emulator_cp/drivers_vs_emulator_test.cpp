// The real ocsctl drivers (TL1 over TCP and SSH, NETCONF over SSH, SCPI over TCP) against one
// emulator control plane on loopback: every transport sees the same switch, refusals reach
// the caller with the device's text, and acknowledgements wait for the mirrors when asked.
#include <catch2/catch.hpp>

#include <algorithm>
#include <iostream>

#include "cp_lab.h"
#include "ocslab/ocsctl/port_set.h"

using namespace cp_test;
using ocs::Circuit;
using ocs::Port;
using ocs::Protocol;

namespace {

const std::vector<Protocol> kAll = {Protocol::kTl1, Protocol::kTl1Ssh, Protocol::kNetconf, Protocol::kScpi};

const char* name(Protocol p) { return ocs::SwitchUrl::scheme(p); }

std::vector<Circuit> sorted(std::vector<Circuit> v) {
  std::sort(v.begin(), v.end());
  return v;
}

}  // namespace

TEST_CASE("every transport reports the emulated switch's size and identity", "[emulator_cp]") {
  Lab lab;
  for (auto proto : kAll) {
    INFO(name(proto));
    auto d = lab.driver(proto);
    auto info = d->info();
    CHECK(info.ingress_ports == 16);
    CHECK(info.egress_ports == 16);
    if (proto != Protocol::kNetconf) CHECK(info.model == "6000");
    CHECK_THAT(info.vendor, Catch::Matchers::Contains("POLATIS"));
    d->close();
  }
  CHECK(lab.wait_sessions(0) == 0);
}

TEST_CASE("connect, list, apply, power and disconnect through each driver", "[emulator_cp]") {
  Lab lab;
  for (auto proto : kAll) {
    INFO(name(proto));
    auto d = lab.driver(proto);
    d->connect({{1, 17}, {2, 18}});
    CHECK(sorted(d->list()) == std::vector<Circuit>{{1, 17}, {2, 18}});
    CHECK(lab.call([&] { return lab.model.circuits(); }) == std::vector<Circuit>{{1, 17}, {2, 18}});

    // Acked after settling, so the light is already there: source 0 dBm minus 1.5 dB loss.
    auto pw = d->power({17, 19, 1});
    REQUIRE(pw.size() == 3);
    CHECK(pw[0].port == 17);
    CHECK(pw[0].dbm == Approx(-1.5));
    CHECK(pw[1].dbm == Approx(-60.0));
    CHECK(pw[2].dbm == Approx(0.0));

    d->apply({{3, 19}}, ocs::ApplyMode::kMerge);
    CHECK(sorted(d->list()) == std::vector<Circuit>{{1, 17}, {2, 18}, {3, 19}});
    d->apply({{4, 20}, {1, 21}}, ocs::ApplyMode::kReplace);
    CHECK(sorted(d->list()) == std::vector<Circuit>{{1, 21}, {4, 20}});
    d->disconnect({20});
    CHECK(d->list() == std::vector<Circuit>{{1, 21}});
    d->clear();
    CHECK(d->list().empty());
    CHECK(lab.call([&] { return lab.model.circuits().empty(); }));
  }
}

TEST_CASE("device refusals reach the caller as DenyError with the switch's text", "[emulator_cp]") {
  Lab lab;
  auto setup = lab.driver(Protocol::kTl1);
  setup->connect({{1, 17}});
  for (auto proto : kAll) {
    INFO(name(proto));
    auto o = lab.options();
    o.replace_patched = false;  // else the NETCONF driver deletes 1-17 in the same edit
    auto d = lab.driver(proto, o);
    // Egress 17 is taken by ingress 1; the emulator refuses rather than stealing it.
    try {
      d->connect({{2, 17}});
      FAIL("connect onto a used egress was accepted");
    } catch (const ocs::DenyError& e) {
      CHECK_THAT(e.text(), Catch::Matchers::Contains("Port already connected: 17"));
    }
    CHECK(sorted(d->list()) == std::vector<Circuit>{{1, 17}});
    // The session stays usable after the refusal.
    d->connect({{2, 18}});
    d->disconnect({18});
    CHECK(d->list() == std::vector<Circuit>{{1, 17}});
  }
  auto tl1 = lab.driver(Protocol::kTl1);
  CHECK_THROWS_AS(tl1->connect({{1, 18}, {1, 19}}), ocs::OcsError);  // one ingress twice
}

TEST_CASE("an allow-list refusal sends nothing to the emulator", "[emulator_cp]") {
  Lab lab;
  for (auto proto : kAll) {
    INFO(name(proto));
    auto o = lab.options();
    o.allow = ocs::PortSet::parse("1..4,17..20");
    auto d = lab.driver(proto, o);
    d->list();  // opened and logged in
    size_t before = lab.truth.samples().size();
    CHECK_THROWS_AS(d->connect({{5, 21}}), ocs::PortError);
    CHECK_THROWS_AS(d->disconnect({30}), ocs::PortError);
    CHECK(lab.truth.samples().size() == before);
    CHECK(lab.call([&] { return lab.model.circuits().empty(); }));
  }
}

TEST_CASE("what one protocol changes, every other protocol sees", "[emulator_cp]") {
  Lab lab;
  auto tl1 = lab.driver(Protocol::kTl1);
  auto tl1ssh = lab.driver(Protocol::kTl1Ssh);
  auto nc = lab.driver(Protocol::kNetconf);
  auto scpi = lab.driver(Protocol::kScpi);

  tl1->connect({{1, 17}, {2, 18}, {3, 19}});
  const std::vector<Circuit> three{{1, 17}, {2, 18}, {3, 19}};
  CHECK(sorted(nc->list()) == three);
  CHECK(sorted(scpi->list()) == three);
  CHECK(sorted(tl1ssh->list()) == three);

  scpi->disconnect({18});
  CHECK(sorted(tl1->list()) == std::vector<Circuit>{{1, 17}, {3, 19}});
  nc->connect({{5, 25}});
  CHECK(sorted(tl1ssh->list()) == std::vector<Circuit>{{1, 17}, {3, 19}, {5, 25}});
  CHECK(tl1->power({25})[0].dbm == Approx(-1.5));
  tl1ssh->clear();
  CHECK(scpi->list().empty());
  CHECK(nc->list().empty());
  CHECK(lab.cp.open_sessions() == 4);
}

TEST_CASE("connect is acknowledged only after the mirrors settle when configured", "[emulator_cp]") {
  for (bool settle : {true, false}) {
    Lab lab(small_switch(150, settle));
    for (auto proto : kAll) {
      INFO(name(proto) << (settle ? " ack after settle" : " ack at once"));
      auto d = lab.driver(proto);
      d->list();
      Port in = proto == Protocol::kTl1 ? 1 : proto == Protocol::kTl1Ssh ? 2 : proto == Protocol::kNetconf ? 3 : 4;
      d->connect({{in, in + 16}});
      auto t = d->last_timing();
      REQUIRE(t);
      CHECK(t->ok);
      std::cout << name(proto) << (settle ? " ack_after_settle=true" : " ack_after_settle=false")
                << " connect latency " << t->latency_ms() << " ms (switching 150 ms)\n";
      if (settle) {
        CHECK(t->latency_ms() >= 150.0);
        CHECK(lab.call([&] { return lab.model.lit(in + 16); }));
      } else {
        CHECK(t->latency_ms() < 75.0);
        CHECK_FALSE(lab.call([&] { return lab.model.lit(in + 16); }));
      }
    }
  }
}

TEST_CASE("the ground truth holds a command and an ack for every request", "[emulator_cp]") {
  Lab lab;
  auto tl1 = lab.driver(Protocol::kTl1);
  tl1->connect({{1, 17}});
  CHECK(lab.count("tl1", "ACT-USER", "command") == 1);
  CHECK(lab.count("tl1", "ACT-USER", "ack", 1) == 1);
  CHECK(lab.count("tl1", "ENT-PATCH", "command") == 1);
  CHECK(lab.count("tl1", "ENT-PATCH", "ack", 1) == 1);
  CHECK_THROWS_AS(tl1->connect({{2, 17}}), ocs::DenyError);
  CHECK(lab.count("tl1", "ENT-PATCH", "command") == 2);
  CHECK(lab.count("tl1", "ENT-PATCH", "ack", 0) == 1);

  auto nc = lab.driver(Protocol::kNetconf);
  nc->connect({{3, 19}});
  CHECK(lab.count("netconf", "edit-config", "command") == 1);
  CHECK(lab.count("netconf", "edit-config", "ack", 1) == 1);
  CHECK(lab.count("netconf", "get", "command") >= 1);

  auto scpi = lab.driver(Protocol::kScpi);
  scpi->connect({{4, 20}});
  CHECK(lab.count("scpi", "OXC:SWITCH:CONNECT:ADD", "command") == 1);
  CHECK(lab.count("scpi", "OXC:SWITCH:CONNECT:ADD", "ack", 1) == 1);  // accepted
  CHECK(lab.count("scpi", "*OPC?", "ack", 1) == 1);                     // switched
  CHECK(lab.count("scpi", "SYST:ERR?", "command") >= 1);  // the header as the client spelled it

  // Command before ack, ack after the switching ended.
  auto samples = lab.truth.samples();
  int64_t cmd_t = 0, ack_t = 0, end_t = 0;
  for (const auto& s : samples) {
    if (s.source == "tl1" && s.subject == "ENT-PATCH" && s.signal == "command" && !cmd_t) cmd_t = s.mono_ns;
    if (s.source == "tl1" && s.subject == "ENT-PATCH" && s.signal == "ack" && !ack_t) ack_t = s.mono_ns;
    if (s.source == "switch" && s.subject == "1-17" && s.signal == "switch_end" && !end_t) end_t = s.mono_ns;
  }
  CHECK(cmd_t > 0);
  CHECK(cmd_t <= end_t);
  CHECK(end_t <= ack_t);
}
