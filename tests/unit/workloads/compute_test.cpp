// Modelled compute in the schedule (docs/workloads.md "Modelled compute"): the compute_ms keys
// parse in the emulator's timing syntax, draws are reproducible per (seed, rank, step, op), bad
// values are refused naming file:line:col, the step loop spends the compute before the pre hook
// and records it, and the ops CSV carries it (and still reads files written without it).
#include <catch2/catch.hpp>

#include <chrono>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "ocslab/common/clock.h"
#include "ocslab/common/error.h"
#include "ocslab/workloads/collbench.h"
#include "ocslab/workloads/op_record.h"
#include "ocslab/workloads/ring.h"
#include "ocslab/workloads/schedule.h"

using namespace ocslab;
using namespace ocslab::workloads;
using Catch::Matchers::Contains;

// Named, not anonymous: the unity build puts this file in one unit with its neighbours.
namespace compute_unit {

const char* kHead = R"(name: t
ranks: 2
groups:
  - {name: dp, kind: dp, ranks: [0, 1]}
)";

std::string error_of(const std::string& text) {
  try {
    parse_schedule(text, "c.yaml");
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "no error";
}

// A schedule whose top-level compute_ms is `step` and whose one allreduce has compute_ms `op`.
std::string with(const std::string& step, const std::string& op) {
  std::string s = kHead;
  if (!step.empty()) s += "compute_ms: " + step + "\n";
  s += "step:\n  - {group: dp, op: allreduce, bytes: 64";
  if (!op.empty()) s += ", compute_ms: " + op;
  return s + "}\n";
}

TEST_CASE("compute_ms parses fixed times and distributions, per step and per op", "[workloads][compute]") {
  Schedule none = parse_schedule(with("", ""), "c.yaml");
  CHECK_FALSE(none.has_compute());
  CHECK_FALSE(none.step_compute.any());
  CHECK(none.step_compute.draw_ns(0, 0, 0, kStepCompute) == 0);

  Schedule fixed = parse_schedule(with("50", "20"), "c.yaml");
  CHECK(fixed.has_compute());
  CHECK(fixed.step_compute.kind == ComputeTime::Kind::kFixed);
  CHECK(fixed.step_compute.a_ms == 50);
  CHECK(fixed.step_compute.line == 5);
  CHECK(fixed.step[0].compute.kind == ComputeTime::Kind::kFixed);
  CHECK(fixed.step[0].compute.a_ms == 20);
  CHECK(fixed.step_compute.draw_ns(0, 1, 7, kStepCompute) == 50'000'000);
  CHECK(fixed.step[0].compute.draw_ns(0, 1, 7, 0) == 20'000'000);
  CHECK(parse_schedule(with("{fixed: 2.5}", ""), "c.yaml").step_compute.draw_ns(0, 0, 0, -1) == 2'500'000);
  // Only the op that has it: a barrier may carry compute too.
  Schedule two = parse_schedule(std::string(kHead) +
                                    "step:\n  - {group: dp, op: barrier, compute_ms: 0.5}\n"
                                    "  - {group: dp, op: allreduce, bytes: 64}\n",
                                "c.yaml");
  CHECK(two.step[0].compute.a_ms == 0.5);
  CHECK_FALSE(two.step[1].compute.any());
  CHECK_FALSE(two.step_compute.any());
  CHECK(two.has_compute());

  Schedule u = parse_schedule(with("{uniform: [10, 20]}", "{normal: {mean: 5, sd: 2, floor: 4}}"), "c.yaml");
  CHECK(u.step_compute.kind == ComputeTime::Kind::kUniform);
  CHECK(u.step_compute.a_ms == 10);
  CHECK(u.step_compute.b_ms == 20);
  CHECK(u.step_compute.to_string() == "uniform 10..20 ms");
  CHECK(u.step[0].compute.kind == ComputeTime::Kind::kNormal);
  CHECK(u.step[0].compute.to_string() == "normal 5 sd 2 floor 4 ms");
  // sd and floor may be left out (0): a normal of sd 0 is its mean.
  Schedule n = parse_schedule(with("{normal: {mean: 3}}", ""), "c.yaml");
  CHECK(n.step_compute.draw_ns(9, 1, 2, kStepCompute) == 3'000'000);
  CHECK(parse_schedule(with("1", "") + "seed: 42\n", "c.yaml").seed == 42);
}

TEST_CASE("compute draws are reproducible and follow their distribution", "[workloads][compute]") {
  Schedule s =
      parse_schedule(with("{uniform: [10, 20]}", "{normal: {mean: 5, sd: 2, floor: 4}}") + "seed: 7\n", "c.yaml");
  Schedule again =
      parse_schedule(with("{uniform: [10, 20]}", "{normal: {mean: 5, sd: 2, floor: 4}}") + "seed: 7\n", "again.yaml");
  const ComputeTime& uni = s.step_compute;
  const ComputeTime& nor = s.step[0].compute;
  std::set<int64_t> distinct;
  double sum = 0, nsum = 0;
  int below_mean = 0, at_floor = 0;
  const int kDraws = 4000;
  for (int k = 0; k < kDraws; ++k) {
    int rank = k % 2, step = k / 2;
    int64_t d = uni.draw_ns(s.seed, rank, step, kStepCompute);
    // The same (seed, rank, step, op) gives the same time, from a second parse too.
    REQUIRE(d == again.step_compute.draw_ns(again.seed, rank, step, kStepCompute));
    REQUIRE(d >= 10'000'000);
    REQUIRE(d <= 20'000'000);
    distinct.insert(d);
    sum += static_cast<double>(d);
    int64_t x = nor.draw_ns(s.seed, rank, step, 0);
    REQUIRE(x == again.step[0].compute.draw_ns(again.seed, rank, step, 0));
    REQUIRE(x >= 4'000'000);  // the floor
    nsum += static_cast<double>(x);
    if (x < 5'000'000) ++below_mean;
    if (x == 4'000'000) ++at_floor;
  }
  CHECK(distinct.size() > kDraws * 9 / 10);  // really drawn, not one value
  CHECK(sum / kDraws == Approx(15'000'000).epsilon(0.02));
  // Normal(5, 2) raised to 4: P(< 4) = 31%, so ~31% sit on the floor and ~19% lie in (4, 5).
  CHECK(at_floor > kDraws * 25 / 100);
  CHECK(at_floor < kDraws * 37 / 100);
  CHECK(below_mean - at_floor > kDraws * 14 / 100);
  CHECK(nsum / kDraws > 5'000'000);  // the floor lifts the mean
  // Rank, step, op index and seed each change the draw.
  int64_t base = uni.draw_ns(7, 0, 3, kStepCompute);
  CHECK(uni.draw_ns(7, 1, 3, kStepCompute) != base);
  CHECK(uni.draw_ns(7, 0, 4, kStepCompute) != base);
  CHECK(uni.draw_ns(7, 0, 3, 0) != base);
  CHECK(uni.draw_ns(8, 0, 3, kStepCompute) != base);
  // Pinned: the generator is the schedule's own (splitmix64, Box-Muller), not the standard
  // library's distributions, so a results folder's compute times can be reproduced with any
  // (the normal's log/cos could differ in a last bit between libms, far below a nanosecond).
  ComputeTime pinned;
  pinned.kind = ComputeTime::Kind::kUniform;
  pinned.a_ms = 0;
  pinned.b_ms = 1000;
  CHECK(pinned.draw_ns(0, 0, 0, 0) == 129'645'618);
  CHECK(pinned.draw_ns(0, 1, 2, kStepCompute) == 761'983'065);
  pinned.kind = ComputeTime::Kind::kNormal;
  pinned.a_ms = 100;
  pinned.b_ms = 10;
  CHECK(pinned.draw_ns(0, 0, 0, 0) == 105'012'710);
}

TEST_CASE("the compute keys enter the digest only when present", "[workloads][compute]") {
  uint64_t plain = parse_schedule(with("", ""), "c.yaml").digest();
  CHECK(parse_schedule(with("", "") + "seed: 3\n", "c.yaml").digest() == plain);  // no compute: seed unused
  uint64_t a = parse_schedule(with("50", ""), "c.yaml").digest();
  uint64_t b = parse_schedule(with("", "50"), "c.yaml").digest();
  uint64_t c = parse_schedule(with("50", "") + "seed: 3\n", "c.yaml").digest();
  uint64_t d = parse_schedule(with("{uniform: [40, 60]}", ""), "c.yaml").digest();
  CHECK(std::set<uint64_t>{plain, a, b, c, d}.size() == 5);
}

TEST_CASE("bad compute_ms values are refused naming file:line:col", "[workloads][compute]") {
  CHECK_THAT(error_of(with("-5", "")), Contains("c.yaml:5:13: compute_ms: -5 ms is negative"));
  CHECK_THAT(error_of(with("", "-1")), Contains("c.yaml:6:55: allreduce on group 'dp': compute_ms: -1 ms is negative"));
  CHECK_THAT(error_of(with("fast", "")),
             Contains("c.yaml:5:13: compute_ms: expected a number of milliseconds, got 'fast'"));
  CHECK_THAT(error_of(with("", "true")), Contains("c.yaml:6:55: allreduce on group 'dp': compute_ms: expected a "
                                                  "number of milliseconds, got 'true'"));
  CHECK_THAT(error_of(with(".nan", "")), Contains("c.yaml:5:13: compute_ms: must be a finite number"));
  CHECK_THAT(error_of(with(".inf", "")), Contains("c.yaml:5:13: compute_ms: must be a finite number"));
  CHECK_THAT(error_of(with("1e12", "")), Contains("c.yaml:5:13: compute_ms: 1000000000000 ms is over the limit"));
  CHECK_THAT(error_of(with("{gamma: [1, 2]}", "")),
             Contains("c.yaml:5:14: compute_ms: unknown distribution 'gamma' (fixed, uniform, normal)"));
  CHECK_THAT(error_of(with("{uniform: [20, 10]}", "")),
             Contains("c.yaml:5:23: compute_ms: uniform: HI 10 is below LO 20"));
  CHECK_THAT(error_of(with("{uniform: [1, -2]}", "")), Contains("c.yaml:5:27: compute_ms: -2 ms is negative"));
  CHECK_THAT(error_of(with("{uniform: [1]}", "")), Contains("c.yaml:5:23: compute_ms: uniform needs [LO, HI]"));
  CHECK_THAT(error_of(with("{uniform: [1, x]}", "")),
             Contains("c.yaml:5:27: compute_ms: expected a number of milliseconds, got 'x'"));
  CHECK_THAT(error_of(with("{normal: {mean: 5, sd: -1}}", "")), Contains("c.yaml:5:36: compute_ms: -1 ms is negative"));
  CHECK_THAT(error_of(with("{normal: {sd: 1}}", "")), Contains("c.yaml:5:22: missing key 'mean'"));
  CHECK_THAT(error_of(with("{normal: {mean: 5, sdev: 1}}", "")),
             Contains("c.yaml:5:32: compute_ms: normal: unknown key 'sdev' (mean, sd, floor)"));
  CHECK_THAT(error_of(with("{normal: 5}", "")),
             Contains("c.yaml:5:22: compute_ms: normal needs {mean: MS, sd: MS, floor: MS}"));
  CHECK_THAT(error_of(with("{fixed: 1, uniform: [1, 2]}", "")),
             Contains("c.yaml:5:13: compute_ms: expected milliseconds or one of {fixed: MS}"));
  CHECK_THAT(error_of(with("[1, 2]", "")), Contains("c.yaml:5:13: compute_ms: expected milliseconds or one of"));
  CHECK_THAT(error_of(with("1", "") + "seed: -1\n"), Contains("c.yaml:8:7: seed must be 0 or more"));
  CHECK_THAT(error_of(std::string(kHead) + "step:\n  - {group: dp, op: barrier, compute: 5}\n"),
             Contains("c.yaml:6:30: unknown key 'compute' (known: group, op, bytes, src, dst, sizes, root, compute_ms)"));
}

// Rank 0 of a two-rank schedule: the transport computes the exact allreduce itself (what a
// correct one delivers) and logs what it is asked; the compute is the default, real host_compute.
struct LoopBackend : Backend {
  const Schedule& s;
  std::vector<std::string> log;
  std::map<uint64_t, int64_t> prepared;  // seq -> CLOCK_REALTIME when prepare returned
  std::vector<float> buf = std::vector<float>(64);
  uint64_t seq = 0;
  explicit LoopBackend(const Schedule& sched) : s(sched) {}
  void prepare(const Op& op, uint64_t q) override {
    log.push_back("prepare " + std::to_string(q));
    seq = q;
    fill_input(s, op, 0, q, buf.data());
    prepared[q] = realtime_ns();
  }
  void compute(const Op& op, std::chrono::nanoseconds d) override {
    log.push_back("compute " + std::to_string(d.count() / 1'000'000) + " ms");
    Backend::compute(op, d);
  }
  void run(const Op& op) override {
    log.push_back("run " + std::string(op_name(op.type)));
    for (uint64_t j = 0; j < buffer_floats(op); ++j) {
      if (op.type == OpType::kAllReduce) buf[j] = fill_value(0, seq, j) + fill_value(1, seq, j);
    }
  }
  uint64_t verify(const Op& op, uint64_t q) override { return count_wrong(s, op, 0, q, buf.data()); }
};

struct LogHooks : PhaseHooks {
  std::vector<std::string>* log;
  explicit LogHooks(std::vector<std::string>* l) : log(l) {}
  void pre_communication(const OpDesc& d) override { log->push_back("pre " + std::to_string(d.seq)); }
  void post_communication(const OpDesc& d) override { log->push_back("post " + std::to_string(d.seq)); }
};

TEST_CASE("the step loop spends the step's compute before its first op, each op's before its pre hook",
          "[workloads][compute]") {
  Schedule s = parse_schedule(std::string(kHead) +
                                  "steps: 2\nwarmup: 1\ncompute_ms: 30\n"
                                  "step:\n  - {group: dp, op: allreduce, bytes: 64}\n"
                                  "  - {group: dp, op: allreduce, bytes: 64, compute_ms: 10}\n",
                              "c.yaml");
  LoopBackend backend(s);
  LogHooks hooks(&backend.log);
  auto records = run_steps(s, 0, "h", backend, hooks, true);
  REQUIRE(records.size() == 6);
  const std::vector<std::string> step0 = {"prepare 0", "compute 30 ms", "pre 0", "run allreduce", "post 0",
                                          "prepare 1", "compute 10 ms", "pre 1", "run allreduce", "post 1",
                                          "prepare 2", "compute 30 ms", "pre 2"};
  REQUIRE(backend.log.size() > step0.size());
  CHECK(std::vector<std::string>(backend.log.begin(), backend.log.begin() + static_cast<int64_t>(step0.size())) ==
        step0);
  for (const auto& r : records) {
    INFO("step " << r.step << " op " << r.index);
    CHECK(r.wrong == 0);
    // The step's compute is on the rank's first op row of the step, the op's own on its row.
    if (r.index == 0) {
      CHECK(r.step_compute_ns >= 30'000'000);
      CHECK(r.compute_ns == 0);
    } else {
      CHECK(r.step_compute_ns == 0);
      CHECK(r.compute_ns >= 10'000'000);
    }
    // The compute lies between prepare and the pre hook: outside the wait and the op's time.
    int64_t spent = r.compute_ns + r.step_compute_ns;
    CHECK(r.wait_start_ns - backend.prepared.at(r.seq) >= spent);
    CHECK(r.start_ns >= r.wait_start_ns);
    CHECK(r.wait_ns < spent);
  }

  // Without the keys nothing is spent and the rows say 0.
  Schedule plain = parse_schedule(with("", ""), "c.yaml");
  LoopBackend b2(plain);
  PhaseHooks no_hooks;
  for (const auto& r : run_steps(plain, 0, "h", b2, no_hooks, true)) {
    CHECK(r.compute_ns == 0);
    CHECK(r.step_compute_ns == 0);
  }
  for (const auto& line : b2.log) CHECK(line.rfind("compute", 0) != 0);
}

TEST_CASE("host_compute spends the time it is given", "[workloads][compute]") {
  for (int64_t ns : {0LL, 50'000LL, 3'000'000LL, 20'000'000LL}) {
    INFO(ns << " ns");
    Timestamp t0 = now();
    host_compute(std::chrono::nanoseconds(ns));
    int64_t took = now().monotonic_ns - t0.monotonic_ns;
    CHECK(took >= ns);
    // Never early; late only by the scheduler (generous: the CI machine is loaded).
    CHECK(took < ns + 200'000'000);
  }
}

TEST_CASE("ops CSV rows carry compute_ns and step_compute_ns; older files without them still read",
          "[workloads][compute]") {
  OpRecord r;
  r.rank = 1;
  r.host = "h1";
  r.group = "dp";
  r.kind = "dp";
  r.group_size = 2;
  r.bytes = 64;
  r.duration_ns = 1000;
  r.compute_ns = 20'000'123;
  r.step_compute_ns = 50'000'456;
  const auto& cols = op_csv_columns();
  REQUIRE(cols.size() == 28);
  CHECK(cols[25] == "compute_ns");
  CHECK(cols[26] == "step_compute_ns");
  CHECK(cols[27] == "barrier");
  auto f = op_csv_fields(r);
  CHECK(f[25] == "20000123");
  CHECK(f[26] == "50000456");
  auto back = decode_records(encode_records({r}));
  REQUIRE(back.size() == 1);
  CHECK(back[0].compute_ns == 20'000'123);
  CHECK(back[0].step_compute_ns == 50'000'456);

  // A results folder from before the compute columns: 25 columns, read with both 0.
  std::string old_header, old_row;
  for (size_t i = 0; i < 25; ++i) {
    old_header += (i ? "," : "") + cols[i];
    old_row += (i ? "," : "") + f[i];
  }
  auto old = parse_op_csv(old_header + "\n" + old_row + "\n", "old.csv");
  REQUIRE(old.size() == 1);
  CHECK(old[0].rank == 1);
  CHECK(old[0].duration_ns == 1000);
  CHECK(old[0].compute_ns == 0);
  CHECK(old[0].step_compute_ns == 0);
  // An old header with a new-width row, or a new header with a bad number: refused, naming the line.
  CHECK_THROWS_WITH(parse_op_csv(old_header + "\n" + old_row + ",1,2\n", "old.csv"),
                    Contains("old.csv:2: 27 fields, the header has 25"));
  auto bad = f;
  bad[25] = "soon";
  std::string line;
  for (const auto& x : bad) line += (line.empty() ? "" : ",") + x;
  std::string header;
  for (const auto& c : cols) header += (header.empty() ? "" : ",") + c;
  CHECK_THROWS_WITH(parse_op_csv(header + "\n" + line + "\n", "new.csv"),
                    Contains("new.csv:2: column compute_ns: bad number 'soon'"));
  // A header that is none of the three (full; without barrier; without the compute columns and
  // barrier) is no ops CSV: here the full one less its last two columns.
  std::string two_short = header.substr(0, header.rfind(','));
  two_short = two_short.substr(0, two_short.rfind(','));
  CHECK_THROWS_WITH(parse_op_csv(two_short + "\n", "x.csv"), Contains("x.csv:1: not an ops CSV header"));
  CHECK(parse_op_csv(header.substr(0, header.rfind(',')) + "\n", "x.csv").empty());  // without barrier: read
}

}  // namespace compute_unit
