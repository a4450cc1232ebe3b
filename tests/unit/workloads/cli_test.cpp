// The workload binaries' command lines on this machine (no RDMA device here): help, and bad
// input refused with a message naming it before anything is set up.
#include <sys/wait.h>

#include <catch2/catch.hpp>

#include "ocslab/common/exit_code.h"
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

using Catch::Matchers::Contains;

namespace {

struct Result {
  int rc = -1;
  std::string out;
};

Result run(const std::string& args, const std::string& program = "ocslab-collbench-verbs",
           const std::string& env = "") {
  const char* bin = std::getenv("OCSLAB_BIN_DIR");
  std::string cmd = env + " " + std::string(bin ? bin : "build/bin") + "/" + program + " " + args + " 2>&1";
  Result r;
  FILE* p = ::popen(cmd.c_str(), "r");
  REQUIRE(p);
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), p)) > 0) r.out.append(buf, n);
  int st = ::pclose(p);
  r.rc = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

#ifdef OCSLAB_HAVE_NCCL
// An NVIDIA GPU usable by processes here: the driver's device nodes exist and
// CUDA_VISIBLE_DEVICES does not hide every device.
bool nvidia_gpu_present() {
  std::error_code ec;
  bool nodes = std::filesystem::exists("/dev/nvidiactl", ec) || std::filesystem::exists("/dev/nvidia0", ec);
  if (!nodes) {
    std::filesystem::directory_iterator it("/proc/driver/nvidia/gpus", ec);
    nodes = !ec && it != std::filesystem::directory_iterator();
  }
  if (!nodes) return false;
  const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
  if (visible &&
      (std::string(visible).empty() || std::string(visible) == "-1" || std::string(visible) == "NoDevFiles")) {
    return false;
  }
  return true;
}
#endif

std::string sched(const std::string& name) {
  return std::string(OCSLAB_TEST_SOURCE_DIR) + "/experiments/workloads/schedules/" + name;
}

}  // namespace

