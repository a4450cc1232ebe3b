// Phase-driven reconfiguration end to end in the virtual lab: four QEMU guests with Soft-RoCE,
// one rank of ocslab-collbench-verbs each, running the DP/PP schedule (dp-pp-4-phase.yaml)
// while `ocslab controller` rewires the lab's emulated OCS for every phase through the shim
// (--controller --job --phase-mode). The data NICs are connected only by the emulator's
// circuits, so the pipeline sends and DP allreduces can only complete over the circuits the
// controller made; the world ops (management group: no topo_id digit) run over the lab's
// management LAN, as Opus routes them over the front-end network. Both phase modes run on the
// same lab: results verified, reconfigurations per step as derived from the topo_ids, the
// emulator's ground truth matching every reconfiguration circuit by circuit, and
// provisioning's fabric wait printed next to on-demand's and clearly below it.
#include <signal.h>
#include <sys/wait.h>

#include <fmt/format.h>
#include <catch2/catch.hpp>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <thread>

#include "lab_fixture.h"
#include "ocslab/common/process.h"
#include "ocslab/ocsctl/driver.h"
#include "ocslab/ocsctl/switch_url.h"
#include "ocslab/phase/controller_config.h"
#include "ocslab/phase/topology.h"
#include "ocslab/testing/sshd_fixture.h"
#include "ocslab/vlab/lab_spec.h"
#include "ocslab/vlab/lab_state.h"
#include "ocslab/workloads/op_record.h"
#include "ocslab/workloads/schedule.h"
#include "ocslab/workloads/shim_hooks.h"

using namespace vlab_test;
using Catch::Matchers::Contains;

namespace {

// QEMU user networking's address for this machine's loopback, as seen from a guest's
// management NIC (the guests' default gateway): the controller listens on 127.0.0.1 here.
constexpr const char* kHostFromGuest = "10.0.2.2";
constexpr const char* kJob = "phasevlab";
constexpr int kRendezvousPort = 18670;

std::vector<std::string> split(const std::string& line, char sep = ',') {
  std::vector<std::string> f;
  std::stringstream ss(line);
  for (std::string x; std::getline(ss, x, sep);) f.push_back(x);
  return f;
}

// `ocslab controller` as a child process: started with the switch password in its
// environment, its bound port read from its first stdout line; SIGTERM (it then writes its
// events) and reaped in stop() or the destructor.
class ControllerProcess {
 public:
  ControllerProcess(const std::string& config, const std::string& events, const std::string& log,
                    const std::string& password) {
    ::setenv("OCSLAB_OCS_PASSWORD", password.c_str(), 1);
    SpawnOptions so;
    so.log_file = log;
    pid_ = spawn_program({testing::bin_path("ocslab"), "controller", config, "--events", events}, so);
    // load-safe: the ceiling of a wait for the controller's port (the event); a hang guard.
    auto deadline = std::chrono::steady_clock::now() + 30s;
    while (port_ == 0) {
      std::string text = read_file_or_empty(log);
      auto at = text.find("{\"listen\":\"127.0.0.1:");
      if (at != std::string::npos && text.find('"', at + 21) != std::string::npos) {
        port_ = std::stoi(text.substr(at + 21));
        break;
      }
      INFO("controller log:\n" << text);
      REQUIRE(process_alive(pid_));
      REQUIRE(std::chrono::steady_clock::now() < deadline);
      // load-safe: the poll interval of the wait for the port.
      std::this_thread::sleep_for(50ms);  // poll interval of this bounded wait
    }
  }
  ~ControllerProcess() { stop(); }
  int port() const { return port_; }
  // Exit status (130: stopped by the signal, as asked).
  int stop() {
    if (pid_ <= 0) return status_;
    ::kill(pid_, SIGTERM);
    int ws = 0;
    ::waitpid(pid_, &ws, 0);
    pid_ = -1;
    status_ = WIFEXITED(ws) ? WEXITSTATUS(ws) : 128 + WTERMSIG(ws);
    return status_;
  }

