// ocslab-collbench-nccl: runs a collective schedule (docs/workloads.md) with NCCL on CUDA
// buffers, one process per GPU, and prints an nccl-tests-like table on rank 0.
#include <cuda_runtime.h>
#include <fmt/format.h>

#include <iostream>
#include <memory>

#include "nccl_backend.h"
#include "ocslab/common/error.h"
#include "ocslab/workloads/collbench.h"
#include "ocslab/workloads/shim_hooks.h"

namespace po = boost::program_options;
using namespace ocslab;
using namespace ocslab::workloads;

namespace {

constexpr const char* kUsage =
    R"(usage: ocslab-collbench-nccl --schedule FILE [--rank R] (--ranks H0,H1,... | --rendezvous HOST:PORT) [options]

Runs every collective of the schedule's step with NCCL (ncclAllReduce / AllGather /
ReduceScatter in place, ncclSend/ncclRecv, float32 sum) on a buffer in GPU memory, one process
per GPU. NCCL unique ids (one communicator per schedule group) are handed out over a TCP
rendezvous with rank 0. Every result is copied back and checked against the exact expected
values. Rank 0 prints a table like nccl-tests'; with --output each rank writes
ops-rank<R>.csv and timeline-rank<R>.csv.

Rank and world size come from --rank/--nranks or from mpirun (OMPI_COMM_WORLD_*), Slurm
(SLURM_PROCID/NTASKS) or PMI; the GPU from --gpu, else the launcher's local rank.

Example (one node, 8 GPUs, Open MPI):
  mpirun -np 8 ocslab-collbench-nccl -s 3d-dp-pp-tp.yaml --rendezvous $(hostname):18600 -o out

With --controller HOST:PORT --job NAME the phase shim asks the job's phase controller
(`ocslab controller`) to wire the fabric for each op's group before it runs
(--phase-mode on-demand) or ahead of it (--phase-mode provisioning); see docs/workloads.md.

Exit status: 0 all results exact; 1 some result wrong; 2 bad input or a CUDA/NCCL failure.

)";

}  // namespace

int main(int argc, char** argv) {
  po::options_description desc("options");
  add_common_options(desc);
  add_phase_options(desc);
  desc.add_options()("gpu", po::value<int>(),
                     "CUDA device of this rank (default: the launcher's local rank, else rank modulo the GPU count)")(
      "help,h", "this help");
  po::variables_map vm;
  try {
    po::store(po::parse_command_line(argc, argv, desc), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    std::cerr << "ocslab-collbench-nccl: " << e.what() << "\n\n" << kUsage << desc;
    return 2;
  }
  if (vm.count("help")) {
    std::cout << kUsage << desc;
    return 0;
  }
  try {
    CommonOptions o = common_options(vm);
    Schedule s = load_schedule(o.schedule_path);
    if (o.steps >= 1) s.steps = o.steps;
    if (o.warmup >= 0) s.warmup = o.warmup;
    if (o.nranks < 0) o.nranks = s.ranks;
    if (o.nranks != s.ranks) {
      throw Error(fmt::format("{}: the schedule has {} ranks, this job {} (--nranks/--ranks/launcher)", s.origin,
                              s.ranks, o.nranks));
    }
    if (o.rank >= o.nranks) throw Error(fmt::format("--rank {} is outside 0..{}", o.rank, o.nranks - 1));
    if (o.rendezvous.empty() && o.nranks > 1) throw Error("missing --ranks or --rendezvous HOST:PORT");
    // Flag errors before anything starts; the shim joins after the rendezvous (every rank is up).
    auto phase = phase_options(vm, o.rank, o.nranks, o.host, o.timeout);
    // Before the rendezvous: a rank without its GPU fails at once instead of holding the others.
    int count = 0;
    cudaError_t ce = cudaGetDeviceCount(&count);
    if (ce != cudaSuccess || count == 0) {
      throw Error(fmt::format("rank {} on {}: no CUDA device visible ({})", o.rank, o.host,
                              ce != cudaSuccess ? cudaGetErrorString(ce) : "0 devices"));
    }
    int gpu = vm.count("gpu") ? vm["gpu"].as<int>() : launcher_local_rank();
    if (gpu < 0) gpu = o.rank % count;
    if (gpu >= count) {
      throw Error(fmt::format("rank {} on {}: GPU {} does not exist ({} visible; one rank per GPU)", o.rank, o.host,
                              gpu, count));
    }
    Rendezvous rv(o.rank, o.nranks, o.rendezvous.empty() ? "localhost:1" : o.rendezvous, rendezvous_tag(s, "nccl"),
                  o.timeout);
    // Without --controller the fabric is never reconfigured (no-op hooks). A refused join
    // (group size disagreement, unknown dimension) throws PhaseError naming rank and group: exit 2.
    std::unique_ptr<PhaseHooks> hooks =
        phase ? std::make_unique<ShimHooks>(s, o.rank, *phase) : std::make_unique<PhaseHooks>();
    NcclBackend backend(s, o.rank, gpu, rv);
    std::cerr << fmt::format("rank {} on {}: {}\n", o.rank, o.host, backend.describe());
    int rc = run_and_report(s, o, "nccl", backend, *hooks, rv);
    // The shim's own record (requests, ACK waits, provisioning, fallbacks) next to the rows.
    if (auto* sh = dynamic_cast<ShimHooks*>(hooks.get()); sh && !o.output.empty()) {
      sh->shim().write_csv(fmt::format("{}/shim-rank{}.csv", o.output, o.rank));
      if (sh->shim().provisioning_active()) {
        sh->shim().phase_table().save(fmt::format("{}/phase-table-rank{}.csv", o.output, o.rank));
      }
    }
    return rc;
  } catch (const Error& e) {
    std::cerr << "ocslab-collbench-nccl: " << e.what() << "\n";
    return 2;
  }
}
