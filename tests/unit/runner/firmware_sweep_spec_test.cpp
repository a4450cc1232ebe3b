// A reconfig-latency spec's firmware sweep (`sweep: {nic_model, dwell_s}`, `nic_models:`;
// experiments/specs/firmware-study-vlab.yaml): the points in run order and the schedule over
// all of them, models of the emulator's presets and of the spec's own, and every bad value
// refused at its file:line:col: an unknown model name, a dwell that is not above 0, a value
// listed twice, a model without a virtual lab.
#include <fmt/format.h>
#include <catch2/catch.hpp>
#include <string>

#include "ocslab/runner/experiment_spec.h"
#include "spec_test_support.h"

namespace firmware_sweep_spec_test {

using namespace ocslab;
using namespace ocslab::runner;
using Catch::Contains;
using spec_test::error_of;
using spec_test::parse;

namespace {

const std::string kHead =
    "lab: {vlab: ../labs/four-hosts.yaml}\n"
    "mappings:\n"
    "  a: [h1:eth1 <-> h2:eth1, h3:eth1 <-> h4:eth1]\n"
    "  b: [h1:eth1 <-> h3:eth1, h2:eth1 <-> h4:eth1]\n"
    "schedule: {reconfigurations: 3, dwell_s: 7}\n";  // lines 1-5

const std::string kFast =
    "nic_models:\n"                                                                                  // 6
    "  fast: {preset: cx6dx-autoneg, firmware_up_ms: 600, rapid_window_ms: 500, max_up_ms: 1000}\n"  // 7
    "  slow: {firmware_up_ms: {uniform: [1000, 3000]}}\n";                                           // 8

}  // namespace

TEST_CASE("firmware sweep: models outer, dwells inner, the schedule's reconfigurations at each point",
          "[runner][spec][firmware-sweep]") {
  ExperimentSpec s = parse(kHead + "sweep: {nic_model: [cx6dx-autoneg, cx6dx-no-autoneg], dwell_s: [5, 10, 20]}\n");
  REQUIRE(s.sweep.enabled());
  REQUIRE(s.sweep.nic_models.size() == 2);
  CHECK(s.sweep.nic_models[0].name == "cx6dx-autoneg");
  CHECK(s.sweep.nic_models[0].yaml == "cx6dx-autoneg");  // a preset goes to the lab by its name
  CHECK(s.sweep.nic_models[0].up_mean_ms == 6000);
  CHECK(s.sweep.nic_models[1].up_mean_ms == 3000);
  CHECK_THAT(s.sweep.nic_models[1].where, Contains("test.yaml:6:"));
  const auto points = s.sweep_points();
  REQUIRE(points.size() == 6);
  CHECK(points[0].model->name == "cx6dx-autoneg");
  CHECK(points[0].dwell_s == 5);
  CHECK(points[2].dwell_s == 20);
  CHECK(points[3].model->name == "cx6dx-no-autoneg");
  CHECK(points[3].dwell_s == 5);
  CHECK(s.reconfigurations == 3);  // per point
  CHECK(s.iterations() == 18);
  const auto sched = s.schedule();
  REQUIRE(sched.size() == 18);  // alternating on through the points: b, a, b, a, ...
  for (size_t i = 0; i < sched.size(); ++i) CHECK(sched[i] == (i + 1) % 2);
  // Faults may come before any reconfiguration of the whole sweep.
  CHECK(error_of(kHead +
                 "sweep: {dwell_s: [5, 10]}\nfaults: [{kind: nic-held-down, nic: h2:eth1, before_iteration: 6}]\n") ==
        "accepted");
  CHECK_THAT(error_of(kHead + "sweep: {dwell_s: [5, 10]}\n"
                              "faults: [{kind: nic-held-down, nic: h2:eth1, before_iteration: 7}]\n"),
             Contains("the schedule has 6"));
}

TEST_CASE("firmware sweep: one axis alone; the lab's own model, the schedule's own dwell",
          "[runner][spec][firmware-sweep]") {
  ExperimentSpec s = parse(kHead + "sweep: {dwell_s: [2, 4]}\n");
  CHECK(s.sweep.nic_models.empty());
  auto points = s.sweep_points();
  REQUIRE(points.size() == 2);
  CHECK(points[0].model == nullptr);
  CHECK(points[1].dwell_s == 4);
  CHECK(s.iterations() == 6);
  s = parse(kHead + "sweep: {nic_model: [ideal]}\n");
  points = s.sweep_points();
  REQUIRE(points.size() == 1);
  CHECK(points[0].dwell_s == 7);
  CHECK(points[0].model->up_mean_ms == 0);
  // Without a sweep: one point, nothing swept.
  s = parse(kHead);
  CHECK(!s.sweep.enabled());
  CHECK(s.iterations() == 3);
  CHECK(s.sweep_points().size() == 1);
}

TEST_CASE("firmware sweep: a model of the spec's own, in the lab file's nic_model syntax",
          "[runner][spec][firmware-sweep]") {
  ExperimentSpec s = parse(kHead + kFast + "sweep: {nic_model: [fast, slow, cx6dx-autoneg], dwell_s: [1]}\n");
  REQUIRE(s.sweep.nic_models.size() == 3);
  const auto& fast = s.sweep.nic_models[0];
  CHECK(fast.name == "fast");
  CHECK(fast.up_mean_ms == 600);
  // What the lab's timing control gets: the model as written, which the emulator parses again.
  CHECK_THAT(fast.yaml, Contains("preset: cx6dx-autoneg"));
  CHECK_THAT(fast.yaml, Contains("max_up_ms: 1000"));
  CHECK(s.sweep.nic_models[1].up_mean_ms == 2000);
}

TEST_CASE("firmware sweep: bad names, dwells and duplicates are refused at file:line:col",
          "[runner][spec][firmware-sweep]") {
  // line 6: the sweep
  CHECK_THAT(error_of(kHead + "sweep: {nic_model: [cx6dx-autoneg, cx7-autoneg]}\n"),
             Contains("test.yaml:6:36: sweep.nic_model: unknown NIC model 'cx7-autoneg' (presets: ideal, "
                      "cx6dx-no-autoneg, cx6dx-autoneg; nic_models: none)"));
  CHECK_THAT(error_of(kHead + kFast + "sweep: {nic_model: [fats]}\n"),
             Contains("test.yaml:9:21: sweep.nic_model: unknown NIC model 'fats' (presets: ideal, cx6dx-no-autoneg, "
                      "cx6dx-autoneg; nic_models: fast, slow)"));
  CHECK_THAT(error_of(kHead + "sweep: {nic_model: [ideal, ideal]}\n"),
             Contains("test.yaml:6:28: sweep.nic_model: 'ideal' listed twice"));
  CHECK_THAT(error_of(kHead + "sweep: {dwell_s: [5, 0]}\n"),
             Contains("test.yaml:6:22: sweep.dwell_s: 0 is not a dwell time (at least 0.01 s, at most 3600 s)"));
  CHECK_THAT(error_of(kHead + "sweep: {dwell_s: [-2]}\n"), Contains("test.yaml:6:19: sweep.dwell_s: -2 is not"));
  CHECK_THAT(error_of(kHead + "sweep: {dwell_s: [.nan]}\n"), Contains("test.yaml:6:19: sweep.dwell_s:"));
  CHECK_THAT(error_of(kHead + "sweep: {dwell_s: [5, 10, 5]}\n"),
             Contains("test.yaml:6:26: sweep.dwell_s: 5 s listed twice"));
  CHECK_THAT(error_of(kHead + "sweep: {dwell_s: []}\n"), Contains("test.yaml:6:18: sweep.dwell_s is a non-empty list"));
  CHECK_THAT(error_of(kHead + "sweep: {nic_model: ideal}\n"),
             Contains("test.yaml:6:20: sweep.nic_model is a non-empty list"));
  CHECK_THAT(error_of(kHead + "sweep: {}\n"), Contains("test.yaml:6:8: sweep needs an axis: nic_model or dwell_s"));
  CHECK_THAT(error_of(kHead + "sweep: {nic_model: [ideal], repeat: 2}\n"), Contains("test.yaml:6:"));
  CHECK_THAT(error_of(kHead + "sweep: {dwell_s: [1, 2], switching_ms: [0]}\n"),
             Contains("'sweep' needs type: phase-workload for switching_ms"));
}

TEST_CASE("firmware sweep: nic_models entries are checked by the emulator's parser and must be swept",
          "[runner][spec][firmware-sweep]") {
  CHECK_THAT(error_of(kHead + "nic_models:\n  fast: {firmware_up_ms: -5}\nsweep: {nic_model: [fast]}\n"),
             Contains("test.yaml:7:"));
  CHECK_THAT(error_of(kHead + "nic_models:\n  fast: {preset: cx9}\nsweep: {nic_model: [fast]}\n"),
             Contains("test.yaml:7:18: unknown NIC link preset 'cx9'"));
  CHECK_THAT(error_of(kHead + "nic_models:\n  fast: {firmware_up: 5}\nsweep: {nic_model: [fast]}\n"),
             Contains("test.yaml:7:"));
  CHECK_THAT(error_of(kHead + "nic_models:\n  fast: {max_up_ms: .inf}\nsweep: {nic_model: [fast]}\n"),
             Contains("test.yaml:7:"));
  CHECK_THAT(error_of(kHead + "nic_models:\n  ideal: {firmware_up_ms: 5}\nsweep: {nic_model: [ideal]}\n"),
             Contains("test.yaml:7:3: nic_models: 'ideal' is a preset's name"));
  CHECK_THAT(error_of(kHead + "nic_models:\n  fast: {firmware_up_ms: 5}\n"),
             Contains("test.yaml:7:3: nic_models: no sweep.nic_model names them"));
}

TEST_CASE("firmware sweep: models need a virtual lab, and no other experiment type has one",
          "[runner][spec][firmware-sweep]") {
  const std::string real =
      "lab:\n  inventory:\n"
      "    - {name: h1, ssh: root@127.0.0.1, nics: [{name: eth1, tx_port: 1, rx_port: 9}, {name: eth2, tx_port: 3, "
      "rx_port: 11}]}\n"
      "    - {name: h2, ssh: root@127.0.0.1, nics: [{name: eth1, tx_port: 2, rx_port: 10}]}\n"
      "switch: {url: scpi://127.0.0.1:5025}\n"
      "mappings: {a: [h1:eth1 <-> h2:eth1], b: [h1:eth2 <-> h2:eth1]}\n";
  CHECK_THAT(error_of(real + "sweep: {nic_model: [ideal]}\n"),
             Contains("test.yaml:7:20: sweep.nic_model needs a virtual lab (lab.vlab)"));
  CHECK(error_of(real + "sweep: {dwell_s: [1, 2]}\n") == "accepted");  // the dwell alone sweeps a real lab
  CHECK_THAT(error_of("type: outages\nlab: {vlab: ../labs/phase-four.yaml}\nmappings: {r: [h1:eth1 <-> h2:eth1]}\n"
                      "outages: {ms: [5]}\nsweep: {dwell_s: [1]}\n"),
             Contains("test.yaml:5:8: 'sweep' is not part of an outages spec"));
  CHECK_THAT(error_of("type: outages\nlab: {vlab: ../labs/phase-four.yaml}\nmappings: {r: [h1:eth1 <-> h2:eth1]}\n"
                      "outages: {ms: [5]}\nnic_models: {f: {firmware_up_ms: 1}}\n"),
             Contains("test.yaml:5:13: 'nic_models' needs type: reconfig-latency"));
}

}  // namespace firmware_sweep_spec_test
