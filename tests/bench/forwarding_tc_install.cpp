// Installing relay filters (flower dst_ip -> pedit eth dst -> mirred redirect), three ways in
// the same run on the same kernel: ocslab's TcNetlink (one pipelined batch), one `tc` process
// per filter (the TopoOpt scripts' way) and `tc -batch`. Goal: >= 50x faster than per-filter
// processes and faster than tc -batch.
//
// This machine's kernel has no cls_flower/act_pedit, so by default the benchmark boots a
// one-guest virtual lab (Debian's kernel), copies itself into the lab folder and runs
// `forwarding_tc_install --guest` inside over `ocslab vlab ssh`, printing the guest's figures.
//   forwarding_tc_install [--rules N] [--lab-file F]   boot, run inside, tear down
//   forwarding_tc_install --guest [--rules N]           run here (needs flower + pedit)
// Guest times are under TCG emulation: compare the ratios, not the absolute numbers.
#include <fmt/format.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "ocslab/common/process.h"
#include "ocslab/forwarding/tc_netlink.h"
#include "ocslab/testing/sshd_fixture.h"
#include "ocslab/vlab/lab_spec.h"
#include "ocslab/vlab/lab_state.h"

namespace fs = std::filesystem;
using namespace ocslab;
using namespace ocslab::forwarding;