 private:
  pid_t pid_ = -1;
  int port_ = 0;
  int status_ = -1;
};

struct CtlEvent {
  int64_t mono_ns = 0;
  std::string kind, group;
  int64_t seq = 0;
  double value = 0;
};

std::vector<CtlEvent> read_events(const std::string& path) {
  std::vector<CtlEvent> out;
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  REQUIRE(line.rfind("mono_ns,t_ns,kind,rank,rail,group,seq,stages,value", 0) == 0);
  while (std::getline(in, line)) {
    auto f = split(line);
    REQUIRE(f.size() >= 9);
    out.push_back({std::stoll(f[0]), f[2], f[5], std::stoll(f[6]), std::stod(f[8])});
  }
  return out;
}

// The emulator's ground truth: every circuit move that started, "in-out", with its monotonic time.
std::vector<std::pair<int64_t, std::string>> switch_starts(const std::string& csv) {
  std::vector<std::pair<int64_t, std::string>> out;
  std::ifstream in(csv);
  for (std::string line; std::getline(in, line);) {
    auto f = split(line);
    if (f.size() >= 8 && f[2] == "switch" && f[4] == "switch_start") out.emplace_back(std::stoll(f[7]), f[3]);
  }
  return out;
}

// What the controller does with one schedule op: the shim group it asks for, and that group's
// topo_id digit on the stages its ranks live in (digit -1: a management group, no request).
struct FabricNeed {
  std::string group;
  int digit = -1;
  std::set<int> stages;
};

FabricNeed need_of(const workloads::Schedule& s, const workloads::Op& op, const phase::JobLayout& L) {
  const auto& g = s.group_of(op);
  FabricNeed n;
  n.group = workloads::shim_group(s, op);
  std::string dim = workloads::shim_dim(g);
  if (dim == "mgmt") return n;
  n.digit = L.digit_of(dim);
  std::vector<int> members = g.ranks;
  if (n.group != g.name) members = {op.src, op.dst};
  for (int r : members) n.stages.insert(L.stage_of(r));
  return n;
}

phase::TopoId apply(phase::TopoId t, const FabricNeed& n) {
  for (int st : n.stages) t.set(st, n.digit);
  return t;
}

std::set<ocs::Circuit> circuits_of(const phase::SubMappingTable& table, const phase::TopoId& t,
                                   const std::vector<phase::Slot>& slots) {
  auto v = phase::to_circuits(table.compose(t), slots);
  return {v.begin(), v.end()};
}

// The expected reconfigurations, derived from the schedule and the topo_ids alone: walk the
// step's ops from the initial topo_id, each fabric op setting its group's digit on its stages,
// and count the ops whose topo_id gives other circuits than the fabric has. For this schedule
// the count per step does not depend on which of two concurrent requests is served first (the
// pipeline groups all want "00"; each DP group changes its own stage only), which the
// controller is free to choose.
struct Expected {
  std::vector<int> per_step;  // warm-up steps included
  int provisioned_extra = 0;  // provisioning asks for one more step's first phase after the last op
};

Expected expected_reconfigurations(const workloads::Schedule& s, const phase::ControllerConfig& cfg,
                                   const std::vector<phase::Slot>& slots) {
  phase::SubMappingTable table(cfg.layout);
  phase::TopoId cur = cfg.initial;
  Expected e;
  auto step_through = [&](const workloads::Op& op) {
    FabricNeed n = need_of(s, op, cfg.layout);
    if (n.digit < 0) return 0;
    phase::TopoId next = apply(cur, n);
    int changed = circuits_of(table, next, slots) != circuits_of(table, cur, slots) ? 1 : 0;
    cur = next;
    return changed;
  };
  for (int step = 0; step < s.warmup + s.steps; ++step) {
    int n = 0;
    for (const auto& op : s.step) n += step_through(op);
    e.per_step.push_back(n);
  }
  // Each rank's post hook after its last op provisions its first fabric op of the next step.
  std::set<int> asked;
  for (const auto& op : s.step) {
    if (need_of(s, op, cfg.layout).digit < 0) continue;
    bool first_for_someone = false;
    for (int r = 0; r < s.ranks; ++r) {
      if (s.involves(op, r) && !asked.count(r)) {
        asked.insert(r);
        first_for_someone = true;
      }
    }
    if (first_for_someone) e.provisioned_extra += step_through(op);
  }
  return e;
}

long rxe_sent(const Lab& lab, const std::string& host, const std::string& dev) {
  return std::stol(lab.run(host, "cat /sys/class/infiniband/" + dev + "/ports/1/hw_counters/sent_pkts"));
}

struct ModeResult {
  double wait_ms = 0;  // reconfig_wait over the measured steps, summed over the ranks
  std::vector<int> per_step;
  double seconds = 0;
  std::string table;  // rank 0's
};

struct PhaseRuns {
  workloads::Schedule s;
  double switching_ms = 0;
  std::map<std::string, ModeResult> modes;
};

// Runs `schedule` (a file of experiments/workloads/schedules/, ranks numbered stage-major) on
// the shared phase lab once per mode, under `ocslab controller` with the job pp=2 x `dim`=2, and
// checks every run as the test case below describes.
PhaseRuns run_phase_workload(const std::string& schedule, const std::string& dim,
                             const std::vector<std::string>& modes) {
  PhaseRuns out;
  const std::string lab_file = kSharedPhase;  // shared with vlab_phase_runner
  const double switching_ms = vlab::load_lab_spec(source_path(lab_file)).emulator.sw.switching.mean_ms();
  out.switching_ms = switching_ms;
  Lab lab(lab_file, 120s, Sharing::kShared);
  const auto& st = lab.state();
  workloads::Schedule s = workloads::load_schedule(source_path("experiments/workloads/schedules/" + schedule));
  out.s = s;
  const std::string stem = schedule.substr(0, schedule.rfind('.'));
  REQUIRE(s.ranks == 4);
  REQUIRE(st.hosts.size() == 4);

  // Rank r on the r-th host; its data NIC is the job's slot r on the switch.
  std::vector<std::string> hosts;
  std::string slots_yaml, ranks_arg;
  for (const auto& h : st.hosts) {
    REQUIRE(h.nics.front().name == "eth1");  // the rank's data NIC (rail1's eth2 and h3's standby follow it)
    hosts.push_back(h.name);
    slots_yaml += fmt::format("{}{}-{}", slots_yaml.empty() ? "" : ", ", h.nics[0].tx_port, h.nics[0].rx_port);
    ranks_arg += (ranks_arg.empty() ? "" : ",") + h.name;
  }
  const std::string dir = st.dir;
  const std::string cfg_path = dir + "/phase-controller.yaml";
  std::ofstream(cfg_path) << fmt::format(
      "job: {}\npp: 2\ndims: [{{name: {}, size: 2}}]\ninitial: \"11\"\nlisten: 127.0.0.1:0\n"
      "rails:\n  - name: rail0\n    switch: {}\n    slots: [{}]\n",
      kJob, dim, st.switch_url(), slots_yaml);
  phase::ControllerConfig cfg = phase::load_controller_config(cfg_path);
  const auto& slots = cfg.rails.at(0).slots;
  phase::SubMappingTable table(cfg.layout);
  const Expected want = expected_reconfigurations(s, cfg, slots);
  std::cout << fmt::format(
      "expected reconfigurations per step (from the topo_ids): {}; provisioning +{} after the "
      "last op\n",
      fmt::join(want.per_step, " "), want.provisioned_extra);

  // Guests mount their own /tmp: binary and schedule go into the lab's folder.
  const std::string bin = dir + "/ocslab-collbench-verbs", sched = dir + "/" + schedule;
  fs::copy_file(testing::bin_path("ocslab-collbench-verbs"), bin, fs::copy_options::overwrite_existing);
  fs::copy_file(source_path("experiments/workloads/schedules/" + schedule), sched, fs::copy_options::overwrite_existing);
  // The world group rides the management LAN (its own Soft-RoCE device), the pipeline and DP
  // groups the data NICs. The data NICs' neighbours are pinned: a circuit change drops the
  // carrier, which flushes learned neighbours, and a lost ARP would cost a 1 s retry.
  for (size_t i = 0; i < st.hosts.size(); ++i) {
    std::string cmd = "rdma link add rxe_lan0 type rxe netdev lan0";
    for (size_t j = 0; j < st.hosts.size(); ++j) {
      if (j == i) continue;
      const auto& n = st.hosts[j].nics[0];
      cmd += fmt::format(" && ip neigh replace {} lladdr {} dev eth1 nud permanent", n.ip.substr(0, n.ip.find('/')),
                         n.mac);
    }
    lab.run(hosts[i], cmd);
  }

  ocs::DriverOptions dro;
  dro.password = st.switch_password;
  auto driver = ocs::make_driver(ocs::SwitchUrl::parse(st.switch_url()), dro);
  std::set<ocs::Port> job_ingress;
  for (const auto& sl : slots) job_ingress.insert(sl.ingress);

  auto run_mode = [&](const std::string& mode) {
    INFO("phase mode " << mode);
    ModeResult res;
    const std::string events = dir + "/controller-" + stem + "-" + mode + ".csv";
    const size_t truth_before = switch_starts(st.ground_truth()).size();
    std::map<std::string, long> eth1_before, lan0_before;
    for (const auto& h : hosts) {
      eth1_before[h] = rxe_sent(lab, h, "rxe_eth1");
      lan0_before[h] = rxe_sent(lab, h, "rxe_lan0");
    }
    const std::string ctl_log_path = dir + "/controller-" + stem + "-" + mode + ".log";
    ControllerProcess ctl(cfg_path, events, ctl_log_path, st.switch_password);
    std::vector<ocs::ExecResult> results(4);
    std::vector<std::thread> ranks;
    ranks.reserve(4);
    auto t0 = std::chrono::steady_clock::now();
    for (int r = 0; r < 4; ++r) {
      ranks.emplace_back([&, r] {
        try {
          results[static_cast<size_t>(r)] = lab.exec(
              hosts[static_cast<size_t>(r)],
              fmt::format("{} -s {} --ranks {} --port {} --rank {} --if eth1 --group-if world=lan0 --timeout-s 120 "
                          "--output /tmp/phasevlab-{}-{} --controller {}:{} --job {} --phase-mode {}",
                          bin, sched, ranks_arg, kRendezvousPort, r, stem, mode, kHostFromGuest, ctl.port(), kJob,
                          mode),
              300s);
        } catch (const std::exception& e) {
          results[static_cast<size_t>(r)].exit_status = -1;
          results[static_cast<size_t>(r)].err = e.what();
        }
      });
    }
    for (auto& t : ranks) t.join();
    res.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    CHECK(ctl.stop() == 130);  // stopped by SIGTERM, not in fallback, listener fine
    std::string ctl_log = read_file_or_empty(ctl_log_path);
    INFO("controller:\n" << ctl_log);
    CHECK_THAT(ctl_log, !Contains("problem:"));
    for (int r = 0; r < 4; ++r) {
      INFO("rank " << r << ":\n" << results[static_cast<size_t>(r)].out << results[static_cast<size_t>(r)].err);
      REQUIRE(results[static_cast<size_t>(r)].exit_status == 0);
    }
    res.table = results[0].out;
    CHECK_THAT(res.table, Contains("# Out of bounds values : 0 OK"));

    // Every rank's rows: data exact, world ops passed, fabric ops served by the controller,
    // never a fallback.
    std::vector<workloads::OpRecord> all;
    uint64_t eth1_payload_h1 = 0;
    for (int r = 0; r < 4; ++r) {
      const std::string& host = hosts[static_cast<size_t>(r)];
      auto text = lab.run(host, fmt::format("cat /tmp/phasevlab-{}-{}/ops-rank{}.csv", stem, mode, r));
      auto rows = workloads::parse_op_csv(text, host + ":ops-rank" + std::to_string(r) + ".csv");
      size_t mine = 0;
      for (const auto& op : s.step) mine += s.involves(op, r);
      CHECK(rows.size() == mine * static_cast<size_t>(s.steps + s.warmup));
      for (const auto& row : rows) {
        INFO("rank " << r << " step " << row.step << " op " << row.index << " " << row.group);
        CHECK(row.verified);
        CHECK(row.wrong == 0);
        CHECK_FALSE(row.fallback);
        if (row.kind == "world") {
          CHECK(row.phase == "pass");
        } else {
          CHECK((row.phase == "reconfigured" || row.phase == "ready"));
          CHECK(row.topo.rfind("rail0=", 0) == 0);
        }
        if (!row.warmup) res.wait_ms += static_cast<double>(row.wait_ns) / 1e6;
        const auto& op = s.step.at(static_cast<size_t>(row.index));
        if (r == 0 && op.type == workloads::OpType::kSendRecv && op.src == 0) eth1_payload_h1 += op.bytes;
        all.push_back(row);
      }
    }
    if (mode == "provisioning") {
      size_t provisioned = 0;
      for (const auto& row : all) provisioned += (!row.warmup && row.provisioned) ? 1 : 0;
      CHECK(provisioned > 0);
    }

    // The controller's reconfigurations, each attributed to the step of the op it served:
    // the group's seq counts that group's ops, so step = (seq - 1) / the group's ops per step.
    std::map<std::string, int> ops_per_step;
    for (const auto& op : s.step) ++ops_per_step[workloads::shim_group(s, op)];
    auto evs = read_events(events);
    std::vector<CtlEvent> starts, ends;
    for (const auto& e : evs) {
      INFO("controller event " << e.kind << " " << e.group << "#" << e.seq);
      CHECK(e.kind != "timeout");
      CHECK(e.kind != "retry");
      CHECK(e.kind != "fallback");
      CHECK(e.kind != "disconnect");
      CHECK(e.kind != "rejected");
      if (e.kind == "reconfig_start") starts.push_back(e);
      if (e.kind == "reconfig_end") ends.push_back(e);
    }
    REQUIRE(starts.size() == ends.size());
    const int total_steps = s.warmup + s.steps;
    res.per_step.assign(static_cast<size_t>(total_steps) + 1, 0);
    for (const auto& e : starts) {
      REQUIRE(ops_per_step.count(e.group));
      int step = static_cast<int>((e.seq - 1) / ops_per_step[e.group]);
      REQUIRE(step <= total_steps);
      ++res.per_step[static_cast<size_t>(step)];
    }
    for (int step = 0; step < total_steps; ++step) {
      INFO("step " << step);
      CHECK(res.per_step[static_cast<size_t>(step)] == want.per_step[static_cast<size_t>(step)]);
      // The shims agree: that many groups were served by a fabric change in this step.
      std::set<std::string> groups;
      for (const auto& row : all)
        if (row.step == step && row.reconfigured) groups.insert(row.group);
      CHECK(static_cast<int>(groups.size()) == want.per_step[static_cast<size_t>(step)]);
    }
    CHECK(res.per_step.back() == (mode == "provisioning" ? want.provisioned_extra : 0));

    // Ground truth: during each reconfiguration the emulator moved exactly the circuits that
    // the topo_id change adds for the job's slots, and nothing else moved during the run.
    auto truth = switch_starts(st.ground_truth());
    std::vector<std::pair<int64_t, std::string>> mine(truth.begin() + static_cast<int64_t>(truth_before), truth.end());
    phase::TopoId topo = cfg.initial;
    size_t matched = 0;
    for (size_t i = 0; i < starts.size(); ++i) {
      FabricNeed n;
      for (const auto& op : s.step)
        if (workloads::shim_group(s, op) == starts[i].group) n = need_of(s, op, cfg.layout);
      phase::TopoId next = apply(topo, n);
      std::set<std::string> want_moves, got_moves;
      auto before = circuits_of(table, topo, slots);
      for (const auto& c : circuits_of(table, next, slots))
        if (!before.count(c)) want_moves.insert(ocs::to_string(c));
      for (const auto& [t, circuit] : mine)
        if (t >= starts[i].mono_ns && t <= ends[i].mono_ns) got_moves.insert(circuit);
      INFO("reconfiguration " << i << " for " << starts[i].group << "#" << starts[i].seq << ": " << topo.str() << " -> "
                              << next.str());
      CHECK(got_moves == want_moves);
      matched += got_moves.size();
      topo = next;
    }
    CHECK(matched == mine.size());

    // The switch holds the final topo_id's circuits on the job's ports, and the guests' data
    // NICs reach exactly the peers those circuits join: rank 0's partner answers over eth1,
    // a rank it has no circuit with does not.
    std::set<ocs::Circuit> on_switch;
    for (const auto& c : driver->list())
      if (job_ingress.count(c.ingress)) on_switch.insert(c);
    CHECK(on_switch == circuits_of(table, topo, slots));
    std::set<int> peers_of_0, strangers_of_0 = {1, 2, 3};
    for (const auto& e : table.compose(topo))
      if (e.src == 0) peers_of_0.insert(e.dst);
    for (int p : peers_of_0) strangers_of_0.erase(p);
    std::cout << fmt::format("{}: final topo_id {}, rank 0 linked to rank(s) {}\n", mode, topo.str(),
                             fmt::join(peers_of_0, ","));
    auto addr = [&](int r) {
      const auto& ip = st.hosts[static_cast<size_t>(r)].nics[0].ip;
      return ip.substr(0, ip.find('/'));
    };
    for (int p : peers_of_0) lab.run(hosts[0], "ping -c 2 -W 3 -I eth1 " + addr(p));
    if (!strangers_of_0.empty()) {
      auto r = lab.exec(hosts[0], "ping -c 1 -W 1 -I eth1 " + addr(*strangers_of_0.begin()));
      CHECK(r.exit_status != 0);
    }

    // The pipeline and DP traffic left through the data NICs, the world ops through the LAN's.
    long h1_eth1 = rxe_sent(lab, hosts[0], "rxe_eth1") - eth1_before[hosts[0]];
    long h1_lan0 = rxe_sent(lab, hosts[0], "rxe_lan0") - lan0_before[hosts[0]];
    std::cout << fmt::format("{}: rxe sent_pkts on {}: eth1 +{}, lan0 +{}\n", mode, hosts[0], h1_eth1, h1_lan0);
    CHECK(h1_eth1 >= static_cast<long>(eth1_payload_h1 / 4096));
    CHECK(h1_lan0 > 0);
    return res;
  };

  for (const auto& m : modes) out.modes[m] = run_mode(m);
  return out;
}

}  // namespace

