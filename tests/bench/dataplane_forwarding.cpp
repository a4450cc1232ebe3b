// Benchmark: forwarding rate of the emulator's data plane over UDP attachments with 1500-byte
// frames, against the machine's raw UDP loopback rate measured in the same run with the same
// sender and receiver (one sendto / recv per frame, as QEMU's socket netdev does). Prints
// frames/s, Mbit/s and the ratio; asserts nothing about speed. Then the link rate cap
// (DataPlane::set_rate_gbps): the same circuit capped at two rates below what it carried
// uncapped, each capped run's rate on the wire (frames + kWireOverheadBytes) against its cap and
// against the uncapped run; the goal is within 10 % of the cap.
//   dataplane_forwarding [--seconds S] [--size BYTES] [--cap-gbps G]   (G: one cap instead of two)
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "ocslab/emulator/data_plane.h"

using namespace ocslab;
using namespace ocslab::emu;
using Clock = std::chrono::steady_clock;

namespace {

class Socket {
 public:
  Socket() {
    fd_ = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd_ < 0) throw std::runtime_error("socket");
    sockaddr_in a = addr(0);
    if (::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) throw std::runtime_error("bind");
    socklen_t len = sizeof(a);
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    // Both phases get the same generous buffers, as QEMU's sockets would after tuning.
    int size = 4 << 20;
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVBUFFORCE, &size, sizeof(size));
    timeval tv{0, 100'000};  // lets the receiver notice the end of a phase
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  }
  ~Socket() { ::close(fd_); }
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;
  static sockaddr_in addr(int port) {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(static_cast<uint16_t>(port));
    return a;
  }
  int fd() const { return fd_; }
  int port() const { return port_; }

 private:
  int fd_ = -1;
  int port_ = 0;
};

int free_port() {
  Socket s;
  return s.port();
}

struct Phase {
  double seconds = 0;
  uint64_t sent = 0, received = 0;
};

// Sender floods `to_port` from `tx` for `seconds`; a receiver thread counts what reaches `rx`.
Phase run_phase(const Socket& tx, const Socket& rx, int to_port, size_t size, double seconds) {
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> received{0};
  std::thread receiver([&] {
    std::vector<char> buf(65536);
    while (!stop.load(std::memory_order_relaxed)) {
      if (::recv(rx.fd(), buf.data(), buf.size(), 0) > 0) received.fetch_add(1, std::memory_order_relaxed);
    }
  });
  std::vector<char> frame(size, 'x');
  sockaddr_in dst = Socket::addr(to_port);
  uint64_t sent = 0;
  auto start = Clock::now();
  auto end = start + std::chrono::duration<double>(seconds);
  uint64_t at_end = 0;
  while (Clock::now() < end) {
    for (int i = 0; i < 64; ++i) {
      // Each frame numbered, as distinct frames would be.
      std::memcpy(frame.data(), &sent, sizeof(sent));
      if (::sendto(tx.fd(), frame.data(), frame.size(), 0, reinterpret_cast<sockaddr*>(&dst), sizeof(dst)) > 0) ++sent;
    }
  }
  double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  at_end = received.load();
  // Frames still in flight when the sender stops are not counted: the rate is what arrived
  // while the sender ran.
  // load-safe: a benchmark: the measured sending window.
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // kept: the measured sending window
  stop = true;
  receiver.join();
  return {elapsed, sent, at_end};
}

void print(const char* what, const Phase& p, size_t size) {
  double fps = static_cast<double>(p.received) / p.seconds;
  std::printf(
      "%-28s %10.0f frames/s %9.1f Mbit/s  (sent %llu, received %llu, lost %.1f %%)\n", what, fps,
      fps * static_cast<double>(size) * 8 / 1e6, static_cast<unsigned long long>(p.sent),
      static_cast<unsigned long long>(p.received),
      p.sent ? 100.0 * static_cast<double>(p.sent - std::min(p.sent, p.received)) / static_cast<double>(p.sent) : 0.0);
}

struct Forwarded {
  Phase phase;
  NicCounters sender, receiver;
};

