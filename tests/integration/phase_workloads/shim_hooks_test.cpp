// The workloads' step loop driven through ShimHooks against the real phase control plane:
// one thread per rank with its own Shim (loopback TCP), a real Controller and Orchestrator,
// and the project's OCS emulator as the switch (TL1, switching time > 0). The collectives run
// on in-memory buffers (no RDMA here; the verbs data path is the virtual-lab test's), computed
// from every member's deterministic input, so results are verified as in the real programs.
#include <catch2/catch.hpp>

#include <fmt/format.h>

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "ocslab/common/secret.h"
#include "ocslab/phase/controller.h"
#include "ocslab/phase/orchestrator.h"
#include "ocslab/testing/phase_lab.h"
#include "ocslab/testing/source_dir.h"
#include "ocslab/workloads/collbench.h"
#include "ocslab/workloads/ring.h"
#include "ocslab/workloads/shim_hooks.h"

using namespace phase_test;
using namespace ocslab::workloads;
using namespace ocslab::phase;
using Catch::Matchers::Contains;

namespace {

constexpr double kSwitchMs = 25;
constexpr auto kCompute = std::chrono::milliseconds(40);  // compute before each collective

using ocslab::testing::source_dir;

// What a correct transport delivers, computed from every member's input (fill_input is
// deterministic): the transport-free executor for the step loop.
struct InMemoryBackend : Backend {
  const Schedule& s;
  int rank;
  std::vector<float> buf;
  uint64_t seq = 0;
  InMemoryBackend(const Schedule& sched, int r) : s(sched), rank(r) {}
  std::vector<float> input_of(const Op& op, int member) const {
    std::vector<float> v(buffer_floats(op));
    fill_input(s, op, member, seq, v.data());
    return v;
  }
  void prepare(const Op& op, uint64_t sq) override {
    // load-safe: models the forward/backward compute; a workload parameter.
    std::this_thread::sleep_for(kCompute);  // the forward/backward work before this collective
    seq = sq;
    buf = input_of(op, rank);
  }
  void run(const Op& op) override {
    const Group& g = s.group_of(op);
    const uint64_t n = buffer_floats(op);
    const int size = static_cast<int>(g.ranks.size());
    // load-safe: models the transfer; a workload parameter.
    std::this_thread::sleep_for(std::chrono::milliseconds(2));  // the transfer
    switch (op.type) {
      case OpType::kAllReduce:
      case OpType::kReduceScatter: {
        Chunk c = op.type == OpType::kAllReduce ? Chunk{0, n} : ring_chunk(n, size, g.index_of(rank));
        std::vector<float> sum(n, 0.0f);
        for (int m : g.ranks) {
          auto in = input_of(op, m);
          for (uint64_t j = c.offset; j < c.offset + c.count; ++j) sum[j] += in[j];
        }
        for (uint64_t j = c.offset; j < c.offset + c.count; ++j) buf[j] = sum[j];
        break;
      }
      case OpType::kAllGather:
        for (int k = 0; k < size; ++k) {
          auto in = input_of(op, g.ranks[static_cast<size_t>(k)]);
          Chunk c = ring_chunk(n, size, k);
          std::copy(in.begin() + static_cast<int64_t>(c.offset), in.begin() + static_cast<int64_t>(c.offset + c.count),
                    buf.begin() + static_cast<int64_t>(c.offset));
        }
        break;
      case OpType::kSendRecv:
        if (rank == op.dst) buf = input_of(op, op.src);
        break;
      case OpType::kBroadcast:
        buf = input_of(op, op.root);
        break;
      case OpType::kAllToAll:
      case OpType::kAllToAllV: {
        const int me = g.index_of(rank);
        AllToAllLayout mine = alltoall_layout(op, size, me);
        for (int k = 0; k < size; ++k) {
          auto in = input_of(op, g.ranks[static_cast<size_t>(k)]);
          Chunk from = alltoall_layout(op, size, k).send[static_cast<size_t>(me)];
          std::copy(in.begin() + static_cast<int64_t>(from.offset),
                    in.begin() + static_cast<int64_t>(from.offset + from.count),
                    buf.begin() + static_cast<int64_t>(mine.recv[static_cast<size_t>(k)].offset));
        }
        break;
      }
      case OpType::kBarrier:
        break;
    }
  }
  uint64_t verify(const Op& op, uint64_t sq) override { return count_wrong(s, op, rank, sq, buf.data()); }
};

struct Run {
  std::vector<std::vector<OpRecord>> records;  // per rank
  std::vector<std::string> errors;
  std::vector<ocslab::Sample> truth;
  std::vector<std::string> problems;
  std::vector<std::vector<ocslab::Sample>> shim_samples;  // per rank (shim-rank<R>.csv rows)
  size_t requests = 0;                                    // the controller's request events
};

JobLayout dp_pp_layout() { return JobLayout{"dppp", 2, {{"dp", 2}}}; }

// table_dir: when set, provisioning ranks load "<dir>/phase-table-rank{rank}.csv" through
// the programs' flag parsing (phase_options) instead of profiling; profiling runs save theirs.
Run run_job(const Schedule& s, ocslab::phase::ShimMode mode, const std::string& table_dir = "",
            bool load_tables = false, bool skip_unchanged = true, const JobLayout& L = dp_pp_layout()) {
  Lab lab(phase_switch(kSwitchMs));
  auto rail = lab.rail(L, TopoId::uniform(L, 1));  // every stage starts on its DP rings
  Controller ctl(controller_options(L, {rail}));
  ctl.start();
  const size_t mark = lab.mark();

  Run out;
  out.records.resize(static_cast<size_t>(s.ranks));
  out.shim_samples.resize(static_cast<size_t>(s.ranks));
  std::mutex mu;
  std::vector<std::thread> threads;
  for (int r = 0; r < s.ranks; ++r) {
    threads.emplace_back([&, r] {
      try {
        ocslab::phase::ShimOptions o;
        o.port = ctl.port();
        o.job = L.job;
        o.world = s.ranks;
        o.mode = mode;
        o.profile_steps = 1;
        o.ack_wait = std::chrono::milliseconds(20000);
        if (load_tables) {
          namespace po = boost::program_options;
          po::options_description desc;
          add_phase_options(desc);
          std::vector<std::string> args = {
              "--controller",  fmt::format("127.0.0.1:{}", ctl.port()),  "--job", L.job, "--phase-mode", "provisioning",
              "--phase-table", table_dir + "/phase-table-rank{rank}.csv"};
          po::variables_map vm;
          po::store(po::command_line_parser(args).options(desc).run(), vm);
          o = *phase_options(vm, r, s.ranks, "localhost", std::chrono::milliseconds(20000));
        }
        o.skip_unchanged = skip_unchanged;
        ShimHooks hooks(s, r, o);
        InMemoryBackend backend(s, r);
        auto recs = run_steps(s, r, "localhost", backend, hooks, true);
        if (!table_dir.empty() && !load_tables && hooks.shim().provisioning_active()) {
          hooks.shim().phase_table().save(fmt::format("{}/phase-table-rank{}.csv", table_dir, r));
        }
        std::lock_guard lock(mu);
        out.records[static_cast<size_t>(r)] = std::move(recs);
        out.shim_samples[static_cast<size_t>(r)] = hooks.shim().samples();
      } catch (const std::exception& e) {
        std::lock_guard lock(mu);
        out.errors.push_back(fmt::format("rank {}: {}", r, e.what()));
      }
    });
  }
  for (auto& t : threads) t.join();
  ctl.stop();
  auto all = lab.truth.samples();
  out.truth.assign(all.begin() + static_cast<int64_t>(mark), all.end());
  out.problems = ctl.problems();
  for (const auto& e : ctl.events()) out.requests += e.kind == ControllerEvent::Kind::kRequest;
  return out;
}

// Ground truth: the emulator's switch_start events, grouped into reconfigurations. One
// reconfiguration's circuits start together; the next cannot start before the previous one
// settled (ACK after settle, one rail strand), so a gap over half the switching time splits.
std::vector<int64_t> truth_reconfigurations(const std::vector<ocslab::Sample>& truth) {
  std::vector<int64_t> starts;
  for (const auto& smp : truth) {
    if (smp.source == "switch" && smp.signal == "switch_start") starts.push_back(smp.t_ns);
  }
  std::sort(starts.begin(), starts.end());
  std::vector<int64_t> clusters;
  for (size_t i = 0; i < starts.size(); ++i) {
    if (i == 0 || starts[i] - starts[i - 1] > static_cast<int64_t>(kSwitchMs * 1e6 / 2)) clusters.push_back(starts[i]);
  }
  return clusters;
}

struct Figures {
  double wait_ms = 0;  // total hook time over the measured steps, all ranks
  int reconfigurations = 0;
};

Figures check_run(const Schedule& s, const Run& run, ocslab::phase::ShimMode mode) {
  INFO(fmt::format("errors: {}", fmt::join(run.errors, " | ")));
  REQUIRE(run.errors.empty());
  CHECK(run.problems.empty());
  const int total_steps = s.warmup + s.steps;
  // Every op the rank takes part in, data exact, decision recorded, never a fallback.
  std::vector<const OpRecord*> all;
  for (int r = 0; r < s.ranks; ++r) {
    const auto& recs = run.records[static_cast<size_t>(r)];
    size_t expect = 0;
    for (const auto& op : s.step) expect += s.involves(op, r) ? 1 : 0;
    CHECK(recs.size() == expect * static_cast<size_t>(total_steps));
    for (const auto& rec : recs) {
      all.push_back(&rec);
      INFO("rank " << r << " step " << rec.step << " op " << rec.index << " " << rec.group);
      CHECK(rec.verified);
      CHECK(rec.wrong == 0);
      CHECK_FALSE(rec.fallback);
      if (rec.kind == "world") {
        CHECK(rec.phase == "pass");
      } else {
        CHECK((rec.phase == "reconfigured" || rec.phase == "ready"));
        CHECK(rec.topo.rfind("rail0=", 0) == 0);
      }
    }
  }
  // Each ground-truth reconfiguration serves the next op that reports "reconfigured": match it
  // to that op's step, and count per step. On demand nothing is left over; provisioning may
  // have prepared one more step's PP phase after the last op.
  auto clusters = truth_reconfigurations(run.truth);
  std::map<int, int> per_step;
  int unmatched = 0;
  for (int64_t t : clusters) {
    const OpRecord* next = nullptr;
    for (const auto* rec : all) {
      if (rec->reconfigured && rec->start_ns > t && (!next || rec->start_ns < next->start_ns)) next = rec;
    }
    if (next) {
      ++per_step[next->step];
    } else {
      ++unmatched;
    }
  }
  for (int step = 0; step < total_steps; ++step) {
    INFO("step " << step);
    CHECK(per_step[step] == 3);  // "00" for the pipeline sends, then "10" and "11" for the allreduces
    // The shims agree: three distinct groups were served by a fabric change in this step.
    std::set<std::string> groups;
    for (const auto* rec : all) {
      if (rec->step == step && rec->reconfigured) groups.insert(rec->group);
    }
    CHECK(groups.size() == 3);
    CHECK(groups.count("dp-s0") == 1);
    CHECK(groups.count("dp-s1") == 1);
  }
  CHECK(unmatched <= (mode == ocslab::phase::ShimMode::kProvisioning ? 1 : 0));
  Figures f;
  f.reconfigurations = static_cast<int>(clusters.size());
  for (const auto* rec : all) {
    if (!rec->warmup) f.wait_ms += static_cast<double>(rec->wait_ns) / 1e6;
  }
  if (mode == ocslab::phase::ShimMode::kProvisioning) {
    size_t provisioned = 0;
    for (const auto* rec : all) provisioned += (!rec->warmup && rec->provisioned) ? 1 : 0;
    CHECK(provisioned > 0);
  }
  return f;
}

}  // namespace