TEST_CASE("phase control in the virtual lab: 4 guests, DP/PP schedule, the controller rewiring the emulated OCS",
          "[vlab][phase]") {
  auto t_all = std::chrono::steady_clock::now();
  PhaseRuns runs = run_phase_workload("dp-pp-4-phase.yaml", "dp", {"on-demand", "provisioning"});
  const workloads::Schedule& s = runs.s;
  const double switching_ms = runs.switching_ms;
  ModeResult on_demand = runs.modes["on-demand"];
  ModeResult provisioning = runs.modes["provisioning"];
  std::cout << "on-demand, rank 0:\n" << on_demand.table << "provisioning, rank 0:\n" << provisioning.table;
  std::cout << fmt::format(
      "phase workload {} on 4 guests (1 rank each), {} measured step(s) + {} warm-up, switching ~{:.0f} ms:\n"
      "  reconfigurations per step (controller, ground truth checked): on-demand {}, provisioning {}\n"
      "  on-demand:    fabric wait {:8.1f} ms (sum over ranks, measured steps), run {:.1f} s\n"
      "  provisioning: fabric wait {:8.1f} ms (sum over ranks, measured steps), run {:.1f} s\n"
      "  provisioning / on-demand wait: {:.2f}\n",
      s.name, s.steps, s.warmup, switching_ms, fmt::join(on_demand.per_step, " "),
      fmt::join(provisioning.per_step, " "), on_demand.wait_ms, on_demand.seconds, provisioning.wait_ms,
      provisioning.seconds, provisioning.wait_ms / on_demand.wait_ms);
  // Provisioning hides the pipeline phase's switch (requested behind the world ops) from all
  // four ranks in every measured step: the saving must be at least one switching time per step.
  CHECK(provisioning.wait_ms < on_demand.wait_ms);
  CHECK(on_demand.wait_ms - provisioning.wait_ms > switching_ms * s.steps);
  std::cout << "phase vlab test: " << std::chrono::duration<double>(std::chrono::steady_clock::now() - t_all).count()
            << " s\n";
}

