// The circuit-cut fault (docs/experiments.md, "Queue-pair settings through outages, under a
// job") against the real emulator over TL1 on loopback: the runner's fault injector deletes the
// circuit on a port through the switch's driver, holds it for for_ms after the deletion's
// acknowledgement and makes it again; the fault's rows, its record and the emulator's own ground
// truth agree, and a port without a circuit, or a run without a switch session, is a problem
// naming the port, with nothing touched. Bounds are lower bounds, which load only lengthens.
#include <catch2/catch.hpp>
#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>

#include "ocslab/common/config.h"
#include "ocslab/emulator/emulator.h"
#include "ocslab/ocsctl/driver.h"
#include "ocslab/runner/experiment_spec.h"
#include "ocslab/runner/fault_injection.h"
#include "ocslab/testing/sshd_fixture.h"
#include "ocslab/testing/wait.h"

namespace circuit_cut_test {

using namespace ocslab;
using namespace ocslab::runner;
using namespace std::chrono_literals;

namespace {

constexpr double kCutMs = 300;

std::unique_ptr<emu::Emulator> start_emulator(int port) {
  std::ostringstream lab;
  lab << "switch:\n  name: ocs-cut\n  size: 16x16\n  switching_ms: 40\n  ack: after-settle\n  listen: {tl1: 127.0.0.1:"
      << port << "}\n";
  auto e = std::make_unique<emu::Emulator>(emu::parse_emulator_config(load_yaml_string(lab.str(), "cut-lab.yaml")));
  e->start();
  return e;
}

// h1 (ports 1 / 17), h2 (2 / 18), h3 (3 / 19); a circuit-cut on port 18 (h2's receive fibre) and
// one on port 19 (h3's, which has no circuit).
ExperimentSpec spec() {
  ExperimentSpec s;
  for (int i = 1; i <= 3; ++i) {
    HostEntry h;
    h.name = "h" + std::to_string(i);
    NicEntry n;
    n.name = "eth1";
    n.tx_port = static_cast<ocs::Port>(i);
    n.rx_port = static_cast<ocs::Port>(16 + i);
    h.nics.push_back(n);
    s.hosts.push_back(h);
  }
  for (ocs::Port p : {18, 19}) {
    FaultSpec f;
    f.kind = kCircuitCut;
    f.host = p == 18 ? 1 : 2;
    f.nic = "eth1";
    f.port = p;
    f.for_ms = kCutMs;
    f.at_step = 0;
    f.before_iteration = 0;
    s.faults.push_back(f);
  }
  return s;
}

struct Rows {
  std::mutex mu;
  std::vector<Sample> rows;
  std::vector<Sample> get() {
    std::lock_guard lock(mu);
    return rows;
  }
};

// The emulator's record of a port's light changing to `value` (CLOCK_MONOTONIC), the last one.
std::optional<int64_t> light_at(emu::Emulator& e, const std::string& port, double value) {
  std::optional<int64_t> at;
  for (const auto& s : e.truth().samples()) {
    if (s.source == "switch" && s.subject == port && s.signal == "light" && s.value == value) at = s.mono_ns;
  }
  return at;
}

}  // namespace

TEST_CASE("circuit-cut deletes the port's circuit, holds it for_ms and makes it again", "[runner][faults][circuit-cut]") {
  const int port = testing::free_loopback_port();
  auto e = start_emulator(port);
  ocs::DriverOptions o;
  o.password = "root";
  o.reply_timeout = 5000ms;
  o.connect_timeout = 5000ms;
  const auto url = ocs::SwitchUrl::parse("tl1://admin@127.0.0.1:" + std::to_string(port));
  auto setup = ocs::make_driver(url, o);
  setup->connect({{1, 18}, {2, 17}});  // h1 <-> h2

  testing::TempDir tmp;
  const ExperimentSpec s = spec();
  Rows rows;
  std::vector<std::string> log;
  FaultInjector inj(
      s, "",
      [&](const Sample& smp) {
        std::lock_guard lock(rows.mu);
        rows.rows.push_back(smp);
      },
      [&](const std::string& line) { log.push_back(line); }, tmp.path() + "/faults.json");

  SECTION("without a switch session nothing is cut") {
    auto problem = inj.inject(0, "at step 0");
    REQUIRE(problem);
    CHECK_THAT(*problem, Catch::Contains("no switch session to cut a circuit with"));
    CHECK(setup->list().size() == 2);
  }

  SECTION("cut and made again") {
    inj.set_switch([&] { return ocs::make_driver(url, o); });
    const int64_t before = now().monotonic_ns;
    auto problem = inj.inject(0, "at step 0");
    CHECK_FALSE(problem);
    // The circuit is back when inject returns (the fault thread holds the cut).
    auto circuits = setup->list();
    CHECK(std::find(circuits.begin(), circuits.end(), ocs::Circuit{1, 18}) != circuits.end());
    CHECK(circuits.size() == 2);
    auto got = rows.get();
    REQUIRE(got.size() == 2);
    CHECK(got[0].subject == "port 18");
    CHECK(got[0].signal == "cut");
    CHECK(got[0].value == 1);
    CHECK(got[1].value == 0);
    CHECK(got[1].t_ns - got[0].t_ns >= static_cast<int64_t>(kCutMs * 1e6));
    // The emulator's ground truth: port 18 went dark after the call began and was lit again at
    // least for_ms later (the remaking's switching time on top).
    auto dark = light_at(*e, "port 18", 0);
    auto lit = light_at(*e, "port 18", 1);
    REQUIRE(dark);
    REQUIRE(lit);
    CHECK(*dark >= before);
    CHECK(*lit - *dark >= static_cast<int64_t>(kCutMs * 1e6));
    auto record = inj.record();
    CHECK(record[0]["kind"] == kCircuitCut);
    CHECK(record[0]["held_ns"].get<int64_t>() > 0);
    CHECK(record[0]["released_ns"].get<int64_t>() >= record[0]["held_ns"].get<int64_t>() + 300'000'000);
    CHECK_FALSE(record[0].contains("not_remade"));
    CHECK(inj.release().empty());  // nothing left to put back
    CHECK(rows.get().size() == 2);  // and no second end row

    // A port without a circuit: the problem names it, the switch is untouched.
    problem = inj.inject(1, "at step 0");
    REQUIRE(problem);
    CHECK_THAT(*problem, Catch::Contains("switch port 19 has no circuit to cut"));
    CHECK(setup->list().size() == 2);
  }
}

}  // namespace circuit_cut_test
