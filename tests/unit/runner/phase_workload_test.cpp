// The phase-workload experiment type without running it: spec parsing and every validation
// error (file:line), the launchers' command lines, and the per-step figures from rows + events.
#include <catch2/catch.hpp>

#include <unistd.h>
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "ocslab/common/file.h"
#include "ocslab/common/shell.h"
#include "ocslab/runner/experiment_spec.h"
#include "ocslab/runner/job_launcher.h"
#include "ocslab/runner/phase_figures.h"
#include "ocslab/runner/phase_workload.h"
#include "ocslab/testing/sshd_fixture.h"
#include "spec_test_support.h"

// This file's helpers in a namespace of its own: the unity build compiles it together with
// the other tests of its binary.
namespace phase_workload_test {

using namespace ocslab;
using namespace ocslab::runner;
namespace fs = std::filesystem;
using Catch::Matchers::Contains;
using spec_test::error_of;
using spec_test::parse;
using spec_test::source_dir;

namespace {

const std::string kHead =
    "type: phase-workload\n"
    "name: pw\n"
    "lab: {vlab: ../labs/four-hosts.yaml}\n";
const std::string kPhase = "phase: {job: dppp, pp: 2, dims: [{name: dp, size: 2}], initial: '11'}\n";
const std::string kWorkload = "workload: {schedule: ../workloads/schedules/dp-pp-4-phase.yaml}\n";

// n hosts h1..hn over loopback SSH, NIC lo with ports i / 8+i.
std::string inventory(int n) {
  std::string s = "lab:\n  inventory:\n";
  for (int i = 1; i <= n; ++i) {
    s += "    - {name: h" + std::to_string(i) +
         ", ssh: 'root@127.0.0.1:2222', nics: [{name: lo, tx_port: " + std::to_string(i) +
         ", rx_port: " + std::to_string(8 + i) + "}, {name: lo2, tx_port: " + std::to_string(16 + i) +
         ", rx_port: " + std::to_string(24 + i) + "}]}\n";
  }
  return s + "switch: {url: 'tl1://admin@127.0.0.1:3082'}\n";
}

}  // namespace

TEST_CASE("a phase-workload spec: defaults from the lab, the schedule and the job", "[runner][phase-workload]") {
  auto s = parse(kHead + kWorkload + kPhase);
  CHECK(s.type == kPhaseWorkload);
  REQUIRE(s.phase_workload);
  const auto& pw = *s.phase_workload;
  CHECK(pw.program == "ocslab-collbench-verbs");
  CHECK(pw.pass_if);
  CHECK(pw.schedule.ranks == 4);
  CHECK(pw.schedule_path ==
        std::filesystem::weakly_canonical(source_dir() + "/experiments/workloads/schedules/dp-pp-4-phase.yaml").string());
  CHECK(pw.modes == std::vector<std::string>{"on-demand", "provisioning"});
  CHECK(pw.launcher == Launcher::kSsh);
  REQUIRE(pw.ranks.size() == 4);
  CHECK(pw.ranks[2].host == 2);
  CHECK(pw.ranks[2].nic == "eth1");
  auto slots = pw.slots(s.hosts);
  CHECK(slots[0] == phase::Slot{1, 17});
  CHECK(slots[3] == phase::Slot{4, 20});
  CHECK(s.allow.to_string() == "1..4,17..20");
  CHECK(pw.layout.job == "dppp");
  CHECK(pw.initial.str() == "11");
  CHECK(pw.controller_host == "10.0.2.2");  // a virtual lab's guests reach the runner there
  CHECK(pw.listen_host == "127.0.0.1");      // ... which QEMU turns into the runner's loopback
  CHECK(pw.rendezvous_port == 18600);
}

TEST_CASE("the shipped example spec is valid", "[runner][phase-workload]") {
  auto s = load_experiment_spec(source_dir() + "/experiments/specs/dp-pp-phases.yaml");
  REQUIRE(s.phase_workload);
  CHECK(s.phase_workload->schedule.name == "dp-pp-4-phase");
  CHECK(s.phase_workload->modes.size() == 2);
}

TEST_CASE("phase-workload settings: placement, launcher, modes, args", "[runner][phase-workload]") {
  auto s = parse("type: phase-workload\n" + inventory(2) +
                 "workload:\n"
                 "  program: /opt/ocslab/bin/ocslab-collbench-nccl\n"
                 "  schedule: ../workloads/schedules/dp-pp-4-phase.yaml\n"
                 "  modes: provisioning\n"
                 "  placement: [h1:lo, h1:lo2, h2:lo, h2:lo2]\n"
                 "  launcher: {name: mpirun, program: /usr/bin/mpirun, args: [-x, NCCL_DEBUG=INFO]}\n"
                 "  args: [--gpu-direct]\n"
                 "  port: 19000\n"
                 "phase: {pp: 2, dims: [{name: dp, size: 2}], controller: 10.0.0.1, listen: '0.0.0.0:7100'}\n");
  const auto& pw = *s.phase_workload;
  CHECK_FALSE(pw.pass_if);  // only the verbs program takes --if
  CHECK(pw.modes == std::vector<std::string>{"provisioning"});
  CHECK(pw.launcher == Launcher::kMpirun);
  CHECK(pw.launcher_program == "/usr/bin/mpirun");
  CHECK(pw.layout.job == "test");  // default: the spec's name (the file stem)
  CHECK(pw.initial.str() == "11");
  CHECK(pw.listen_port == 7100);
  auto slots = pw.slots(s.hosts);
  CHECK(slots[1] == phase::Slot{17, 25});
  CHECK(slots[2] == phase::Slot{2, 10});
}

TEST_CASE("phase-workload specs are refused before anything is touched, naming file:line", "[runner][phase-workload]") {
  const std::string spec = source_dir() + "/experiments/specs/test.yaml";
  SECTION("an unknown schedule group names the schedule's line") {
    std::string dir = "/tmp/ocslab-t-phaserunner-unit-" + std::to_string(::getpid());
    std::filesystem::create_directories(dir);
    std::ofstream(dir + "/bad.yaml") << "ranks: 2\ngroups:\n  - {name: dp0, kind: dp, ranks: [0, 1]}\n"
                                        "step:\n  - {group: dp0, op: allreduce, bytes: 1KiB}\n"
                                        "  - {group: dp9, op: allreduce, bytes: 1KiB}\n";
    auto e =
        error_of(kHead + "workload: {schedule: " + dir + "/bad.yaml}\nphase: {pp: 1, dims: [{name: dp, size: 2}]}\n");
    std::filesystem::remove_all(dir);
    CHECK_THAT(e, Contains(spec + ":4:") && Contains(dir + "/bad.yaml:6") && Contains("dp9"));
  }
  SECTION("fewer hosts than ranks") {
    auto e = error_of("type: phase-workload\n" + inventory(3) + kWorkload + kPhase);
    CHECK_THAT(e, Contains(spec + ":") && Contains("the lab has 3 host(s)") && Contains("has 4 ranks"));
    e = error_of(kHead + "workload: {schedule: ../workloads/schedules/dp-pp-4-phase.yaml, placement: [h1, h2, h3]}\n" +
                 kPhase);
    CHECK_THAT(e, Contains(spec + ":4:") && Contains("placement lists 3 rank(s)"));
  }
  SECTION("a bad launcher") {
    auto e =
        error_of(kHead + "workload: {schedule: ../workloads/schedules/dp-pp-4-phase.yaml, launcher: pbs}\n" + kPhase);
    CHECK_THAT(e, Contains(spec + ":4:") && Contains("unknown launcher 'pbs' (known: ssh, mpirun, srun)"));
    e = error_of(
        kHead + "workload: {schedule: ../workloads/schedules/dp-pp-4-phase.yaml, launcher: {name: ssh, args: [-v]}}\n" +
        kPhase);
    CHECK_THAT(e, Contains("the ssh launcher takes no program, args or host"));
    e = error_of(kHead +
                 "workload: {schedule: ../workloads/schedules/dp-pp-4-phase.yaml, launcher: {name: srun, host: h9}}\n" +
                 kPhase);
    CHECK_THAT(e, Contains(spec + ":4:") && Contains("launcher.host: unknown host 'h9' (the lab has: h1, h2, h3, h4)"));
    auto ok = parse(kHead + "workload: {schedule: ../workloads/schedules/dp-pp-4-phase.yaml, "
                            "launcher: {name: mpirun, host: h2}}\n" + kPhase);
    CHECK(ok.phase_workload->launcher_host == "h2");
  }
  SECTION("launcher placement constraints") {
    std::string w = "workload:\n  schedule: ../workloads/schedules/dp-pp-4-phase.yaml\n";
    auto e = error_of("type: phase-workload\n" + inventory(2) + w + "  placement: [h1:lo, h2:lo, h1:lo2, h2:lo2]\n" +
                      "  launcher: mpirun\n" + kPhase.substr(0, kPhase.size() - 2) + ", controller: 10.0.0.1}\n");
    CHECK_THAT(e, Contains("host 'h1' must hold consecutive ranks"));
    e = error_of("type: phase-workload\n" + inventory(3) + w + "  placement: [h1:lo, h1:lo2, h2:lo, h3:lo]\n" +
                 "  launcher: srun\n" + "  program: ocslab-collbench-nccl\n" + kPhase.substr(0, kPhase.size() - 2) +
                 ", controller: 10.0.0.1}\n");
    CHECK_THAT(e, Contains("same number of ranks on every host"));
    e = error_of("type: phase-workload\n" + inventory(2) + w + "  placement: [h1:lo, h1:lo2, h2:lo, h2:lo2]\n" +
                 "  launcher: mpirun\n" + kPhase.substr(0, kPhase.size() - 2) + ", controller: 10.0.0.1}\n");
    CHECK_THAT(e, Contains("same --if: ranks use NICs lo and lo2"));
  }
  SECTION("placement errors") {
    auto e = error_of(kHead +
                      "workload: {schedule: ../workloads/schedules/dp-pp-4-phase.yaml, placement: [h1, h2, h3, h9]}\n" +
                      kPhase);
    CHECK_THAT(e, Contains("rank 3: unknown host 'h9'"));
    e = error_of(kHead +
                 "workload: {schedule: ../workloads/schedules/dp-pp-4-phase.yaml, placement: [h1, h2, h3, h3:eth2]}\n" +
                 kPhase);
    CHECK_THAT(e, Contains("host 'h3' has no data NIC 'eth2' (it has: eth1)"));
    e = error_of(kHead +
                 "workload: {schedule: ../workloads/schedules/dp-pp-4-phase.yaml, placement: [h1, h2, h3, h3:eth1]}\n" +
                 kPhase);
    CHECK_THAT(e, Contains("ranks 2 and 3 both on h3:eth1"));
  }
  SECTION("the job and the schedule disagree") {
    auto e = error_of(kHead + kWorkload + "phase: {pp: 2, dims: [{name: dp, size: 4}]}\n");
    CHECK_THAT(e, Contains(spec + ":5:") && Contains("job pw has 8 ranks") && Contains("has 4"));
    e = error_of(kHead + kWorkload + "phase: {pp: 2, dims: [{name: tp, size: 2}]}\n");
    CHECK_THAT(e, Contains("group 'dp-s0' has kind 'dp', which job pw has no dimension for"));
    e = error_of(kHead + kWorkload + "phase: {pp: 1, dims: [{name: dp, size: 4}]}\n");
    CHECK_THAT(e, Contains("accepted"));  // pp groups are the controller's business; dp groups fit in one stage
    e = error_of(kHead + kWorkload + "phase: {pp: 2, dims: [{name: dp, size: 2}], initial: '13'}\n");
    CHECK_THAT(e, Contains(spec + ":5:"));
  }
  SECTION("modes, keys and types") {
    CHECK_THAT(
        error_of(kHead + "workload: {schedule: ../workloads/schedules/dp-pp-4-phase.yaml, modes: [fast]}\n" + kPhase),
        Contains("unknown phase mode 'fast'"));
    CHECK_THAT(
        error_of(kHead +
                 "workload: {schedule: ../workloads/schedules/dp-pp-4-phase.yaml, modes: [on-demand, on-demand]}\n" +
                 kPhase),
        Contains("listed twice"));
    CHECK_THAT(error_of(kHead + kWorkload + kPhase + "mappings: {a: [h1:eth1 <-> h2:eth1]}\n"),
               Contains(spec + ":6:") && Contains("'mappings' is not part of a phase-workload spec"));
    CHECK_THAT(error_of("name: x\nlab: {vlab: ../labs/four-hosts.yaml}\n" + kWorkload),
               Contains(spec + ":3:") && Contains("'workload' needs type: phase-workload"));
    CHECK_THAT(error_of("type: bench\n"), Contains(spec + ":1:") && Contains("unknown experiment type 'bench'"));
    CHECK_THAT(error_of(kHead + kWorkload), Contains("phase"));
    CHECK_THAT(error_of(kHead + "workload: {schedule: nope.yaml}\n" + kPhase), Contains("the schedule is not valid"));
    CHECK_THAT(
        error_of("type: phase-workload\n" + inventory(4) +
                 "workload: {schedule: ../workloads/schedules/dp-pp-4-phase.yaml, placement: [h1, h2, h3, h4]}\n" +
                 kPhase + "\n"),
        Contains("accepted"));  // loopback inventory: the controller is reached at 127.0.0.1
  }
}

TEST_CASE("launcher command lines", "[runner][phase-workload]") {
  auto s = parse("type: phase-workload\n" + inventory(2) +
                 "workload:\n"
                 "  schedule: ../workloads/schedules/dp-pp-4-phase.yaml\n"
                 "  placement: [h1:lo, h1:lo2, h2:lo, h2:lo2]\n"
                 "  args: [--max-msg, 16KiB]\n"
                 "  timeout_s: 90\n"
                 "phase: {pp: 2, dims: [{name: dp, size: 2}], controller: 10.0.0.1}\n");
  auto pw = *s.phase_workload;
  pw.pass_if = true;
  RankLaunch l{"/opt/bin/ocslab-collbench-verbs",
               "/tmp/x/schedule.yaml",
               "/tmp/x",
               "10.0.0.1:7100",
               "dppp",
               "provisioning",
               "127.0.0.1:18600",
               "",
               "",
               {}};  // no token file: the argv has no --controller-token-file
  std::vector<std::string> want = {"/opt/bin/ocslab-collbench-verbs",
                                   "--schedule",
                                   "/tmp/x/schedule.yaml",
                                   "--rank",
                                   "2",
                                   "--nranks",
                                   "4",
                                   "--rendezvous",
                                   "127.0.0.1:18600",
                                   "--host",
                                   "h2",
                                   "--output",
                                   "/tmp/x",
                                   "--controller",
                                   "10.0.0.1:7100",
                                   "--job",
                                   "dppp",
                                   "--phase-mode",
                                   "provisioning",
                                   "--profile-steps",
                                   "1",
                                   "--if",
                                   "lo",
                                   "--timeout-s",
                                   "90",
                                   "--max-msg",
                                   "16KiB"};
  CHECK(rank_argv(pw, s.hosts, 2, l) == want);
  l.mode = "on-demand";
  auto od = rank_argv(pw, s.hosts, 1, l);
  CHECK(std::find(od.begin(), od.end(), "--profile-steps") == od.end());
  CHECK(od[10] == "h1");
  CHECK(od[od.size() - 5] == "lo2");
  CHECK_THROWS_AS(launcher_argv(pw, s.hosts, l), Error);  // ssh: one command per rank
  CHECK(pw.listen_host == "10.0.0.1");  // the address the ranks reach, not every address
  // The controller's token: only the path of the 0600 file the runner wrote goes into argv.
  l.token_file = "/tmp/x/controller.token";
  auto with_token = rank_argv(pw, s.hosts, 1, l);
  auto at = std::find(with_token.begin(), with_token.end(), "--controller-token-file");
  REQUIRE(at != with_token.end());
  CHECK(*(at + 1) == "/tmp/x/controller.token");
  // The same per-run secret authenticates the ranks to rank 0's rendezvous.
  auto rv_at = std::find(with_token.begin(), with_token.end(), "--rendezvous-token-file");
  REQUIRE(rv_at != with_token.end());
  CHECK(*(rv_at + 1) == "/tmp/x/controller.token");
  CHECK(std::find(od.begin(), od.end(), "--rendezvous-token-file") == od.end());
  l.token_file.clear();

  SECTION("mpirun: hosts in blocks, rank and size from the launcher") {
    pw.launcher = Launcher::kMpirun;
    pw.launcher_program = "mpirun";
    pw.launcher_args = {"-x", "NCCL_DEBUG=INFO"};
    pw.pass_if = false;
    l.program = "ocslab-collbench-nccl";
    auto a = launcher_argv(pw, s.hosts, l);
    CHECK(shell_join(a) ==
          "mpirun -np 4 -H 127.0.0.1:2,127.0.0.1:2 --map-by slot -x NCCL_DEBUG=INFO ocslab-collbench-nccl "
          "--schedule /tmp/x/schedule.yaml --nranks 4 --rendezvous 127.0.0.1:18600 --output /tmp/x --controller "
          "10.0.0.1:7100 --job dppp --phase-mode on-demand --timeout-s 90 --max-msg 16KiB");
    l.token_file = "/shared/controller.token";  // both doors get the job's one secret file
    auto with_token = launcher_argv(pw, s.hosts, l);
    CHECK(shell_join(with_token).find("--controller-token-file /shared/controller.token --rendezvous-token-file "
                                      "/shared/controller.token") != std::string::npos);
  }
  SECTION("srun: nodes, tasks per node, block distribution") {
    s.hosts[0].ssh_host = "gpu1";
    s.hosts[1].ssh_host = "gpu2";
    pw.launcher = Launcher::kSrun;
    pw.launcher_program = "srun";
    pw.launcher_args = {"--gpus-per-task=1"};
    pw.pass_if = false;
    l.program = "ocslab-collbench-nccl";
    l.mode = "provisioning";
    auto a = launcher_argv(pw, s.hosts, l);
    CHECK(shell_join(a) ==
          "srun --nodes=2 --ntasks=4 --ntasks-per-node=2 --nodelist=gpu1,gpu2 --distribution=block --gpus-per-task=1 "
          "ocslab-collbench-nccl --schedule /tmp/x/schedule.yaml --nranks 4 --rendezvous 127.0.0.1:18600 --output "
          "/tmp/x --controller 10.0.0.1:7100 --job dppp --phase-mode provisioning --profile-steps 1 --timeout-s 90 "
          "--max-msg 16KiB");
  }
  SECTION("launcher.host: hosts by their names, srun inside the runner's allocation") {
    s.hosts[0].ssh_host = "127.0.0.1";
    s.hosts[1].ssh_host = "127.0.0.1";
    pw.launcher = Launcher::kSrun;
    pw.launcher_program = "srun";
    pw.launcher_host = "h1";
    pw.pass_if = false;
    l.job_id = "42";
    auto a = shell_join(launcher_argv(pw, s.hosts, l));
    CHECK_THAT(a, Contains("srun --jobid=42 --nodes=2 --ntasks=4 --ntasks-per-node=2 --nodelist=h1,h2 "));
    CHECK(shell_join(salloc_argv(pw, s.hosts, "ocslab-run1", 7)) ==
          "salloc --no-shell --job-name=ocslab-run1 --nodes=2 --nodelist=h1,h2 --ntasks-per-node=2 --time=7 "
          "--immediate=60");
    pw.launcher = Launcher::kMpirun;
    pw.launcher_program = "mpirun";
    l.launcher_args = {"--display-map"};
    CHECK_THAT(shell_join(launcher_argv(pw, s.hosts, l)),
               Contains("mpirun -np 4 -H h1:2,h2:2 --map-by slot --display-map /opt/bin/ocslab-collbench-verbs"));
  }
  CHECK(shell_join({"a b", "it's", "", "x=1,y"}) == "'a b' 'it'\\''s' '' x=1,y");
}

TEST_CASE("per-step figures: the slowest rank's split and reconfigurations mapped to steps",
          "[runner][phase-workload]") {
  auto s = parse(kHead + kWorkload + kPhase);
  const auto& sched = s.phase_workload->schedule;
  // Two ranks of dp-s0 (ops 4 allreduce) in two steps, in ms on a common clock.
  auto row = [](int rank, int step, int index, double wait_start, double start, double end, double wait_ms, bool rec) {
    workloads::OpRecord r;
    r.rank = rank;
    r.step = step;
    r.warmup = step == 0;
    r.index = index;
    r.wait_start_ns = static_cast<int64_t>(wait_start * 1e6);
    r.start_ns = static_cast<int64_t>(start * 1e6);
    r.end_ns = static_cast<int64_t>(end * 1e6);
    r.duration_ns = r.end_ns - r.start_ns;
    r.wait_ns = static_cast<int64_t>(wait_ms * 1e6);
    r.reconfigured = rec;
    return r;
  };
  std::vector<workloads::OpRecord> rows = {// rank 0: step 0 = op0 (wait 5 pre + 1 post) then op4; step 1 = op0, op4
                                           row(0, 0, 0, 100, 105, 110, 6, true), row(0, 0, 4, 130, 140, 150, 10, true),
                                           row(0, 1, 0, 200, 201, 210, 1, false), row(0, 1, 4, 220, 221, 230, 1, false),
                                           // rank 1: shorter step 1
                                           row(1, 0, 1, 100, 101, 111, 1, false), row(1, 0, 5, 140, 141, 151, 1, false),
                                           row(1, 1, 1, 190, 191, 195, 1, false),
                                           row(1, 1, 5, 200, 201, 205, 1, false)};
  using K = phase::ControllerEvent::Kind;
  auto ev = [](K k, const std::string& g, int64_t seq, double attempt) {
    phase::ControllerEvent e;
    e.kind = k;
    e.group = g;
    e.seq = seq;
    e.value = attempt;
    return e;
  };
  // pp0 has 2 ops per step: seq 1, 2 -> step 0; 3 -> step 1. dp-s0 one per step: seq 2 -> step 1.
  std::vector<phase::ControllerEvent> events = {
      ev(K::kReconfigStart, "pp0", 1, 1),   ev(K::kReconfigStart, "pp0", 1, 2), ev(K::kReconfigEnd, "pp0", 1, 0),
      ev(K::kReconfigStart, "dp-s0", 1, 1), ev(K::kReconfigStart, "pp0", 3, 1), ev(K::kReconfigStart, "dp-s0", 2, 1),
      ev(K::kReconfigStart, "nope", 1, 1)};
  auto f = step_figures(sched, "on-demand", rows, events);
  REQUIRE(f.size() == 2);
  CHECK(f[0].warmup);
  CHECK(f[0].rows == 4);
  CHECK(f[0].reconfigurations == 2);  // pp0#1 (its retry not counted again), dp-s0#1
  CHECK(f[0].reconfigured_ops == 2);
  // step 0: rank 0 from 100 to 150 + post (10 - 10 pre = 0) = 50 ms; rank 1 100 -> 151 + 0 = 51
  CHECK(f[0].rank == 1);
  CHECK(f[0].step_ms == Approx(51));
  CHECK(f[0].comm_ms == Approx(20));
  CHECK(f[0].wait_ms == Approx(2));
  CHECK(f[0].compute_ms == Approx(29));
  CHECK(f[0].max_wait_ms == Approx(16));
  // step 1: rank 0 from 150 to 230 = 80 ms (comm 18, wait 2, compute 60); rank 1: 151 -> 205 = 54
  CHECK(f[1].rank == 0);
  CHECK(f[1].step_ms == Approx(80));
  CHECK(f[1].comm_ms == Approx(18));
  CHECK(f[1].wait_ms == Approx(2));
  CHECK(f[1].compute_ms == Approx(60));
  CHECK(f[1].reconfigurations == 2);  // pp0#3, dp-s0#2
  auto fields = step_csv_fields(f[1]);
  REQUIRE(fields.size() == step_csv_columns().size());
  CHECK(fields[4] == "80.000");
  std::ostringstream table;
  auto g = f;
  for (auto& x : g) x.mode = "provisioning", x.wait_ms /= 2;
  f.insert(f.end(), g.begin(), g.end());
  print_step_table(table, f);
  CHECK_THAT(table.str(),
             Contains("# on-demand     step 80.00 ms, fabric wait 2.00 ms, 2.00 reconfigurations per step (1 steps)"));
  CHECK_THAT(table.str(), Contains("provisioning vs on-demand: fabric wait x0.50 (-1.00 ms per step)"));
}

TEST_CASE("lab preparation options: group_if, rxe, pin_neighbours", "[runner][phase-workload]") {
  SECTION("the shipped virtual-lab spec sets them, and --group-if reaches every rank's command") {
    auto s = load_experiment_spec(source_dir() + "/experiments/specs/dp-pp-phases-vlab.yaml");
    REQUIRE(s.phase_workload);
    const auto& pw = *s.phase_workload;
    CHECK(pw.pin_neighbours);
    CHECK(pw.rxe == std::vector<std::string>{"lan0"});
    REQUIRE(pw.group_if.size() == 1);
    CHECK(pw.group_if[0] == std::pair<std::string, std::string>{"world", "lan0"});
    RankLaunch l{"/lab/bin/ocslab-collbench-verbs", "/tmp/x/schedule.yaml", "/tmp/x", "10.0.2.2:7100", "dppp",
                 "on-demand", "h1:18600", "", "", {}};
    auto argv = rank_argv(pw, s.hosts, 1, l);
    auto at = std::find(argv.begin(), argv.end(), "--group-if");
    REQUIRE(at != argv.end());
    REQUIRE(at + 1 != argv.end());
    CHECK(*(at + 1) == "world=lan0");
    CHECK(std::find(argv.begin(), argv.end(), "eth1") != argv.end());  // --if stays the data NIC
  }
  SECTION("defaults: nothing prepared, no --group-if") {
    auto s = parse(kHead + kWorkload + kPhase);
    CHECK_FALSE(s.phase_workload->pin_neighbours);
    CHECK(s.phase_workload->rxe.empty());
    CHECK(s.phase_workload->group_if.empty());
  }
  SECTION("a group the schedule lacks is named with the groups it has") {
    auto e = error_of(kHead + "workload: {schedule: ../workloads/schedules/dp-pp-4-phase.yaml, group_if: {wrld: lan0}}\n" +
                      kPhase);
    CHECK_THAT(e, Contains("test.yaml:4:"));
    CHECK_THAT(e, Contains("no group 'wrld'"));
    CHECK_THAT(e, Contains("world"));
  }
  SECTION("bad interface names are refused; host preparation goes with every launcher") {
    CHECK_THAT(error_of(kHead +
                        "workload: {schedule: ../workloads/schedules/dp-pp-4-phase.yaml, group_if: {world: 'a b'}}\n" +
                        kPhase),
               Contains("'a b' is not an interface name"));
    CHECK_THAT(error_of(kHead + "workload: {schedule: ../workloads/schedules/dp-pp-4-phase.yaml, rxe: ['x;rm']}\n" +
                        kPhase),
               Contains("rxe: 'x;rm' is not an interface name"));
    // The runner prepares the hosts over its own SSH sessions, whoever starts the ranks.
    auto s = parse("type: phase-workload\n" + inventory(4) +
                   "workload: {schedule: ../workloads/schedules/dp-pp-4-phase.yaml, launcher: srun, "
                   "pin_neighbours: true, rxe: [lan0]}\n"
                   "phase: {pp: 2, dims: [{name: dp, size: 2}], controller: 10.0.0.1}\n");
    CHECK(s.phase_workload->pin_neighbours);
    CHECK(s.phase_workload->rxe == std::vector<std::string>{"lan0"});
  }
}

TEST_CASE("the controller never listens on every address by default", "[runner][phase-workload]") {
  auto e = error_of("type: phase-workload\n" + inventory(4) + kWorkload +
                    "phase: {pp: 2, dims: [{name: dp, size: 2}], controller: runner.lab}\n");
  CHECK_THAT(e, Contains("phase.controller 'runner.lab' is a name: give phase.listen ADDRESS:PORT"));
  auto s = parse("type: phase-workload\n" + inventory(4) + kWorkload +
                 "phase: {pp: 2, dims: [{name: dp, size: 2}], controller: runner.lab, listen: '10.1.0.1:7100'}\n");
  CHECK(s.phase_workload->listen_host == "10.1.0.1");
  CHECK(s.phase_workload->controller_host == "runner.lab");
}

}  // namespace phase_workload_test