// Issue 43: alltoall, alltoallv and broadcast in a phase workload. moe-4-phase.yaml's expert
// groups (kind ep: the job's second dimension) and pipeline broadcasts reconfigure the rail as
// their groups require, the world broadcast and alltoall pass over the management LAN; one
// on-demand run (38 s once the lab was up, 2026-12-07, with a build beside it) with every check
// of the case above.
TEST_CASE("phase control in the virtual lab: alltoall, alltoallv and broadcast groups reconfigure the rail",
          "[vlab][phase][alltoall]") {
  auto t0 = std::chrono::steady_clock::now();
  PhaseRuns runs = run_phase_workload("moe-4-phase.yaml", "ep", {"on-demand"});
  const ModeResult& r = runs.modes.at("on-demand");
  std::cout << "on-demand, rank 0:\n" << r.table;
  std::cout << fmt::format("phase workload {}: reconfigurations per step (controller, ground truth checked): {}\n",
                           runs.s.name, fmt::join(r.per_step, " "));
  // Every measured step changes the rail: the pipeline broadcasts and both stages' expert ops.
  for (int step = runs.s.warmup; step < runs.s.warmup + runs.s.steps; ++step) {
    CHECK(r.per_step.at(static_cast<size_t>(step)) == 3);
  }
  std::cout << "phase vlab alltoall test: " << std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count()
            << " s\n";
}
