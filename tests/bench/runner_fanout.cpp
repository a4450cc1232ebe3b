// Benchmark: what growing the lab costs the runner. For N host sessions (local ocslab-agents,
// each its own daemon, all through one loopback sshd with host-key verification and sshd's
// default MaxStartups 10:30:100, as a stock lab host has it): the start-up time (SessionPool
// connect_all + start_all, wall, at most K SSH handshakes at a time) and the aggregate sample
// throughput delivered to the sink with a heartbeat probe on every host, each with its ratio to
// N = 1; the runner's CPU and the whole machine's in % of its cores (agents and sshd share them),
// and where the slowest host's connect went (queue for a handshake slot, SSH, hello, clock).
// The heartbeat is every 10 ms by default: at 1 ms (--interval-ms 1) 16 hosts already offer
// more samples than a 2-core box carries through sshd, and the rows then measure saturation.
// --unbounded N,... adds a row per size with no bound on the handshakes (the runner before the
// gate), for comparison in the same run.
//   runner_fanout [--seconds S] [--interval-ms I] [--sizes 1,16,64,128] [--concurrency K]
//                 [--unbounded 64]
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>

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

// "No bound": more slots than any run here has hosts.
constexpr int kUnbounded = 100000;

struct Row {
  int hosts = 0;
  int concurrency = 0, peak = 0;  // the handshake bound and the most in flight at once
  double startup_ms = 0, connect_ms = 0, slowest_connect_ms = 0;
  double samples_per_s = 0;
  double runner_cpu = 0;   // CPU the runner process used in the steady state, in cores
  double machine_cpu = 0;  // CPU the whole machine used then (runner, agents, sshd, anyone else), in cores
  ConnectPhases slowest;   // the slowest host's connect phases
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

// Busy and total jiffies of all cores since boot (/proc/stat's first line).
std::pair<double, double> machine_jiffies() {
  std::ifstream in("/proc/stat");
  std::string cpu;
  double user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0, steal = 0;
  in >> cpu >> user >> nice >> system >> idle >> iowait >> irq >> softirq >> steal;
  double busy = user + nice + system + irq + softirq + steal;
  return {busy, busy + idle + iowait};
}

double ms_since(Clock::time_point t0, Clock::time_point t1) {
  return std::chrono::duration<double, std::milli>(t1 - t0).count();
}

Row measure(const testing::SshdFixture& sshd, int hosts, double seconds, int interval_ms, int concurrency) {
  testing::TempDir dir;  // fresh agents: start-up includes starting each daemon
  testing::DaemonReaper reaper(dir.path());
  std::atomic<uint64_t> delivered{0};
  SessionPool pool([&](const std::string&, const agent::SeqSample&) { delivered.fetch_add(1); }, concurrency);
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
  row.concurrency = concurrency;
  auto t0 = Clock::now();
  auto connect_errors = pool.connect_all();
  row.connect_ms = ms_since(t0, Clock::now());
  for (auto& s : pool.sessions()) reaper.add(s->hello().pid);
  auto start_errors = pool.start_all();
  auto t1 = Clock::now();
  row.startup_ms = ms_since(t0, t1);
  row.peak = pool.gate().peak();
  std::chrono::milliseconds slowest{-1};
  for (auto& s : pool.sessions()) {
    HostReport r = s->report();
    if (r.connect_time > slowest) {
      slowest = r.connect_time;
      row.slowest = r.connect_phases;
    }
  }
  for (size_t i = 0; i < connect_errors.size(); ++i) {
    const std::string& e = connect_errors[i].empty() ? start_errors[i] : connect_errors[i];
    if (!e.empty()) {
      if (++row.failed <= 3) std::fprintf(stderr, "  %s\n", e.c_str());
    }
  }
  // Throughput over the steady state: samples delivered between two marks, not counting the
  // start-up (the hosts did not all start at the same instant).
  // load-safe: a benchmark: warm-up before the measured window.
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // kept: warm-up before the measured window
  uint64_t n0 = delivered.load();
  double c0 = cpu_seconds();
  auto j0 = machine_jiffies();
  auto m0 = Clock::now();
  // load-safe: a benchmark: the measured window; rates are counted over its measured length.
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));  // kept: the measured window
  uint64_t n1 = delivered.load();
  double c1 = cpu_seconds();
  auto j1 = machine_jiffies();
  auto m1 = Clock::now();
  int64_t now_ns = realtime_ns();
  for (const auto& h : pool.health()) {
    if (h.last_sample_ns > 0) row.lag_ms = std::max(row.lag_ms, static_cast<double>(now_ns - h.last_sample_ns) / 1e6);
  }
  double wall_s = ms_since(m0, m1) / 1000.0;
  row.samples_per_s = static_cast<double>(n1 - n0) / wall_s;
  row.runner_cpu = (c1 - c0) / wall_s;
  if (j1.second > j0.second) {
    row.machine_cpu =
        (j1.first - j0.first) / (j1.second - j0.second) * static_cast<double>(::sysconf(_SC_NPROCESSORS_ONLN));
  }
  if (n1 > n0) row.runner_us_per_sample = (c1 - c0) * 1e6 / static_cast<double>(n1 - n0);
  for (const auto& r : pool.stop_all()) {
    row.slowest_connect_ms = std::max(row.slowest_connect_ms, static_cast<double>(r.connect_time.count()));
    row.samples += r.samples;
    row.expected += r.last_seq;
    if (r.samples < r.last_seq) row.missing += r.last_seq - r.samples;
    if (r.lost) ++row.lost;
    row.recovered += r.recovered;
    if (!r.errors.empty()) {
      if (++row.with_errors <= 3) std::fprintf(stderr, "  %s: %s\n", r.name.c_str(), r.errors.front().c_str());
    }
  }
  return row;
}