TEST_CASE("ocslab-collbench-verbs: help and bad input", "[workloads]") {
  Result h = run("--help");
  CHECK(h.rc == 0);
  CHECK_THAT(h.out, Contains("usage: ocslab-collbench-verbs") && Contains("--group-if") && Contains("--rendezvous") &&
                        Contains("--controller") && Contains("--phase-mode"));

  CHECK_THAT(h.out, Contains("--minbytes") && Contains("--stepfactor") && Contains("--warmup_iters") &&
                        Contains("--output_file") && Contains("--average") && Contains("-b 8 -e 8M -f 2"));

  // Without --schedule it is nccl-tests' size sweep; its options are checked before anything starts.
  Result r = run("--rank 0 --if lo -n 0");
  CHECK(r.rc == 2);
  CHECK_THAT(r.out, Contains("ocslab-collbench-verbs: -n/--iters 0: must be at least 1"));
  r = run("--rank 0 --if lo -b 8 -e 8M -f 2 -g 2");
  CHECK(r.rc == 2);
  CHECK_THAT(r.out, Contains("-g/--ngpus 2: ocslab-collbench-verbs reduces in host memory"));
  r = run("--nranks 2 --rendezvous x:1 --if lo -b 8");
  CHECK(r.rc == 1);  // a missing option is the command line (docs/exit-codes.md)
  CHECK_THAT(r.out, Contains("missing --rank") && Contains("Try 'ocslab-collbench-verbs --help'."));
  r = run("--rank 0 --if lo -o sum --output /tmp/x");
  CHECK(r.rc == 2);
  CHECK_THAT(r.out, Contains("--output applies to a schedule"));
  r = run("-s " + sched("dp-pp-4.yaml") + " --rank 0 --nranks 4 --rendezvous x:1 --if lo -n 4");
  CHECK(r.rc == 2);
  CHECK_THAT(r.out, Contains("-n/--iters belongs to the size sweep, which runs without --schedule"));

  r = run("-s /nonexistent.yaml --rank 0 --if lo");
  CHECK(r.rc == 2);
  CHECK_THAT(r.out, Contains("/nonexistent.yaml: cannot open the schedule file"));

  r = run("-s " + sched("dp-pp-4.yaml") + " --rank 0 --ranks a,b --if lo");
  CHECK(r.rc == 2);
  CHECK_THAT(r.out, Contains("dp-pp-4.yaml: the schedule has 4 ranks, this job 2"));

  r = run("-s " + sched("dp-pp-4.yaml") + " --rank 4 --nranks 4 --rendezvous x:1 --if lo");
  CHECK(r.rc == 2);
  CHECK_THAT(r.out, Contains("--rank 4 is outside 0..3"));

  r = run("-s " + sched("dp-pp-4.yaml") + " --rank 1 --nranks 4 --rendezvous x:1");
  CHECK(r.rc == 1);
  CHECK_THAT(r.out, Contains("missing --if IFACE"));

  // Rank 0 not reachable: a peer, exit 4.
  r = run("-s " + sched("dp-pp-4.yaml") + " --rank 1 --ranks a,b,c,d --if eth1 --group-if nosuch=eth2 --timeout-s 0.2");
  CHECK(r.rc == 4);
  CHECK_THAT(r.out, Contains("could not reach rank 0 at a:18600"));

  // Bad values of the per-rank flags are named before anything starts.
  const std::string base = "-s " + sched("dp-pp-4.yaml") + " --rank 1 --nranks 4 --rendezvous 127.0.0.1:1 --if lo ";
  // --peer-if: malformed or naming no other rank, refused before the rendezvous.
  for (const auto& [arg, message] : std::vector<std::pair<std::string, std::string>>{
           {"two=eth2", "--peer-if 'two=eth2': want RANK=IFACE"},
           {"2=", "--peer-if '2=': want RANK=IFACE"},
           {"4=eth2", "--peer-if '4=eth2': no rank 4 to talk to (ranks 0..3, this rank 1)"},
           {"1=eth2", "--peer-if '1=eth2': no rank 1 to talk to"}}) {
    r = run(base + "--peer-if " + arg);
    CHECK(r.rc == 2);
    CHECK_THAT(r.out, Contains(message));
  }

  // Phase-control flags.
  r = run(base + "--controller 127.0.0.1:7100 --job j --phase-mode fast");
  CHECK(r.rc == 2);
  CHECK_THAT(r.out, Contains("--phase-mode 'fast': want on-demand or provisioning"));
  r = run(base + "--controller 127.0.0.1:0 --job j");
  CHECK(r.rc == 2);
  CHECK_THAT(r.out, Contains("--controller '127.0.0.1:0': port '0' is not 1..65535"));
  r = run(base + "--controller nohostport --job j");
  CHECK(r.rc == 2);
  CHECK_THAT(r.out, Contains("--controller 'nohostport': want HOST:PORT"));
  r = run(base + "--controller 127.0.0.1:7100");
  CHECK(r.rc == 2);
  CHECK_THAT(r.out, Contains("--controller needs --job NAME"));
  r = run(base + "--job j");
  CHECK(r.rc == 2);
  CHECK_THAT(r.out, Contains("--job needs --controller HOST:PORT"));
  r = run(base + "--controller 127.0.0.1:7100 --job j --phase-mode provisioning --profile-steps 0");
  CHECK(r.rc == 2);
  CHECK_THAT(r.out, Contains("--profile-steps 0: want at least 1"));
  r = run(base + "--controller 127.0.0.1:7100 --job j --phase-mode provisioning --phase-table /nonexistent.csv");
  CHECK(r.rc == 2);
  CHECK_THAT(r.out, Contains("--phase-table '/nonexistent.csv': no such file"));
  r = run(base + "--controller 127.0.0.1:7100 --job j --profile-steps 2");
  CHECK(r.rc == 2);
  CHECK_THAT(r.out, Contains("--profile-steps only applies with --phase-mode provisioning"));
  r = run(base + "--controller 127.0.0.1:7100 --job j --phase-mode provisioning --profile-steps 2 --phase-table x");
  CHECK(r.rc == 2);
  CHECK_THAT(r.out, Contains("--profile-steps and --phase-table exclude each other"));

  r = run("-s " + sched("dp-pp-4.yaml") + " --rank 0 --nranks 4 --rendezvous 127.0.0.1:1 --if lo --bogus");
  CHECK(r.rc == ocslab::kExitUsage);  // usage errors are 1 in every ocslab program (common/exit_code.h)
  CHECK_THAT(r.out, Contains("unknown option '--bogus'."));
  // A typo names the option it was meant to be (ocslab/common/suggest.h).
  r = run("-s " + sched("dp-pp-4.yaml") + " --rank 0 --nranks 4 --rendezvous 127.0.0.1:1 --if lo --qp-retyr 3");
  CHECK(r.rc == ocslab::kExitUsage);
  CHECK_THAT(r.out, Contains("ocslab-collbench-verbs: unknown option '--qp-retyr'. Did you mean '--qp-retry'?"));
  // --version prints the project's version, alone on stdout, whatever else is missing.
  r = run("--version");
  CHECK(r.rc == 0);
  CHECK(r.out == std::string("ocslab-collbench-verbs ") + OCSLAB_TEST_PROJECT_VERSION + "\n");
}

