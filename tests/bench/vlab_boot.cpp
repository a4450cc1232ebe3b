// Virtual-lab boot time and memory: wall time from `ocslab vlab up` to every host ready
// (SSH answers, Soft-RoCE ACTIVE) for N = 2 and N = 4 hosts in the same run, and the memory
// the lab's processes hold (resident set of the QEMU hosts and the supervisor). Goal: 4
// hosts under 60 s on a 2-core machine.
#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "ocslab/common/process.h"
#include "ocslab/testing/processes.h"
#include "ocslab/testing/sshd_fixture.h"
#include "ocslab/vlab/lab_state.h"

namespace fs = std::filesystem;

namespace {

std::string lab_yaml(int n) {
  std::string y = fmt::format("name: bench-boot-{}\nswitch: {{size: 16x16}}\nnic_model: cx6dx-no-autoneg\nhosts:\n", n);
  for (int i = 1; i <= n; ++i) {
    y += fmt::format("  - {{name: h{}, nics: [{{name: eth1, ip: 10.40.0.{}/24, tx_port: {}, rx_port: {}}}]}}\n", i, i,
                     i, 16 + i);
  }
  y += "links:\n";
  for (int i = 1; i + 1 <= n; i += 2) y += fmt::format("  - h{}:eth1 <-> h{}:eth1\n", i, i + 1);
  return y;
}

// Resident memory (kB) of every process whose command line names dir.
long rss_kb(const std::string& dir, int& processes) {
  long total = 0;
  processes = 0;
  for (const auto& p : ocslab::testing::processes_matching(dir)) {
    std::ifstream st("/proc/" + std::to_string(p.pid) + "/status");
    for (std::string line; std::getline(st, line);) {
      if (line.rfind("VmRSS:", 0) == 0) {
        total += std::stol(line.substr(6));
        ++processes;
      }
    }
  }
  return total;
}

}  // namespace

int main() {
  std::string cache = ocslab::vlab::default_cache_dir();
  fs::path specs = fs::path(cache) / "bench";
  fs::create_directories(specs);
  std::string ocslab_bin = ocslab::testing::bin_path("ocslab");
  double baseline = 0;
  for (int n : {2, 4}) {
    fs::path spec = specs / fmt::format("boot-{}.yaml", n);
    std::ofstream(spec) << lab_yaml(n);
    auto t0 = std::chrono::steady_clock::now();
    try {
      ocslab::run_program({ocslab_bin, "vlab", "up", spec.string()});
    } catch (const std::exception& e) {
      std::cerr << "vlab_boot: " << e.what() << "\n";
      return 1;
    }
    double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::string dir = ocslab::vlab::labs_dir(cache) + fmt::format("/bench-boot-{}", n);
    int procs = 0;
    long kb = rss_kb(dir, procs);
    ocslab::run_program({ocslab_bin, "vlab", "down", fmt::format("bench-boot-{}", n)});
    if (n == 2) baseline = secs;
    std::cout << fmt::format(
        "vlab boot N={}: {:.1f} s from up to all hosts ready ({:.1f} s per host; {:.2f}x the N=2 time){}; "
        "memory {:.0f} MiB resident in {} processes ({:.0f} MiB per host)\n",
        n, secs, secs / n, secs / baseline, n == 4 ? (secs < 60 ? ", goal < 60 s: met" : ", goal < 60 s: MISSED") : "",
        kb / 1024.0, procs, kb / 1024.0 / n);
  }
  return 0;
}