// moe-4-phase.yaml (issue 43): broadcast on the pipeline pairs, alltoallv and alltoall on each
// stage's expert group (kind ep, the job's second dimension), world broadcast and alltoall as
// management ops. On demand, every result exact and the fabric changed exactly where the groups
// need it: "00" for the first pipeline broadcast of a step, "01" for stage 1's alltoall, and "11"
// for stage 0's dispatch from the second step on (the rail starts on "11").
TEST_CASE("alltoall, alltoallv and broadcast groups reconfigure the rail as their groups require",
          "[phase][workloads][alltoall]") {
  Schedule s = load_schedule(source_dir() + "/experiments/workloads/schedules/moe-4-phase.yaml");
  Run run = run_job(s, ocslab::phase::ShimMode::kOnDemand, "", false, true, JobLayout{"moe", 2, {{"ep", 2}}});
  INFO(fmt::format("errors: {}", fmt::join(run.errors, " | ")));
  REQUIRE(run.errors.empty());
  CHECK(run.problems.empty());
  const int total_steps = s.warmup + s.steps;
  std::vector<const OpRecord*> all;
  for (int r = 0; r < s.ranks; ++r) {
    size_t expect = 0;
    for (const auto& op : s.step) expect += s.involves(op, r) ? 1 : 0;
    CHECK(run.records[static_cast<size_t>(r)].size() == expect * static_cast<size_t>(total_steps));
    for (const auto& rec : run.records[static_cast<size_t>(r)]) {
      INFO("rank " << r << " step " << rec.step << " op " << rec.index << " " << rec.group);
      all.push_back(&rec);
      CHECK(rec.verified);
      CHECK(rec.wrong == 0);
      CHECK_FALSE(rec.fallback);
      CHECK(rec.phase == (rec.kind == "world" ? "pass" : rec.reconfigured ? "reconfigured" : "ready"));
    }
  }
  // Each ground-truth reconfiguration serves the next op that reports "reconfigured".
  std::map<int, std::set<std::string>> served;
  int unmatched = 0;
  for (int64_t t : truth_reconfigurations(run.truth)) {
    const OpRecord* next = nullptr;
    for (const auto* rec : all) {
      if (rec->reconfigured && rec->start_ns > t && (!next || rec->start_ns < next->start_ns)) next = rec;
    }
    if (next) {
      served[next->step].insert(next->group);
    } else {
      ++unmatched;
    }
  }
  CHECK(unmatched == 0);
  for (int step = 0; step < total_steps; ++step) {
    INFO("step " << step);
    const auto& g = served[step];
    CHECK(g.size() == (step == 0 ? 2u : 3u));
    CHECK(g.count("ep-s1") == 1);
    CHECK(g.count("ep-s0") == (step == 0 ? 0u : 1u));
    CHECK(g.count("pp0") + g.count("pp1") == 1);  // both want "00": whichever is served first
  }
}

