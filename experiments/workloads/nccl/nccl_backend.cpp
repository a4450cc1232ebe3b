#include "nccl_backend.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "ocslab/common/error.h"
#include "ocslab/workloads/ring.h"

namespace ocslab::workloads {

namespace {

void cuda_check(cudaError_t e, const std::string& what) {
  if (e != cudaSuccess)
    throw Error(fmt::format("{}: CUDA error {}: {}", what, cudaGetErrorName(e), cudaGetErrorString(e)));
}

void nccl_check(ncclResult_t r, const std::string& what, ncclComm_t comm = nullptr) {
  if (r == ncclSuccess) return;
  std::string last = comm ? ncclGetLastError(comm) : ncclGetLastError(nullptr);
  throw Error(fmt::format("{}: NCCL error {} ({}){}{}", what, static_cast<int>(r), ncclGetErrorString(r),
                          last.empty() ? "" : ": ", last));
}

// The modelled-compute kernel in PTX, JIT-compiled by the driver at load (cudaLibraryLoadData):
// no nvcc in the build, and PTX for sm_70 runs on every later GPU. One thread reads the global
// nanosecond timer and spins until ns have passed.
constexpr const char* kSpinPtx = R"(.version 6.0
.target sm_70
.address_size 64

.visible .entry ocslab_compute_spin(.param .u64 ns)
{
  .reg .pred %p;
  .reg .b64 %rd<4>;
  ld.param.u64 %rd0, [ns];
  mov.u64 %rd1, %globaltimer;
  add.u64 %rd2, %rd1, %rd0;
SPIN:
  mov.u64 %rd3, %globaltimer;
  setp.lt.u64 %p, %rd3, %rd2;
  @%p bra SPIN;
  ret;
}
)";

}  // namespace

NcclBackend::NcclBackend(const Schedule& s, int rank, int device, Rendezvous& rv)
    : s_(s), rank_(rank), device_(device) {
  try {
    setup(rv);
  } catch (...) {
    release();  // the destructor does not run for a constructor that throws
    throw;
  }
}

void NcclBackend::setup(Rendezvous& rv) {
  const Schedule& s = s_;
  int rank = rank_, device = device_;
  int count = 0;
  cuda_check(cudaGetDeviceCount(&count), fmt::format("rank {}: cudaGetDeviceCount", rank));
  if (device < 0 || device >= count) {
    throw Error(
        fmt::format("rank {}: GPU {} does not exist ({} GPU(s) visible; one rank per GPU: --gpu or the "
                    "launcher's local rank)",
                    rank, device, count));
  }
  cuda_check(cudaSetDevice(device), fmt::format("rank {}: cudaSetDevice({})", rank, device));
  cuda_check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
  uint64_t floats = std::max<uint64_t>(s.max_buffer_bytes() / sizeof(float), 1);
  host_.assign(floats, 0.0f);
  cuda_check(cudaMalloc(reinterpret_cast<void**>(&dev_), floats * sizeof(float)),
             fmt::format("rank {}: cudaMalloc of {} bytes on GPU {}", rank, floats * sizeof(float), device));

  // The first member of each group makes its unique id; one all-gather hands them out.
  std::string mine;
  for (size_t g = 0; g < s.groups.size(); ++g) {
    if (s.groups[g].ranks.front() != rank) continue;
    ncclUniqueId id;
    nccl_check(ncclGetUniqueId(&id), "ncclGetUniqueId");
    uint32_t gi = static_cast<uint32_t>(g);
    mine.append(reinterpret_cast<const char*>(&gi), sizeof(gi));
    mine.append(reinterpret_cast<const char*>(&id), sizeof(id));
  }
  auto all = rv.all_gather(mine);
  std::map<size_t, ncclUniqueId> ids;
  for (const auto& blob : all) {
    constexpr size_t kEntry = sizeof(uint32_t) + sizeof(ncclUniqueId);
    if (blob.size() % kEntry != 0) throw Error("rendezvous: malformed NCCL unique-id announcement");
    for (size_t off = 0; off < blob.size(); off += kEntry) {
      uint32_t gi = 0;
      ncclUniqueId id;
      std::memcpy(&gi, blob.data() + off, sizeof(gi));
      std::memcpy(&id, blob.data() + off + sizeof(gi), sizeof(id));
      if (gi >= s.groups.size()) throw Error("rendezvous: unique id for an unknown group index");
      ids[gi] = id;
    }
  }
  // All of this rank's communicators in one group call: NCCL pairs them up whatever order the
  // other ranks reach theirs in.
  nccl_check(ncclGroupStart(), "ncclGroupStart");
  for (size_t g = 0; g < s.groups.size(); ++g) {
    int idx = s.groups[g].index_of(rank);
    if (idx < 0) continue;
    if (!ids.count(g)) throw Error(fmt::format("rendezvous: no NCCL unique id for group '{}'", s.groups[g].name));
    ncclComm_t comm = nullptr;
    nccl_check(ncclCommInitRank(&comm, static_cast<int>(s.groups[g].ranks.size()), ids[g], idx),
               fmt::format("rank {}: ncclCommInitRank for group '{}'", rank, s.groups[g].name));
    comms_[g] = comm;
  }
  nccl_check(ncclGroupEnd(), fmt::format("rank {}: creating the NCCL communicators", rank));

  // Loaded (and JIT-compiled) here, not at the first compute, which would then take longer.
  if (s.has_compute()) {
    cuda_check(cudaLibraryLoadData(&spin_lib_, kSpinPtx, nullptr, nullptr, 0, nullptr, nullptr, 0),
               fmt::format("rank {}: loading the compute kernel on GPU {}", rank, device));
    cuda_check(cudaLibraryGetKernel(&spin_, spin_lib_, "ocslab_compute_spin"),
               fmt::format("rank {}: the compute kernel", rank));
  }
}

