// Benchmark: the phase controller's topo_write round trip (shim pre hook -> barrier -> ACK) with
// 8, 64 and 512 emulated ranks on loopback against the OCS emulator with switch time 0, with
// and without a reconfiguration per op; and what the control plane adds per reconfiguration
// over calling libocs directly for the same circuit changes, measured in the same run.
//   phase_controller [--rounds-scale F]
#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <thread>
#include <vector>

#include "ocslab/testing/phase_lab.h"
#include "ocslab/common/log.h"
#include "ocslab/phase/controller.h"
#include "ocslab/phase/orchestrator.h"
#include "ocslab/phase/shim.h"

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

struct Result {
  std::vector<double> pre_ms;       // every pre hook, every rank
  std::vector<double> last_ms;      // per op: the last rank's request -> its ACK (controller view)
  std::vector<double> dispatch_ms;  // last request -> rail work starts
  std::vector<double> rail_ms;      // reconfig_start -> reconfig_end (orchestrator + libocs)
  std::vector<double> fanout_ms;    // reconfig_end -> last ACK sent
};

Result run(int n, int rounds, bool reconfigure) {
  phase_test::Lab lab(phase_test::phase_switch(0, std::max(64, n)));
  JobLayout L{"bench", 1, {{"dp", n / 2}, {"cp", 2}}};
  auto o = lab.rail(L, TopoId::uniform(L, 1));
  Controller ctl(phase_test::controller_options(L, {o}));
  ctl.start();
  std::vector<int> all;
  for (int r = 0; r < n; ++r) all.push_back(r);
  std::vector<std::vector<double>> per(static_cast<size_t>(n));
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
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
        for (int i = 0; i < rounds; ++i) {
          OpDescriptor op{reconfigure && i % 2 ? "all_cp" : "all_dp", "allreduce", 1 << 20, 0};
          auto t0 = Clock::now();
          shim.pre_communication(op);
          per[static_cast<size_t>(r)].push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
          shim.post_communication(op);
        }
      } catch (const std::exception& e) {
        std::fprintf(stderr, "rank %d: %s\n", r, e.what());
        ++failures;
      }
    });
  }
  for (auto& t : threads) t.join();
  ctl.stop();
  if (failures) throw Error(fmt::format("{} ranks failed", failures.load()));
  Result res;
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
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::strcmp(argv[i], "--rounds-scale") == 0) scale = std::atof(argv[i + 1]);
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
  for (auto [n, rounds] : rows) {
    rounds = std::max(rounds, 4);
    for (bool rc : {false, true}) {
      auto r = run(n, rounds, rc);
      std::printf("%6d %7d %-13s %9.3f %9.3f %13.3f %13.3f\n", n, rounds, rc ? "reconfigure" : "same topology",
                  pct(r.pre_ms, 0.5), pct(r.pre_ms, 0.99), pct(r.last_ms, 0.5), pct(r.last_ms, 0.99));
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
  std::printf(
      "\nrail = orchestrator on its worker strand (diff + libocs); dispatch = last request -> rail work starts;\n");
  std::printf("ACK fanout = rail confirmed -> last ACK written; overhead = last-rank / libocs (1.00x = no overhead)\n");
  return 0;
}