#ifdef OCSLAB_HAVE_NCCL
TEST_CASE("ocslab-collbench-nccl: help, bad input, and no GPU on this machine", "[workloads]") {
  const std::string nccl = "ocslab-collbench-nccl";
  Result h = run("--help", nccl);
  CHECK(h.rc == 0);
  CHECK_THAT(h.out, Contains("usage: ocslab-collbench-nccl") && Contains("--gpu") && Contains("mpirun -np 8"));
  Result v = run("--version", nccl);
  CHECK(v.rc == 0);
  CHECK(v.out == std::string("ocslab-collbench-nccl ") + OCSLAB_TEST_PROJECT_VERSION + "\n");

  CHECK_THAT(h.out, Contains("--minbytes") && Contains("-J out.json"));

  // The size sweep (no --schedule) drives one GPU per process.
  Result r = run("--rank 0 -b 8 -e 8M -f 2 -g 2", nccl);
  CHECK(r.rc == 2);
  CHECK_THAT(r.out, Contains("-g/--ngpus 2: ocslab-collbench-nccl drives one GPU per process"));
  // alltoallv has no sweep (its sizes are a matrix); --root only with broadcast.
  r = run("--rank 0 -b 8 -e 8M --collective alltoallv", nccl);
  CHECK(r.rc != 0);
  CHECK_THAT(r.out, Contains("--collective alltoallv: its per-pair sizes are a matrix"));
  r = run("--rank 0 -b 8 -e 8M --root 1", nccl);
  CHECK(r.rc != 0);
  CHECK_THAT(r.out, Contains("--root is for --collective broadcast"));

  r = run("-s " + sched("dp-pp-4.yaml") + " --rank 0 --nranks 8 --rendezvous x:1", nccl);
  CHECK(r.rc == 2);
  CHECK_THAT(r.out, Contains("dp-pp-4.yaml: the schedule has 4 ranks, this job 8"));

  r = run("-s " + sched("dp-pp-4.yaml") + " --rank 0 --nranks 4 --rendezvous x:1 --job j", nccl);
  CHECK(r.rc == 2);
  CHECK_THAT(r.out, Contains("--job needs --controller HOST:PORT"));
  r = run("-s " + sched("dp-pp-4.yaml") +
              " --rank 0 --nranks 4 --rendezvous x:1 --controller h:1 --job j "
              "--phase-mode sometimes",
          nccl);
  CHECK(r.rc == 2);
  CHECK_THAT(r.out, Contains("--phase-mode 'sometimes': want on-demand or provisioning"));

  // The launcher's environment names rank and world size.
  r = run("-s " + sched("dp-pp-4.yaml") + " --rendezvous x:1 --host gpu7", nccl,
          "OMPI_COMM_WORLD_RANK=5 OMPI_COMM_WORLD_SIZE=4");
  CHECK(r.rc == 2);
  CHECK_THAT(r.out, Contains("--rank 5 is outside 0..3"));

  // Whether a GPU is here is decided from the driver's device nodes, not from the binary under
  // test, so a crash or a wrong message cannot pass as "a GPU is visible".
  if (!nvidia_gpu_present()) {
    // The CUDA toolkit but no GPU: refused before the rendezvous (which would otherwise wait
    // up to --timeout-s for the other ranks).
    r = run("-s " + sched("dp-pp-4.yaml") + " --rank 1 --nranks 4 --rendezvous 127.0.0.1:1 --host gpu7 --timeout-s 600",
            nccl);
    INFO(r.out);
    CHECK(r.rc == 3);  // nothing asked for can run on this host (docs/exit-codes.md)
    CHECK_THAT(r.out, Contains("rank 1 on gpu7: no CUDA device visible"));
    // alltoall, alltoallv and broadcast (a schedule, alltoall_perf's and broadcast_perf's sweeps)
    // are accepted as far as this machine lets them go: the GPU check.
    for (const std::string& args : {"-s " + sched("moe-4.yaml") + " --rank 1 --nranks 4",
                                    std::string("-b 64 -e 1K --collective alltoall --rank 1 --nranks 4"),
                                    std::string("-b 64 -e 1K --collective broadcast --root 3 --rank 1 --nranks 4")}) {
      r = run(args + " --rendezvous 127.0.0.1:1 --host gpu7 --timeout-s 600", nccl);
      INFO(args << ": " << r.out);
      CHECK(r.rc == 3);
      CHECK_THAT(r.out, Contains("rank 1 on gpu7: no CUDA device visible"));
    }
  } else {
    // A GPU: the device check passes and the rank goes on to the rendezvous, where nobody
    // listens on port 1; it gives up after the short --timeout-s and names rank 0's address.
    r = run("-s " + sched("dp-pp-4.yaml") + " --rank 1 --nranks 4 --rendezvous 127.0.0.1:1 --host gpu7 --timeout-s 2",
            nccl);
    INFO(r.out);
    CHECK(r.rc == 4);  // a peer that cannot be reached (docs/exit-codes.md)
    CHECK_THAT(r.out, !Contains("no CUDA device visible"));
    CHECK_THAT(r.out, Contains("rendezvous: rank 1 could not reach rank 0 at 127.0.0.1:1 within 2000 ms"));
  }
}
#endif
