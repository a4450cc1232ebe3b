// Benchmark (issue 21): replaying a very large gap from the agent's spool. A real Agent (its
// Session writer, spool and Agent::fetch) serves a real unix socket; a probe of this benchmark
// emits N samples as fast as the agent takes them, all spooled (the session that started the
// capture closes at once, so nothing follows live), then the capture is stopped. A client in a
// process of its own (this binary again, --client) connects the way the runner does after a
// dropped session, AgentClient::fetch(1, follow=false) page by page, checks every seq 1..N
// arrives once and in order, and reports its time and peak RSS (VmHWM). The baseline is the same
// for 500,000 samples in the same run; a 5,000,000-sample gap is the acceptance case.
//   spool_replay [--samples 500000,5000000] [--page 20000] [--dir DIR]
// Prints figures, asserts nothing but the seqs (exit 1 when one is missing or out of order).
//
// Measured on the shared 2-core build machine (RelWithDebInfo without -g, load average 2.9-3.4,
// 2026-11-26), page 20,000: 500,000 samples (84.7 MiB of spool) replayed in 25 pages in 1.63 s,
// 305,833 samples/s, client peak RSS 8.8 MiB; 5,000,000 samples (856.2 MiB) in 250 pages in
// 13.51 s, 370,176 samples/s, client peak RSS 8.7 MiB: x8.26 the time for x10 the samples, x1.00
// the memory.
#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "ocslab/agent/agent.h"
#include "ocslab/agent/client.h"
#include "ocslab/agent/registry.h"
#include "ocslab/common/clock.h"
#include "ocslab/ocsctl/errors.h"
#include "ocslab/ocsctl/stream.h"
#include "ocslab/testing/fd_stream.h"
#include "peak_rss.h"

using namespace ocslab;
using namespace ocslab::agent;
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

using ocslab::bench::vm_hwm_kib;

namespace {

// Emits params.count samples back to back on a thread of its own, then idles.
class BurstProbe final : public probes::Probe {
 public:
  BurstProbe(std::string host, uint64_t count) : host_(std::move(host)), count_(count) {}
  ~BurstProbe() override { stop(); }
  std::string name() const override { return "burst"; }
  probes::ProbeStatus start(probes::SampleSink sink) override {
    thread_ = std::thread([this, sink = std::move(sink)] {
      Sample s{0, 0, host_, "burst", "bench", "burst", 0, "count"};
      for (uint64_t n = 1; n <= count_ && !stopping_; ++n) {
        Timestamp ts = now();
        s.t_ns = ts.realtime_ns;
        s.mono_ns = ts.monotonic_ns;
        s.value = static_cast<double>(n);
        sink(s);
      }
    });
    return {true, "as fast as the agent takes them", ""};
  }
  void stop() override {
    stopping_ = true;
    if (thread_.joinable()) thread_.join();
  }

 private:
  std::string host_;
  uint64_t count_;
  std::atomic<bool> stopping_{false};
  std::thread thread_;
};

using ocslab::testing::FdStream;

// One session of agent on a socketpair, served on a thread; the client's end comes back.
struct Served {
  explicit Served(Agent& agent, bool inheritable = false) {
    int sv[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | (inheritable ? 0 : SOCK_CLOEXEC), 0, sv) != 0) std::abort();
    server_fd = sv[0];
    client_fd = sv[1];
    ::fcntl(server_fd, F_SETFD, FD_CLOEXEC);
    thread = std::thread([&agent, fd = server_fd] { agent.serve(fd, fd); });
  }
  ~Served() {
    ::shutdown(server_fd, SHUT_RDWR);
    thread.join();
    ::close(server_fd);
  }
  int server_fd, client_fd;
  std::thread thread;
};

struct Replay {
  uint64_t count = 0, pages = 0;
  double seconds = 0;
  long hwm_kib = 0;
  bool in_order = false;
};

// The client process: fetch everything from seq 1, page by page; "count pages seconds hwm ok".
int client_main(int fd, uint64_t expected, uint64_t page, const std::string& result_file) {
  AgentClient c(std::make_unique<FdStream>(fd, "unix socket"), std::chrono::seconds(15));
  uint64_t next = 1;
  bool ok = true;
  c.on_sample([&](const SeqSample& s) {
    ok = ok && s.seq == next;
    ++next;
  });
  c.hello();
  long before = vm_hwm_kib();
  auto t0 = Clock::now();
  FetchResult f = c.fetch(1, /*follow=*/false, page);
  double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  c.bye();
  ok = ok && f.count == expected && next == expected + 1;
  std::ofstream(result_file) << f.count << " " << f.pages << " " << seconds << " " << vm_hwm_kib() << " " << ok << " "
                             << before << "\n";
  return ok ? 0 : 1;
}

