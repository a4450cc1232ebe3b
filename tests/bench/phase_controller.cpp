// Benchmark: the phase controller's topo_write round trip (shim pre hook -> barrier -> ACK) with
// 8, 64 and 512 emulated ranks on loopback against the OCS emulator with switch time 0, with
// and without a reconfiguration per op; and what the control plane adds per reconfiguration
// over calling libocs directly for the same circuit changes, measured in the same run; and the
// controller's service time per rank message (CPU time of its event-loop thread, read from
// the kernel's per-thread accounting) apart from its rail workers and the ranks' own threads,
// so that what the controller spends is told apart from waiting for 512 client threads to be
// scheduled on a few CPUs.
//   phase_controller [--rounds-scale F] [--ranks N]
// --ranks N: only the rows with N ranks (and their overhead and service lines), for profiling.
// The controller's event-loop thread is named ctl-loop (perf report --comm ctl-loop).
#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <latch>
#include <map>
#include <set>
#include <thread>
#include <tuple>
#include <vector>

#include "ocslab/common/log.h"
#include "ocslab/phase/controller.h"
#include "ocslab/phase/orchestrator.h"
#include "ocslab/phase/shim.h"
#include "ocslab/testing/phase_lab.h"

using namespace ocslab;
using namespace ocslab::phase;
using Clock = std::chrono::steady_clock;

