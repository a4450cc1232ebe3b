// Benchmark: what growing the lab costs the runner. For N host sessions (local ocslab-agents,
// each its own daemon, all through one loopback sshd with host-key verification): the start-up
// time (SessionPool connect_all + start_all, wall) and the aggregate sample throughput delivered
// to the sink with a heartbeat probe on every host, each with its ratio to N = 1.
//   runner_fanout [--seconds S] [--interval-ms I] [--sizes 1,4,16,32]
#include <sys/resource.h>
#include <algorithm>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "ocslab/common/clock.h"
#include "ocslab/runner/host_session.h"
#include "ocslab/testing/agent_lab.h"
#include "ocslab/testing/sshd_fixture.h"

using namespace ocslab;
using namespace ocslab::runner;
using Clock = std::chrono::steady_clock;

namespace {

struct Row {
  int hosts = 0;
  double startup_ms = 0, connect_ms = 0, slowest_connect_ms = 0;
  double samples_per_s = 0;
  double runner_cpu = 0;  // CPU the runner process used in the steady state, in cores
  double runner_us_per_sample = 0;
  double lag_ms = 0;  // at the end of the window: now - t_ns of the newest sample delivered, worst host
  uint64_t samples = 0, expected = 0, missing = 0, lost = 0, failed = 0, recovered = 0, with_errors = 0;
};

// User + system CPU time of this process (the runner: sessions, readers, sink), seconds.
double cpu_seconds() {
  rusage u{};
  ::getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

double ms_since(Clock::time_point t0, Clock::time_point t1) {
  return std::chrono::duration<double, std::milli>(t1 - t0).count();
}

Row measure(const testing::SshdFixture& sshd, int hosts, double seconds, int interval_ms) {
  testing::TempDir dir;  // fresh agents: start-up includes starting each daemon
  testing::DaemonReaper reaper(dir.path());
  std::atomic<uint64_t> delivered{0};
  SessionPool pool([&](const std::string&, const agent::SeqSample&) { delivered.fetch_add(1); });
  for (int i = 0; i < hosts; ++i) {
    std::string name = "host-" + std::to_string(i);
    HostTarget t;
    t.name = name;
    t.ssh = testing::agent_ssh_options(sshd);
    t.agent_command = testing::agent_command(dir.path(), name, name, /*daemon=*/true);
    agent::ProbeRequest hb;
    hb.name = "heartbeat";
    hb.interval_ms = interval_ms;
    t.probes = {hb};
    pool.add(std::move(t));
  }
  Row row;
  row.hosts = hosts;
  auto t0 = Clock::now();
  auto connect_errors = pool.connect_all();
  row.connect_ms = ms_since(t0, Clock::now());
  for (auto& s : pool.sessions()) reaper.add(s->hello().pid);
  auto start_errors = pool.start_all();
  auto t1 = Clock::now();
  row.startup_ms = ms_since(t0, t1);
  for (size_t i = 0; i < connect_errors.size(); ++i) {
    const std::string& e = connect_errors[i].empty() ? start_errors[i] : connect_errors[i];
    if (!e.empty()) {
      ++row.failed;
      std::fprintf(stderr, "  %s\n", e.c_str());
    }
  }
  // Throughput over the steady state: samples delivered between two marks, not counting the
  // start-up (the hosts did not all start at the same instant).
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // kept: warm-up before the measured window
  uint64_t n0 = delivered.load();
  double c0 = cpu_seconds();
  auto m0 = Clock::now();
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));  // kept: the measured window
  uint64_t n1 = delivered.load();
  double c1 = cpu_seconds();
  auto m1 = Clock::now();
  int64_t now_ns = realtime_ns();
  for (const auto& h : pool.health()) {
    if (h.last_sample_ns > 0) row.lag_ms = std::max(row.lag_ms, static_cast<double>(now_ns - h.last_sample_ns) / 1e6);
  }
  double wall_s = ms_since(m0, m1) / 1000.0;
  row.samples_per_s = static_cast<double>(n1 - n0) / wall_s;
  row.runner_cpu = (c1 - c0) / wall_s;
  if (n1 > n0) row.runner_us_per_sample = (c1 - c0) * 1e6 / static_cast<double>(n1 - n0);
  for (const auto& r : pool.stop_all()) {
    row.slowest_connect_ms = std::max(row.slowest_connect_ms, static_cast<double>(r.connect_time.count()));
    row.samples += r.samples;
    row.expected += r.last_seq;
    if (r.samples < r.last_seq) row.missing += r.last_seq - r.samples;
    if (r.lost) ++row.lost;
    row.recovered += r.recovered;
    if (!r.errors.empty()) {
      ++row.with_errors;
      std::fprintf(stderr, "  %s: %s\n", r.name.c_str(), r.errors.front().c_str());
    }
  }
  return row;
}

}  // namespace

int main(int argc, char** argv) {
  double seconds = 3;
  int interval_ms = 1;
  std::vector<int> sizes = {1, 4, 16, 32};
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--seconds")) {
      seconds = std::stod(argv[i + 1]);
    } else if (!std::strcmp(argv[i], "--interval-ms")) {
      interval_ms = std::stoi(argv[i + 1]);
    } else if (!std::strcmp(argv[i], "--sizes")) {
      sizes.clear();
      std::string list = argv[i + 1];
      for (size_t p = 0; p < list.size();) {
        size_t q = list.find(',', p);
        if (q == std::string::npos) q = list.size();
        sizes.push_back(std::stoi(list.substr(p, q - p)));
        p = q + 1;
      }
    }
  }
  testing::SshdFixture sshd{testing::SshdOptions{}};
  std::printf("runner fan-out: heartbeat every %d ms per host, %.1f s capture, one loopback sshd, %u CPUs\n",
              interval_ms, seconds, std::thread::hardware_concurrency());
  std::printf("%6s %11s %7s %11s %13s %12s %7s %11s %11s %10s %9s %10s %8s %5s\n", "hosts", "startup ms", "x N=1",
              "connect ms", "slowest host", "samples/s", "x N=1", "per host/s", "runner CPU", "us/sample", "lag ms",
              "delivered", "missing", "lost");
  Row base;
  for (int n : sizes) {
    Row r = measure(sshd, n, seconds, interval_ms);
    if (base.hosts == 0) base = r;
    std::printf("%6d %11.1f %7.2f %11.1f %13.1f %12.0f %7.2f %11.0f %11.2f %10.1f %9.0f %10llu %8llu %5llu\n", r.hosts,
                r.startup_ms, r.startup_ms / base.startup_ms, r.connect_ms, r.slowest_connect_ms, r.samples_per_s,
                r.samples_per_s / base.samples_per_s, r.samples_per_s / r.hosts, r.runner_cpu, r.runner_us_per_sample,
                r.lag_ms, (unsigned long long)r.samples, (unsigned long long)r.missing, (unsigned long long)r.lost);
    if (r.failed) std::printf("       (%llu hosts failed to connect or start)\n", (unsigned long long)r.failed);
    if (r.with_errors) {
      std::printf("       (%llu hosts reported errors; %llu samples recovered from spools)\n",
                  (unsigned long long)r.with_errors, (unsigned long long)r.recovered);
    }
    std::fflush(stdout);
  }
  return 0;
}
