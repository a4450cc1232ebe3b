// Benchmark: the runner's memory over a long capture (issue 21). The capture path of
// `ocslab run` (runner/capture_store.h: one append-only file per host, synced every second;
// merge_capture: sorted runs, then a k-way merge into timeline.csv) is fed the sample count of
// a D-minute run at the fault-matrix rates, 4 hosts x (carrier 1 kHz + heartbeat 1 kHz + RDMA
// 100 Hz) = 8,400 samples/s, from one thread per host as the sessions deliver them, as fast as
// the disk takes them. Each duration runs in a child process of its own; it reports its peak
// RSS (VmHWM) after the capture and after the merge, and the rate into disk. The baseline is
// the same samples kept in a std::vector<Sample> and sorted, what the runner did before.
//   capture_memory [--minutes 1,10] [--dir DIR]   (DIR: where to write, default a temp dir)
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <functional>
#include <mutex>
#include <algorithm>
#include <thread>
#include <vector>

#include "ocslab/common/file.h"
#include "ocslab/runner/capture_store.h"
#include "ocslab/runner/run_context.h"
#include "ocslab/runner/merge.h"
#include "ocslab/runner/runner.h"
#include "peak_rss.h"

using namespace ocslab;
using namespace ocslab::runner;
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

using ocslab::bench::vm_hwm_kib;

