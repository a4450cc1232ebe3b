// Benchmark: installing N /32 routes + N permanent neighbours (the source side of a forwarding
// plan) in a fresh network namespace with a veth device, (a) through ocslab's pipelined
// rtnetlink code (RouteNetlink) and through the whole Forwarder::apply (dump, diff, fsynced
// journal, netlink), (b) one `ip` process per rule as the TopoOpt scripts do, (c) one
// `ip -batch` process. Every method starts from an empty table and is checked to leave exactly
// the N routes and N neighbours. Prints median times of R rounds (the per-rule baseline: one
// round) and the ratios; asserts nothing about speed. Needs root (unshare(CLONE_NEWNET)).
//   forwarding_install [--rules N] [--rounds R]
#include <sched.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "ocslab/forwarding/apply.h"
#include "ocslab/forwarding/route_netlink.h"

    extern char** environ;

using namespace ocslab::forwarding;
using Clock = std::chrono::steady_clock;

namespace {

int run(const std::vector<std::string>& argv) {
  std::vector<char*> a;
  for (const auto& s : argv) a.push_back(const_cast<char*>(s.c_str()));
  a.push_back(nullptr);
  pid_t pid = 0;
  if (posix_spawnp(&pid, a[0], nullptr, nullptr, a.data(), environ) != 0) throw std::runtime_error("spawn " + argv[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

void must(const std::vector<std::string>& argv) {
  if (run(argv) != 0) {
    std::string cmd;
    for (const auto& s : argv) cmd += s + " ";
    throw std::runtime_error("failed: " + cmd);
  }
}

HostPlan rules(int n) {
  HostPlan p;
  p.host = "bench";
  for (int i = 0; i < n; ++i) {
    std::string dst = fmt::format("10.{}.{}.{}", 100 + i / 62500, (i / 250) % 250, i % 250 + 1);
    p.routes.push_back({dst + "/32", "fwb0", "10.99.0.1", kRouteProtocol});
    p.neighbours.push_back(
        {dst, fmt::format("02:00:00:{:02x}:{:02x}:{:02x}", (i >> 16) & 0xff, (i >> 8) & 0xff, i & 0xff), "fwb0"});
  }
  return p;
}

// Exactly the plan's routes and permanent neighbours, nothing more.
void check_installed(RouteNetlink& nl, const HostPlan& p, const char* method) {
  size_t routes = 0, neigh = 0;
  for (const auto& r : nl.list_routes()) routes += r.rule.protocol == kRouteProtocol;
  for (const auto& n : nl.list_neighbours()) neigh += n.permanent();
  if (routes != p.routes.size() || neigh != p.neighbours.size())
    throw std::runtime_error(fmt::format("{}: {} routes and {} permanent neighbours installed, expected {} and {}",
                                         method, routes, neigh, p.routes.size(), p.neighbours.size()));
}

void clean(RouteNetlink& nl, const HostPlan& p) {
  std::vector<RouteRequest> r;
  std::vector<NeighbourRequest> n;
  for (const auto& x : nl.list_routes())
    if (x.rule.protocol == kRouteProtocol) r.push_back({ChangeOp::remove, x.rule});
  for (const auto& x : nl.list_neighbours())
    if (x.permanent()) n.push_back({ChangeOp::remove, x.rule});
  nl.apply(r);
  nl.apply(n);
  size_t left = 0;
  for (const auto& x : nl.list_routes()) left += x.rule.protocol == kRouteProtocol;
  if (left) throw std::runtime_error("cleanup left routes");
  (void)p;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  int n = 1000, rounds = 3;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--rules" && i + 1 < argc)
      n = std::atoi(argv[++i]);
    else if (a == "--rounds" && i + 1 < argc)
      rounds = std::atoi(argv[++i]);
    else {
      std::fprintf(stderr, "usage: forwarding_install [--rules N] [--rounds R]\n");
      return 1;
    }
  }
  if (n < 1 || n > 250000 || rounds < 1) {
    std::fprintf(stderr, "forwarding_install: --rules 1..250000, --rounds >= 1\n");
    return 1;
  }
  if (::unshare(CLONE_NEWNET) != 0) {
    std::fprintf(stderr, "forwarding_install: unshare(CLONE_NEWNET): %s (run as root)\n", std::strerror(errno));
    return 1;
  }
  try {
    // A fresh namespace: only lo, and the veth pair made here. ip children inherit it.
    must({"ip", "link", "add", "fwb0", "type", "veth", "peer", "name", "fwb1"});
    must({"ip", "addr", "add", "10.99.0.1/16", "dev", "fwb0"});
    must({"ip", "link", "set", "fwb0", "up"});
    must({"ip", "link", "set", "fwb1", "up"});
    HostPlan p = rules(n);
    std::string dir = fmt::format("/tmp/ocslab-bench-fwd-{}", ::getpid());
    std::filesystem::create_directories(dir);
    std::string batch = dir + "/rules.batch";
    {
      std::ofstream f(batch);
      for (const auto& x : p.neighbours) f << render(x).substr(3) << "\n";  // without "ip "
      for (const auto& x : p.routes) f << render(x).substr(3) << "\n";
    }
    RouteNetlink nl;
    std::vector<double> t_nl, t_engine, t_proc, t_batch;
    for (int round = 0; round < rounds; ++round) {
      auto t0 = Clock::now();
      {
        std::vector<NeighbourRequest> nq;
        std::vector<RouteRequest> rq;
        for (const auto& x : p.neighbours) nq.push_back({ChangeOp::add, x});
        for (const auto& x : p.routes) rq.push_back({ChangeOp::add, x});
        nl.apply(nq);
        nl.apply(rq);
      }
      t_nl.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
      check_installed(nl, p, "ocslab netlink");
      clean(nl, p);

      ApplyOptions o;
      o.state_dir = dir + "/state";
      std::filesystem::remove_all(o.state_dir);
      Forwarder fwd(o);
      t0 = Clock::now();
      fwd.apply(p);
      t_engine.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
      check_installed(nl, p, "ocslab Forwarder::apply");
      clean(nl, p);

      // The per-rule baseline takes minutes on a loaded machine and is orders of magnitude
      // away from the others: measured in the first round only.
      if (round == 0) {
        t0 = Clock::now();
        for (const auto& x : p.neighbours)
          must({"ip", "neigh", "replace", x.dst, "lladdr", x.lladdr, "dev", x.dev, "nud", "permanent"});
        for (const auto& x : p.routes)
          must({"ip", "route", "replace", x.dst, "dev", x.dev, "src", x.src, "proto", std::to_string(x.protocol)});
        t_proc.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
        check_installed(nl, p, "ip per rule");
        clean(nl, p);
      }

      t0 = Clock::now();
      must({"ip", "-batch", batch});
      t_batch.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
      check_installed(nl, p, "ip -batch");
      clean(nl, p);
    }
    std::filesystem::remove_all(dir);
    double a = median(t_nl), e = median(t_engine), b = median(t_proc), c = median(t_batch);
    std::printf(
        "forwarding_install: %d routes + %d permanent neighbours on a veth in a fresh netns, median of %d "
        "rounds (per-rule: 1)\n",
        n, n, rounds);
    std::printf("  %-44s %10.2f ms  %8.0f rules/s\n", "(a) ocslab RouteNetlink (pipelined)", a * 1e3, 2 * n / a);
    std::printf("  %-44s %10.2f ms  %8.0f rules/s\n", "(a') ocslab Forwarder::apply (dump+journal)", e * 1e3,
                2 * n / e);
    std::printf("  %-44s %10.2f ms  %8.0f rules/s\n", "(b) one ip process per rule", b * 1e3, 2 * n / b);
    std::printf("  %-44s %10.2f ms  %8.0f rules/s\n", "(c) ip -batch", c * 1e3, 2 * n / c);
    std::printf("  ratios: per-rule/(a) %.1fx, ip-batch/(a) %.2fx, per-rule/(a') %.1fx, ip-batch/(a') %.2fx\n", b / a,
                c / a, b / e, c / e);
  } catch (const std::exception& ex) {
    std::fprintf(stderr, "forwarding_install: %s\n", ex.what());
    return 1;
  }
  return 0;
}