TEST_CASE("ShimHooks drive the step loop through the controller; provisioning hides the switch time",
          "[phase][workloads]") {
  Schedule s = load_schedule(source_dir() + "/experiments/workloads/schedules/dp-pp-4-phase.yaml");
  Figures on_demand, provisioning;
  {
    INFO("on demand");
    auto run = run_job(s, ocslab::phase::ShimMode::kOnDemand);
    on_demand = check_run(s, run, ocslab::phase::ShimMode::kOnDemand);
  }
  const std::string tables = fmt::format("/tmp/shimwl-tables-{}", ::getpid());
  std::filesystem::create_directories(tables);
  {
    INFO("provisioning");
    auto run = run_job(s, ocslab::phase::ShimMode::kProvisioning, tables);
    provisioning = check_run(s, run, ocslab::phase::ShimMode::kProvisioning);
  }
  {
    // The profiled tables, loaded back per rank through --phase-table "...{rank}...":
    // provisioning from the very first op, warm-up step included.
    INFO("provisioning from saved phase tables");
    for (int r = 0; r < s.ranks; ++r)
      REQUIRE(std::filesystem::exists(fmt::format("{}/phase-table-rank{}.csv", tables, r)));
    auto run = run_job(s, ocslab::phase::ShimMode::kProvisioning, tables, true);
    check_run(s, run, ocslab::phase::ShimMode::kProvisioning);
    size_t warmup_provisioned = 0;
    for (const auto& recs : run.records) {
      for (const auto& rec : recs) warmup_provisioned += (rec.warmup && rec.provisioned) ? 1 : 0;
    }
    CHECK(warmup_provisioned > 0);
  }
  std::filesystem::remove_all(tables);
  std::cout << fmt::format(
      "phase workload {} ({} ranks, {} measured steps, switching {} ms, compute {} ms per op):\n"
      "  on-demand:    total reconfig_wait {:8.1f} ms over all ranks, {} reconfigurations (ground truth)\n"
      "  provisioning: total reconfig_wait {:8.1f} ms over all ranks, {} reconfigurations (ground truth)\n"
      "  provisioning / on-demand wait: {:.2f}\n",
      s.name, s.ranks, s.steps, kSwitchMs, kCompute.count(), on_demand.wait_ms, on_demand.reconfigurations,
      provisioning.wait_ms, provisioning.reconfigurations, provisioning.wait_ms / on_demand.wait_ms);
  CHECK(provisioning.wait_ms < on_demand.wait_ms);
}