NcclBackend::~NcclBackend() { release(); }

void NcclBackend::release() {
  for (auto& [g, comm] : comms_) ncclCommDestroy(comm);
  comms_.clear();
  if (dev_) cudaFree(dev_);
  dev_ = nullptr;
  if (stream_) cudaStreamDestroy(stream_);
  stream_ = nullptr;
  if (spin_lib_) cudaLibraryUnload(spin_lib_);
  spin_lib_ = nullptr;
  spin_ = nullptr;
}

std::string NcclBackend::describe() const {
  cudaDeviceProp p{};
  cudaGetDeviceProperties(&p, device_);
  char bus[32] = {0};
  cudaDeviceGetPCIBusId(bus, sizeof(bus), device_);
  int v = 0;
  ncclGetVersion(&v);
  return fmt::format("GPU {} ({}, bus {}), NCCL {}.{}.{}, {} communicator(s)", device_, p.name, bus, v / 10000,
                     (v / 100) % 100, v % 100, comms_.size());
}

std::string NcclBackend::op_where(const Op& op) const {
  return fmt::format("rank {}: {} on group '{}' ({}:{})", rank_, op_name(op.type), s_.group_of(op).name, s_.origin,
                     op.line);
}

namespace {
// ncclAvg is NCCL 2.10's; the build requires a newer one.
ncclRedOp_t nccl_redop(RedOp r) {
  switch (r) {
    case RedOp::kSum:
      return ncclSum;
    case RedOp::kProd:
      return ncclProd;
    case RedOp::kMax:
      return ncclMax;
    case RedOp::kMin:
      return ncclMin;
    case RedOp::kAvg:
      return ncclAvg;
  }
  return ncclSum;
}
}  // namespace

void NcclBackend::prepare(const Op& op, uint64_t seq) {
  if (op.type == OpType::kBarrier) return;
  fill_input(s_, op, rank_, seq, host_.data());
  // alltoall / alltoallv: the send and the receive buffer (buffer_floats), the others op.bytes.
  cuda_check(cudaMemcpy(dev_, host_.data(), buffer_floats(op) * sizeof(float), cudaMemcpyHostToDevice),
             op_where(op) + ": copy to the GPU");
}

