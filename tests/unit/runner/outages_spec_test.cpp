// The `outages` experiment type's spec (experiments/specs/outages-vlab.yaml,
// rdma-survival-vlab.yaml): the plan of dark spells, the ports they darken, the queue-pair
// matrix of the RDMA probe and what each host's agent is asked to run, and every bad value
// refused at its file:line:col before anything is touched.
#include <fmt/format.h>
#include <catch2/catch.hpp>
#include <map>
#include <set>
#include <string>

#include "ocslab/runner/experiment_spec.h"
#include "ocslab/runner/host_session.h"
#include "ocslab/runner/target.h"
#include "spec_test_support.h"

namespace outages_spec_test {

using namespace ocslab;
using namespace ocslab::runner;
using Catch::Contains;
using spec_test::error_of;
using spec_test::parse;

namespace {

const std::string kHead =
    "type: outages\n"
    "lab: {vlab: ../labs/phase-four.yaml}\n"
    "mappings:\n"
    "  rails: [h1:eth1 <-> h2:eth1, h3:eth1 <-> h4:eth1]\n";

}  // namespace

TEST_CASE("outages: every length `repetitions` times, seeded order, each NIC's tx and rx port", "[runner][spec][outages]") {
  ExperimentSpec s = parse(kHead + "outages: {ms: [5, 20, 500], repetitions: 4, gap_ms: 800}\nseed: 9\n");
  CHECK(s.type == kOutages);
  CHECK(s.reconfigurations == 12);
  auto plan = s.outage_plan();
  REQUIRE(plan.size() == 12);
  std::map<double, int> count;
  for (double ms : plan) ++count[ms];
  CHECK(count == std::map<double, int>{{5, 4}, {20, 4}, {500, 4}});
  CHECK(plan == s.outage_plan());  // the seed fixes the order
  CHECK(plan != std::vector<double>{5, 20, 500, 5, 20, 500, 5, 20, 500, 5, 20, 500});
  CHECK(s.outages.gap_ms == 800);
  // Default NICs: every NIC of the mapping, each circuit dark both ways.
  CHECK(s.outage_ports() == std::vector<ocs::Port>{1, 17, 2, 18, 3, 19, 4, 20});
  CHECK(s.schedule() == std::vector<size_t>(12, 0));  // the mapping stays

  s = parse(kHead + "outages: {nics: [h3:eth1], ms: [50, 20], order: as-listed, repetitions: 2}\n");
  CHECK(s.outage_plan() == std::vector<double>{50, 20, 50, 20});
  CHECK(s.outage_ports() == std::vector<ocs::Port>{3, 19});
}

TEST_CASE("outages: the shipped specs are valid", "[runner][spec][outages]") {
  ExperimentSpec a = load_experiment_spec(spec_test::source_dir() + "/experiments/specs/outages-vlab.yaml");
  CHECK(a.reconfigurations == 50);
  CHECK(a.outage_ports().size() == 8);
  ExperimentSpec b = load_experiment_spec(spec_test::source_dir() + "/experiments/specs/rdma-survival-vlab.yaml");
  CHECK(b.reconfigurations == 10);
  CHECK(b.rdma.settings().size() == 6);
}

TEST_CASE("rdma.qp: one probe pair per setting, labelled PEER:tTrR, one control port each", "[runner][spec][outages]") {
  Target t;
  t.spec = parse(kHead +
                 "outages: {ms: [20]}\n"
                 "probes:\n"
                 "  rdma: {pairs: [h1:eth1 -> h2:eth1, h3:eth1 -> h4:eth1], port: 19000, qp: {timeout: [12, 0], retry_cnt: [2, 4, 6]}}\n");
  const auto& qp = t.spec.rdma.qp_matrix;
  REQUIRE(qp.size() == 6);
  CHECK(qp.front() == RdmaSpec::QpPoint{12, 2});
  CHECK(qp.back() == RdmaSpec::QpPoint{0, 6});
  std::set<std::string> labels, controls;
  int requests = 0;
  for (const auto& target : host_targets(t, "run-1")) {
    for (const auto& p : target.probes) {
      if (p.name != "rdma") continue;
      ++requests;
      std::string label = p.params.at("label");
      labels.insert(target.name + ">" + label);
      controls.insert(p.params.at("control").get<std::string>());
      // The label's setting is the one the probe is asked for.
      CHECK_THAT(label, Contains(fmt::format(":t{}r{}", p.params.at("timeout").get<int>(),
                                             p.params.at("retry_cnt").get<int>())));
    }
  }
  CHECK(requests == 24);          // 2 pairs x 6 settings x (server, client)
  CHECK(labels.size() == 24);
  CHECK(labels.count("h1>h2:t12r2") == 1);
  CHECK(labels.count("h2>h1:t0r6") == 1);
  CHECK(controls.size() == 12);  // one port per pair and setting
  CHECK(controls.count(t.spec.hosts[1].mgmt + ":19000") == 1);
  CHECK(controls.count(t.spec.hosts[3].mgmt + ":19011") == 1);
}

TEST_CASE("outages: bad values refused at file:line:col", "[runner][spec][outages]") {
  const std::string spec = spec_test::source_dir() + spec_test::kSpecsOrigin;
  auto err = [&](const std::string& tail) { return error_of(kHead + tail); };
  CHECK_THAT(err("outages: {ms: [0]}\n"), Contains(spec + ":5:16: outages.ms: 0 is not an outage the lab can make"));
  CHECK_THAT(err("outages: {ms: [20, 600001]}\n"),
             Contains(":5:20: outages.ms: 600001 is not an outage the lab can make (above 0, at most 600000 ms"));
  CHECK_THAT(err("outages: {ms: [20, 20]}\n"), Contains(":5:20: outages.ms: 20 is listed twice"));
  CHECK_THAT(err("outages: {ms: []}\n"), Contains(":5:15: outages.ms must be a list of milliseconds"));
  CHECK_THAT(err("outages: {ms: [5], repetitions: 0}\n"), Contains(":5:33: outages.repetitions must be in [1, 1000]"));
  CHECK_THAT(err("outages: {ms: [5], order: sorted}\n"), Contains(":5:27: outages.order must be 'random'"));
  CHECK_THAT(err("outages: {ms: [5], nics: [h1:eth2]}\n"),
             Contains(":5:27: outages.nics: h1:eth2 has no circuit in mapping 'rails'"));
  CHECK_THAT(err("outages: {ms: [5], nics: [h9:eth1]}\n"), Contains(":5:27: unknown host 'h9'"));
  CHECK_THAT(err("outages: {ms: [5], nics: [h1:eth1, h1:eth1]}\n"), Contains(":5:36: outages.nics: h1:eth1 is listed twice"));
  CHECK_THAT(err("outages: {ms: [5], for: 2}\n"), Contains(":5:"));
  CHECK_THAT(err("schedule: {dwell_s: 3}\noutages: {ms: [5]}\n"), Contains(":5:12:"));
  CHECK_THAT(err(""), Contains("outages"));  // required
  CHECK_THAT(err("outages: {ms: [5]}\nfaults: []\n"), Contains(":6:9: 'faults' is not part of an outages spec"));
  CHECK_THAT(error_of("type: outages\nlab: {vlab: ../labs/phase-four.yaml}\nmappings:\n  a: [h1:eth1 <-> h2:eth1]\n"
                      "  b: [h1:eth1 <-> h3:eth1]\noutages: {ms: [5]}\n"),
             Contains(":4:3: an outages spec lights exactly one mapping"));
  CHECK_THAT(error_of("lab: {vlab: ../labs/phase-four.yaml}\nmappings:\n  a: [h1:eth1 <-> h2:eth1]\n"
                      "  b: [h1:eth1 <-> h3:eth1]\noutages: {ms: [5]}\n"),
             Contains(":5:10: 'outages' needs type: outages"));
  // The queue-pair matrix: the verbs fields' ranges, each value once, not beside timeout/retry_cnt.
  auto rdma = [&](const std::string& r) { return err("outages: {ms: [5]}\nprobes:\n  rdma: " + r + "\n"); };
  CHECK_THAT(rdma("{qp: {timeout: [12, 32], retry_cnt: [2]}}"), Contains(":7:29: qp.timeout must be in [0, 31], got 32"));
  CHECK_THAT(rdma("{qp: {timeout: [12], retry_cnt: [8]}}"), Contains(":7:42: qp.retry_cnt must be in [0, 7], got 8"));
  CHECK_THAT(rdma("{qp: {timeout: [12], retry_cnt: [-1]}}"), Contains(":7:42: qp.retry_cnt must be in [0, 7], got -1"));
  CHECK_THAT(rdma("{qp: {timeout: [12, 12], retry_cnt: [2]}}"), Contains(":7:29: qp.timeout 12 is listed twice"));
  CHECK_THAT(rdma("{qp: {timeout: [12]}}"), Contains(":7:14: missing key 'retry_cnt'"));
  CHECK_THAT(rdma("{timeout: 12, qp: {timeout: [12], retry_cnt: [2]}}"),
             Contains(":7:19: 'timeout' and 'qp' exclude each other"));
  CHECK(rdma("{qp: {timeout: 0, retry_cnt: 7}}") == "accepted");
}

TEST_CASE("outages need a virtual lab: a real switch has no dark spell of exact length", "[runner][spec][outages]") {
  const std::string inv =
      "type: outages\n"
      "lab:\n"
      "  inventory:\n"
      "    - {name: a, ssh: a.lab, nics: [{name: eth1, tx_port: 1, rx_port: 9}]}\n"
      "    - {name: b, ssh: b.lab, nics: [{name: eth1, tx_port: 2, rx_port: 10}]}\n"
      "switch: {url: 'tl1://admin@ocs.lab:3082'}\n"
      "mappings:\n"
      "  m: [a:eth1 <-> b:eth1]\n"
      "outages: {ms: [5]}\n";
  CHECK_THAT(error_of(inv), Contains(":9:10: outages need a virtual lab (lab.vlab)"));
}

}  // namespace outages_spec_test
