// An acknowledgement means switching finished, on every protocol (docs/protocols.md#what-an-ack-means):
// against the emulator with 200 ms switching, each driver's connect and apply return, and the
// ack they record is stamped, only after the mirrors settled: TL1 COMPLD and the NETCONF
// rpc-reply come after settling, and over SCPI, whose set commands return at acceptance, the
// driver waits for *OPC?. Every bound here is a lower bound or an order of events, which a
// loaded machine can only lengthen or keep.
#include <catch2/catch.hpp>

#include <chrono>
#include <optional>

#include "cp_lab.h"

using namespace cp_test;
using ocs::Circuit;
using ocs::Protocol;

namespace {

constexpr int64_t kSwitchingNs = 200'000'000;  // the emulator's switching time, 200 ms

int64_t mono_ns() { return ocslab::now().monotonic_ns; }

// When the emulator's mirror for `circuit` last settled (its ground truth, CLOCK_MONOTONIC like
// the driver's stamps); nullopt when it has not.
std::optional<int64_t> settled_at(const Lab& lab, const Circuit& circuit) {
  std::optional<int64_t> at;
  const std::string subject = std::to_string(circuit.ingress) + "-" + std::to_string(circuit.egress);
  for (const auto& s : lab.truth.samples()) {
    if (s.source == "switch" && s.subject == subject && s.signal == "switch_end") at = s.mono_ns;
  }
  return at;
}

}  // namespace

TEST_CASE("connect and apply are acknowledged only after switching completed, on every protocol",
          "[emulator_cp][ack]") {
  const Protocol proto = GENERATE(Protocol::kScpi, Protocol::kTl1, Protocol::kTl1Ssh, Protocol::kNetconf);
  INFO(ocs::SwitchUrl::scheme(proto));
  Lab lab(small_switch(200));  // acknowledgements after settling: the emulator's default
  auto d = lab.driver(proto);
  d->open();

  // connect: the call returns, and its ack is stamped, after the mirror settled.
  const Circuit first{1, 17};
  const int64_t before = mono_ns();
  d->connect({first});
  const int64_t returned = mono_ns();
  auto t = d->last_timing();
  REQUIRE(t);
  CHECK(t->ok);
  CHECK(t->op == "connect");
  CHECK(returned - before >= kSwitchingNs);
  CHECK(t->acked.monotonic_ns - t->issued.monotonic_ns >= kSwitchingNs);
  auto end = settled_at(lab, first);
  REQUIRE(end);
  CHECK(*end <= t->acked.monotonic_ns);
  CHECK(*end <= returned);
  CHECK(lab.call([&] { return lab.model.lit(first.egress); }));

  // apply, as the runner records a reconfiguration: `command` at the first modifying request's
  // issue, `ack` at the report's finish.
  const Circuit moved{1, 18}, added{2, 17};
  const int64_t apply_before = mono_ns();
  auto report = d->apply({moved, added}, ocs::ApplyMode::kReplace);
  const int64_t apply_returned = mono_ns();
  std::optional<int64_t> command;
  for (const auto& c : report.calls) {
    if (c.op != "list" && c.op != "info" && !command) command = c.issued.monotonic_ns;
    CHECK(c.ok);
  }
  REQUIRE(command);
  CHECK(apply_returned - apply_before >= kSwitchingNs);
  CHECK(report.finished.monotonic_ns - *command >= kSwitchingNs);
  for (const auto& c : {moved, added}) {
    INFO(ocs::to_string(c));
    auto settled = settled_at(lab, c);
    REQUIRE(settled);
    CHECK(*settled <= report.finished.monotonic_ns);
    CHECK(lab.call([&] { return lab.model.lit(c.egress); }));
  }
}
