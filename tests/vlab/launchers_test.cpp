// The phase workload's job launchers for real (issue 24): `ocslab run` of the four-guest DP x
// PP workload started once by Open MPI's mpirun and once by srun inside a Slurm allocation the
// runner asks for, both on h1 (the lab's login node, launcher.host) on the shared phase lab
// (slurm: true). Checked like the SSH launcher's run (phase_runner_test.cpp): every rank's rows
// verified, three reconfigurations in every step; plus meta.json's launcher and job id, Slurm's
// own record of the job, the allocation released, and Slurm's refusals (more nodes or tasks
// per node than the cluster has, a munge key the controller does not share) reaching the
// runner's error before any rank could start.
#include <fmt/format.h>
#include <catch2/catch.hpp>

#include <unistd.h>

#include <nlohmann/json.hpp>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <regex>
#include <string>

#include "lab_fixture.h"
#include "ocslab/common/csv_reader.h"
#include "ocslab/runner/job_launcher.h"
#include "ocslab/workloads/op_record.h"

namespace fs = std::filesystem;
using namespace ocslab;
using Catch::Matchers::Contains;
using vlab_test::kSharedPhase;
using vlab_test::Lab;
using vlab_test::ocslab_cli;
using vlab_test::Sharing;
using vlab_test::source_path;

namespace {

// One on-demand run of the spec; returns meta.json after the common checks.
nlohmann::json run_and_check(const std::string& spec, const std::string& out) {
  auto r = ocslab_cli({"run", source_path(spec), "-o", out, "--no-plot"});
  std::cout << r.out << r.err;
  INFO(r.out << r.err);
  REQUIRE(r.status == 0);
  auto meta = nlohmann::json::parse(read_file_or_empty(out + "/meta.json"));
  REQUIRE(meta.at("modes").size() == 1);
  CHECK(meta.at("modes")[0].at("problems").empty());
  CHECK(meta.at("modes")[0].at("reconfigurations") == 12);  // 3 per step, 4 steps: as the ssh launcher
  CHECK(meta.at("workload").at("launcher_host") == "h1");
  // Every step: 3 reconfigurations, every rank's 6 rows.
  std::ifstream steps(out + "/phase-steps.csv");
  std::string line;
  std::getline(steps, line);
  int n = 0;
  while (std::getline(steps, line)) {
    const auto f = split_csv_line(line);
    REQUIRE(f.size() == 18);  // step_csv_columns()
    INFO(line);
    CHECK(f[9] == "3");
    CHECK(f[11] == "24");
    ++n;
  }
  CHECK(n == 4);
  for (int rank = 0; rank < 4; ++rank) {
    const std::string path = fmt::format("{}/on-demand/ops-rank{}.csv", out, rank);
    auto rows = workloads::parse_op_csv(read_file_or_empty(path), path);
    REQUIRE(rows.size() == 24);
    for (const auto& row : rows) {
      INFO("rank " << rank << " step " << row.step << " op " << row.index);
      CHECK(row.verified);
      CHECK(row.wrong == 0);
    }
  }
  return meta;
}

}  // namespace