// Spools n samples in agent (a fresh capture), then replays them in a client process.
Replay run_case(Agent& agent, uint64_t n, uint64_t page, const std::string& self, const std::string& dir) {
  auto t0 = Clock::now();
  {
    Served s(agent);
    AgentClient starter(std::make_unique<FdStream>(s.client_fd, "unix socket"));
    ProbeRequest p;
    p.name = "burst";
    p.params = {{"count", n}};
    starter.start({p}, "bench");
  }  // the starting session closes: nothing follows the capture live
  std::string spool;
  {
    Served s(agent);
    AgentClient control(std::make_unique<FdStream>(s.client_fd, "unix socket"), std::chrono::seconds(60));
    for (;;) {
      auto st = control.status();
      if (st["last_seq"].get<uint64_t>() >= n) {
        spool = st["spool"].get<std::string>();
        break;
      }
      // load-safe: a benchmark: the poll interval of a wait for the spool to fill (the event).
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    control.stop();
  }
  double fill_s = std::chrono::duration<double>(Clock::now() - t0).count();
  std::printf("  spooled %llu samples in %.1f s (%.0f samples/s into the spool), %.1f MiB on disk\n",
              (unsigned long long)n, fill_s, n / fill_s, fs::file_size(spool) / 1048576.0);

  Served s(agent, /*inheritable=*/true);
  std::string result = dir + "/replay-" + std::to_string(n) + ".txt";
  pid_t pid = ::fork();
  if (pid == 0) {
    std::string fd = std::to_string(s.client_fd);
    ::execl(self.c_str(), self.c_str(), "--client", fd.c_str(), std::to_string(n).c_str(), std::to_string(page).c_str(),
            result.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  ::close(s.client_fd);
  int status = 0;
  ::waitpid(pid, &status, 0);
  Replay r;
  long before = 0;
  std::ifstream(result) >> r.count >> r.pages >> r.seconds >> r.hwm_kib >> r.in_order >> before;
  if (!WIFEXITED(status)) r.in_order = false;
  return r;
}

std::vector<uint64_t> parse_list(const std::string& s) {
  std::vector<uint64_t> out;
  std::stringstream ss(s);
  for (std::string x; std::getline(ss, x, ',');) out.push_back(std::stoull(x));
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 6 && std::string(argv[1]) == "--client") {
    return client_main(std::atoi(argv[2]), std::stoull(argv[3]), std::stoull(argv[4]), argv[5]);
  }
  std::vector<uint64_t> sizes = {500000, 5000000};
  uint64_t page = kDefaultFetchPage;
  std::string dir;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i];
    if (a == "--samples")
      sizes = parse_list(argv[i + 1]);
    else if (a == "--page")
      page = std::stoull(argv[i + 1]);
    else if (a == "--dir")
      dir = argv[i + 1];
    else {
      std::fprintf(stderr, "usage: spool_replay [--samples 500000,5000000] [--page N] [--dir DIR]\n");
      return 2;
    }
  }
  bool own_dir = dir.empty();
  if (own_dir) {
    char tmpl[] = "/tmp/spool-replay-XXXXXX";
    if (!::mkdtemp(tmpl)) return 2;
    dir = tmpl;
  }
  ProbeRegistry registry;
  registry.add("burst", [](const ProbeConfig& c) {
    return std::make_unique<BurstProbe>(c.host, c.params.value("count", uint64_t{0}));
  });
  AgentOptions o;
  o.host = "bench";
  o.spool_dir = dir + "/spool";
  o.registry = &registry;
  o.retention.max_bytes = 64ULL << 30;  // keep both captures: the benchmark removes its folder
  const std::string self = fs::read_symlink("/proc/self/exe").string();
  std::printf("spool replay: paged spool.fetch (page %llu samples) over a unix socket, client in its own process\n",
              (unsigned long long)page);
  std::vector<Replay> results;
  int rc = 0;
  {
    Agent agent(o);
    for (uint64_t n : sizes) {
      std::printf("gap of %llu samples:\n", (unsigned long long)n);
      Replay r = run_case(agent, n, page, self, dir);
      std::printf(
          "  replayed %llu samples in %llu pages: %.2f s, %.0f samples/s, client peak RSS %.1f MiB, seqs "
          "1..%llu once and in order: %s\n",
          (unsigned long long)r.count, (unsigned long long)r.pages, r.seconds, r.count / r.seconds, r.hwm_kib / 1024.0,
          (unsigned long long)n, r.in_order ? "yes" : "NO");
      if (!r.in_order) rc = 1;
      if (!results.empty()) {
        const Replay& b = results.front();
        std::printf(
            "  against the %llu-sample baseline: x%.2f the samples, x%.2f the time, x%.2f the rate, x%.2f "
            "the client's peak RSS\n",
            (unsigned long long)b.count, double(r.count) / b.count, r.seconds / b.seconds,
            (r.count / r.seconds) / (b.count / b.seconds), double(r.hwm_kib) / b.hwm_kib);
      }
      results.push_back(r);
    }
  }
  if (own_dir) fs::remove_all(dir);
  return rc;
}
