// Benchmark: what libocs adds to a reconfiguration round trip, measured against a minimal
// raw-socket TL1 client doing the same exchange (the same request bytes, the same replies)
// with the same peer in the same run; and the speed-up of one batched ENT-PATCH for 32
// circuits over 32 single commands.
//   ocs_driver_overhead [--rounds N] [--repeats R] [--only libocs|raw] [--no-batch]
//                       [--policy batch|other|both]
// With no arguments it runs the comparison and the batching figure and prints the ratio.
// --only runs one side's rounds alone (no comparison), so that `strace -c -f`, `perf` or
// callgrind see that side only; docs/driver-overhead.md shows how.
//
// The client and the peer's threads share one CPU, and by default all of them run under
// SCHED_BATCH: a thread woken by a reply or a request then waits for the running one to block,
// as it would if the switch were another machine. Under the default policy (SCHED_OTHER) the
// peer woken by a request may instead preempt the client in the middle of its send, and
// whether it does flips with small differences in the threads' CPU accounting: the same raw
// client then measures 27.5 or 29 us per round from run to run on a 2-vCPU VM. --policy other
// (or both) shows those figures, with the preemptions per round that explain them.
#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sched.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
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
    exchange("ACT-USER::admin:1::root;\r\n");
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

double quantile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(q * static_cast<double>(v.size())))];
}
double median(const std::vector<double>& v) { return quantile(v, 0.5); }

std::string load_average() {
  std::ifstream in("/proc/loadavg");
  std::string one, five;
  in >> one >> five;
  return in ? one + " (1 min), " + five + " (5 min)" : "unknown";
}

[[noreturn]] void usage(const char* why) {
  std::fprintf(stderr,
               "ocs_driver_overhead: %s\nusage: ocs_driver_overhead [--rounds N] [--repeats R] [--only libocs|raw] "
               "[--no-batch] [--policy batch|other|both]\n",
               why);
  std::exit(2);
}

// Puts every thread of the process (the client and the peer's threads) under one policy.
// Returns false if the kernel refused it for any of them.
bool set_policy_all_threads(int policy) {
  DIR* d = ::opendir("/proc/self/task");
  if (!d) return false;
  bool ok = true;
  sched_param p{};
  while (dirent* e = ::readdir(d)) {
    if (e->d_name[0] == '.') continue;
    ok = ::sched_setscheduler(std::atoi(e->d_name), policy, &p) == 0 && ok;
  }
  ::closedir(d);
  return ok;
}

// Involuntary context switches of the calling thread so far: the client being preempted.
long preemptions() {
  rusage u{};
  ::getrusage(RUSAGE_THREAD, &u);
  return u.ru_nivcsw;
}

int positive(const char* flag, const char* text) {
  int v = 0;
  auto [p, ec] = std::from_chars(text, text + std::strlen(text), v);
  if (ec != std::errc() || *p != '\0' || v < 1) usage((std::string(flag) + ": want a positive number, got \"" + text + "\"").c_str());
  return v;
}

}  // namespace