// The sender plays QEMU of NIC 0, the receiver QEMU of NIC 1, over one lit circuit; gbps > 0
// caps it.
Forwarded through_data_plane(size_t size, double seconds, double gbps) {
  Socket tx, rx;
  NicAttachment a, b;
  a.name = "bench-a";
  a.kind = NicAttachment::Kind::kUdp;
  a.tx_port = 1;
  a.rx_port = 3;
  a.listen.port = free_port();
  a.peer.port = tx.port();
  b = a;
  b.name = "bench-b";
  b.tx_port = 2;
  b.rx_port = 4;
  b.listen.port = free_port();
  b.peer.port = rx.port();
  DataPlane dp({a, b}, 4);
  dp.set_rate_gbps(gbps);
  dp.start();
  dp.set_path(1, 4);
  Forwarded f;
  f.phase = run_phase(tx, rx, a.listen.port, size, seconds);
  f.sender = dp.counters(0);
  f.receiver = dp.counters(1);
  return f;
}

// What arrived, in Gbit/s on the wire: frames with their preamble, FCS and gap, as the cap counts them.
double wire_gbps(const Phase& p, size_t size) {
  return static_cast<double>(p.received) * static_cast<double>(size + kWireOverheadBytes) * 8 / p.seconds / 1e9;
}

}  // namespace

int main(int argc, char** argv) {
  double seconds = 3;
  size_t size = 1500;
  double cap = 0;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string opt = argv[i];
    if (opt == "--seconds") {
      seconds = std::stod(argv[i + 1]);
    } else if (opt == "--size") {
      size = std::stoul(argv[i + 1]);
    } else if (opt == "--cap-gbps") {
      cap = std::stod(argv[i + 1]);
    } else {
      std::fprintf(stderr, "usage: dataplane_forwarding [--seconds S] [--size BYTES] [--cap-gbps G]\n");
      return 2;
    }
  }
  std::printf("UDP loopback, %zu-byte frames, %.1f s per phase, %u CPUs\n", size, seconds,
              std::thread::hardware_concurrency());

  // Reference: the sender's socket straight to the receiver's.
  Phase raw;
  {
    Socket tx, rx;
    raw = run_phase(tx, rx, rx.port(), size, seconds);
  }

  const Forwarded uncapped = through_data_plane(size, seconds, 0);
  const Phase& fwd = uncapped.phase;
  const NicCounters& c0 = uncapped.sender;
  const NicCounters& c1 = uncapped.receiver;

  print("raw loopback (reference)", raw, size);
  print("through the data plane", fwd, size);
  std::printf("data plane counters: taken from sender %llu, delivered %llu, refused by receiver socket %llu\n",
              static_cast<unsigned long long>(c0.rx_frames), static_cast<unsigned long long>(c1.tx_frames),
              static_cast<unsigned long long>(c1.tx_errors));
  double ratio = static_cast<double>(fwd.received) / fwd.seconds / (static_cast<double>(raw.received) / raw.seconds);
  std::printf("ratio data plane / raw: %.1f %% (goal >= 50 %%)\n", 100 * ratio);

  // The rate cap: below what the circuit carried uncapped, so the cap and not the machine limits.
  const double open = wire_gbps(fwd, size);
  std::vector<double> caps = {cap};
  if (cap <= 0) caps = {std::min(1.0, open / 2), std::min(1.0, open / 2) / 4};
  std::printf("\nlink rate cap (token bucket per circuit); uncapped run: %.3f Gbit/s on the wire\n", open);
  for (double g : caps) {
    g = std::max(g, kMinLinkGbps);
    const Forwarded capped = through_data_plane(size, seconds, g);
    const double got = wire_gbps(capped.phase, size);
    std::printf(
        "capped at %7.3f Gbit/s: carried %7.3f Gbit/s = %5.1f %% of the cap (goal 90..110 %%), "
        "%5.1f %% of the uncapped run; paused %llu times\n",
        g, got, 100 * got / g, 100 * got / open, static_cast<unsigned long long>(capped.sender.rate_waits));
  }
  return 0;
}