namespace {

// dp-pp-4-phase with each stage's gradient allreduce split into three back-to-back buckets: a
// group repeating the same op, where only the first of each run is a phase boundary.
const char* kBucketSchedule = R"(name: dp-pp-4-buckets
ranks: 4
steps: 3
warmup: 1
groups:
  - {name: pp0, kind: pp, ranks: [0, 2]}
  - {name: pp1, kind: pp, ranks: [1, 3]}
  - {name: dp-s0, kind: dp, ranks: [0, 1]}
  - {name: dp-s1, kind: dp, ranks: [2, 3]}
  - {name: world, kind: world, ranks: [0, 1, 2, 3]}
step:
  - {group: pp0, op: sendrecv, bytes: 64KiB}
  - {group: pp1, op: sendrecv, bytes: 64KiB}
  - {group: pp0, op: sendrecv, bytes: 64KiB, src: 2, dst: 0}
  - {group: pp1, op: sendrecv, bytes: 64KiB, src: 3, dst: 1}
  - {group: dp-s0, op: allreduce, bytes: 256KiB}
  - {group: dp-s0, op: allreduce, bytes: 256KiB}
  - {group: dp-s0, op: allreduce, bytes: 256KiB}
  - {group: dp-s1, op: allreduce, bytes: 256KiB}
  - {group: dp-s1, op: allreduce, bytes: 256KiB}
  - {group: dp-s1, op: allreduce, bytes: 256KiB}
  - {group: world, op: allgather, bytes: 128KiB}
  - {group: world, op: barrier}
)";