namespace phase_workload_test {

TEST_CASE("native mode: the static topology and the groups it leaves without a circuit", "[runner][phase-workload]") {
  const std::string modes = "workload: {schedule: ../workloads/schedules/dp-pp-4-phase.yaml, "
                            "modes: [native, on-demand, provisioning]";
  SECTION("the topology serving the most bytes is chosen; the others need native_group_if") {
    // dp-pp-4-phase: per step 2 x 256 KiB DP allreduces (digits 1) vs 4 x 64 KiB pipeline sends (digits 0).
    auto s = parse(kHead + modes + ", native_group_if: {pp0: lan0, pp1: lan0}}\n" + kPhase);
    const auto& pw = *s.phase_workload;
    CHECK(pw.native.str() == "11");
    CHECK(pw.native_unconnected == std::vector<std::string>{"pp0", "pp1"});
    RankLaunch l{"prog", "sched", "out", "10.0.2.2:7000", "dppp", "native", "h1:18600", "/tmp/tok", "", {}};
    auto a = rank_argv(pw, s.hosts, 1, l);
    CHECK(std::find(a.begin(), a.end(), "--controller") == a.end());  // no controller in native mode
    CHECK(std::find(a.begin(), a.end(), "--controller-token-file") == a.end());
    CHECK(std::find(a.begin(), a.end(), "--rendezvous-token-file") != a.end());
    CHECK(std::find(a.begin(), a.end(), "pp0=lan0") != a.end());
    l.mode = "on-demand";
    a = rank_argv(pw, s.hosts, 1, l);
    CHECK(std::find(a.begin(), a.end(), "--controller") != a.end());
    CHECK(std::find(a.begin(), a.end(), "pp0=lan0") == a.end());  // only native routes them elsewhere
  }
  SECTION("a schedule that cannot be wired statically is refused, naming the groups and the spec's line") {
    auto e = error_of(kHead + modes + "}\n" + kPhase);
    CHECK_THAT(e, Contains("test.yaml:4:"));
    CHECK_THAT(e, Contains("cannot be wired statically"));
    CHECK_THAT(e, Contains("pp0, pp1"));
    e = error_of(kHead + modes + ", native_group_if: {pp0: lan0}}\n" + kPhase);
    CHECK_THAT(e, Contains("leaves group(s) pp1 without a circuit"));
  }
  SECTION("phase.native names the topology; native options without the mode are refused") {
    auto s = parse(kHead + modes + ", native_group_if: {dp-s0: lan0, dp-s1: lan0}}\n" +
                   "phase: {job: dppp, pp: 2, dims: [{name: dp, size: 2}], initial: '11', native: '00'}\n");
    CHECK(s.phase_workload->native.str() == "00");
    auto e = error_of(kHead + kWorkload + "phase: {job: dppp, pp: 2, dims: [{name: dp, size: 2}], native: '00'}\n");
    CHECK_THAT(e, Contains("add native to workload.modes"));
    e = error_of(kHead + modes + "}\nphase: {job: dppp, pp: 2, dims: [{name: dp, size: 2}], native: '13'}\n");
    CHECK_THAT(e, Contains("test.yaml:5:"));
  }
}

TEST_CASE("sweep: switching times, repetitions, injection; refused where it cannot be done", "[runner][phase-workload]") {
  SECTION("a virtual lab's sweep sets the emulator's time") {
    auto s = parse(kHead + kWorkload + kPhase + "sweep: {switching_ms: [0, 25, 100, 200], repetitions: 2}\n");
    const auto& pw = *s.phase_workload;
    CHECK(pw.sweep_switching_ms == std::vector<double>{0, 25, 100, 200});
    CHECK(pw.repetitions == 2);
    CHECK_FALSE(pw.inject_delay);
  }
  SECTION("a real switch needs inject: true") {
    const std::string wl = "workload: {schedule: ../workloads/schedules/dp-pp-4-phase.yaml, "
                           "placement: [h1:lo, h2:lo, h3:lo, h4:lo]}\n";
    auto e = error_of("type: phase-workload\nname: pw\n" + inventory(4) + wl + kPhase + "sweep: {switching_ms: [0, 50]}\n");
    CHECK_THAT(e, Contains("cannot set the switching time of a real switch"));
    CHECK_THAT(e, Contains("inject: true"));
    auto s = parse("type: phase-workload\nname: pw\n" + inventory(4) + wl + kPhase +
                   "sweep: {switching_ms: [0, 50], inject: true}\n");
    CHECK(s.phase_workload->inject_delay);
  }
  SECTION("bad points name the spec's line") {
    auto e = error_of(kHead + kWorkload + kPhase + "sweep: {switching_ms: [0, -5]}\n");
    CHECK_THAT(e, Contains("test.yaml:6:"));
    CHECK_THAT(e, Contains("-5"));
    e = error_of(kHead + kWorkload + kPhase + "sweep: {switching_ms: [10, 10]}\n");
    CHECK_THAT(e, Contains("listed twice"));
    e = error_of(kHead + kWorkload + kPhase + "sweep: {switching_ms: [ten]}\n");
    CHECK_THAT(e, Contains("test.yaml:6:"));
    e = error_of(kHead + kWorkload + kPhase + "sweep: {switching_ms: []}\n");
    CHECK_THAT(e, Contains("non-empty list"));
    e = error_of(kHead + "workload: {schedule: ../workloads/schedules/dp-pp-4-phase.yaml, modes: [native], "
                         "native_group_if: {pp0: lan0, pp1: lan0}}\n" + kPhase + "sweep: {switching_ms: [0, 5]}\n");
    CHECK_THAT(e, Contains("native never switches"));
  }
  SECTION("sweep belongs to phase-workload specs") {
    auto e = error_of("name: r\nlab: {vlab: ../labs/four-hosts.yaml}\nmappings: {a: [h1:eth1 <-> h2:eth1], "
                      "b: [h1:eth1 <-> h3:eth1]}\nsweep: {switching_ms: [0]}\n");
    CHECK_THAT(e, Contains("'sweep' needs type: phase-workload"));
  }
}

TEST_CASE("sweep.link_gbps: link rates of a virtual lab's circuits; bad ones name the spec's line",
          "[runner][phase-workload][link-rate]") {
  auto s = parse(kHead + kWorkload + kPhase + "sweep: {link_gbps: [0.5, 2]}\n");
  CHECK(s.phase_workload->sweep_link_gbps == std::vector<double>{0.5, 2});
  CHECK(s.phase_workload->sweep_switching_ms.empty());
  s = parse(kHead + kWorkload + kPhase + "sweep: {link_gbps: [1], switching_ms: [0, 25]}\n");
  CHECK(s.phase_workload->sweep_link_gbps == std::vector<double>{1});
  CHECK(s.phase_workload->sweep_switching_ms.size() == 2);
  for (const char* bad : {"[-1]", "[2000]", "[fast]", "[0.0001]"}) {
    INFO(bad);
    auto e = error_of(kHead + kWorkload + kPhase + "sweep: {link_gbps: " + bad + "}\n");
    CHECK_THAT(e, Contains("test.yaml:6:21: sweep.link_gbps: expected a link rate in Gbit/s, 0.001..1000"));
  }
  CHECK_THAT(error_of(kHead + kWorkload + kPhase + "sweep: {link_gbps: [0]}\n"),
             Contains("test.yaml:6:21: sweep.link_gbps: 0 is no cap, not a rate"));
  CHECK_THAT(error_of(kHead + kWorkload + kPhase + "sweep: {link_gbps: [1, 1]}\n"),
             Contains("test.yaml:6:24: sweep.link_gbps: 1 Gbit/s listed twice"));
  CHECK_THAT(error_of(kHead + kWorkload + kPhase + "sweep: {link_gbps: []}\n"),
             Contains("test.yaml:6:20: sweep.link_gbps is a non-empty list"));
  CHECK_THAT(error_of(kHead + kWorkload + kPhase + "sweep: {link_gbps: 1}\n"),
             Contains("test.yaml:6:20: sweep.link_gbps is a non-empty list"));
  const std::string wl = "workload: {schedule: ../workloads/schedules/dp-pp-4-phase.yaml, "
                         "placement: [h1:lo, h2:lo, h3:lo, h4:lo]}\n";
  auto e = error_of("type: phase-workload\nname: pw\n" + inventory(4) + wl + kPhase + "sweep: {link_gbps: [1]}\n");
  CHECK_THAT(e, Contains("only a virtual lab has"));
  CHECK_THAT(e, Contains("tc"));
}

TEST_CASE("sweep figures by link rate: one point per mode and rate, with the measured bandwidth",
          "[runner][phase-workload][link-rate]") {
  std::vector<StepFigures> f;
  for (double gbps : {0.5, 2.0}) {
    for (const char* mode : {"native", "on-demand"}) {
      for (int step = 0; step < 2; ++step) {
        StepFigures x;
        x.mode = mode;
        x.link_gbps = gbps;
        x.step = step;
        x.step_ms = 100 / gbps;
        x.algbw_gbps = gbps * 0.8 + step * 0.02;
        f.push_back(x);
      }
    }
  }
  auto pts = sweep_points(f);
  REQUIRE(pts.size() == 4);
  CHECK(pts[0].mode == "native");
  CHECK(pts[0].link_gbps == 0.5);
  CHECK(pts[2].link_gbps == 2);
  CHECK(pts[2].steps == 2);
  CHECK(pts[2].algbw_gbps == Approx(1.61));
  auto fields = sweep_csv_fields(pts[2]);
  REQUIRE(fields.size() == sweep_csv_columns().size());
  CHECK(sweep_csv_columns()[11] == "link_gbps");
  CHECK(fields[11] == "2");
  CHECK(sweep_csv_columns()[12] == "algbw_gbps");
  CHECK(fields[12] == "1.6100");
  const auto steps = step_csv_fields(f[0]);
  REQUIRE(steps.size() == step_csv_columns().size());
  CHECK(steps[steps.size() - 2] == "0.5");
}

TEST_CASE("probes in a phase-workload spec", "[runner][phase-workload]") {
  auto s = parse(kHead + kWorkload + kPhase + "probes: {carrier: {interval_ms: 1}, firmware: {interval_ms: 5}}\n");
  CHECK(s.probes.size() == 2);
  auto e = error_of(kHead + kWorkload + kPhase + "probes: {rdma: {interval_ms: 10}}\n");
  CHECK_THAT(e, Contains("needs pairs"));
  s = parse(kHead + kWorkload + kPhase + "probes: {rdma: {pairs: ['h1:eth1 -> h2:eth1']}}\n");
  CHECK(s.rdma.pairs.size() == 1);
}

TEST_CASE("sweep figures: relative to native, the estimate, the slope and the overhead lines", "[runner][phase-workload]") {
  std::vector<StepFigures> f;
  auto add = [&](const std::string& mode, double sw, int step, double ms, int reconf, int barriers, bool warm = false) {
    StepFigures x;
    x.mode = mode;
    x.switching_ms = sw;
    x.step = step;
    x.step_ms = ms;
    x.reconfigurations = reconf;
    x.barriers = barriers;
    x.warmup = warm;
    x.wait_ms = ms > 100 ? ms - 100 : 0;
    f.push_back(x);
  };
  add("native", -1, 0, 500, 0, 0, true);  // warm-up: not in any mean
  add("native", -1, 1, 100, 0, 0);
  add("native", -1, 2, 100, 0, 0);
  for (double sw : {0.0, 50.0, 100.0}) {
    add("on-demand", sw, 0, 999, 3, 6, true);
    add("on-demand", sw, 1, 110 + 3 * sw, 3, 6);
    add("on-demand", sw, 2, 110 + 3 * sw, 3, 6);
  }
  set_relative_to_native(f);
  CHECK(f[1].relative == Approx(1.0));
  auto pts = sweep_points(f);
  REQUIRE(pts.size() == 4);
  CHECK(pts[0].mode == "native");
  CHECK(pts[0].steps == 2);
  CHECK(pts[0].estimate_ms < 0);
  CHECK(pts[2].switching_ms == 50);
  CHECK(pts[2].step_ms == Approx(260));
  CHECK(pts[2].relative == Approx(2.6));
  CHECK(pts[2].estimate_ms == Approx(100 + 3 * 50));
  CHECK(pts[2].barriers_per_step == Approx(6));
  auto slope = sweep_slope(pts, "on-demand");
  REQUIRE(slope);
  CHECK(slope->slope == Approx(3));
  CHECK(slope->reconfigs_per_step == Approx(3));
  CHECK_FALSE(sweep_slope(pts, "native"));
  auto fields = sweep_csv_fields(pts[2]);
  REQUIRE(fields.size() == sweep_csv_columns().size());
  CHECK(fields[1] == "50.000");
  CHECK(fields[10] == "250.000");
  std::ostringstream out;
  print_overhead(out, pts);
  CHECK_THAT(out.str(), Contains("on-demand     at 0 ms switching: step 110.00 ms, x1.100 native (+10.00% overhead)"));
  CHECK_THAT(out.str(), Contains("6.00 controller barriers per step"));
  CHECK_THAT(out.str(), Contains("sweep slope: 3.000 ms of step time per ms of switching; 3.00 reconfigurations per step (x1.00)"));
}


TEST_CASE("job ids from what salloc and mpirun print", "[runner][phase-workload]") {
  CHECK(salloc_job_id("salloc: Granted job allocation 42\nsalloc: Waiting for resource configuration\n") == "42");
  CHECK(salloc_job_id("salloc: error: Job submit/allocate failed: Requested node configuration is not available\n")
            .empty());
  CHECK(mpirun_job_id(" ========================   JOB MAP   ========================\n\n"
                      " Data for node: h1\tNum slots: 1\tMax slots: 0\tNum procs: 1\n"
                      " \tProcess OMPI jobid: [35398,1] App: 0 Process rank: 0 Bound: N/A\n\n"
                      " =============================================================\n"
                      " Data for JOB [35398,1] offset 0 Total slots allocated 4\n") == "35398,1");
  CHECK(mpirun_job_id("no map here").empty());
}

TEST_CASE("a launcher command runs here with its output in the log; a Slurm refusal names what Slurm said",
          "[runner][phase-workload]") {
  const std::string log = fs::temp_directory_path().string() + "/ocslab-launcher-" + std::to_string(::getpid()) + ".log";
  struct Rm {
    std::string p;
    ~Rm() { fs::remove(p); }
  } rm{log};
  auto o = run_launcher_command({}, {"sh", "-c", "echo salloc: Granted job allocation 7; exit 3"}, log,
                                std::chrono::seconds(10));
  CHECK(o.exit_status == 3);
  CHECK_FALSE(o.timed_out);
  CHECK(salloc_job_id(o.output) == "7");
  CHECK_THAT(read_file_or_empty(log), Contains("Granted job allocation 7"));
  o = run_launcher_command({}, {"sleep", "5"}, log, std::chrono::seconds(1));
  CHECK(o.timed_out);
  // A salloc that exits non-zero: the allocation's error carries its words and where it ran.
  try {
    SlurmAllocation a({}, {"sh", "-c", "echo 'salloc: error: Invalid user id' >&2; exit 1"}, log);
    FAIL("no error");
  } catch (const Error& e) {
    CHECK_THAT(std::string(e.what()), Contains("srun launcher: no Slurm allocation: sh on this machine exited with "
                                               "status 1: salloc: error: Invalid user id"));
  }
}

// experiments/specs/NAME (a virtual-lab spec on phase-four.yaml) with each `from` replaced by its
// `to` (each must occur), loaded from a temporary copy: the ConfigError's words ("" if none).
std::string shipped_spec_refusal(const std::string& name,
                                 const std::vector<std::pair<std::string, std::string>>& swaps) {
  std::string text = read_file_or_empty(source_dir() + "/experiments/specs/" + name);
  std::vector<std::pair<std::string, std::string>> all{
      {"../labs/phase-four.yaml", source_dir() + "/experiments/labs/phase-four.yaml"},
      {"../workloads/schedules/", source_dir() + "/experiments/workloads/schedules/"}};
  all.insert(all.end(), swaps.begin(), swaps.end());
  for (const auto& [from, to] : all) {
    auto pos = text.find(from);
    REQUIRE(pos != std::string::npos);
    text.replace(pos, from.size(), to);
  }
  const std::string path =
      std::filesystem::temp_directory_path().string() + "/ocslab-spec-" + std::to_string(::getpid()) + ".yaml";
  std::ofstream(path) << text;
  std::string err;
  try {
    load_experiment_spec(path);
  } catch (const ConfigError& e) {
    err = e.what();
  }
  std::filesystem::remove(path);
  return err;
}

TEST_CASE("a lab's standby NIC can be a spare but not a rank's NIC", "[runner][phase-workload]") {
  // The failover spec as shipped: h3's standby eth1s is rail0's spare.
  auto s = load_experiment_spec(source_dir() + "/experiments/specs/dp-pp-failover-vlab.yaml");
  REQUIRE(s.phase_workload);
  REQUIRE(s.phase_workload->rails.size() == 2);
  REQUIRE(s.phase_workload->rails[0].spares.size() == 1);
  CHECK(s.phase_workload->rails[0].spares[0].nic == "eth1s");
  CHECK(s.hosts[2].nic("eth1s")->standby_for == "eth1");

  // The same spec with the standby as rank 2's NIC: refused, naming the NIC to use instead.
  const std::string err = shipped_spec_refusal(
      "dp-pp-failover-vlab.yaml",
      {{"placement: [h1:eth1, h2:eth1, h3:eth1, h4:eth1]", "placement: [h1:eth1, h2:eth1, h3:eth1s, h4:eth1]"}});
  CHECK_THAT(err, Contains(".yaml:18:33: ") &&
                      Contains("rank 2: h3:eth1s is eth1's standby NIC, which carries no rank of its own: use h3:eth1"));
}

TEST_CASE("phase.detect_nic: every rail NIC's own link read by a probe, else refused at file:line:col",
          "[runner][phase-workload]") {
  // As shipped: a carrier probe on every host; h3's eth1 has a standby, so its own link is the
  // bond member eth1p, which the carrier probe reads by default.
  const std::string shipped = source_dir() + "/experiments/specs/nic-failover-vlab.yaml";
  auto s = load_experiment_spec(shipped);
  REQUIRE(s.phase_workload);
  REQUIRE(s.phase_workload->detect_nic);
  CHECK(s.phase_workload->detect_nic->down_for == std::chrono::milliseconds(300));
  CHECK(s.hosts[2].link_interface("eth1") == "eth1p");
  CHECK(s.hosts[2].link_interface("eth1s") == "eth1s");
  CHECK(s.hosts[0].link_interface("eth1") == "eth1");

  auto refused = [](const std::vector<std::pair<std::string, std::string>>& swaps) {
    return shipped_spec_refusal("nic-failover-vlab.yaml", swaps);
  };
  // No probe reads any link: the first rail NIC is named, with what to add.
  CHECK_THAT(refused({{"probes:\n  carrier: {interval_ms: 1}", "probes:\n  rx_power: {interval_ms: 100}"}}),
             Contains(".yaml:34:") &&
                 Contains("phase.detect_nic: nothing reads the link of h1:eth1 (interface eth1) on rail rail0: add a "
                          "carrier probe on h1 (probes: {carrier: ...}) or a firmware probe"));
  // A carrier probe that lists the bond but not its member: h3's NIC is not read.
  CHECK_THAT(refused({{"carrier: {interval_ms: 1}", "carrier: {interval_ms: 1, interfaces: [eth1, eth1s, eth2]}"}}),
             Contains("nothing reads the link of h3:eth1 (interface eth1p) on rail rail0: add a carrier probe on h3 "
                      "(probes: {carrier: ...}) whose interfaces include eth1p"));
  // No heartbeat: how far a host's stream has come is unknown, so nothing could be judged.
  CHECK_THAT(refused({{"  heartbeat: {interval_ms: 20}", ""}}),
             Contains(".yaml:34:") && Contains("phase.detect_nic: no heartbeat probe on h1 (probes: {heartbeat: "
                                              "{interval_ms: 20}}): a NIC is judged only as far as its host's stream "
                                              "has been heard"));
  // Restricted to other hosts: h4's NICs are unread.
  CHECK_THAT(refused({{"carrier: {interval_ms: 1}", "carrier: {interval_ms: 1, hosts: [h1, h2, h3]}"}}),
             Contains("nothing reads the link of h4:eth1 (interface eth1)"));
  CHECK_THAT(refused({{"detect_nic: {down_ms: 300}", "detect_nic: {down_ms: 0}"}}),
             Contains(".yaml:34:25: ") && Contains("down_ms"));
  CHECK_THAT(refused({{"detect_nic: {down_ms: 300}", "detect_nic: {down: 300}"}}), Contains(".yaml:34:") &&
                                                                                    Contains("down"));
  CHECK_THAT(refused({{"detect_nic: {down_ms: 300}", "detect_nic: 300"}}),
             Contains("phase.detect_nic is {down_ms: MS}"));
}

}  // namespace phase_workload_test

