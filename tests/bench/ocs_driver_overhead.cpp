// Benchmark: what libocs adds to a reconfiguration round trip, measured against a minimal
// raw-socket TL1 client doing the same exchange with the same peer in the same run; and the
// speed-up of one batched ENT-PATCH for 32 circuits over 32 single commands.
//   ocs_driver_overhead [--rounds N] [--repeats R]
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "ocslab/ocsctl/driver.h"
#include "ocslab/testing/peers.h"

using namespace ocslab;
using Clock = std::chrono::steady_clock;

namespace {

// The least a client can do: write the command, read until the reply's terminating ';' line.
class RawTl1Client {
 public:
  explicit RawTl1Client(int port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) throw std::runtime_error("raw connect");
    int one = 1;
    ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    exchange("ACT-USER::admin:1::root;");
  }
  ~RawTl1Client() { ::close(fd_); }

  void exchange(const std::string& cmd) {
    if (::send(fd_, cmd.data(), cmd.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(cmd.size())) throw std::runtime_error("raw send");
    buf_.clear();
    for (;;) {
      char tmp[4096];
      ssize_t n = ::recv(fd_, tmp, sizeof(tmp), 0);
      if (n <= 0) throw std::runtime_error("raw recv");
      buf_.append(tmp, static_cast<size_t>(n));
      if (buf_.find("\n;") != std::string::npos) break;
    }
    if (buf_.find("COMPLD") == std::string::npos) throw std::runtime_error("raw client got: " + buf_);
  }

 private:
  int fd_;
  std::string buf_;
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  int rounds = 2000, repeats = 7;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--rounds")) rounds = std::stoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--repeats")) repeats = std::stoi(argv[i + 1]);
  }
  // All threads (client, and the peer's thread per connection) share one CPU. Otherwise the
  // connection whose peer thread lands on an idle vCPU pays a cross-CPU wake-up (over 100 us
  // on a VM) on every reply, and which connection that is changes from run to run.
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(0, &one);
  bool pinned = sched_setaffinity(0, sizeof(one), &one) == 0;
  std::printf("threads pinned to CPU 0: %s\n", pinned ? "yes" : "no (figures may be bimodal)");
  testing::PeerSwitch sw(32, 32);
  testing::TcpPeer peer(testing::PeerProtocol::kTl1, sw);
  ocs::DriverOptions opts;
  opts.password = "root";
  auto url = ocs::SwitchUrl::parse("tl1://admin@127.0.0.1:" + std::to_string(peer.port()));
  auto driver = ocs::make_driver(url, opts);
  driver->open();
  RawTl1Client raw(peer.port());

  // One reconfiguration round trip = make a circuit, then delete it (two commands). libocs
  // and raw rounds alternate one by one, and medians of the per-round times are compared,
  // so both see the same machine noise (other processes, frequency changes).
  int ctag = 100;
  auto libocs_round = [&] {
    auto t0 = Clock::now();
    driver->connect({{1, 33}});
    driver->disconnect({1});
    return std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
  };
  auto raw_round = [&] {
    auto t0 = Clock::now();
    raw.exchange("ENT-PATCH::1,33:" + std::to_string(++ctag) + ":;");
    raw.exchange("DLT-PATCH::1:" + std::to_string(++ctag) + ":;");
    return std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
  };
  for (int i = 0; i < rounds / 10; ++i) {  // warm-up both paths
    libocs_round();
    raw_round();
  }
  std::vector<double> lib, base, ratios;
  for (int r = 0; r < repeats; ++r) {
    std::vector<double> l1, b1;
    for (int i = 0; i < rounds; ++i) {
      if (i % 2 == 0) {
        l1.push_back(libocs_round());
        b1.push_back(raw_round());
      } else {
        b1.push_back(raw_round());
        l1.push_back(libocs_round());
      }
    }
    double lm = median(l1), bm = median(b1);
    lib.push_back(lm);
    base.push_back(bm);
    ratios.push_back(lm / bm);
  }
  double l = median(lib), b = median(base), ratio = median(ratios);
  std::printf("reconfiguration round trip (ENT-PATCH + DLT-PATCH), %d interleaved rounds x %d repeats, median:\n",
              rounds, repeats);
  std::printf("  raw socket client : %8.1f us\n", b);
  std::printf("  libocs Tl1Driver  : %8.1f us\n", l);
  std::printf("  libocs / raw      : %8.3f  (overhead %+.1f%%; goal <= +5%%; per-repeat ratios %.3f..%.3f)\n", ratio,
              (ratio - 1) * 100, *std::min_element(ratios.begin(), ratios.end()),
              *std::max_element(ratios.begin(), ratios.end()));

  // 32 circuits: one batched ENT-PATCH vs 32 single ENT-PATCH commands, through libocs.
  std::vector<ocs::Circuit> mapping;
  for (int i = 1; i <= 32; ++i) mapping.push_back({i, 32 + i});
  std::vector<ocs::Port> ingress;
  for (int i = 1; i <= 32; ++i) ingress.push_back(i);
  int batch_rounds = std::max(20, rounds / 20);
  std::vector<double> batched, single;
  for (int r = 0; r < repeats; ++r) {
    auto t0 = Clock::now();
    for (int i = 0; i < batch_rounds; ++i) {
      driver->connect(mapping);
      auto t1 = Clock::now();
      driver->disconnect(ingress);
      t0 += Clock::now() - t1;  // time only the make step
    }
    batched.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count() / batch_rounds);
    t0 = Clock::now();
    for (int i = 0; i < batch_rounds; ++i) {
      for (const auto& c : mapping) driver->connect({c});
      auto t1 = Clock::now();
      driver->disconnect(ingress);
      t0 += Clock::now() - t1;
    }
    single.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count() / batch_rounds);
  }
  double bt = median(batched), st = median(single);
  std::printf("32-circuit mapping, %d rounds x %d repeats, median:\n", batch_rounds, repeats);
  std::printf("  one batched ENT-PATCH : %8.1f us\n", bt);
  std::printf("  32 single ENT-PATCH   : %8.1f us\n", st);
  std::printf("  speed-up of batching  : %8.1fx\n", st / bt);
  return 0;
}