namespace {

double pct(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t i = static_cast<size_t>(p * static_cast<double>(v.size() - 1) + 0.5);
  return v[std::min(i, v.size() - 1)];
}

// The threads of this process (Linux task ids).
std::set<int> thread_ids() {
  std::set<int> out;
  for (const auto& e : std::filesystem::directory_iterator("/proc/self/task")) {
    out.insert(std::atoi(e.path().filename().c_str()));
  }
  return out;
}

std::set<int> minus(const std::set<int>& a, const std::set<int>& b) {
  std::set<int> out;
  std::set_difference(a.begin(), a.end(), b.begin(), b.end(), std::inserter(out, out.end()));
  return out;
}

// CPU time these threads have run, in ns: the first field of their schedstat (nanosecond
// accounting, unlike the clock ticks of /proc/.../stat).
int64_t cpu_ns(const std::set<int>& tids) {
  int64_t sum = 0;
  for (int t : tids) {
    std::ifstream f("/proc/self/task/" + std::to_string(t) + "/schedstat");
    long long ns = 0;
    if (f >> ns) sum += ns;
  }
  return sum;
}

// Names these threads (/proc/self/task/T/comm) so that a profile tells them apart.
void name_threads(const std::set<int>& tids, const char* name) {
  for (int t : tids) std::ofstream("/proc/self/task/" + std::to_string(t) + "/comm") << name;
}

int64_t thread_cpu_ns() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

// Where the ops' time went, from the moment every rank was connected to the last op's end.
struct Service {
  double wall_ms = 0;      // that span
  int64_t loop_ns = 0;     // the controller's event-loop thread: every rank message's handling
  int64_t workers_ns = 0;  // its rail workers (orchestrator + libocs)
  int64_t ranks_ns = 0;    // the ranks' threads (shims)
  size_t messages = 0;     // rank messages in that span: requests and dones
};

struct Result {
  std::vector<double> pre_ms;       // every pre hook, every rank
  std::vector<double> last_ms;      // per op: the last rank's request -> its ACK (controller view)
  std::vector<double> dispatch_ms;  // last request -> rail work starts
  std::vector<double> rail_ms;      // reconfig_start -> reconfig_end (orchestrator + libocs)
  std::vector<double> fanout_ms;    // reconfig_end -> last ACK sent
  Service service;
};

Result run(int n, int rounds, bool reconfigure) {
  phase_test::Lab lab(phase_test::phase_switch(0, std::max(64, n)));
  JobLayout L{"bench", 1, {{"dp", n / 2}, {"cp", 2}}};
  auto o = lab.rail(L, TopoId::uniform(L, 1));
  const auto before = thread_ids();
  Controller ctl(phase_test::controller_options(L, {o}));
  const auto workers = minus(thread_ids(), before);  // the rail thread pool, made with the controller
  ctl.start();
  const auto loop = minus(minus(thread_ids(), before), workers);  // the event loop, made by start()
  name_threads(loop, "ctl-loop");
  name_threads(workers, "ctl-rail");
  // Every rank connects and registers its groups before the measured span starts.
  std::latch ready(n), go(1);
  std::atomic<int64_t> ranks_ns{0};
  std::vector<int> all;
  for (int r = 0; r < n; ++r) all.push_back(r);
  std::vector<std::vector<double>> per(static_cast<size_t>(n));
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      bool counted = false;
      try {
        ShimOptions so;
        so.port = ctl.port();
        so.job = "bench";
        so.rank = r;
        so.world = n;
        so.connect_timeout = std::chrono::milliseconds(30000);
        Shim shim(so);
        shim.add_group("all_dp", "dp", all);
        shim.add_group("all_cp", "cp", all);
        ready.count_down();
        counted = true;
        go.wait();
        const int64_t cpu0 = thread_cpu_ns();
        for (int i = 0; i < rounds; ++i) {
          OpDescriptor op{reconfigure && i % 2 ? "all_cp" : "all_dp", "allreduce", 1 << 20, 0};
          auto t0 = Clock::now();
          shim.pre_communication(op);
          per[static_cast<size_t>(r)].push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
          shim.post_communication(op);
        }
        ranks_ns += thread_cpu_ns() - cpu0;
      } catch (const std::exception& e) {
        std::fprintf(stderr, "rank %d: %s\n", r, e.what());
        ++failures;
        if (!counted) ready.count_down();
      }
    });
  }
  ready.wait();
  const int64_t loop0 = cpu_ns(loop), workers0 = cpu_ns(workers);
  const size_t events0 = ctl.events().size();
  const auto wall0 = Clock::now();
  go.count_down();
  for (auto& t : threads) t.join();
  Service svc;
  svc.wall_ms = std::chrono::duration<double, std::milli>(Clock::now() - wall0).count();
  // A rank's last done is sent without waiting for the controller: count its handling too.
  const size_t expected = static_cast<size_t>(2 * n) * static_cast<size_t>(rounds);
  // load-safe: a benchmark: the ceiling of a wait for every message (the event); a hang guard.
  for (auto until = Clock::now() + std::chrono::seconds(5); Clock::now() < until;) {
    const auto events = ctl.events();
    svc.messages = 0;
    for (size_t i = events0; i < events.size(); ++i) {
      using K = ControllerEvent::Kind;
      svc.messages += events[i].kind == K::kRequest || events[i].kind == K::kDone;
    }
    if (svc.messages >= expected || failures) break;
    // load-safe: a benchmark: the poll interval of the wait for the messages.
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  svc.loop_ns = cpu_ns(loop) - loop0;
  svc.workers_ns = cpu_ns(workers) - workers0;
  svc.ranks_ns = ranks_ns;
  ctl.stop();
  if (failures) throw Error(fmt::format("{} ranks failed", failures.load()));
  Result res;
  res.service = svc;
  for (auto& v : per) res.pre_ms.insert(res.pre_ms.end(), v.begin(), v.end());
  // Controller-side spans per (group, seq).
  std::map<std::string, int64_t> last_req, rstart, rend, last_ack;
  for (const auto& e : ctl.events()) {
    auto key = fmt::format("{}#{}", e.group, e.seq);
    using K = ControllerEvent::Kind;
    if (e.kind == K::kRequest) last_req[key] = std::max(last_req[key], e.mono_ns);
    if (e.kind == K::kReconfigStart && !rstart.count(key)) rstart[key] = e.mono_ns;
    if (e.kind == K::kReconfigEnd) rend[key] = e.mono_ns;
    if (e.kind == K::kAck) last_ack[key] = std::max(last_ack[key], e.mono_ns);
  }
  for (const auto& [key, t] : last_ack) {
    res.last_ms.push_back(static_cast<double>(t - last_req[key]) / 1e6);
    if (rstart.count(key) && rend.count(key)) {
      res.dispatch_ms.push_back(static_cast<double>(rstart[key] - last_req[key]) / 1e6);
      res.rail_ms.push_back(static_cast<double>(rend[key] - rstart[key]) / 1e6);
      res.fanout_ms.push_back(static_cast<double>(t - rend[key]) / 1e6);
    }
  }
  return res;
}