void NcclBackend::run(const Op& op) {
  const Group& g = s_.group_of(op);
  ncclComm_t comm = comms_.at(op.group);
  int n = static_cast<int>(g.ranks.size());
  int me = g.index_of(rank_);
  size_t total = buffer_floats(op);
  std::string where = op_where(op);
  switch (op.type) {
    case OpType::kAllReduce:
      nccl_check(ncclAllReduce(dev_, dev_, total, ncclFloat, nccl_redop(op.redop), comm, stream_), where, comm);
      break;
    case OpType::kAllGather: {
      size_t per = total / static_cast<size_t>(n);  // the schedule guarantees an exact split
      nccl_check(ncclAllGather(dev_ + static_cast<size_t>(me) * per, dev_, per, ncclFloat, comm, stream_), where, comm);
      break;
    }
    case OpType::kReduceScatter: {
      size_t per = total / static_cast<size_t>(n);
      nccl_check(ncclReduceScatter(dev_, dev_ + static_cast<size_t>(me) * per, per, ncclFloat, nccl_redop(op.redop),
                                   comm, stream_),
                 where, comm);
      break;
    }
    case OpType::kSendRecv: {
      nccl_check(ncclGroupStart(), where);
      if (rank_ == op.src) {
        nccl_check(ncclSend(dev_, total, ncclFloat, g.index_of(op.dst), comm, stream_), where, comm);
      } else {
        nccl_check(ncclRecv(dev_, total, ncclFloat, g.index_of(op.src), comm, stream_), where, comm);
      }
      nccl_check(ncclGroupEnd(), where, comm);
      break;
    }
    case OpType::kAllToAll:
    case OpType::kAllToAllV: {
      // As nccl-tests' alltoall: one ncclSend and one ncclRecv per member (itself included) in a
      // group, from the send blocks into the receive blocks after them (ring.h's layout).
      AllToAllLayout l = alltoall_layout(op, n, me);
      nccl_check(ncclGroupStart(), where);
      for (int j = 0; j < n; ++j) {
        Chunk snd = l.send[static_cast<size_t>(j)], rcv = l.recv[static_cast<size_t>(j)];
        nccl_check(ncclSend(dev_ + snd.offset, snd.count, ncclFloat, j, comm, stream_), where, comm);
        nccl_check(ncclRecv(dev_ + rcv.offset, rcv.count, ncclFloat, j, comm, stream_), where, comm);
      }
      nccl_check(ncclGroupEnd(), where, comm);
      break;
    }
    case OpType::kBroadcast:
      // In place: the root's buffer is the send buffer, every member's the receive buffer.
      nccl_check(ncclBroadcast(dev_, dev_, total, ncclFloat, g.index_of(op.root), comm, stream_), where, comm);
      break;
    case OpType::kBarrier:
      // An allreduce of one float: nobody's stream gets past it before every member's did.
      nccl_check(ncclAllReduce(dev_, dev_, 1, ncclFloat, ncclSum, comm, stream_), where, comm);
      break;
  }
  cuda_check(cudaStreamSynchronize(stream_), where);
}

void NcclBackend::compute(const Op& op, std::chrono::nanoseconds d) {
  if (d.count() <= 0) return;
  if (!spin_) throw Error(op_where(op) + ": compute requested but the compute kernel is not loaded");
  auto ns = static_cast<uint64_t>(d.count());
  void* args[] = {&ns};
  std::string where = op_where(op) + ": modelled compute";
  // A cudaKernel_t is launched through cudaLaunchKernel as its function pointer (CUDA 12+).
  cuda_check(cudaLaunchKernel(reinterpret_cast<const void*>(spin_), dim3(1), dim3(1), args, 0, stream_), where);
  cuda_check(cudaStreamSynchronize(stream_), where);
}

uint64_t NcclBackend::verify(const Op& op, uint64_t seq) {
  if (op.type == OpType::kBarrier) return 0;
  cuda_check(cudaMemcpy(host_.data(), dev_, buffer_floats(op) * sizeof(float), cudaMemcpyDeviceToHost),
             op_where(op) + ": copy from the GPU");
  return count_wrong(s_, op, rank_, seq, host_.data());
}

}  // namespace ocslab::workloads