TEST_CASE("the phase workload launched by mpirun and by srun in a Slurm allocation", "[vlab][phase-runner][launchers]") {
  auto t0 = std::chrono::steady_clock::now();
  Lab lab(kSharedPhase, std::chrono::seconds(120), Sharing::kShared);
  const std::string out = fs::temp_directory_path().string() + "/ocslab-launchers-" + std::to_string(::getpid());
  vlab_test::RemovedAtEnd cleanup{out};
  CHECK_THAT(lab.run("h1", "sinfo -h -o '%D %T'"), Contains("4 idle"));

  {  // mpirun (plain blocks, not SECTIONs: one reset of the shared lab for the three parts)
    auto meta = run_and_check("tests/vlab/labs/phase-mpirun.spec.yaml", out + "/mpirun");
    CHECK(meta.at("workload").at("launcher") == "mpirun");
    // Open MPI's job id, from the map mpirun printed (--display-map).
    const std::string id = meta.at("modes")[0].at("job_id");
    CHECK(std::regex_match(id, std::regex("[0-9]+,1")));
    CHECK_THAT(read_file_or_empty(out + "/mpirun/on-demand/launcher.log"),
               Contains("Data for JOB [" + id + "]") && Contains("Data for node: h4"));
  }
  {  // srun
    auto meta = run_and_check("tests/vlab/labs/phase-srun.spec.yaml", out + "/srun");
    CHECK(meta.at("workload").at("launcher") == "srun");
    const std::string id = meta.at("workload").at("job_id");
    REQUIRE(std::regex_match(id, std::regex("[0-9]+")));
    CHECK(meta.at("modes")[0].at("job_id") == id);
    CHECK_THAT(read_file_or_empty(out + "/srun/on-demand/launcher.log"), Contains("srun --jobid=" + id + " "));
    // Slurm's own record: the job the runner named, on all four nodes, cancelled (released) at
    // the end; nothing of it left in the queue.
    std::string job = lab.run("h1", "scontrol show job " + id);
    CHECK_THAT(job, Contains("JobName=ocslab-srun") && Contains("NodeList=h[1-4]") && Contains("JobState=CANCELLED"));
    CHECK(lab.run("h1", "squeue -h -j " + id + " -t running,pending") == "");
    CHECK_THAT(lab.run("h1", "cat /var/log/slurmctld.log"), Contains("JobId=" + id) && Contains("NodeList=h[1-4]"));
  }
  {  // Slurm's refusals reach the runner's error before any rank starts
    runner::LauncherPlace h1{"h1", lab.ssh("h1")};
    const std::string log = out + "/salloc.log";
    fs::create_directories(out);
    // A host Slurm does not know (placement beyond the cluster), more ranks per node than it has CPUs.
    const std::pair<const char*, const char*> asks[] = {
        {"--nodelist=h1,h9", "Invalid node name specified"},
        {"--ntasks-per-node=2", "Requested node configuration is not available"}};
    for (const auto& [ask, said] : asks) {
      INFO(ask);
      try {
        runner::SlurmAllocation a(h1, {"salloc", "--no-shell", ask, "--immediate=10", "--time=1"}, log);
        FAIL("Slurm granted " << ask << " as job " << a.job_id());
      } catch (const Error& e) {
        std::cout << e.what() << "\n";
        CHECK_THAT(std::string(e.what()),
                   Contains("srun launcher: no Slurm allocation: salloc on h1 exited with status 1: ") && Contains(said));
      }
    }
    // A munge key the controller does not share: a second munged on h1 with a key of its own,
    // and salloc's slurm.conf pointing at that munged's socket (the shared lab's reset ends it).
    lab.run("h1",
            "set -e; mkdir -p /tmp/m2; chmod 0755 /tmp/m2; dd if=/dev/urandom of=/tmp/m2/key bs=1024 count=1 2>/dev/null; "
            "chown munge /tmp/m2 /tmp/m2/key; chmod 0400 /tmp/m2/key; "
            "runuser -u munge -- munged --socket=/tmp/m2/sock --key-file=/tmp/m2/key --pid-file=/tmp/m2/pid "
            "--seed-file=/tmp/m2/seed --log-file=/tmp/m2/log; "
            "sed 's#^AuthType=auth/munge#AuthType=auth/munge\\nAuthInfo=socket=/tmp/m2/sock#' /etc/slurm/slurm.conf "
            "> /tmp/m2/slurm.conf; grep -q AuthInfo=socket=/tmp/m2/sock /tmp/m2/slurm.conf");
    const std::string before = lab.run("h1", "wc -l < /var/log/slurmctld.log");
    try {
      runner::SlurmAllocation a(
          h1, {"env", "SLURM_CONF=/tmp/m2/slurm.conf", "salloc", "--no-shell", "--immediate=10", "--time=1", "-N1"}, log);
      FAIL("Slurm granted an allocation under another munge key as job " << a.job_id());
    } catch (const Error& e) {
      std::cout << e.what() << "\n";
      // What salloc says varies ("Protocol authentication error", "Zero Bytes were transmitted
      // or received": the controller drops the connection); the controller's log names munge.
      CHECK_THAT(std::string(e.what()), Contains("srun launcher: no Slurm allocation: env on h1 exited with status 1: ") &&
                                            Contains("salloc: error: Job submit/allocate failed: "));
    }
    CHECK_THAT(lab.run("h1", "tail -n +" + std::to_string(std::stoi(before) + 1) + " /var/log/slurmctld.log"),
               Contains("Munge decode failed: Invalid credential") &&
                   Contains("REQUEST_RESOURCE_ALLOCATION has authentication error"));
  }
  std::cout << fmt::format("launchers case: {:.1f} s\n",
                           std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
}