int main(int argc, char** argv) {
  int rounds = 2000, repeats = 15;
  std::string only, policy = "batch";
  bool batch = true;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--no-batch") {
      batch = false;
      continue;
    }
    if (i + 1 >= argc) usage(("missing value after " + a).c_str());
    if (a == "--rounds") rounds = positive("--rounds", argv[++i]);
    else if (a == "--repeats") repeats = positive("--repeats", argv[++i]);
    else if (a == "--only") only = argv[++i];
    else if (a == "--policy") policy = argv[++i];
    else usage(("unknown option " + a).c_str());
  }
  if (!only.empty() && only != "libocs" && only != "raw") usage(("--only: want libocs or raw, got \"" + only + "\"").c_str());
  if (policy != "batch" && policy != "other" && policy != "both") {
    usage(("--policy: want batch, other or both, got \"" + policy + "\"").c_str());
  }
  std::printf("machine: %ld CPUs online, load average %s at start\n", sysconf(_SC_NPROCESSORS_ONLN),
              load_average().c_str());
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
  RawTl1Client control(peer.port());  // a second raw client: the comparison's control

  // One reconfiguration round trip = make a circuit, then delete it (two commands). The raw
  // client sends the bytes libocs sends (a request line ends in CR LF) and gets the same
  // replies; it only checks for the ';' line and COMPLD, where libocs matches the ctag, hands
  // autonomous messages on, keeps the timing record and enforces the reply deadline.
  int ctag = 100;
  auto libocs_round = [&] {
    auto t0 = Clock::now();
    driver->connect({{1, 33}});
    driver->disconnect({1});
    return std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
  };
  auto raw_round_on = [&](RawTl1Client& client) {
    auto t0 = Clock::now();
    client.exchange("ENT-PATCH::1,33:" + std::to_string(++ctag) + ":;\r\n");
    client.exchange("DLT-PATCH::1:" + std::to_string(++ctag) + ":;\r\n");
    return std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
  };
  auto raw_round = [&] { return raw_round_on(raw); };
  auto control_round = [&] { return raw_round_on(control); };

  const bool batch_ok = set_policy_all_threads(policy == "other" ? SCHED_OTHER : SCHED_BATCH);
  if (policy != "other") {
    std::printf("scheduling: SCHED_BATCH for every thread%s\n",
                batch_ok ? " (a woken thread waits until the running one blocks)" : ": REFUSED, figures are SCHED_OTHER's");
  }
  for (int i = 0; i < rounds / 10; ++i) {  // warm-up (with --only, that side's path alone)
    if (only != "raw") libocs_round();
    if (only != "libocs") raw_round();
  }
  if (!only.empty()) {
    std::vector<double> t;
    for (int i = 0; i < rounds * repeats; ++i) t.push_back(only == "libocs" ? libocs_round() : raw_round());
    std::printf("%s alone, %d rounds (ENT-PATCH + DLT-PATCH): median %.1f us\n", only.c_str(), rounds * repeats,
                median(t));
    return 0;
  }

  // libocs, raw and control rounds alternate one by one (in two orders), so all see the same
  // machine noise (other processes, frequency changes). Each repeat compares the medians of
  // its per-round times; the repeats' ratios show how much that comparison moves with the
  // noise. The control is a second raw client: control/raw shows what the method itself
  // reads as a difference between two identical clients.
  struct Comparison {
    double lib = 0, base = 0, ctl = 0, ratio = 0, control_ratio = 0;
    std::vector<double> ratios;
    double lib_preempt = 0, base_preempt = 0;  // involuntary switches of the client per round
  };
  auto compare = [&] {
    Comparison c;
    std::vector<double> lib, base, ctl, control_ratios;
    long lib_pre = 0, base_pre = 0;
    auto timed = [](auto& round, std::vector<double>& out, long& pre) {
      long p0 = preemptions();
      out.push_back(round());
      pre += preemptions() - p0;
    };
    long ignored = 0;
    for (int r = 0; r < repeats; ++r) {
      std::vector<double> l1, b1, c1;
      for (int i = 0; i < rounds; ++i) {
        if (i % 2 == 0) {
          timed(libocs_round, l1, lib_pre);
          timed(raw_round, b1, base_pre);
          timed(control_round, c1, ignored);
        } else {
          timed(control_round, c1, ignored);
          timed(raw_round, b1, base_pre);
          timed(libocs_round, l1, lib_pre);
        }
      }
      double lm = median(l1), bm = median(b1), cm = median(c1);
      lib.push_back(lm);
      base.push_back(bm);
      ctl.push_back(cm);
      c.ratios.push_back(lm / bm);
      control_ratios.push_back(cm / bm);
    }
    c.lib = median(lib);
    c.base = median(base);
    c.ctl = median(ctl);
    c.ratio = median(c.ratios);
    c.control_ratio = median(control_ratios);
    c.lib_preempt = static_cast<double>(lib_pre) / (rounds * repeats);
    c.base_preempt = static_cast<double>(base_pre) / (rounds * repeats);
    return c;
  };
  auto report = [&](const Comparison& c) {
    std::printf("  raw socket client : %8.1f us (median of the repeats' medians)\n", c.base);
    std::printf("  libocs Tl1Driver  : %8.1f us\n", c.lib);
    std::printf("  control (2nd raw) : %8.1f us\n", c.ctl);
    std::printf("  client preempted per round: libocs %.2f, raw %.2f\n", c.lib_preempt, c.base_preempt);
    std::printf("  per-repeat libocs/raw: min %.3f, quartiles %.3f %.3f %.3f, max %.3f\n",
                *std::min_element(c.ratios.begin(), c.ratios.end()), quantile(c.ratios, 0.25), c.ratio,
                quantile(c.ratios, 0.75), *std::max_element(c.ratios.begin(), c.ratios.end()));
    std::printf("  control / raw     : %8.3f  (two identical clients: what the method reads as no difference)\n",
                c.control_ratio);
  };

  double ratio = 0;
  if (policy != "other") {
    Comparison c = compare();
    ratio = c.ratio;
    std::printf("reconfiguration round trip (ENT-PATCH + DLT-PATCH), SCHED_BATCH, %d interleaved rounds x %d repeats:\n",
                rounds, repeats);
    report(c);
    std::printf("  libocs / raw      : %8.3f  (median of the repeats; overhead %+.1f%%, %+.2f us per round; goal <= +5%%)\n",
                c.ratio, (c.ratio - 1) * 100, c.lib - c.base);
  }
  if (policy != "batch") {
    set_policy_all_threads(SCHED_OTHER);
    Comparison c = compare();
    if (policy == "other") ratio = c.ratio;
    std::printf("the same under SCHED_OTHER (the woken peer may preempt the client; %s):\n",
                policy == "other" ? "the ratio below is this one" : "for reference, not the goal's figure");
    report(c);
    std::printf("  libocs / raw      : %8.3f  (overhead %+.1f%%, %+.2f us per round)\n", c.ratio, (c.ratio - 1) * 100,
                c.lib - c.base);
    if (policy == "both") set_policy_all_threads(batch_ok ? SCHED_BATCH : SCHED_OTHER);
  }

  if (batch) {
    // 32 circuits: one batched ENT-PATCH vs 32 single ENT-PATCH commands, through libocs.
    std::vector<ocs::Circuit> mapping;
    for (int i = 1; i <= 32; ++i) mapping.push_back({i, 32 + i});
    std::vector<ocs::Port> ingress;
    for (int i = 1; i <= 32; ++i) ingress.push_back(i);
    int batch_rounds = std::max(20, rounds / 20);
    int batch_repeats = std::min(repeats, 7);
    std::vector<double> batched, single;
    for (int r = 0; r < batch_repeats; ++r) {
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
    std::printf("32-circuit mapping, %d rounds x %d repeats, median:\n", batch_rounds, batch_repeats);
    std::printf("  one batched ENT-PATCH : %8.1f us\n", bt);
    std::printf("  32 single ENT-PATCH   : %8.1f us\n", st);
    std::printf("  speed-up of batching  : %8.1fx\n", st / bt);
  }
  std::printf("load average at end: %s\n", load_average().c_str());
  std::printf("ratio libocs/raw: %.3f%s\n", ratio, policy == "other" ? " (SCHED_OTHER)" : "");
  return 0;
}
