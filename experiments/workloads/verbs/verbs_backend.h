// ibverbs RC transport of ocslab-collbench-verbs: one RC queue pair per (peer, interface) this
// rank talks to (ring neighbours in each group, sendrecv partners, every member of an alltoall
// group), SEND/RECV of float32 chunks in host memory, ring algorithms for the collectives,
// pairwise exchange for alltoall / alltoallv, a pipelined ring for broadcast. Queue-pair numbers
// and GIDs travel over the TCP rendezvous; the data only over the RDMA device of the chosen
// interface.
#pragma once

#include <infiniband/verbs.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "ocslab/workloads/collbench.h"

namespace ocslab::workloads {

struct VerbsOptions {
  std::string interface;                           // netdev of the RoCE port ("eth1"): device + RoCE v2 GID
  std::map<std::string, std::string> group_iface;  // group name -> interface (default: interface)
  // peer rank -> the interface whose device this rank's queue pairs with that peer use (a host
  // with several NICs, each circuit to one neighbour: TopoOpt). The pair keeps the group's
  // interface name as its key, so both sides still match it; only the device and GID change.
  std::map<int, std::string> peer_iface;
  int port = 1;
  uint8_t timeout = 14;  // local ACK timeout 4.096 us * 2^timeout
  uint8_t retry_cnt = 7;
  std::chrono::milliseconds op_timeout{120000};  // no completion for this long: the op fails
  uint64_t max_msg_bytes = 0;  // > 0: split messages above this (default: the port's max_msg_sz, at most 1 GiB)
};

class VerbsBackend : public Backend {
 public:
  // Opens the devices, creates the queue pairs, exchanges them over rv and connects them.
  VerbsBackend(const Schedule& s, int rank, const VerbsOptions& o, Rendezvous& rv);
  ~VerbsBackend() override;

  void prepare(const Op& op, uint64_t seq) override;
  void run(const Op& op) override;
  uint64_t verify(const Op& op, uint64_t seq) override;

  // "rxe_eth1 (eth1, GID index 1, 10.30.0.1), 2 queue pair(s)" for the log.
  std::string describe() const override;

 private:
  struct Device;
  struct Conn;
  Device& device_for(const std::string& iface);
  Conn& conn(int peer, const std::string& iface, const Op& op);
  const std::string& iface_of(const Group& g) const;
  // One ring step: recv `recv_count` floats into recv_to from left while sending
  // `send_count` floats at send_from to right, in segments of at most the device's message
  // size; waits for both.
  void exchange(const Op& op, Conn* to, const float* send_from, uint64_t send_count, Conn* from, float* recv_to,
                uint64_t recv_count);
  // One message each way (either may be absent), both completions awaited.
  void post_and_wait(const Op& op, Conn* to, const float* send_from, uint64_t send_count, Conn* from, float* recv_to,
                     uint64_t recv_count);
  void ring_reduce_scatter(const Op& op, float* buf, uint64_t total, int n, int me, Conn& left, Conn& right);
  void ring_all_gather(const Op& op, float* buf, uint64_t total, int n, int me, Conn& left, Conn& right);
  // AllToAll(v): the own block copied locally, then n - 1 pairwise steps.
  void pairwise_alltoall(const Op& op, float* buf, int n, int me);
  // Broadcast: the root's buffer in kBroadcastChunks chunks along the ring, pipelined.
  void ring_broadcast(const Op& op, float* buf, uint64_t total, int n, int me, Conn& left, Conn& right);
  std::string op_where(const Op& op) const;

  const Schedule& s_;
  int rank_;
  VerbsOptions o_;
  std::vector<float> data_, scratch_;
  std::vector<std::unique_ptr<Device>> devices_;
  std::map<std::pair<int, std::string>, std::unique_ptr<Conn>> conns_;
};

}  // namespace ocslab::workloads
