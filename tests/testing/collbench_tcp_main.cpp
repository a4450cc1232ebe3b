// collbench-tcp: the collective workloads' program (same schedule, step loop, phase hooks, rows
// and table as ocslab-collbench-verbs) over plain TCP between the ranks, for tests on machines
// without an RDMA device: the runner's phase-workload integration test starts it over SSH on
// loopback. Each op's members exchange their whole inputs over a full mesh of TCP connections
// and reduce locally, so every result is real data from the peers, verified as the real
// programs verify theirs. The schedule's compute_ms (docs/workloads.md "Modelled compute") is
// spent on the host by the shared step loop (Backend::compute's default) and recorded in the
// rows; the older --compute-ms sleeps before every collective inside prepare (not recorded),
// and adds to the schedule's.
#include <arpa/inet.h>
#include <fmt/format.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>
#include <algorithm>

#include <cstring>
#include <iostream>
#include <memory>
#include <thread>

#include "ocslab/common/error.h"
#include "ocslab/workloads/collbench.h"
#include "ocslab/workloads/collbench_main.h"
#include "ocslab/workloads/ring.h"
#include "ocslab/workloads/shim_hooks.h"

namespace po = boost::program_options;
using namespace ocslab;
using namespace ocslab::workloads;

namespace {

void send_all(int fd, const void* p, size_t n, int peer) {
  const char* c = static_cast<const char*>(p);
  while (n > 0) {
    ssize_t k = ::send(fd, c, n, MSG_NOSIGNAL);
    if (k <= 0) throw Error(fmt::format("send to rank {}: {}", peer, k == 0 ? "closed" : std::strerror(errno)));
    c += k;
    n -= static_cast<size_t>(k);
  }
}

void recv_all(int fd, void* p, size_t n, int peer) {
  char* c = static_cast<char*>(p);
  while (n > 0) {
    ssize_t k = ::recv(fd, c, n, 0);
    if (k <= 0)
      throw Error(fmt::format("receive from rank {}: {}", peer, k == 0 ? "connection closed" : std::strerror(errno)));
    c += k;
    n -= static_cast<size_t>(k);
  }
}

class TcpBackend : public Backend {
 public:
  TcpBackend(const Schedule& s, int rank, Rendezvous& rv, const std::string& bind_host, int compute_ms)
      : s_(s), rank_(rank), compute_ms_(compute_ms), fds_(static_cast<size_t>(s.ranks), -1) {
    int lfd = ::socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    ::setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = 0;
    ::inet_pton(AF_INET, bind_host.c_str(), &a.sin_addr);
    if (::bind(lfd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(lfd, s.ranks) != 0) {
      throw Error(fmt::format("rank {}: cannot listen on {}: {}", rank, bind_host, std::strerror(errno)));
    }
    socklen_t len = sizeof a;
    ::getsockname(lfd, reinterpret_cast<sockaddr*>(&a), &len);
    auto addrs = rv.all_gather(fmt::format("{}:{}", bind_host, ntohs(a.sin_port)));
    // Connect to every higher rank (they accept below), accept every lower one.
    for (int p = rank + 1; p < s.ranks; ++p) {
      auto [h, port] = split_host_port(addrs[static_cast<size_t>(p)]);
      int fd = ::socket(AF_INET, SOCK_STREAM, 0);
      sockaddr_in pa{};
      pa.sin_family = AF_INET;
      pa.sin_port = htons(static_cast<uint16_t>(port));
      ::inet_pton(AF_INET, h.c_str(), &pa.sin_addr);
      if (::connect(fd, reinterpret_cast<sockaddr*>(&pa), sizeof pa) != 0) {
        throw Error(fmt::format("rank {}: cannot connect to rank {} at {}: {}", rank, p, addrs[static_cast<size_t>(p)],
                                std::strerror(errno)));
      }
      ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      int32_t me = rank;
      send_all(fd, &me, sizeof me, p);
      fds_[static_cast<size_t>(p)] = fd;
    }
    for (int k = 0; k < rank; ++k) {
      int fd = ::accept(lfd, nullptr, nullptr);
      if (fd < 0) throw Error(fmt::format("rank {}: accept: {}", rank, std::strerror(errno)));
      ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      int32_t who = -1;
      recv_all(fd, &who, sizeof who, -1);
      if (who < 0 || who >= rank || fds_[static_cast<size_t>(who)] >= 0)
        throw Error(fmt::format("rank {}: unexpected peer {}", rank, who));
      fds_[static_cast<size_t>(who)] = fd;
    }
    ::close(lfd);
  }
  ~TcpBackend() override {
    for (int fd : fds_) {
      if (fd >= 0) ::close(fd);
    }
  }

  void prepare(const Op& op, uint64_t seq) override {
    // load-safe: models a rank's compute (--compute-ms), a workload parameter, not a wait for an event.
    if (compute_ms_ > 0) std::this_thread::sleep_for(std::chrono::milliseconds(compute_ms_));  // kept: models compute
    seq_ = seq;
    buf_.assign(buffer_floats(op), 0.0f);
    fill_input(s_, op, rank_, seq, buf_.data());
  }

  void run(const Op& op) override {
    const Group& g = s_.group_of(op);
    std::vector<int> senders, receivers;
    if (op.type == OpType::kSendRecv) {
      senders = {op.src};
      receivers = {op.dst};
    } else if (op.type == OpType::kBroadcast) {
      senders = {op.root};
      receivers = g.ranks;
    } else {
      senders = receivers = g.ranks;
    }
    const bool i_send = std::find(senders.begin(), senders.end(), rank_) != senders.end();
    const bool i_recv = std::find(receivers.begin(), receivers.end(), rank_) != receivers.end();
    // Send while receiving: both sides of a pair send at once and a payload may exceed the
    // socket buffers.
    std::string send_error;
    std::thread sender([&] {
      if (!i_send) return;
      try {
        for (int p : receivers) {
          if (p == rank_) continue;
          uint64_t hdr[2] = {seq_, buf_.size()};
          send_all(fds_[static_cast<size_t>(p)], hdr, sizeof hdr, p);
          send_all(fds_[static_cast<size_t>(p)], buf_.data(), buf_.size() * sizeof(float), p);
        }
      } catch (const std::exception& e) {
        send_error = e.what();
      }
    });
    std::vector<std::vector<float>> in(static_cast<size_t>(s_.ranks));
    std::string recv_error;
    if (i_recv) {
      try {
        for (int p : senders) {
          if (p == rank_) continue;
          uint64_t hdr[2] = {0, 0};
          recv_all(fds_[static_cast<size_t>(p)], hdr, sizeof hdr, p);
          if (hdr[0] != seq_ || hdr[1] != buf_.size()) {
            throw Error(fmt::format("rank {}: rank {} sent op seq {} ({} floats), expected seq {} ({})", rank_, p,
                                    hdr[0], hdr[1], seq_, buf_.size()));
          }
          auto& v = in[static_cast<size_t>(p)];
          v.resize(buf_.size());
          recv_all(fds_[static_cast<size_t>(p)], v.data(), v.size() * sizeof(float), p);
        }
      } catch (const std::exception& e) {
        recv_error = e.what();
      }
    }
    sender.join();
    if (!send_error.empty()) throw Error(send_error);
    if (!recv_error.empty()) throw Error(recv_error);
    in[static_cast<size_t>(rank_)] = buf_;
    const uint64_t n = buf_.size();
    const int size = static_cast<int>(g.ranks.size());
    switch (op.type) {
      case OpType::kAllReduce:
      case OpType::kReduceScatter: {
        Chunk c = op.type == OpType::kAllReduce ? Chunk{0, n} : ring_chunk(n, size, g.index_of(rank_));
        // Members in group order, as the expected values are computed.
        std::vector<float> acc(
            in[static_cast<size_t>(g.ranks.front())].begin() + static_cast<int64_t>(c.offset),
            in[static_cast<size_t>(g.ranks.front())].begin() + static_cast<int64_t>(c.offset + c.count));
        for (size_t m = 1; m < g.ranks.size(); ++m) {
          reduce_into(op.redop, acc.data(), in[static_cast<size_t>(g.ranks[m])].data() + c.offset, c.count);
        }
        finish_reduction(op.redop, acc.data(), c.count, size);
        std::copy(acc.begin(), acc.end(), buf_.begin() + static_cast<int64_t>(c.offset));
        break;
      }
      case OpType::kAllGather:
        for (int k = 0; k < size; ++k) {
          Chunk c = ring_chunk(n, size, k);
          const auto& src = in[static_cast<size_t>(g.ranks[static_cast<size_t>(k)])];
          std::copy(src.begin() + static_cast<int64_t>(c.offset),
                    src.begin() + static_cast<int64_t>(c.offset + c.count),
                    buf_.begin() + static_cast<int64_t>(c.offset));
        }
        break;
      case OpType::kSendRecv:
        if (rank_ == op.dst) buf_ = in[static_cast<size_t>(op.src)];
        break;
      case OpType::kBroadcast:
        buf_ = in[static_cast<size_t>(op.root)];
        break;
      case OpType::kAllToAll:
      case OpType::kAllToAllV: {
        // Member k's block for this one, from where k keeps it, into this one's receive block k.
        const int me = g.index_of(rank_);
        AllToAllLayout mine = alltoall_layout(op, size, me);
        for (int k = 0; k < size; ++k) {
          Chunk from = alltoall_layout(op, size, k).send[static_cast<size_t>(me)];
          const auto& src = in[static_cast<size_t>(g.ranks[static_cast<size_t>(k)])];
          std::copy(src.begin() + static_cast<int64_t>(from.offset),
                    src.begin() + static_cast<int64_t>(from.offset + from.count),
                    buf_.begin() + static_cast<int64_t>(mine.recv[static_cast<size_t>(k)].offset));
        }
        break;
      }
      case OpType::kBarrier:
        break;
    }
  }

  uint64_t verify(const Op& op, uint64_t seq) override { return count_wrong(s_, op, rank_, seq, buf_.data()); }

  std::string describe() const override { return fmt::format("TCP full mesh, {} peer(s)", fds_.size() - 1); }

 private:
  const Schedule& s_;
  int rank_;
  int compute_ms_;
  std::vector<int> fds_;  // by peer rank
  std::vector<float> buf_;
  uint64_t seq_ = 0;
};

constexpr const char* kUsage =
    R"(usage: collbench-tcp (--schedule FILE | nccl-tests' size sweep options) --rank R (--ranks H0,H1,... | --rendezvous HOST:PORT) [options]

The collective workloads' driver (the same command line, step loop, size sweep, rows and table
as ocslab-collbench-verbs) over plain TCP between the ranks, for tests without an RDMA device.

)";

