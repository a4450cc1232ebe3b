// How a reconfiguration's cost grows with its circuits (issue "Lab scale", item 5): the time
// of OcsDriver::apply (what `ocsctl apply` runs: one list, then the protocol's reconfiguration
// commands) of 8, 64, 512 and 1024 circuits onto an empty 1024x1024 switch, through each
// protocol driver (TL1/TCP, NETCONF/SSH, SCPI/TCP) against the emulator in this process on
// loopback, switching time 0. Prints the median time per size, the cost per circuit, and the
// growth of the per-circuit cost from 8 to 1024 circuits (linear or better: <= 1x; the goal is
// within 2x), plus the marginal cost per circuit of the large step against the small one.
// Figures are ratios within one run; nothing is asserted.
//
//   ocs_scale [--repeats N] [--sizes 8,64,512,1024] [--only tl1|netconf|scpi] [--switching-ms MS]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "ocslab/emulator/emulator.h"
#include "ocslab/ocsctl/driver.h"
#include "ocslab/testing/sshd_fixture.h"

using namespace ocslab;

namespace {

constexpr int kIngress = 1024;
constexpr int kEgress = 1024;

struct Args {
  int repeats = 7;
  std::vector<int> sizes{8, 64, 512, 1024};
  std::string only;
  double switching_ms = 0;
};

[[noreturn]] void usage() {
  std::fprintf(stderr,
               "usage: ocs_scale [--repeats N] [--sizes 8,64,512,1024] [--only tl1|netconf|scpi] "
               "[--switching-ms MS]\n");
  std::exit(2);
}

Args parse_args(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    std::string_view k = argv[i];
    if (i + 1 >= argc) usage();
    std::string v = argv[++i];
    if (k == "--repeats") {
      a.repeats = std::atoi(v.c_str());
    } else if (k == "--sizes") {
      a.sizes.clear();
      for (size_t at = 0; at <= v.size();) {
        size_t comma = v.find(',', at);
        int n = std::atoi(v.substr(at, comma == std::string::npos ? std::string::npos : comma - at).c_str());
        if (n < 1 || n > kIngress) usage();
        a.sizes.push_back(n);
        if (comma == std::string::npos) break;
        at = comma + 1;
      }
    } else if (k == "--only") {
      a.only = v;
    } else if (k == "--switching-ms") {
      a.switching_ms = std::atof(v.c_str());
    } else {
      usage();
    }
  }
  if (a.repeats < 1 || a.sizes.empty()) usage();
  return a;
}

// n circuits as a rotor-style mapping: ingress 1..n, each to its own egress drawn at random
// (fixed seed) from all 1024, so that the egress list does not compress to one range.
std::vector<ocs::Circuit> mapping(int n) {
  std::vector<ocs::Port> egress;
  for (int p = 1; p <= kEgress; ++p) egress.push_back(kIngress + p);
  std::mt19937 rng(static_cast<unsigned>(n));
  std::shuffle(egress.begin(), egress.end(), rng);
  std::vector<ocs::Circuit> out;
  for (int i = 0; i < n; ++i) out.push_back({i + 1, egress[static_cast<size_t>(i)]});
  return out;
}

struct Target {
  const char* name;
  std::string url;
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Median wall time (ms) of apply(target, replace) onto an empty switch; the switch is cleared
// (untimed) after every run. One untimed run first warms the connection and caches.
double measure(ocs::OcsDriver& d, const std::vector<ocs::Circuit>& target, int repeats) {
  std::vector<double> ms;
  for (int r = -1; r < repeats; ++r) {
    auto t0 = std::chrono::steady_clock::now();
    auto report = d.apply(target, ocs::ApplyMode::kReplace);
    auto t1 = std::chrono::steady_clock::now();
    if (report.diff.add.size() != target.size() || !report.diff.remove.empty()) {
      std::fprintf(stderr, "ocs_scale: the switch was not empty before a run\n");
      std::exit(1);
    }
    if (r >= 0) ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
    d.clear();
  }
  return median(ms);
}

}  // namespace

int main(int argc, char** argv) {
  Args args = parse_args(argc, argv);

  emu::EmulatorConfig cfg;
  cfg.preset = "rotor";
  cfg.sw = emu::SwitchParams::preset("rotor");
  cfg.sw.ingress_ports = kIngress;
  cfg.sw.egress_ports = kEgress;
  cfg.sw.switching = emu::Distribution::fixed(args.switching_ms);
  cfg.control.tl1 = emu::ListenAddress{"127.0.0.1", 0};
  cfg.control.netconf = emu::ListenAddress{"127.0.0.1", 0};
  cfg.control.scpi = emu::ListenAddress{"127.0.0.1", 0};
  testing::TempDir tmp;
  const std::string known_hosts = tmp.path() + "/known_hosts";

  std::printf(
      "apply N circuits onto an empty %dx%d emulated switch (rotor, switching %g ms), loopback, "
      "median of %d\n",
      kIngress, kEgress, args.switching_ms, args.repeats);
  std::printf("%-8s %9s %12s %16s\n", "driver", "circuits", "apply (ms)", "per circuit (us)");
  for (const char* name : {"tl1", "netconf", "scpi"}) {
    if (!args.only.empty() && args.only != name) continue;
    // A fresh emulator per driver: what one driver left in the switch model (mirrors that
    // moved once) cannot weigh on the next one's figures.
    emu::Emulator emulator(cfg);
    emulator.start();
    auto ports = emulator.ports();
    std::ofstream(known_hosts) << emulator.known_hosts("127.0.0.1", *ports.netconf) << "\n";
    ocs::DriverOptions opts;
    opts.password = "root";
    opts.known_hosts_file = known_hosts;
    opts.reply_timeout = std::chrono::milliseconds(60000);
    const std::string url = std::string_view(name) == "tl1" ? "tl1://admin@127.0.0.1:" + std::to_string(*ports.tl1)
                            : std::string_view(name) == "netconf"
                                ? "netconf://admin@127.0.0.1:" + std::to_string(*ports.netconf)
                                : "scpi://127.0.0.1:" + std::to_string(*ports.scpi);
    const Target t{name, url};
    auto d = ocs::make_driver(ocs::SwitchUrl::parse(t.url), opts);
    d->open();
    d->clear();
    std::map<int, double> ms;
    for (int n : args.sizes) {
      ms[n] = measure(*d, mapping(n), args.repeats);
      std::printf("%-8s %9d %12.3f %16.2f\n", t.name, n, ms[n], ms[n] * 1000 / n);
      std::fflush(stdout);
    }
    d->close();
    emulator.stop();
    const int lo = args.sizes.front(), hi = args.sizes.back();
    if (args.sizes.size() >= 2 && hi > lo) {
      double per_lo = ms[lo] / lo, per_hi = ms[hi] / hi;
      std::printf("%-8s growth per circuit %d vs %d: %.2fx (linear or better <= 1x; goal <= 2x)\n", t.name, hi, lo,
                  per_hi / per_lo);
    }
    if (args.sizes.size() >= 4) {
      // The marginal cost per circuit of the last step against the first: fixed costs (round
      // trips, login) cancel out, so this is ~1x when the work per circuit stays the same.
      const int a = args.sizes[0], b = args.sizes[1], c = args.sizes[args.sizes.size() - 2];
      double small = (ms[b] - ms[a]) / (b - a), large = (ms[hi] - ms[c]) / (hi - c);
      std::printf("%-8s marginal per circuit %d->%d vs %d->%d: %.2fx (%.2f vs %.2f us)\n", t.name, c, hi, a, b,
                  large / small, large * 1000, small * 1000);
    }
  }
  return 0;
}