// The same circuit changes as one reconfiguration above, made by calling libocs directly.
std::vector<double> direct_libocs(int n, int rounds) {
  phase_test::Lab lab(phase_test::phase_switch(0, std::max(64, n)));
  JobLayout L{"bench", 1, {{"dp", n / 2}, {"cp", 2}}};
  SubMappingTable t(L);
  auto slots = lab.slots(1, n);
  auto dp = to_circuits(t.compose(TopoId::uniform(L, 1)), slots);
  auto cp = to_circuits(t.compose(TopoId::uniform(L, 2)), slots);
  auto d = lab.driver();
  d->connect(dp);
  std::vector<double> out;
  for (int i = 0; i < rounds; ++i) {
    const auto& from = i % 2 ? cp : dp;
    const auto& to = i % 2 ? dp : cp;
    // Only the circuits that differ, as the orchestrator sends them.
    std::vector<ocs::Port> remove;
    std::vector<ocs::Circuit> add;
    for (size_t k = 0; k < from.size(); ++k) {
      if (std::find(to.begin(), to.end(), from[k]) == to.end()) remove.push_back(from[k].ingress);
      if (std::find(from.begin(), from.end(), to[k]) == from.end()) add.push_back(to[k]);
    }
    auto t0 = Clock::now();
    if (!remove.empty()) d->disconnect(remove);
    if (!add.empty()) d->connect(add);
    out.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  double scale = 1.0;
  int only = 0;
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::strcmp(argv[i], "--rounds-scale") == 0) scale = std::atof(argv[i + 1]);
    if (std::strcmp(argv[i], "--ranks") == 0) only = std::atoi(argv[i + 1]);
  }
  spdlog::set_level(spdlog::level::warn);
  std::printf("phase controller benchmark: loopback TCP, OCS emulator over TL1, switch time 0 ms, one rail\n");
  std::printf("topo_write round trip = one shim pre hook (request -> barrier of all ranks -> ACK), ms\n\n");
  std::printf("%6s %7s %-13s %9s %9s %13s %13s\n", "ranks", "ops", "case", "pre p50", "pre p99", "last-rank p50",
              "last-rank p99");
  struct Row {
    int n, rounds;
  };
  std::vector<Row> rows{
      {8, static_cast<int>(200 * scale)}, {64, static_cast<int>(60 * scale)}, {512, static_cast<int>(12 * scale)}};
  std::vector<std::pair<int, Result>> reconf;
  std::vector<std::tuple<int, int, bool, Service>> services;
  for (auto [n, rounds] : rows) {
    if (only > 0 && n != only) continue;
    rounds = std::max(rounds, 4);
    for (bool rc : {false, true}) {
      auto r = run(n, rounds, rc);
      std::printf("%6d %7d %-13s %9.3f %9.3f %13.3f %13.3f\n", n, rounds, rc ? "reconfigure" : "same topology",
                  pct(r.pre_ms, 0.5), pct(r.pre_ms, 0.99), pct(r.last_ms, 0.5), pct(r.last_ms, 0.99));
      services.emplace_back(n, rounds, rc, r.service);
      if (rc) reconf.emplace_back(n, std::move(r));
    }
  }
  std::printf("\ncontrol-plane overhead per reconfiguration (p50, ms); baseline = the same circuit changes\n");
  std::printf("made by calling libocs (OcsDriver disconnect + connect) directly, in this run\n\n");
  std::printf("%6s %9s %9s %9s %9s %11s %12s %9s\n", "ranks", "circuits", "libocs", "rail", "dispatch", "ACK fanout",
              "last-rank", "overhead");
  for (auto& [n, r] : reconf) {
    auto direct = direct_libocs(n, 40);
    double base = pct(direct, 0.5);
    double last = pct(r.last_ms, 0.5);
    std::printf("%6d %9d %9.3f %9.3f %9.3f %11.3f %12.3f %8.2fx\n", n, n, base, pct(r.rail_ms, 0.5),
                pct(r.dispatch_ms, 0.5), pct(r.fanout_ms, 0.5), last, base > 0 ? last / base : 0.0);
  }
  std::printf("\ncontroller service time per rank message, and where an op's wall time goes (CPU per op, ms)\n\n");
  std::printf("%6s %-13s %9s %13s %9s %9s %9s %9s %10s\n", "ranks", "case", "msgs/op", "loop/msg us", "loop", "rail",
              "ranks", "wall", "loop/wall");
  for (const auto& [n, rounds, rc, sv] : services) {
    const double ops = rounds;
    const double loop_ms = static_cast<double>(sv.loop_ns) / 1e6 / ops;
    std::printf("%6d %-13s %9.0f %13.2f %9.3f %9.3f %9.3f %9.3f %9.2f%%\n", n, rc ? "reconfigure" : "same topology",
                static_cast<double>(sv.messages) / ops,
                sv.messages ? static_cast<double>(sv.loop_ns) / 1e3 / static_cast<double>(sv.messages) : 0.0, loop_ms,
                static_cast<double>(sv.workers_ns) / 1e6 / ops, static_cast<double>(sv.ranks_ns) / 1e6 / ops,
                sv.wall_ms / ops, sv.wall_ms > 0 ? 100 * loop_ms * ops / sv.wall_ms : 0.0);
  }
  std::printf(
      "\nloop = the controller's event-loop thread (every rank message: request, done, ACK writes); rail = its\n"
      "worker threads; ranks = the shims' threads; wall = all ranks connected -> last op done, per op. What the\n"
      "wall time holds beyond loop and rail is the ranks' own work and their waiting to be scheduled.\n");
  std::printf(
      "\nrail = orchestrator on its worker strand (diff + libocs); dispatch = last request -> rail work starts;\n");
  std::printf("ACK fanout = rail confirmed -> last ACK written; overhead = last-rank / libocs (1.00x = no overhead)\n");
  return 0;
}
