// A `framework: torch` phase workload without running it: its keys and their errors, and the
// exact command lines of its ranks under each launcher (PyTorch's environment contract).
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <string>

#include "ocslab/common/error.h"
#include "ocslab/common/file.h"
#include "ocslab/common/shell.h"
#include "ocslab/runner/experiment_spec.h"
#include "ocslab/runner/phase_workload.h"
#include "ocslab/runner/torch_ranks.h"
#include "ocslab/testing/sshd_fixture.h"  // TempDir
#include "spec_test_support.h"

// This file's helpers in a namespace of its own: the unity build compiles it together with
// the other tests of its binary.
namespace torch_ranks_test {

using namespace ocslab;
using namespace ocslab::runner;
using Catch::Matchers::Contains;
using spec_test::error_of;
using spec_test::parse;
using spec_test::source_dir;

namespace {

const std::string kVlab = "type: phase-workload\nname: lm\nlab: {vlab: ../labs/four-hosts.yaml}\n";
const std::string kPhase = "phase: {job: lm, pp: 2, dims: [{name: dp, size: 2}], initial: '11'}\n";
const std::string kTorch =
    "workload: {framework: torch, script: ../torch/examples/train_lm.py, args: [--steps, '3']}\n";

// Two loopback hosts with two ranks each (LOCAL_RANK 0 and 1 on each).
const std::string kTwoHosts =
    "type: phase-workload\nname: lm\n"
    "lab:\n  inventory:\n"
    "    - {name: h1, ssh: 'root@127.0.0.1:2222', nics: [{name: lo, tx_port: 1, rx_port: 9}, "
    "{name: lo2, tx_port: 17, rx_port: 25}]}\n"
    "    - {name: h2, ssh: 'root@127.0.0.1:2222', nics: [{name: lo, tx_port: 2, rx_port: 10}, "
    "{name: lo2, tx_port: 18, rx_port: 26}]}\n"
    "switch: {url: 'tl1://admin@127.0.0.1:3082'}\n";

RankLaunch launch(const std::string& mode) {
  RankLaunch l;
  l.program = kTorchPython;
  l.script = "/srv/job/train_lm.py";
  l.output_dir = "/tmp/x";
  l.controller = "10.0.2.2:7100";
  l.job = "lm";
  l.mode = mode;
  l.rendezvous = "10.0.2.15:18600";
  l.token_file = "/tmp/x/controller.token";
  l.python_path = "/opt/ocslab/python";
  return l;
}

}  // namespace

TEST_CASE("a torch phase workload: the script, its args, ranks from the layout", "[runner][phase-workload][torch]") {
  auto s = parse(kVlab + kTorch + kPhase);
  REQUIRE(s.phase_workload);
  const auto& pw = *s.phase_workload;
  CHECK(pw.framework == Framework::kTorch);
  CHECK(pw.script ==
        std::filesystem::weakly_canonical(source_dir() + "/experiments/torch/examples/train_lm.py").string());
  CHECK(pw.args == std::vector<std::string>{"--steps", "3"});
  CHECK(pw.program == "/usr/bin/python3");
  CHECK_FALSE(pw.pass_if);
  CHECK(pw.schedule.ranks == 4);  // pp 2 x dp 2
  CHECK(pw.schedule_path.empty());
  CHECK(pw.ranks.size() == 4);
  CHECK(torch_layout(pw.layout) == "pp=2,dp=2");
  // The default framework is still the collective workloads.
  CHECK(parse(kVlab + "workload: {schedule: ../workloads/schedules/dp-pp-4-phase.yaml}\n" + kPhase)
            .phase_workload->framework == Framework::kCollbench);
}

TEST_CASE("a torch phase workload: bad keys are refused naming the key", "[runner][phase-workload][torch]") {
  CHECK_THAT(
      error_of(kVlab + "workload: {framework: jax, script: x.py}\n" + kPhase),
      Contains("test.yaml:4:") && Contains("workload.framework: unknown framework 'jax' (known: collbench, torch)"));
  CHECK_THAT(error_of(kVlab + "workload: {framework: torch}\n" + kPhase), Contains("workload.script is missing"));
  CHECK_THAT(error_of(kVlab + "workload: {framework: torch, script: ../torch/examples/nope.py}\n" + kPhase),
             Contains("workload.script: ") && Contains("nope.py is not a file on this machine"));
  for (const std::string k : {"schedule: ../workloads/schedules/dp-pp-4-phase.yaml", "program: x", "pass_if: true"}) {
    const std::string key = k.substr(0, k.find(':'));
    CHECK_THAT(
        error_of(kVlab + "workload: {framework: torch, script: ../torch/examples/train_lm.py, " + k + "}\n" + kPhase),
        Contains("workload." + key + " is for the collective workloads (framework collbench)"));
  }
  CHECK_THAT(
      error_of(kVlab + "workload: {schedule: ../workloads/schedules/dp-pp-4-phase.yaml, script: train.py}\n" + kPhase),
      Contains("workload.script is the training script of `framework: torch`"));
  // The layout fixes the rank count: a placement of another length names it.
  CHECK_THAT(error_of(kVlab +
                      "workload: {framework: torch, script: ../torch/examples/train_lm.py, placement: [h1, "
                      "h2]}\n" +
                      kPhase),
             Contains("placement lists 2 rank(s) but job lm (pp=2,dp=2, phase.pp x phase.dims) has 4 ranks"));
  // On real hosts the script is theirs: a path that does not exist here is accepted.
  CHECK(error_of("type: phase-workload\nname: lm\nlab:\n  inventory:\n"
                 "    - {name: a, ssh: gpu1, nics: [{name: ib0, tx_port: 1, rx_port: 9}]}\n"
                 "    - {name: b, ssh: gpu2, nics: [{name: ib0, tx_port: 2, rx_port: 10}]}\n"
                 "switch: {url: 'tl1://admin@127.0.0.1:3082'}\n"
                 "workload: {framework: torch, script: /srv/job/train.py}\n"
                 "phase: {pp: 2, controller: 10.0.0.1}\n") == "accepted");
}

TEST_CASE("a torch phase workload: group interfaces by kind, native's unconnected kinds, profile steps",
          "[runner][phase-workload][torch]") {
  const std::string wl = "workload: {framework: torch, script: ../torch/examples/train_lm.py, ";
  // A torch job's groups are the script's: group_if names kinds (world, pp, the dimensions).
  auto s = parse(kVlab + wl + "group_if: {world: lan0, dp: eth2}, profile_steps: 2}\n" + kPhase);
  CHECK(s.phase_workload->group_if == std::vector<std::pair<std::string, std::string>>{{"world", "lan0"}, {"dp", "eth2"}});
  CHECK(s.phase_workload->profile_steps == 2);
  CHECK(parse(kVlab + kTorch + kPhase).phase_workload->profile_steps == 0);  // unset: the backend's default
  CHECK_THAT(error_of(kVlab + wl + "group_if: {dp0: lan0}}\n" + kPhase),
             Contains("group_if: a torch job's groups are named by kind, and 'dp0' is none of the layout's (it has: "
                      "world, pp, dp)"));
  CHECK_THAT(error_of(kVlab + wl + "group_if: {dp: lan0, dp: eth1}}\n" + kPhase), Contains("duplicate key 'dp'"));
  // Native wires "11" (the initial topology): both stages on their DP rings, so the pipeline pairs
  // have no circuit and need an interface that needs none.
  CHECK_THAT(error_of(kVlab + wl + "modes: [native, on-demand]}\n" + kPhase),
             Contains("native: the job cannot be wired statically on the rail: topology 11 (0=pp, 1=dp) leaves "
                      "group(s) pp without a circuit") &&
                 Contains("native_group_if (e.g. {pp: lan0})"));
  auto n = parse(kVlab + wl + "modes: [native, on-demand], native_group_if: {pp: lan0}}\n" + kPhase);
  CHECK(n.phase_workload->native_unconnected == std::vector<std::string>{"pp"});
  // Wired "00" natively, the DP groups are the ones without a circuit.
  CHECK_THAT(error_of(kVlab + wl + "modes: [native]}\n" +
                      "phase: {job: lm, pp: 2, dims: [{name: dp, size: 2}], initial: '11', native: '00'}\n"),
             Contains("leaves group(s) dp without a circuit"));
  CHECK_THAT(error_of(kVlab + wl + "native_group_if: {pp: lan0}}\n" + kPhase),
             Contains("native_group_if is for the native mode"));
}

TEST_CASE("torch ranks over ssh: PyTorch's environment, LOCAL_RANK per host", "[runner][phase-workload][torch]") {
  auto s = parse(kTwoHosts +
                 "workload: {framework: torch, script: ../torch/examples/train_lm.py, placement: [h1:lo, h1:lo2, "
                 "h2:lo, h2:lo2], args: [--steps, '3']}\n" +
                 kPhase);
  const auto& pw = *s.phase_workload;
  CHECK(shell_join(rank_argv(pw, s.hosts, 3, launch("on-demand"))) ==
        "env RANK=3 LOCAL_RANK=1 WORLD_SIZE=4 MASTER_ADDR=10.0.2.15 MASTER_PORT=18600 "
        "OCSLAB_CONTROLLER=10.0.2.2:7100 OCSLAB_JOB=lm OCSLAB_CONTROLLER_TOKEN_FILE=/tmp/x/controller.token "
        "OCSLAB_LAYOUT=pp=2,dp=2 OCSLAB_RANK_IFS=lo,lo2,lo,lo2 OCSLAB_SHIM_CSV=/tmp/x/shim-rank3.csv "
        "OCSLAB_OUTPUT=/tmp/x "
        "PYTHONPATH=/opt/ocslab/python "
        "/usr/bin/python3 -m ocslab.torch_backend /srv/job/train_lm.py --backend ocslab --steps 3");
  CHECK(shell_join(rank_argv(pw, s.hosts, 2, launch("on-demand"))).rfind("env RANK=2 LOCAL_RANK=0 ", 0) == 0);
  // native: no controller, so the backend passes every op through; no token either.
  auto native = launch("native");
  native.python_path.clear();  // installed: the package is on python3's own path
  CHECK(shell_join(rank_argv(pw, s.hosts, 0, native)) ==
        "env RANK=0 LOCAL_RANK=0 WORLD_SIZE=4 MASTER_ADDR=10.0.2.15 MASTER_PORT=18600 OCSLAB_LAYOUT=pp=2,dp=2 "
        "OCSLAB_RANK_IFS=lo,lo2,lo,lo2 OCSLAB_SHIM_CSV=/tmp/x/shim-rank0.csv OCSLAB_OUTPUT=/tmp/x /usr/bin/python3 -m ocslab.torch_backend "
        "/srv/job/train_lm.py "
        "--backend ocslab --steps 3");
  auto bad = launch("on-demand");
  bad.rendezvous = "nohost";
  CHECK_THROWS_WITH(rank_argv(pw, s.hosts, 0, bad), Contains("rendezvous 'nohost' is not HOST:PORT"));
}

TEST_CASE("torch ranks under mpirun and srun: RANK and LOCAL_RANK from the launcher",
          "[runner][phase-workload][torch]") {
  auto s = parse(kTwoHosts +
                 "workload: {framework: torch, script: ../torch/examples/train_lm.py, placement: [h1:lo, h1:lo2, "
                 "h2:lo, h2:lo2], launcher: mpirun}\n" +
                 "phase: {job: lm, pp: 2, dims: [{name: dp, size: 2}], initial: '11', controller: 10.0.2.2}\n");
  auto pw = *s.phase_workload;
  auto l = launch("provisioning");
  l.output_dir = "/shared/run/provisioning";
  l.token_file = "/shared/run/controller.token";
  // Provisioning is said to the backend (on demand, its default, is not).
  const std::string tail =
      " && exec \"$@\"' sh env WORLD_SIZE=4 MASTER_ADDR=10.0.2.15 MASTER_PORT=18600 "
      "OCSLAB_CONTROLLER=10.0.2.2:7100 OCSLAB_JOB=lm OCSLAB_CONTROLLER_TOKEN_FILE=/shared/run/controller.token "
      "OCSLAB_PHASE_MODE=provisioning OCSLAB_LAYOUT=pp=2,dp=2 OCSLAB_RANK_IFS=lo,lo2,lo,lo2 "
      "'OCSLAB_SHIM_CSV=/shared/run/provisioning/shim-rank{rank}.csv' "
      "OCSLAB_OUTPUT=/shared/run/provisioning PYTHONPATH=/opt/ocslab/python /usr/bin/python3 -m ocslab.torch_backend "
      "/srv/job/train_lm.py --backend ocslab";
  CHECK(shell_join(launcher_argv(pw, s.hosts, l)) ==
        "mpirun -np 4 -H 127.0.0.1:2,127.0.0.1:2 --map-by slot sh -c 'export RANK=\"$OMPI_COMM_WORLD_RANK\" "
        "LOCAL_RANK=\"$OMPI_COMM_WORLD_LOCAL_RANK\"" +
            tail);
  s.hosts[0].ssh_host = "gpu1";
  s.hosts[1].ssh_host = "gpu2";
  pw.launcher = Launcher::kSrun;
  pw.launcher_program = "srun";
  CHECK(shell_join(launcher_argv(pw, s.hosts, l)) ==
        "srun --nodes=2 --ntasks=4 --ntasks-per-node=2 --nodelist=gpu1,gpu2 --distribution=block sh -c 'export "
        "RANK=\"$SLURM_PROCID\" LOCAL_RANK=\"$SLURM_LOCALID\"" +
            tail);
  pw.launcher = Launcher::kSsh;
  CHECK_THROWS_AS(torch_launcher_tail(pw, l), Error);
}

TEST_CASE("torch ranks: the build tree's ocslab package for PYTHONPATH", "[runner][phase-workload][torch]") {
  testing::TempDir d;
  std::filesystem::create_directories(d.path() + "/bin");
  CHECK(torch_python_path(d.path() + "/bin/ocslab").empty());  // installed: python3's own path
  std::filesystem::create_directories(d.path() + "/python/ocslab");
  write_text(d.path() + "/python/ocslab/torch_backend.py", "");
  CHECK(torch_python_path(d.path() + "/bin/ocslab") == d.path() + "/python");
}

TEST_CASE("torch ranks: the process groups a layout implies", "[runner][phase-workload][torch]") {
  phase::JobLayout l;
  l.job = "lm";
  l.pp = 2;
  l.dims = {{"dp", 2}};
  CHECK(torch_expected_groups(l) == std::vector<std::string>{"pp: [0 2] [1 3]", "dp: [0 1] [2 3]"});
  l.pp = 1;
  l.dims = {{"cp", 2}, {"dp", 3}};
  const auto g = torch_expected_groups(l);
  REQUIRE(g.size() == 3);
  CHECK(g[0] == "pp: [0] [1] [2] [3] [4] [5]");
  // Whatever order coords() numbers a stage in, every rank is in exactly one group per dimension.
  for (size_t i = 1; i < 3; ++i) {
    std::string digits;
    for (char c : g[i])
      if (c >= '0' && c <= '9') digits += c;
    std::sort(digits.begin(), digits.end());
    CHECK(digits == "012345");
  }
  CHECK(g[1].rfind("cp: [", 0) == 0);
  CHECK(std::count(g[1].begin(), g[1].end(), '[') == 3);  // 3 cp groups of 2
  CHECK(std::count(g[2].begin(), g[2].end(), '[') == 2);  // 2 dp groups of 3
}

}  // namespace torch_ranks_test