namespace phase_workload_test {

TEST_CASE("phase starts: the ops that need a topology the op before them did not leave", "[runner][phase-workload]") {
  // dp-pp-4-phase: the pipeline sends need "00" (the first one changes it, the other three run
  // on it), stage 0's allreduce "10", stage 1's "11"; the management ops never change it.
  auto s = parse(kHead + kWorkload + kPhase);
  CHECK(phase_starts(*s.phase_workload) ==
        std::vector<bool>{true, false, false, false, true, true, false, false, false});
  // Two DP pairs on the initial topology "11": one phase for the whole job.
  auto pairs = parse(kHead + "workload: {schedule: ../workloads/schedules/dp-pairs-4.yaml}\n" + kPhase);
  CHECK(phase_starts(*pairs.phase_workload) == std::vector<bool>{false, false});
}

}  // namespace phase_workload_test

namespace phase_workload_test {

TEST_CASE("phase.allocator: greedy's circuit allocator per job, checked at file:line:col", "[runner][phase-workload]") {
  const std::string head = "phase: {job: dppp, pp: 2, dims: [{name: dp, size: 2}], initial: '11', ";
  CHECK(parse(kHead + kWorkload + head + "policy: greedy}\n").phase_workload->allocator ==
        phase::Allocator::kLargestDemand);
  CHECK(parse(kHead + kWorkload + head + "policy: greedy, allocator: orchestrrl}\n").phase_workload->allocator ==
        phase::Allocator::kOrchestrRL);
  auto e = error_of(kHead + kWorkload + head + "policy: greedy, allocator: max-min}\n");
  CHECK_THAT(e, Contains("test.yaml:5:"));
  CHECK_THAT(e, Contains("allocator 'max-min' is not one of largest-demand, uniform, orchestrrl"));
  e = error_of(kHead + kWorkload + head + "allocator: uniform}\n");
  CHECK_THAT(e, Contains("allocator is for policy greedy, which allocates circuits (this job's policy is on-request)"));
}

TEST_CASE("safe_window_from: the native run's windows, or a previous run's windows.csv", "[runner][phase-workload]") {
  const std::string policy = "phase: {job: dppp, pp: 2, dims: [{name: dp, size: 2}], initial: '11', "
                             "policy: safe-window, switch_time_ms: 25, ";
  const std::string modes = "workload: {schedule: ../workloads/schedules/dp-pp-4-phase.yaml, modes: [native, "
                            "on-demand], native_group_if: {pp0: lan0, pp1: lan0}}\n";
  auto s = parse(kHead + modes + policy + "safe_window_from: measured}\n");
  CHECK(s.phase_workload->safe_window_from == "measured");
  CHECK(s.phase_workload->switch_time_ms == 25);
  // Refused at file:line:col: measured without native first, with phase_table, without
  // safe-window, a file that is not there or not a windows.csv.
  auto e = error_of(kHead + kWorkload + policy + "safe_window_from: measured}\n");
  CHECK_THAT(e, Contains("test.yaml:5:"));
  CHECK_THAT(e, Contains("native mode, which must come first"));
  e = error_of(kHead + modes + policy + "safe_window_from: measured, phase_table: x.csv}\n");
  CHECK_THAT(e, Contains("phase_table and safe_window_from: the windows come from one of them"));
  e = error_of(kHead + modes + "phase: {job: dppp, pp: 2, dims: [{name: dp, size: 2}], safe_window_from: measured}\n");
  CHECK_THAT(e, Contains("safe_window_from is for policy safe-window"));
  e = error_of(kHead + modes + policy + "safe_window_from: no-such-windows.csv}\n");
  CHECK_THAT(e, Contains("no-such-windows.csv is not a file"));
  // A previous run's windows.csv: its table now.
  testing::TempDir dir;
  std::ofstream(dir.path() + "/windows.csv")
      << "mode,group,rank,members,from_step,from_op,step,to_op,window_ms,switching_ms,hides_switch\n"
         "native,dp-s0,1,2,1,3,1,4,0.400,100.000,0\n";
  auto p = parse(kHead + kWorkload + policy + "safe_window_from: " + dir.path() + "/windows.csv}\n");
  REQUIRE(p.phase_workload->windows.ops.size() == 9);
  CHECK(p.phase_workload->windows.ops[4].idle_us == 400);
  std::ofstream(dir.path() + "/phases.csv") << "index,group,type,bytes,idle_us\n0,pp0,sendrecv,1,1\n";
  e = error_of(kHead + kWorkload + policy + "safe_window_from: " + dir.path() + "/phases.csv}\n");
  CHECK_THAT(e, Contains("no column 'mode'"));
}

}  // namespace phase_workload_test