// "1,16,64" -> {1, 16, 64}
std::vector<int> size_list(const std::string& list) {
  std::vector<int> out;
  for (size_t p = 0; p < list.size();) {
    size_t q = list.find(',', p);
    if (q == std::string::npos) q = list.size();
    out.push_back(std::stoi(list.substr(p, q - p)));
    p = q + 1;
  }
  return out;
}

void print_header() {
  std::printf("%6s %4s %5s %11s %7s %11s %13s %23s %11s %7s %10s %8s %9s %9s %8s %10s %8s %5s %6s\n", "hosts", "K",
              "peak", "startup ms", "x N=1", "connect ms", "slowest host", "queue/ssh/hello/clock", "samples/s",
              "x N=1", "per host/s", "us/smp", "runner %", "machine %", "lag ms", "delivered", "missing", "lost",
              "failed");
}

void print_row(const Row& r, const Row& base, int cores) {
  const ConnectPhases& p = r.slowest;
  char phases[64];
  std::snprintf(phases, sizeof(phases), "%lld/%lld/%lld/%lld", (long long)p.queue.count(), (long long)p.ssh.count(),
                (long long)p.hello.count(), (long long)p.clock.count());
  std::printf(
      "%6d %4s %5d %11.1f %7.2f %11.1f %13.1f %23s %11.0f %7.2f %10.0f %8.1f %9.0f %9.0f %8.0f %10llu %8llu %5llu "
      "%6llu\n",
      r.hosts, r.concurrency >= kUnbounded ? "-" : std::to_string(r.concurrency).c_str(), r.peak, r.startup_ms,
      r.startup_ms / base.startup_ms, r.connect_ms, r.slowest_connect_ms, phases, r.samples_per_s,
      r.samples_per_s / base.samples_per_s, r.samples_per_s / r.hosts, r.runner_us_per_sample,
      100 * r.runner_cpu / cores, 100 * r.machine_cpu / cores, r.lag_ms, (unsigned long long)r.samples,
      (unsigned long long)r.missing, (unsigned long long)r.lost, (unsigned long long)r.failed);
  if (r.with_errors) {
    std::printf("       (%llu hosts reported errors; %llu samples recovered from spools)\n",
                (unsigned long long)r.with_errors, (unsigned long long)r.recovered);
  }
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  double seconds = 3;
  int interval_ms = 10;
  int concurrency = kDefaultConnectConcurrency;
  std::vector<int> sizes = {1, 16, 64, 128}, unbounded;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--seconds")) {
      seconds = std::stod(argv[i + 1]);
    } else if (!std::strcmp(argv[i], "--interval-ms")) {
      interval_ms = std::stoi(argv[i + 1]);
    } else if (!std::strcmp(argv[i], "--sizes")) {
      sizes = size_list(argv[i + 1]);
    } else if (!std::strcmp(argv[i], "--unbounded")) {
      unbounded = size_list(argv[i + 1]);
    } else if (!std::strcmp(argv[i], "--concurrency")) {
      concurrency = std::stoi(argv[i + 1]);
    }
  }
  testing::SshdOptions so;
  so.max_startups = "";  // sshd's default, 10:30:100
  testing::SshdFixture sshd{so};
  const int cores = static_cast<int>(::sysconf(_SC_NPROCESSORS_ONLN));
  std::printf(
      "runner fan-out: heartbeat every %d ms per host, %.1f s capture, one loopback sshd (MaxStartups "
      "default), %d CPUs; %% columns: of all %d cores; phases: the slowest host's, ms\n",
      interval_ms, seconds, cores, cores);
  print_header();
  Row base;
  for (int n : sizes) {
    Row r = measure(sshd, n, seconds, interval_ms, concurrency);
    if (base.hosts == 0) base = r;
    print_row(r, base, cores);
  }
  for (int n : unbounded) print_row(measure(sshd, n, seconds, interval_ms, kUnbounded), base, cores);
  return 0;
}
