// ocslab-collbench-nccl: runs a collective schedule (docs/workloads.md) with NCCL on CUDA
// buffers, one process per GPU, and prints an nccl-tests-like table on rank 0.
#include <cuda_runtime.h>
#include <fmt/format.h>

#include <iostream>
#include <memory>

#include "nccl_backend.h"
#include "ocslab/common/error.h"
#include "ocslab/workloads/collbench_main.h"

namespace po = boost::program_options;
using namespace ocslab;
using namespace ocslab::workloads;

namespace {

constexpr const char* kUsage =
    R"(usage: ocslab-collbench-nccl --schedule FILE [--rank R] (--ranks H0,H1,... | --rendezvous HOST:PORT) [options]
       ocslab-collbench-nccl [-b MIN -e MAX -f FACTOR -n ITERS -w WARMUP -c CHECK -o OP -J FILE] [--rank R ...]

Runs every collective of the schedule's step with NCCL (ncclAllReduce / AllGather /
ReduceScatter in place, ncclSend/ncclRecv, float32 sum) on a buffer in GPU memory, one process
per GPU. NCCL unique ids (one communicator per schedule group) are handed out over a TCP
rendezvous with rank 0. Every result is copied back and checked against the exact expected
values. Rank 0 prints a table like nccl-tests'; with --output each rank writes
ops-rank<R>.csv and timeline-rank<R>.csv.

Rank and world size come from --rank/--nranks or from mpirun (OMPI_COMM_WORLD_*), Slurm
(SLURM_PROCID/NTASKS) or PMI; the GPU from --gpu, else the launcher's local rank.

Without --schedule it is nccl-tests' all_reduce_perf (or --collective allgather, reducescatter,
sendrecv): sizes -b..-e, -n timed iterations, -w warm-up, -c checked ones, reduction -o, the
nccl-tests table on rank 0 and with -J its JSON document; one GPU per process (-g 1).

Example (one node, 8 GPUs, Open MPI):
  mpirun -np 8 ocslab-collbench-nccl -s 3d-dp-pp-tp.yaml --rendezvous $(hostname):18600 --output out
  mpirun -np 8 ocslab-collbench-nccl -b 8 -e 8G -f 2 -n 20 -w 5 -c 1 -J out.json --rendezvous $(hostname):18600

With --controller HOST:PORT --job NAME the phase shim asks the job's phase controller
(`ocslab controller`) to wire the fabric for each op's group before it runs
(--phase-mode on-demand) or ahead of it (--phase-mode provisioning); the controller's token
comes from --controller-token-file FILE (mode 0600) or $OCSLAB_CONTROLLER_TOKEN, never argv;
see docs/workloads.md.

Exit codes (table below): 0 all results exact; 1 bad command line or a missing option; 2 bad
input or a CUDA/NCCL failure (the message says which); 3 no CUDA device on this host; 4 a
rendezvous peer cannot be reached or dropped the connection; 7 some result wrong.

)";

void add_nccl_options(po::options_description& desc) {
  desc.add_options()("gpu", po::value<int>(),
                     "CUDA device of this rank (default: the launcher's local rank, else rank modulo the GPU count)");
}

int run_nccl(const po::variables_map& vm, const Job& job) {
  const CommonOptions& o = job.options;
  if (vm.count("ngpus") && vm["ngpus"].as<int>() != 1) {
    throw Error(
        fmt::format("-g/--ngpus {}: ocslab-collbench-nccl drives one GPU per process (-g 1); start one rank "
                    "per GPU (mpirun -np N, --gpu)",
                    vm["ngpus"].as<int>()));
  }
  // Before the rendezvous: a rank without its GPU fails at once instead of holding the others.
  int count = 0;
  cudaError_t ce = cudaGetDeviceCount(&count);
  if (ce != cudaSuccess || count == 0) {
    throw CannotRunHere(fmt::format("rank {} on {}: no CUDA device visible ({})", o.rank, o.host,
                            ce != cudaSuccess ? cudaGetErrorString(ce) : "0 devices"));
  }
  int gpu = vm.count("gpu") ? vm["gpu"].as<int>() : launcher_local_rank();
  if (gpu < 0) gpu = o.rank % count;
  if (gpu >= count) {
    throw Error(
        fmt::format("rank {} on {}: GPU {} does not exist ({} visible; one rank per GPU)", o.rank, o.host, gpu, count));
  }
  return run_job(job, "nccl",
                 [&](Rendezvous& rv) { return std::make_unique<NcclBackend>(job.schedule, o.rank, gpu, rv); });
}

}  // namespace

int main(int argc, char** argv) {
  return collbench_main(
      argc, argv, {.name = "ocslab-collbench-nccl", .usage = kUsage, .add_options = add_nccl_options, .run = run_nccl});
}