namespace {

constexpr int kHosts = 4;
constexpr int kPerHostPerSecond = 2100;  // carrier 1000 + heartbeat 1000 + RDMA 100

// The i-th sample of a host: the three probes interleaved at their rates, 1 ms apart.
Sample host_sample(int host, uint64_t i) {
  int64_t t = 1'790'000'000'000'000'000 + static_cast<int64_t>(i) * 1'000'000 / 2 + host * 137;
  Sample s{t, t, "h" + std::to_string(host + 1), "carrier", "eth1", "carrier", 1, "bool"};
  if (i % 21 == 20) {
    s.source = "rdma";
    s.subject = "rxe_eth1/eth1@h" + std::to_string((host + 1) % kHosts + 1);
    s.signal = "completion";
    s.value = 12.5;
    s.unit = "us";
  } else if (i % 2) {
    s.source = "heartbeat";
    s.subject = "agent";
    s.signal = "heartbeat";
  }
  return s;
}

struct Figures {
  long capture_kib = 0, merge_kib = 0;
  double capture_s = 0, merge_s = 0;
  uint64_t rows = 0;
};

Figures streamed(const std::string& dir, uint64_t per_host) {
  Figures f;
  auto t0 = Clock::now();
  {
    CaptureStore store(dir + "/capture");
    std::vector<std::thread> threads;
    for (int h = 0; h < kHosts; ++h) {
      threads.emplace_back([&store, h, per_host] {
        const std::string stream = "host.h" + std::to_string(h + 1);
        for (uint64_t i = 0; i < per_host; ++i) store.append(stream, host_sample(h, i), i + 1);
      });
    }
    for (auto& t : threads) t.join();
    store.close();
  }
  f.capture_s = std::chrono::duration<double>(Clock::now() - t0).count();
  f.capture_kib = vm_hwm_kib();
  std::vector<CaptureInput> inputs;
  for (int h = 0; h < kHosts; ++h) inputs.push_back({dir + "/capture/host.h" + std::to_string(h + 1) + ".csv", {}});
  t0 = Clock::now();
  f.rows = merge_capture(inputs, dir + "/timeline.csv", "bench", [](int64_t) { return 0; }, dir + "/capture/.merge");
  f.merge_s = std::chrono::duration<double>(Clock::now() - t0).count();
  f.merge_kib = vm_hwm_kib();
  return f;
}

Figures in_memory(const std::string& dir, uint64_t per_host) {
  Figures f;
  auto t0 = Clock::now();
  std::vector<Sample> all;
  std::mutex m;
  std::vector<std::thread> threads;
  for (int h = 0; h < kHosts; ++h) {
    threads.emplace_back([&, h] {
      for (uint64_t i = 0; i < per_host; ++i) {
        Sample s = host_sample(h, i);
        std::lock_guard lock(m);
        all.push_back(std::move(s));
      }
    });
  }
  for (auto& t : threads) t.join();
  f.capture_s = std::chrono::duration<double>(Clock::now() - t0).count();
  f.capture_kib = vm_hwm_kib();
  t0 = Clock::now();
  std::stable_sort(all.begin(), all.end(), [](const Sample& a, const Sample& b) { return a.t_ns < b.t_ns; });
  write_timeline(dir + "/timeline.csv", all, "bench", [](int64_t) { return 0; });
  f.rows = all.size();
  f.merge_s = std::chrono::duration<double>(Clock::now() - t0).count();
  f.merge_kib = vm_hwm_kib();
  return f;
}

// Runs fn in a child (a fresh peak RSS) and reads its figures back through a pipe.
Figures in_child(const std::function<Figures()>& fn) {
  int p[2];
  if (::pipe(p) != 0) throw std::runtime_error("pipe");
  pid_t pid = ::fork();
  if (pid == 0) {
    ::close(p[0]);
    Figures f = fn();
    if (::write(p[1], &f, sizeof f) != sizeof f) ::_exit(2);
    ::_exit(0);
  }
  ::close(p[1]);
  Figures f;
  ssize_t n = ::read(p[0], &f, sizeof f);
  ::close(p[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  if (n != sizeof f || !WIFEXITED(status) || WEXITSTATUS(status) != 0) throw std::runtime_error("child failed");
  return f;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int> minutes = {1, 10};
  std::string base;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--minutes" && i + 1 < argc) {
      minutes.clear();
      std::string list = argv[++i];
      for (size_t pos = 0; pos <= list.size();) {
        size_t c = list.find(',', pos);
        minutes.push_back(std::stoi(list.substr(pos, c - pos)));
        pos = c == std::string::npos ? list.size() + 1 : c + 1;
      }
    } else if (a == "--dir" && i + 1 < argc) {
      base = argv[++i];
    } else {
      std::fprintf(stderr, "usage: capture_memory [--minutes 1,10] [--dir DIR]\n");
      return a == "--help" || a == "-h" ? 0 : 1;
    }
  }
  if (base.empty()) base = fs::temp_directory_path() / ("ocslab-capture-bench-" + std::to_string(::getpid()));
  std::printf("capture path of `ocslab run`: %d hosts x %d samples/s (carrier 1 kHz + heartbeat 1 kHz + RDMA 100 Hz)\n",
              kHosts, kPerHostPerSecond);
  std::printf("%8s %10s %12s %14s %14s %12s %12s\n", "minutes", "mode", "rows", "peak capture", "peak merge",
              "into disk/s", "merge rows/s");
  long first_streamed = 0, first_memory = 0;
  for (int m : minutes) {
    uint64_t per_host = static_cast<uint64_t>(m) * 60 * kPerHostPerSecond;
    for (const char* mode : {"streamed", "in-memory"}) {
      std::string dir = base + "/" + mode + "-" + std::to_string(m);
      fs::remove_all(dir);
      fs::create_directories(dir);
      Figures f = in_child([&] {
        return std::string(mode) == "streamed" ? streamed(dir, per_host) : in_memory(dir, per_host);
      });
      fs::remove_all(dir);
      long peak = std::max(f.capture_kib, f.merge_kib);
      long& first = std::string(mode) == "streamed" ? first_streamed : first_memory;
      if (first == 0) first = peak;
      std::printf("%8d %10s %12llu %11.1f MiB %11.1f MiB %12.0f %12.0f   peak x%.2f of the first duration\n", m, mode,
                  static_cast<unsigned long long>(f.rows), f.capture_kib / 1024.0, f.merge_kib / 1024.0,
                  static_cast<double>(f.rows) / f.capture_s, static_cast<double>(f.rows) / f.merge_s,
                  static_cast<double>(peak) / static_cast<double>(first));
    }
  }
  fs::remove_all(base);
  return 0;
}