// The controller round trips a rank needs in one step, from the schedule alone: every pipeline
// op, and every other non-management op whose digit on the rank's stage (pp 0, dp 1) differs
// from the one its previous non-management op needed (a phase boundary; the step wraps).
int expected_barriers(const Schedule& s, int rank) {
  std::vector<int> digits;  // per op of the rank that needs the fabric, in order
  std::vector<bool> pp;
  for (const auto& op : s.step) {
    if (!s.involves(op, rank)) continue;
    const auto& kind = s.group_of(op).kind;
    if (kind == "world") continue;
    digits.push_back(kind == "pp" ? 0 : 1);
    pp.push_back(kind == "pp");
  }
  int n = 0;
  for (size_t i = 0; i < digits.size(); ++i) {
    int prev = digits[(i + digits.size() - 1) % digits.size()];
    n += (pp[i] || digits[i] != prev) ? 1 : 0;
  }
  return n;
}

int stage_of_port(int port) { return ((port > 64 ? port - 64 : port) - 1) / 2; }  // slots 1..4 -> ranks 0..3

// G1/G2 against the switch itself: no op of a rank (collective start..end, wall clock) overlaps
// a mirror moving or a circuit removed on a port of a stage the op's group lives on.
void check_truth_no_overlap(const Schedule& s, const Run& run) {
  struct Span {
    int64_t begin, end;
    std::set<int> stages;
    std::string what;
  };
  std::vector<Span> sw;
  std::map<std::string, int64_t> started;
  for (const auto& smp : run.truth) {
    if (smp.source != "switch") continue;
    if (smp.signal == "switch_start") started[smp.subject] = smp.t_ns;
    if (smp.signal == "circuit_removed") {
      sw.push_back({smp.t_ns, smp.t_ns + 1, {stage_of_port(std::stoi(smp.subject))}, "remove " + smp.subject});
    }
    if (smp.signal == "switch_end" && started.count(smp.subject)) {
      auto dash = smp.subject.find('-');
      sw.push_back({started[smp.subject],
                    smp.t_ns,
                    {stage_of_port(std::stoi(smp.subject.substr(0, dash))),
                     stage_of_port(std::stoi(smp.subject.substr(dash + 1)))},
                    "switch " + smp.subject});
    }
  }
  REQUIRE_FALSE(sw.empty());
  size_t checked = 0;
  for (const auto& recs : run.records) {
    for (const auto& rec : recs) {
      if (rec.kind == "world") continue;
      std::set<int> st;
      for (const auto& g : s.groups) {
        if (g.name != rec.group) continue;
        for (int x : g.ranks) st.insert(x / 2);
      }
      for (const auto& w : sw) {
        bool common = false;
        for (int x : w.stages) common = common || st.count(x);
        if (!common) continue;
        ++checked;
        if (rec.start_ns < w.end && w.begin < rec.end_ns) {
          FAIL(fmt::format("rank {} step {} op {} ({}, barrier {}) [{}, {}] overlaps {} [{}, {}]", rec.rank, rec.step,
                           rec.index, rec.group, rec.barrier, rec.start_ns, rec.end_ns, w.what, w.begin, w.end));
        }
      }
    }
  }
  CHECK(checked > 0);
}

