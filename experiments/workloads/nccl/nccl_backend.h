// NCCL transport of ocslab-collbench-nccl: one communicator per schedule group this rank is in
// (unique ids created by each group's first member and shared over the TCP rendezvous), the
// op's buffer in GPU memory, ncclAllReduce / AllGather / ReduceScatter / Broadcast in place,
// Send/Recv (and alltoall / alltoallv as one Send and Recv per member) in a ncclGroupStart/End,
// results copied back to the host and verified there.
#pragma once

#include <cuda_runtime.h>
#include <nccl.h>

#include <chrono>
#include <map>
#include <string>
#include <vector>

#include "ocslab/workloads/collbench.h"

namespace ocslab::workloads {

class NcclBackend : public Backend {
 public:
  NcclBackend(const Schedule& s, int rank, int device, Rendezvous& rv);
  ~NcclBackend() override;
  NcclBackend(const NcclBackend&) = delete;
  NcclBackend& operator=(const NcclBackend&) = delete;

  void prepare(const Op& op, uint64_t seq) override;
  void run(const Op& op) override;
  uint64_t verify(const Op& op, uint64_t seq) override;
  // Modelled compute on the GPU: one thread spinning on %globaltimer for d on the op's stream,
  // waited for, so the op's timing starts when the device finished computing.
  void compute(const Op& op, std::chrono::nanoseconds d) override;

  // "GPU 0 (NVIDIA H100 80GB HBM3, bus 0000:18:00.0), NCCL 2.28.3, 3 communicator(s)".
  std::string describe() const override;

 private:
  std::string op_where(const Op& op) const;
  void setup(Rendezvous& rv);
  void release();
  const Schedule& s_;
  int rank_;
  int device_;
  cudaStream_t stream_ = nullptr;
  float* dev_ = nullptr;
  std::vector<float> host_;
  std::map<size_t, ncclComm_t> comms_;  // group index -> communicator
  cudaLibrary_t spin_lib_ = nullptr;    // the compute kernel, loaded when the schedule models compute
  cudaKernel_t spin_ = nullptr;
};

}  // namespace ocslab::workloads
