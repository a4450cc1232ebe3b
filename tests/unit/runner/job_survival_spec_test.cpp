// A phase workload swept over queue-pair settings and outage lengths (experiments/specs/
// job-survival-vlab.yaml, nccl-survival.yaml): sweep.env and sweep.outage_ms, the outage faults
// (port-dark for_ms, circuit-cut), how each launcher hands the ranks the environment, and every
// bad value refused at its file:line:col before anything is touched.
#include <catch2/catch.hpp>

#include <algorithm>
#include <string>
#include <vector>

#include "ocslab/runner/experiment_spec.h"
#include "ocslab/runner/fault_injection.h"
#include "ocslab/runner/phase_workload.h"
#include "spec_test_support.h"

namespace job_survival_spec_test {

using namespace ocslab;
using namespace ocslab::runner;
using Catch::Matchers::Contains;
using spec_test::error_of;
using spec_test::parse;

namespace {

const std::string kHead =
    "type: phase-workload\n"
    "name: js\n"
    "lab: {vlab: ../labs/phase-four.yaml}\n"
    "workload: {schedule: ../workloads/schedules/dp-pairs-4.yaml, timeout_s: 30}\n"
    "phase: {job: pairs, pp: 2, dims: [{name: dp, size: 2}], initial: '11'}\n";

// Four real hosts over loopback SSH (no virtual lab), NIC ib0 on ports i / 16+i.
const std::string kRealHead =
    "type: phase-workload\n"
    "name: js\n"
    "lab:\n"
    "  inventory:\n"
    "    - {name: g1, ssh: 'root@127.0.0.1:2222', nics: [{name: ib0, tx_port: 1, rx_port: 17}]}\n"
    "    - {name: g2, ssh: 'root@127.0.0.1:2222', nics: [{name: ib0, tx_port: 2, rx_port: 18}]}\n"
    "    - {name: g3, ssh: 'root@127.0.0.1:2222', nics: [{name: ib0, tx_port: 3, rx_port: 19}]}\n"
    "    - {name: g4, ssh: 'root@127.0.0.1:2222', nics: [{name: ib0, tx_port: 4, rx_port: 20}]}\n"
    "switch: {url: 'tl1://admin@127.0.0.1:3082'}\n"
    "phase: {job: p, pp: 2, dims: [{name: dp, size: 2}], initial: '11', controller: 10.0.0.1}\n";
const std::string kRealWorkload =
    "workload: {program: ocslab-collbench-nccl, schedule: ../workloads/schedules/dp-pairs-4.yaml, "
    "placement: [g1:ib0, g2:ib0, g3:ib0, g4:ib0], timeout_s: 60";

}  // namespace

TEST_CASE("sweep.env and sweep.outage_ms: the axes, in the spec's order", "[runner][phase-workload][survival]") {
  auto s = parse(kHead +
                 "sweep: {env: {NCCL_IB_TIMEOUT: [14, 17], NCCL_IB_RETRY_CNT: [2, 4]}, outage_ms: [30, 600], "
                 "repetitions: 2}\n"
                 "faults: [{kind: port-dark, port: 19, at_step: 3}]\n");
  const auto& pw = *s.phase_workload;
  REQUIRE(pw.sweep_env.size() == 2);
  CHECK(pw.sweep_env[0].first == "NCCL_IB_TIMEOUT");
  CHECK(pw.sweep_env[0].second == std::vector<std::string>{"14", "17"});
  CHECK(pw.sweep_env[1].second == std::vector<std::string>{"2", "4"});
  CHECK(pw.sweep_outage_ms == std::vector<double>{30, 600});
  CHECK(pw.sweep_switching_ms.empty());
  CHECK(pw.repetitions == 2);
  CHECK_FALSE(pw.sweep_shuffled);  // as listed unless asked
  CHECK(parse(kHead + "sweep: {env: {NCCL_IB_TIMEOUT: [14]}, order: random}\n").phase_workload->sweep_shuffled);
  REQUIRE(s.faults.size() == 1);
  CHECK(s.faults[0].for_ms == 30);  // each run's own length is the runner's to set
  CHECK(FaultInjector::ends_by_itself(s.faults[0]));
}

TEST_CASE("the shipped survival specs are valid", "[runner][phase-workload][survival]") {
  auto v = load_experiment_spec(spec_test::source_dir() + "/experiments/specs/job-survival-vlab.yaml");
  CHECK(v.phase_workload->sweep_outage_ms.size() == 2);
  CHECK(v.faults.at(0).kind == kPortDark);
  auto n = load_experiment_spec(spec_test::source_dir() + "/experiments/specs/nccl-survival.yaml");
  CHECK(n.vlab.empty());
  CHECK(n.phase_workload->program == "ocslab-collbench-nccl");
  CHECK(n.faults.at(0).kind == kCircuitCut);
  std::vector<std::string> names;
  for (const auto& [name, values] : n.phase_workload->sweep_env) names.push_back(name);
  CHECK(names == std::vector<std::string>{kEnvIbTimeout, kEnvIbRetryCnt, kEnvIbPortFailover});
}

TEST_CASE("outage faults: a dark spell in a virtual lab, a circuit cut on any switch", "[runner][phase-workload][survival]") {
  auto s = parse(kHead + "faults: [{kind: port-dark, port: 19, at_step: 3, for_ms: 250}, "
                         "{kind: port-dark, port: 20, at_step: 2}]\n");
  CHECK(s.faults[0].for_ms == 250);
  CHECK(FaultInjector::ends_by_itself(s.faults[0]));
  CHECK(FaultInjector::lasts(s.faults[0]) == "ends by itself after 250 ms");
  CHECK_FALSE(FaultInjector::ends_by_itself(s.faults[1]));  // dark to the end of the run, as before

  auto r = parse(kRealHead + kRealWorkload + "}\n" +
                 "faults: [{kind: circuit-cut, port: 18, at_step: 2, for_ms: 1500}]\n");
  REQUIRE(r.faults.size() == 1);
  CHECK(r.faults[0].kind == kCircuitCut);
  CHECK(r.faults[0].port == 18);
  CHECK(FaultInjector::describe(r, r.faults[0]) == "circuit-cut on switch port 18 (g2:ib0 rx)");
  const Sample on = FaultInjector::row(r, r.faults[0], true, 5);
  CHECK(on.host == "switch");
  CHECK(on.subject == "port 18");
  CHECK(on.signal == "cut");
  CHECK(on.value == 1);
}

TEST_CASE("survival sweeps refuse bad input at file:line:col", "[runner][phase-workload][survival]") {
  const std::string dark = "faults: [{kind: port-dark, port: 19, at_step: 3}]\n";
  auto e = error_of(kHead + "sweep: {env: {NCCL_IB_TIMEOUT: [14, 32]}}\n");
  CHECK_THAT(e, Contains("test.yaml:6:37"));
  CHECK_THAT(e, Contains("sweep.env.NCCL_IB_TIMEOUT: '32' is not a value in 0..31"));
  e = error_of(kHead + "sweep: {env: {NCCL_IB_TIMEOUT: [-1]}}\n");
  CHECK_THAT(e, Contains("'-1' is not a value in 0..31"));
  e = error_of(kHead + "sweep: {env: {NCCL_IB_RETRY_CNT: [7, 8]}}\n");
  CHECK_THAT(e, Contains("test.yaml:6:"));
  CHECK_THAT(e, Contains("sweep.env.NCCL_IB_RETRY_CNT: '8' is not a value in 0..7"));
  e = error_of(kHead + "sweep: {env: {NCCL_IB_RESILIENCY_PORT_FAILOVER: [yes]}}\n");
  CHECK_THAT(e, Contains("'yes' is not a value in 0..1"));
  e = error_of(kHead + "sweep: {env: {NCCL_IB_TIMEOUT: [14, 14]}}\n");
  CHECK_THAT(e, Contains("listed twice"));
  e = error_of(kHead + "sweep: {env: {'1BAD': [1]}}\n");
  CHECK_THAT(e, Contains("'1BAD' is not a variable name"));
  e = error_of(kHead + "sweep: {env: {LD_PRELOAD: [x.so]}}\n");
  CHECK_THAT(e, Contains("LD_PRELOAD is the runner's or the launcher's to set"));
  e = error_of(kHead + "sweep: {env: {NCCL_DEBUG: ['$(reboot)']}}\n");
  CHECK_THAT(e, Contains("is not a value the ranks' command lines can carry"));
  e = error_of(kHead + "sweep: {env: {NCCL_IB_TIMEOUT: []}}\n");
  CHECK_THAT(e, Contains("non-empty list"));
  e = error_of(kHead + "sweep: {repetitions: 2}\n");
  CHECK_THAT(e, Contains("sweep needs an axis"));
  e = error_of(kHead + "sweep: {env: {NCCL_IB_TIMEOUT: [14]}, order: shuffled}\n");
  CHECK_THAT(e, Contains("test.yaml:6:"));
  CHECK_THAT(e, Contains("sweep.order must be 'random' (seeded by `seed`) or 'as-listed', got 'shuffled'"));
  // An outage longer than the run allows.
  e = error_of(kHead + "sweep: {outage_ms: [50, 30000]}\n" + dark);
  CHECK_THAT(e, Contains("test.yaml:6:25"));
  CHECK_THAT(e, Contains("sweep.outage_ms: 30000 is not an outage the run allows"));
  e = error_of(kHead + "sweep: {outage_ms: [0]}\n" + dark);
  CHECK_THAT(e, Contains("sweep.outage_ms: 0 is not an outage"));
  e = error_of(kHead + "faults: [{kind: port-dark, port: 19, at_step: 3, for_ms: 31000}]\n");
  CHECK_THAT(e, Contains("test.yaml:6:"));
  CHECK_THAT(e, Contains("longer than the job may run (workload.timeout_s 30 s)"));
  e = error_of(kHead + "faults: [{kind: port-dark, port: 19, at_step: 3, for_ms: 700000}]\n");
  CHECK_THAT(e, Contains("is not an outage the run can make"));
  // The axis needs a fault that makes the outage, and gives every outage its length.
  e = error_of(kHead + "sweep: {outage_ms: [50]}\n");
  CHECK_THAT(e, Contains("test.yaml:6:"));
  CHECK_THAT(e, Contains("sweep.outage_ms needs a fault that makes the outage"));
  e = error_of(kHead + "sweep: {outage_ms: [50]}\nfaults: [{kind: port-dark, port: 19, at_step: 3, for_ms: 9}]\n");
  CHECK_THAT(e, Contains("for_ms: each run's outage length comes from sweep.outage_ms"));
  // One outage per port; a circuit cut needs its length.
  e = error_of(kHead + "faults: [{kind: port-dark, port: 19, at_step: 3, for_ms: 20}, "
                       "{kind: circuit-cut, port: 19, at_step: 4, for_ms: 20}]\n");
  CHECK_THAT(e, Contains("port 19 has an outage already"));
  e = error_of(kHead + "faults: [{kind: circuit-cut, port: 19, at_step: 3}]\n");
  CHECK_THAT(e, Contains("missing key 'for_ms'"));
  e = error_of(kHead + "faults: [{kind: circuit-cut, port: 99, at_step: 3, for_ms: 20}]\n");
  CHECK_THAT(e, Contains("unknown port 99"));
  // port-dark stays a virtual lab's fault; only circuit-cut runs on a real switch.
  e = error_of(kRealHead + kRealWorkload + "}\nfaults: [{kind: port-dark, port: 18, at_step: 2, for_ms: 100}]\n");
  CHECK_THAT(e, Contains("needs a virtual lab"));
  // srun's --export cannot carry a comma.
  e = error_of(kRealHead + kRealWorkload + ", launcher: srun}\nsweep: {env: {NCCL_IB_HCA: ['mlx5_0:1,mlx5_1:1']}}\n");
  CHECK_THAT(e, Contains("has a comma, which srun's --export cannot carry"));
}

TEST_CASE("each launcher hands the ranks the run's sweep.env point", "[runner][phase-workload][survival]") {
  const std::string& wl = kRealWorkload;
  RankLaunch l;
  l.program = "ocslab-collbench-nccl";
  l.schedule = "/s/schedule.yaml";
  l.output_dir = "/s";
  l.controller = "10.0.0.1:7000";
  l.job = "p";
  l.mode = "on-demand";
  l.rendezvous = "g1:18600";
  l.env = {{"NCCL_IB_TIMEOUT", "22"}, {"NCCL_IB_RETRY_CNT", "7"}};
  auto ssh = parse(kRealHead + wl + "}\n");
  auto argv = rank_argv(*ssh.phase_workload, ssh.hosts, 1, l);
  REQUIRE(argv.size() > 4);
  CHECK(std::vector<std::string>(argv.begin(), argv.begin() + 4) ==
        std::vector<std::string>{"env", "NCCL_IB_TIMEOUT=22", "NCCL_IB_RETRY_CNT=7", "ocslab-collbench-nccl"});
  auto mpi = parse(kRealHead + wl + ", launcher: mpirun}\n");
  argv = launcher_argv(*mpi.phase_workload, mpi.hosts, l);
  auto x = std::find(argv.begin(), argv.end(), "-x");
  REQUIRE(x != argv.end());
  CHECK(std::vector<std::string>(x, x + 4) ==
        std::vector<std::string>{"-x", "NCCL_IB_TIMEOUT=22", "-x", "NCCL_IB_RETRY_CNT=7"});
  CHECK(x < std::find(argv.begin(), argv.end(), "ocslab-collbench-nccl"));  // mpirun's option, not the program's
  auto srun = parse(kRealHead + wl + ", launcher: srun}\n");
  argv = launcher_argv(*srun.phase_workload, srun.hosts, l);
  CHECK(std::find(argv.begin(), argv.end(), "--export=ALL,NCCL_IB_TIMEOUT=22,NCCL_IB_RETRY_CNT=7") != argv.end());
  l.env.clear();  // no point: the command lines as before
  argv = rank_argv(*ssh.phase_workload, ssh.hosts, 1, l);
  CHECK(argv.front() == "ocslab-collbench-nccl");
}

TEST_CASE("a sweep.env point's folder name", "[runner][phase-workload][survival]") {
  CHECK(env_label({{"NCCL_IB_TIMEOUT", "18"}, {"NCCL_IB_RETRY_CNT", "7"}}) == "timeout18.retry_cnt7");
  CHECK(env_label({{"NCCL_IB_RESILIENCY_PORT_FAILOVER", "1"}}) == "resiliency_port_failover1");
  CHECK(env_label({{"NCCL_ALGO", "Ring"}}) == "algoring");
  CHECK(env_label({{"MY_VAR", "a/b:c"}}) == "my_vara_b_c");
  CHECK(env_label({}).empty());
}

}  // namespace job_survival_spec_test