struct BarrierFigures {
  std::map<int, int> rows;  // step -> op rows with barrier = 1, all ranks
  int reconfigurations = 0;
  size_t topo_hits = 0;
};

BarrierFigures check_barriers(const Schedule& s, const Run& run, ocslab::phase::ShimMode mode, bool skip) {
  const bool provisioning = mode == ocslab::phase::ShimMode::kProvisioning;
  Figures f = check_run(s, run, mode);  // data exact, no fallback, 3 reconfigurations per step
  check_truth_no_overlap(s, run);
  BarrierFigures out;
  out.reconfigurations = f.reconfigurations;
  int expect_all = 0, expect_skipping = 0;
  for (int r = 0; r < s.ranks; ++r) {
    expect_skipping += expected_barriers(s, r);
    for (const auto& op : s.step) expect_all += (s.involves(op, r) && s.group_of(op).kind != "world") ? 1 : 0;
  }
  // (step, op index) -> barrier of every rank in it: the members of a group always agree.
  std::map<std::pair<int, int>, std::set<bool>> agree;
  size_t rows = 0, skipped = 0;
  for (const auto& recs : run.records) {
    for (const auto& rec : recs) {
      INFO("rank " << rec.rank << " step " << rec.step << " op " << rec.index << " " << rec.group);
      if (rec.kind == "world") {
        CHECK_FALSE(rec.barrier);  // management ops never ask
        continue;
      }
      agree[{rec.step, rec.index}].insert(rec.barrier);
      out.rows[rec.step] += rec.barrier ? 1 : 0;
      rows += rec.barrier ? 1 : 0;
      skipped += rec.barrier ? 0 : 1;
      // The topology the op ran on has its group's digit on its stages (rail0 = stage 0, stage 1).
      const std::string topo = rec.topo.substr(rec.topo.find('=') + 1);
      REQUIRE(topo.size() == 2);
      if (rec.kind == "pp") {
        CHECK(topo == "00");
      } else {
        CHECK(topo[rec.group == "dp-s0" ? 0 : 1] == '1');
      }
      if (!rec.barrier) {
        CHECK_FALSE(rec.reconfigured);
        CHECK_FALSE(rec.provisioned);
        CHECK(rec.phase == "ready");
      }
    }
  }
  for (const auto& [at, values] : agree) {
    INFO("step " << at.first << " op " << at.second);
    CHECK(values.size() == 1);
  }
  const int total_steps = s.warmup + s.steps;
  for (int step = 0; step < total_steps; ++step) {
    INFO("step " << step);
    // The first step profiles the phase table (every op asks); from then on only phase
    // boundaries and pipeline sends do.
    CHECK(out.rows[step] == (skip && step > 0 ? expect_skipping : expect_all));
  }
  // The controller saw exactly these requests (provisioning: plus each rank's request for the
  // step after the last, which nobody uses).
  CHECK(run.requests == rows + (provisioning ? static_cast<size_t>(s.ranks) : 0));
  // The timeline shows every skipped op as a topo_hit sample, and nothing else does.
  for (const auto& smps : run.shim_samples) {
    for (const auto& smp : smps) out.topo_hits += smp.signal == "topo_hit";
  }
  CHECK(out.topo_hits == skipped);
  if (!skip) CHECK(skipped == 0);
  return out;
}

}  // namespace

