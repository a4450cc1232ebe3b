// Bootstrap of a multi-process workload over TCP: rank 0 listens, every other rank connects
// (retrying until rank 0 is up), and small blobs (queue-pair numbers, an NCCL unique id, the
// measured records) are all-gathered through rank 0. Never carries collective data.
#pragma once

#include <chrono>
#include <string>
#include <vector>

namespace ocslab::workloads {

class Rendezvous {
 public:
  // address "HOST:PORT" of rank 0 (rank 0 binds PORT on all addresses). `tag` (the schedule's
  // name and size) must agree on every rank: a rank started with another schedule or world
  // size is refused with a message naming it. Throws ocslab::Error naming the address / rank
  // on failure or after `timeout`.
  Rendezvous(int rank, int nranks, const std::string& address, const std::string& tag,
             std::chrono::milliseconds timeout);
  ~Rendezvous();
  Rendezvous(const Rendezvous&) = delete;
  Rendezvous& operator=(const Rendezvous&) = delete;

  int rank() const { return rank_; }
  int nranks() const { return nranks_; }

  // Every rank passes its blob; every rank gets all blobs, indexed by rank.
  std::vector<std::string> all_gather(const std::string& blob);
  void barrier() { all_gather({}); }

 private:
  int rank_, nranks_;
  std::string address_;
  std::chrono::milliseconds timeout_;
  int listen_fd_ = -1;
  std::vector<int> peers_;  // rank 0: fd per rank (index 0 unused); others: [0] = rank 0
};

// Splits "HOST:PORT" ("[v6]:PORT" too); throws ocslab::Error naming the text.
std::pair<std::string, int> split_host_port(const std::string& address);

}  // namespace ocslab::workloads