void add_tcp_options(po::options_description& desc) {
  desc.add_options()("bind", po::value<std::string>()->default_value("127.0.0.1"),
                     "IPv4 address the data listener binds")(
      "compute-ms", po::value<int>()->default_value(0),
      "sleep this long before each collective (unrecorded; the schedule's compute_ms is recorded)")(
      "group-if", po::value<std::vector<std::string>>()->composing(),
      "GROUP=IFACE, as ocslab-collbench-verbs takes it (the runner's native mode routes groups without a "
      "circuit this way); checked against the schedule, then every group connects through --bind as always");
}

int run_tcp(const po::variables_map& vm, const Job& job) {
  if (vm.count("ngpus") && vm["ngpus"].as<int>() != 1) {
    throw Error("-g/--ngpus: collbench-tcp reduces in host memory, one rank per process; only -g 1");
  }
  std::string bind = vm["bind"].as<std::string>();
  int compute_ms = vm["compute-ms"].as<int>();
  if (vm.count("group-if")) {
    for (const auto& gi : vm["group-if"].as<std::vector<std::string>>()) {
      auto eq = gi.find('=');
      const std::string g = gi.substr(0, eq);
      bool known = std::any_of(job.schedule.groups.begin(), job.schedule.groups.end(),
                               [&](const auto& x) { return x.name == g; });
      if (eq == std::string::npos || eq + 1 == gi.size() || !known)
        throw Error("--group-if '" + gi + "': want GROUP=IFACE with a group of the schedule");
    }
  }
  return run_job(job, "tcp", [&](Rendezvous& rv) {
    return std::make_unique<TcpBackend>(job.schedule, job.options.rank, rv, bind, compute_ms);
  });
}

}  // namespace

int main(int argc, char** argv) {
  return collbench_main(argc, argv,
                        {.name = "collbench-tcp", .usage = kUsage, .add_options = add_tcp_options, .run = run_tcp});
}