TEST_CASE("the shim skips the controller when nothing changes: round trips = phase boundaries + pipeline sends",
          "[phase][workloads][barrier]") {
  auto which = GENERATE(as<std::string>{}, "dp-pp-4-phase", "dp-pp-4-buckets");
  auto mode = GENERATE(ocslab::phase::ShimMode::kOnDemand, ocslab::phase::ShimMode::kProvisioning);
  const bool provisioning = mode == ocslab::phase::ShimMode::kProvisioning;
  Schedule s = which == "dp-pp-4-phase"
                   ? load_schedule(source_dir() + "/experiments/workloads/schedules/dp-pp-4-phase.yaml")
                   : parse_schedule(kBucketSchedule, "dp-pp-4-buckets.yaml");
  INFO(which << (provisioning ? " provisioning" : " on demand"));
  BarrierFigures before, after;
  {
    INFO("every op asks (skip_unchanged = false)");
    before = check_barriers(s, run_job(s, mode, "", false, false), mode, false);
  }
  {
    INFO("skip_unchanged");
    after = check_barriers(s, run_job(s, mode), mode, true);
  }
  // The switch moved exactly as often: skipping never loses a reconfiguration.
  CHECK(after.reconfigurations == before.reconfigurations);
  const int total_steps = s.warmup + s.steps;
  CHECK(after.reconfigurations == 3 * total_steps + (provisioning ? 1 : 0));
  int per_rank_before = 0, per_rank_after = 0;
  for (int r = 0; r < s.ranks; ++r) {
    for (const auto& op : s.step) per_rank_before += (s.involves(op, r) && s.group_of(op).kind != "world") ? 1 : 0;
    per_rank_after += expected_barriers(s, r);
  }
  if (which == "dp-pp-4-phase") {
    CHECK(per_rank_after == per_rank_before);  // every op there is a boundary or a pipeline send
    CHECK(after.topo_hits == 0);
  } else {
    CHECK(per_rank_after < per_rank_before);
    // Every step after the profiled first one.
    CHECK(after.topo_hits == static_cast<size_t>((per_rank_before - per_rank_after) * (total_steps - 1)));
  }
  std::cout << fmt::format(
      "barriers {} ({}): op rows with a controller round trip per steady step: {} before, {} after (all ranks; "
      "group barriers {} -> {}); reconfigurations {} both\n",
      s.name, provisioning ? "provisioning" : "on-demand", before.rows[total_steps - 1], after.rows[total_steps - 1],
      before.rows[total_steps - 1] / 2, after.rows[total_steps - 1] / 2, after.reconfigurations);
}

TEST_CASE("a join the controller refuses names the rank and the group", "[phase][workloads]") {
  // dp-pp-4 numbers its stages {0, 3} / {1, 2}: under the controller's stage-major layout its
  // DP group [0, 3] spans two pipeline stages, which the controller refuses.
  Schedule s = load_schedule(source_dir() + "/experiments/workloads/schedules/dp-pp-4.yaml");
  Lab lab(phase_switch(1));
  JobLayout L = dp_pp_layout();
  auto rail = lab.rail(L, TopoId::uniform(L, 1));
  Controller ctl(controller_options(L, {rail}));
  ctl.start();
  ocslab::phase::ShimOptions o;
  o.port = ctl.port();
  o.job = L.job;
  o.world = 4;
  CHECK_THROWS_WITH(ShimHooks(s, 0, o), Contains("rank 0 group dp-s0") && Contains("span stages 0,1"));
}

TEST_CASE("a rank whose group size disagrees with another rank's is refused, naming both", "[phase][workloads]") {
  // Rank 1 runs a schedule where dp-s0 is just itself; rank 0 then joins with dp-s0 = [0, 1].
  Schedule lone = parse_schedule(R"(name: lone
ranks: 4
groups:
  - {name: dp-s0, kind: dp, ranks: [1]}
step:
  - {group: dp-s0, op: allreduce, bytes: 64}
)",
                                 "lone.yaml");
  Schedule s = load_schedule(source_dir() + "/experiments/workloads/schedules/dp-pp-4-phase.yaml");
  Lab lab(phase_switch(1));
  JobLayout L = dp_pp_layout();
  auto rail = lab.rail(L, TopoId::uniform(L, 1));
  Controller ctl(controller_options(L, {rail}));
  ctl.start();
  ShimOptions o;
  o.port = ctl.port();
  o.job = L.job;
  o.world = 4;
  ShimHooks first(lone, 1, o);
  CHECK_THROWS_WITH(ShimHooks(s, 0, o),
                    Contains("rank 0 group dp-s0: says size 2") && Contains("but rank 1 registered size 1"));
}