namespace {

constexpr int kRulesPerDevice = kTcPrioLast - kTcPrioFirst + 1;  // one prio per filter

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

void sh(const std::string& cmd) { run_program({"sh", "-c", cmd}); }

// Devices bench-if2-K (veth, the relays' if2) and the redirect target bench-out0.
std::vector<std::string> make_devices(int devices) {
  std::vector<std::string> names;
  sh("ip link add bench-out0 type veth peer name bench-out1 && ip link set bench-out0 up && ip link set bench-out1 up");
  for (int k = 0; k < devices; ++k) {
    std::string n = fmt::format("bench-if2-{}", k);
    sh(fmt::format("ip link add {} type veth peer name bench-tx-{} && ip link set {} up", n, k, n));
    names.push_back(n);
  }
  return names;
}

void remove_devices(const std::vector<std::string>& names) {
  for (const auto& n : names) run_program_status({"ip", "link", "del", n});
  run_program_status({"ip", "link", "del", "bench-out0"});
}

std::vector<FilterRule> make_rules(int n, const std::vector<std::string>& devs) {
  std::vector<FilterRule> rules;
  for (int i = 0; i < n; ++i) {
    FilterRule r;
    r.dev = devs[static_cast<size_t>(i / kRulesPerDevice)];
    r.prio = static_cast<uint16_t>(kTcPrioFirst + i % kRulesPerDevice);
    r.dst = fmt::format("10.{}.{}.{}/32", 100 + i / 65536, (i / 256) % 256, i % 256);
    r.set_eth_dst = fmt::format("02:00:00:00:{:02x}:{:02x}", (i >> 8) & 0xff, i & 0xff);
    r.redirect_dev = "bench-out0";
    rules.push_back(r);
  }
  return rules;
}

// The plan's own tc command, with the cookie ocslab's netlink form carries, so all three
// methods install the same filter.
std::string tc_args(const FilterRule& r) {
  std::string cmd = render(r).substr(3);  // without "tc "
  const std::string ck = std::string(" cookie ") + kActionCookie;
  cmd.replace(cmd.find(" pipe action mirred"), 19, " pipe" + ck + " action mirred");
  return cmd + ck;
}

void fresh_clsacts(TcNetlink& tc, const std::vector<std::string>& devs) {
  for (const auto& d : devs) {
    if (tc.has_clsact(d)) run_program({"tc", "qdisc", "del", "dev", d, "clsact"});
    tc.add_clsact(d);
  }
}

size_t installed(TcNetlink& tc, const std::vector<std::string>& devs) {
  size_t n = 0;
  for (const auto& d : devs) {
    for (const auto& f : tc.list_owned(d)) n += f.problem.empty();
  }
  return n;
}

int guest(int n) {
  int devices = (n + kRulesPerDevice - 1) / kRulesPerDevice;
  auto devs = make_devices(devices);
  struct Cleanup {
    std::vector<std::string> devs;
    ~Cleanup() { remove_devices(devs); }
  } cleanup{devs};
  auto rules = make_rules(n, devs);
  TcNetlink tc;
  // Warm-up, untimed: the first filter makes the kernel load cls_flower, act_pedit and
  // act_mirred (seconds under TCG), which no method should be charged for.
  fresh_clsacts(tc, devs);
  tc.add_filters({rules[0]});
  run_program({"sh", "-c", "exec tc " + tc_args(rules[1])});
  tc.delete_filters({rules[0], rules[1]});

  // ocslab: one call, pipelined.
  fresh_clsacts(tc, devs);
  auto t0 = std::chrono::steady_clock::now();
  tc.add_filters(rules);
  double ocslab_s = seconds_since(t0);
  size_t ok_ocslab = installed(tc, devs);
  t0 = std::chrono::steady_clock::now();
  auto listed = tc.list_owned(devs[0]);
  double list_s = seconds_since(t0);
  t0 = std::chrono::steady_clock::now();
  tc.delete_filters(rules);
  double delete_s = seconds_since(t0);

  // tc -batch: one process reading every command from a file.
  fresh_clsacts(tc, devs);
  std::string batch = "/tmp/forwarding_tc_install.batch";
  {
    std::ofstream out(batch);
    for (const auto& r : rules) out << tc_args(r) << "\n";
  }
  t0 = std::chrono::steady_clock::now();
  run_program({"tc", "-batch", batch});
  double batch_s = seconds_since(t0);
  size_t ok_batch = installed(tc, devs);
  fs::remove(batch);

  // One tc process per filter.
  fresh_clsacts(tc, devs);
  t0 = std::chrono::steady_clock::now();
  for (const auto& r : rules) run_program({"sh", "-c", "exec tc " + tc_args(r)});
  double per_rule_s = seconds_since(t0);
  size_t ok_per_rule = installed(tc, devs);
  for (const auto& d : devs) run_program({"tc", "qdisc", "del", "dev", d, "clsact"});

  std::string kernel = run_program({"uname", "-r"});
  kernel.erase(kernel.find_last_not_of("\n") + 1);
  std::cout << fmt::format("forwarding_tc_install: {} flower/pedit/mirred filters on {} device(s), kernel {}\n", n,
                           devices, kernel);
  std::cout << fmt::format("  ocslab TcNetlink (pipelined batch) {:9.3f} s  {:8.1f} us/filter  ({} installed)\n",
                           ocslab_s, ocslab_s / n * 1e6, ok_ocslab);
  std::cout << fmt::format("  tc -batch                          {:9.3f} s  {:8.1f} us/filter  ({} installed)\n",
                           batch_s, batch_s / n * 1e6, ok_batch);
  std::cout << fmt::format("  one tc process per filter          {:9.3f} s  {:8.1f} us/filter  ({} installed)\n",
                           per_rule_s, per_rule_s / n * 1e6, ok_per_rule);
  std::cout << fmt::format("  ocslab vs per-filter processes: {:.1f}x faster (goal >= 50x: {})\n",
                           per_rule_s / ocslab_s, per_rule_s / ocslab_s >= 50 ? "met" : "MISSED");
  std::cout << fmt::format("  ocslab vs tc -batch:            {:.2f}x faster (goal > 1x: {})\n", batch_s / ocslab_s,
                           batch_s > ocslab_s ? "met" : "MISSED");
  std::cout << fmt::format("  also: list_owned of {} filters {:.3f} s, delete_filters of {} {:.3f} s\n", listed.size(),
                           list_s, n, delete_s);
  bool all = ok_ocslab == static_cast<size_t>(n) && ok_batch == static_cast<size_t>(n) &&
             ok_per_rule == static_cast<size_t>(n);
  if (!all) std::cerr << "forwarding_tc_install: not every method installed every filter\n";
  return all ? 0 : 1;
}

int host(int n, const std::string& lab_file) {
  std::string ocslab = testing::bin_path("ocslab");
  std::string name = vlab::load_lab_spec(lab_file).name;
  if (fs::exists(vlab::labs_dir(vlab::default_cache_dir()) + "/" + name))
    run_program_status({ocslab, "vlab", "down", name});
  auto up = run_program_status({ocslab, "vlab", "up", lab_file, "--timeout", "400"});
  if (up.status != 0) {
    std::cerr << "forwarding_tc_install: vlab up failed:\n" << up.out << up.err;
    return 1;
  }
  struct Down {
    std::string ocslab, name;
    ~Down() { run_program_status({ocslab, "vlab", "down", name}); }
  } down{ocslab, name};
  // A folder per run under the lab (guests do not see this machine's /tmp and may cache old
  // file contents over 9p).
  std::string dir = vlab::labs_dir(vlab::default_cache_dir()) + "/" + name + "/bench-" + std::to_string(::getpid());
  fs::create_directories(dir);
  fs::copy_file("/proc/self/exe", dir + "/forwarding_tc_install", fs::copy_options::overwrite_existing);
  auto r = run_program_status({ocslab, "vlab", "ssh", "--lab", name, "h1",
                               dir + "/forwarding_tc_install --guest --rules " + std::to_string(n)});
  std::cout << "inside virtual-lab guest h1 of " << name << " (TCG):\n" << r.out;
  if (r.status != 0) std::cerr << "forwarding_tc_install: guest run exited " << r.status << ": " << r.err;
  return r.status == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  int n = 1000;
  bool in_guest = false;
  std::string lab_file;
  const char* src = std::getenv("OCSLAB_SOURCE_DIR");
  lab_file = std::string(src && *src ? src : OCSLAB_SOURCE_DIR) + "/tests/vlab/labs/fwdtc-tc.yaml";
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--guest") {
      in_guest = true;
    } else if (a == "--rules" && i + 1 < argc) {
      n = std::stoi(argv[++i]);
    } else if (a == "--lab-file" && i + 1 < argc) {
      lab_file = argv[++i];
    } else {
      std::cerr << "usage: forwarding_tc_install [--guest] [--rules N] [--lab-file LAB.yaml]\n";
      return 1;
    }
  }
  try {
    return in_guest ? guest(n) : host(n, lab_file);
  } catch (const std::exception& e) {
    std::cerr << "forwarding_tc_install: " << e.what() << "\n";
    return 1;
  }
}