// The program's path: flags -> rendezvous -> ShimHooks; a refused join exits 2 with the
// controller's message (a one-rank job, so the rendezvous needs no peers and no RDMA device is
// reached: the join is refused before the transport is set up).
TEST_CASE("ocslab-collbench-verbs exits 2 when the controller refuses its join", "[phase][workloads]") {
  std::string dir = fmt::format("/tmp/shimwl-join-{}", ::getpid());
  std::filesystem::create_directories(dir);
  {
    std::ofstream f(dir + "/one.yaml");
    f << "name: one\nranks: 1\ngroups:\n  - {name: t0, kind: tp, ranks: [0]}\nstep:\n"
         "  - {group: t0, op: allreduce, bytes: 64}\n";
  }
  Lab lab(phase_switch(1));
  JobLayout L{"solo", 1, {{"dp", 1}}};
  auto rail = lab.rail(L, TopoId::uniform(L, 1));
  Controller ctl(controller_options(L, {rail}));
  ctl.start();
  const char* bin = std::getenv("OCSLAB_BIN_DIR");
  std::string cmd = fmt::format(
      "{}/ocslab-collbench-verbs -s {}/one.yaml --rank 0 --nranks 1 --if lo "
      "--controller 127.0.0.1:{} --job solo 2>&1",
      bin ? bin : "build/bin", dir, ctl.port());
  FILE* p = ::popen(cmd.c_str(), "r");
  REQUIRE(p);
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), p)) > 0) out.append(buf, n);
  int st = ::pclose(p);
  std::filesystem::remove_all(dir);
  INFO(out);
  REQUIRE(WIFEXITED(st));
  CHECK(WEXITSTATUS(st) == 2);
  CHECK_THAT(out, Contains("ocslab-collbench-verbs: rank 0 group t0") && Contains("tp"));
}

TEST_CASE("schedule groups map onto shim dimensions and sendrecv pair groups", "[phase][workloads]") {
  Schedule s = parse_schedule(R"(name: m
ranks: 3
groups:
  - {name: p, kind: pp, ranks: [0, 1, 2]}
  - {name: d, kind: dp, ranks: [0, 1]}
  - {name: w, kind: world, ranks: [0, 1, 2]}
step:
  - {group: p, op: sendrecv, bytes: 8, src: 2, dst: 1}
  - {group: d, op: sendrecv, bytes: 8}
  - {group: w, op: barrier}
)",
                              "m.yaml");
  CHECK(shim_dim(s.groups[0]) == "pp");
  CHECK(shim_dim(s.groups[1]) == "dp");
  CHECK(shim_dim(s.groups[2]) == "mgmt");
  CHECK(shim_group(s, s.step[0]) == "p:1-2");  // a pair of a 3-rank pipeline: its own group
  CHECK(shim_group(s, s.step[1]) == "d");      // two ranks: the group itself
  CHECK(shim_group(s, s.step[2]) == "w");
}

TEST_CASE("the workloads' shim presents the controller's token from a private file or the environment",
          "[phase][workloads][security]") {
  Schedule s = load_schedule(source_dir() + "/experiments/workloads/schedules/dp-pp-4-phase.yaml");
  Lab lab(phase_switch(1));
  JobLayout L = dp_pp_layout();
  auto rail = lab.rail(L, TopoId::uniform(L, 1));
  auto co = controller_options(L, {rail});
  co.token = ocslab::random_token();
  Controller ctl(co);
  ctl.start();
  auto dir = std::filesystem::temp_directory_path() / fmt::format("ocslab-shimtoken-{}", ::getpid());
  std::filesystem::create_directories(dir);
  const std::string file = (dir / "controller.token").string();
  ocslab::write_secret_file(file, co.token);
  auto options = [&](std::vector<std::string> extra) {
    namespace po = boost::program_options;
    po::options_description desc;
    add_phase_options(desc);
    std::vector<std::string> args = {"--controller", fmt::format("127.0.0.1:{}", ctl.port()), "--job", L.job};
    args.insert(args.end(), extra.begin(), extra.end());
    po::variables_map vm;
    po::store(po::command_line_parser(args).options(desc).run(), vm);
    return *phase_options(vm, 0, 4, "localhost", std::chrono::milliseconds(5000));
  };
  ::unsetenv("OCSLAB_CONTROLLER_TOKEN");
  CHECK_THROWS_WITH(ShimHooks(s, 0, options({})), Contains("without the controller's token"));
  CHECK_NOTHROW(ShimHooks(s, 0, options({"--controller-token-file", file})));
  ::setenv("OCSLAB_CONTROLLER_TOKEN", co.token.c_str(), 1);
  CHECK_NOTHROW(ShimHooks(s, 1, options({})));
  ::unsetenv("OCSLAB_CONTROLLER_TOKEN");
  std::filesystem::permissions(file, std::filesystem::perms::group_read, std::filesystem::perm_options::add);
  CHECK_THROWS_WITH(options({"--controller-token-file", file}),
                    Contains("--controller-token-file") && Contains("chmod 600"));
  std::filesystem::remove_all(dir);
}
