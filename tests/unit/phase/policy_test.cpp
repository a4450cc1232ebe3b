// The orchestrator policies' pure parts (policy.h) to exact values: names, the phase table with
// idle windows, the safe-window decision, greedy allocation; the controller core declining a
// reconfiguration under safe-window; and the controller file's policy keys (file:line:col).
#include <catch2/catch.hpp>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>

#include "ocslab/phase/controller_config.h"
#include "ocslab/phase/controller_core.h"
#include "ocslab/phase/allocator.h"
#include "ocslab/phase/policy.h"

namespace policy_test {

using namespace ocslab;
using namespace ocslab::phase;
using namespace std::chrono_literals;

// A file under the build's temp folder, removed at the end of the test.
struct TempFile {
  explicit TempFile(const std::string& text, const std::string& name = "phases.csv") {
    dir = std::filesystem::temp_directory_path() / ("ocslab-policy-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    path = (dir / name).string();
    std::ofstream(path) << text;
  }
  ~TempFile() { std::filesystem::remove_all(dir); }
  std::filesystem::path dir;
  std::string path;
};

PhaseWindows windows_of(std::vector<OpWindow> ops) {
  PhaseWindows w;
  w.ops = std::move(ops);
  return w;
}

TEST_CASE("policy names round-trip and anything else is refused", "[phase][policy]") {
  for (auto p : {Policy::kOnRequest, Policy::kSafeWindow, Policy::kGreedy}) CHECK(parse_policy(to_string(p)) == p);
  CHECK(to_string(Policy::kSafeWindow) == "safe-window");
  CHECK_FALSE(parse_policy("safe_window"));
  CHECK_FALSE(parse_policy(""));
  CHECK(policy_names() == "on-request, safe-window, greedy");
}

TEST_CASE("safe-window reconfigures only when the idle window exceeds the switch time", "[phase][policy]") {
  auto t = windows_of({{0, "pp0", "send", 1 << 20, 1000},
                       {1, "dp0s0", "allreduce", 4 << 20, 5000},
                       {2, "cp0s0", "allgather", 2 << 20, 20000}});
  auto short_w = decide_safe_window(t, "pp0", 1, 5000us);
  CHECK_FALSE(short_w.reconfigure);
  CHECK(short_w.idle_us == 1000);
  CHECK(short_w.why == "pp0#1 (op 0 of the step): idle window 1000 us <= switch time 5000 us");
  auto equal = decide_safe_window(t, "dp0s0", 1, 5000us);  // equal is not longer
  CHECK_FALSE(equal.reconfigure);
  CHECK(equal.idle_us == 5000);
  auto long_w = decide_safe_window(t, "cp0s0", 1, 5000us);
  CHECK(long_w.reconfigure);
  CHECK(long_w.idle_us == 20000);
  CHECK(long_w.why == "cp0s0#1 (op 2 of the step): idle window 20000 us > switch time 5000 us");
  CHECK(decide_safe_window(t, "dp0s0", 1, 4999us).reconfigure);
  // A group the table lacks: no prediction, reconfigure as on-request would, and say why.
  auto unknown = decide_safe_window(t, "pp1", 1, 5000us);
  CHECK(unknown.reconfigure);
  CHECK(unknown.idle_us == -1);
  CHECK(unknown.why == "pp1#1: the phase table has no op of group pp1: no prediction, reconfigure");
  // A group with two ops per step: seq walks its rows, step after step.
  auto two = windows_of({{0, "pp0", "send", 1, 100}, {1, "dp0s0", "allreduce", 1, 7}, {2, "pp0", "recv", 1, 90000}});
  CHECK(decide_safe_window(two, "pp0", 1, 5000us).idle_us == 100);
  CHECK(decide_safe_window(two, "pp0", 2, 5000us).idle_us == 90000);
  CHECK(decide_safe_window(two, "pp0", 3, 5000us).idle_us == 100);
  CHECK(decide_safe_window(two, "pp0", 4, 5000us).reconfigure);
  CHECK(decide_safe_window(two, "dp0s0", 5, 5000us).idle_us == 7);
  CHECK(decide_safe_window(two, "pp0", 0, 5000us).idle_us == -1);  // seqs start at 1
}

TEST_CASE("the phase table with idle windows loads, and its mistakes name file:line:col", "[phase][policy]") {
  {
    TempFile f(
        "# step of gpt\nindex,group,type,bytes,idle_us\n0,pp0,send,1048576,300\n1,dp0s0,allreduce,4194304,"
        "25000\n");
    auto t = PhaseWindows::load(f.path);
    REQUIRE(t.ops.size() == 2);
    CHECK(t.ops[1].group == "dp0s0");
    CHECK(t.ops[1].type == "allreduce");
    CHECK(t.ops[1].bytes == 4194304);
    CHECK(t.ops[1].idle_us == 25000);
    CHECK(t.find("dp0s0", 1) == &t.ops[1]);
    CHECK(t.find("dp0s0", 2) == &t.ops[1]);  // one op per step: every seq is that row
    CHECK(t.find("dp1s0", 1) == nullptr);
    CHECK(t.find("pp0", 0) == nullptr);
  }
  auto error_of = [](const std::string& text) {
    TempFile f(text);
    try {
      PhaseWindows::load(f.path);
    } catch (const ConfigError& e) {
      std::string m = e.what();
      auto pos = m.find(f.path);
      REQUIRE(pos == 0);
      return m.substr(f.path.size());
    }
    FAIL("no error for " << text);
    return std::string();
  };
  CHECK(error_of("index,group,type,bytes\n0,pp0,send,1\n") ==
        ":1:1: header must be 'index,group,type,bytes,idle_us', got 'index,group,type,bytes'");
  CHECK(error_of("index,group,type,bytes,idle_us\n0,pp0,send,1,soon\n") ==
        ":2:14: idle_us must be a non-negative integer, got 'soon'");
  CHECK(error_of("index,group,type,bytes,idle_us\n0,pp0,send,-1,5\n") ==
        ":2:12: bytes must be a non-negative integer, got '-1'");
  CHECK(error_of("index,group,type,bytes,idle_us\n1,pp0,send,1,5\n") == ":2:1: op index 1 out of order (expected 0)");
  CHECK(error_of("index,group,type,bytes,idle_us\n0,,send,1,5\n") == ":2:3: empty group");
  CHECK(error_of("index,group,type,bytes,idle_us\n0,pp0,send,1\n") ==
        ":2:1: expected 5 fields (index,group,type,bytes,idle_us), got 4");
  CHECK(error_of("index,group,type,bytes,idle_us\n") == ":1:1: the phase table has no ops");
  CHECK_THROWS_WITH(PhaseWindows::load("/nonexistent/phases.csv"),
                    "/nonexistent/phases.csv: cannot open the phase table");
}

TEST_CASE("greedy allocation grants the largest demands first while both ends are free", "[phase][policy]") {
  // 4 ranks, 6 demanded pairs: at most 4 circuits (one transmitter and one receiver per rank).
  std::vector<Demand> demands = {{0, 1, 100}, {0, 2, 500}, {3, 2, 300}, {1, 0, 50}, {2, 3, 400}, {1, 3, 200}};
  auto a = allocate_greedy(demands, 4);
  CHECK(a.granted == std::vector<Demand>{{0, 2, 500}, {2, 3, 400}, {1, 0, 50}});
  // 3->2 loses 2's receiver to 0->2, 1->3 loses 3's receiver to 2->3, 0->1 loses 0's transmitter.
  CHECK(a.dropped == std::vector<Demand>{{3, 2, 300}, {1, 3, 200}, {0, 1, 100}});
  // Ties go to the lower source, then the lower destination, whatever the input order.
  auto t = allocate_greedy({{2, 0, 7}, {1, 0, 7}, {1, 2, 7}}, 3);
  CHECK(t.granted == std::vector<Demand>{{1, 0, 7}});
  CHECK(t.dropped == std::vector<Demand>{{1, 2, 7}, {2, 0, 7}});
  CHECK(allocate_greedy({}, 2).granted.empty());
  CHECK_THROWS_WITH(allocate_greedy({{0, 4, 1}}, 4), "demand 0->4: rank 4 is outside 0..3");
  CHECK_THROWS_WITH(allocate_greedy({{2, 2, 1}}, 4), "demand 2->2: a rank cannot send to itself");
}

// ---- the controller core under safe-window ----

struct Actions : CoreActions {
  std::map<ConnId, std::vector<Message>> sent;
  std::vector<size_t> reprograms;
  void send(ConnId c, const Message& m) override { sent[c].push_back(m); }
  void close(ConnId) override {}
  void close_after_send(ConnId) override {}
  void reprogram(size_t rail) override { reprograms.push_back(rail); }
  void arm_timer(uint64_t, size_t, int, std::chrono::milliseconds) override {}
  void cancel_timer(uint64_t, size_t) override {}
  void build_ring(size_t) override {}
  void mask(size_t, int) override {}
};

// PP=2, DP=2 (ranks 0,1 | 2,3), one rail at "11"; group pp-0 = ranks 0 and 2 (digit 0).
CoreConfig safe_window_config() {
  CoreConfig c;
  c.layout = JobLayout{"job", 2, {{"dp", 2}}};
  c.rails = {"rail0"};
  c.initial = {TopoId::uniform(c.layout, 1)};
  c.policy = Policy::kSafeWindow;
  // pp-0's first op of the step has 100 us before it, its second 50 ms; the switch takes 5 ms.
  c.windows = windows_of({{0, "pp-0", "send", 1 << 20, 100}, {1, "pp-0", "send", 1 << 20, 50000}});
  c.switch_time = 5000us;
  return c;
}

void line(ControllerCore& core, int rank, Message m) { core.on_line(static_cast<ConnId>(rank + 1), encode(m)); }

TEST_CASE("controller core, safe-window: a short window keeps the circuits and ACKs as fallback, counted",
          "[phase][policy]") {
  Actions act;
  ControllerCore core(safe_window_config(), act);
  for (int r : {0, 2}) {
    core.opened(static_cast<ConnId>(r + 1), "peer");
    Message h;
    h.type = MsgType::kHello;
    h.job = "job";
    h.rank = r;
    h.world = 4;
    line(core, r, h);
    Message g;
    g.type = MsgType::kRegister;
    g.group = "pp-0";
    g.dim = "pp";
    g.ranks = {0, 2};
    line(core, r, g);
  }
  auto request = [&](int rank, int64_t seq, int64_t op) {
    Message m;
    m.type = MsgType::kRequest;
    m.group = "pp-0";
    m.seq = seq;
    m.op = op;
    line(core, rank, m);
  };
  auto done = [&](int rank, int64_t seq) {
    Message m;
    m.type = MsgType::kDone;
    m.group = "pp-0";
    m.seq = seq;
    line(core, rank, m);
  };
  auto acks = [&](int rank) {
    std::vector<Message> out;
    for (auto& m : act.sent[static_cast<ConnId>(rank + 1)])
      if (m.type == MsgType::kAck) out.push_back(m);
    act.sent[static_cast<ConnId>(rank + 1)].clear();
    return out;
  };
  // seq 1 = the step's op 0 (100 us <= 5 ms): declined. Both ranks ACKed at once on "11",
  // fallback for this op only.
  request(0, 1, 0);
  request(2, 1, 0);
  CHECK(act.reprograms.empty());
  CHECK(core.intended(0).first.str() == "11");
  CHECK(core.declined() == 1);
  for (int r : {0, 2}) {
    auto a = acks(r);
    REQUIRE(a.size() == 1);
    CHECK_FALSE(a[0].reconfigured);
    CHECK(a[0].fallback);
    CHECK(a[0].keep == 0);
    CHECK(a[0].topo.at("rail0") == "11");
  }
  CHECK_FALSE(core.in_fallback());
  size_t declined_events = 0;
  for (const auto& e : core.events()) {
    if (e.kind != ControllerEvent::Kind::kDeclined) continue;
    ++declined_events;
    CHECK(e.group == "pp-0");
    CHECK(e.seq == 1);
    CHECK(e.value == 100);
    CHECK(e.detail == "pp-0#1 (op 0 of the step): idle window 100 us <= switch time 5000 us");
  }
  CHECK(declined_events == 1);
  done(0, 1);
  done(2, 1);
  // seq 2 = op 1 (50 ms > 5 ms): reconfigured to "00", ACKed after the rail confirmed.
  request(0, 2, 1);
  request(2, 2, 1);
  REQUIRE(act.reprograms == std::vector<size_t>{0});
  CHECK(core.intended(0).first.str() == "00");
  CHECK(acks(0).empty());
  auto [topo, version] = core.intended(0);
  core.on_rail_result(0, version, true, {}, topo);
  auto a = acks(0);
  REQUIRE(a.size() == 1);
  CHECK(a[0].reconfigured);
  CHECK_FALSE(a[0].fallback);
  CHECK(core.declined() == 1);
}

TEST_CASE("controller core: safe-window without its phase table or switch time is refused", "[phase][policy]") {
  Actions act;
  auto no_table = safe_window_config();
  no_table.windows = {};
  CHECK_THROWS_WITH(ControllerCore(no_table, act),
                    "controller job: policy safe-window needs a phase table with idle windows");
  auto no_time = safe_window_config();
  no_time.switch_time = 0us;
  CHECK_THROWS_WITH(ControllerCore(no_time, act), "controller job: policy safe-window needs the switch time (> 0)");
  auto greedy = safe_window_config();  // greedy and on-request need neither
  greedy.policy = Policy::kGreedy;
  greedy.windows = {};
  CHECK_NOTHROW(ControllerCore(greedy, act));
}

// ---- the controller file's policy keys ----

const char* kPolicyFile = R"(job: gpt
pp: 2
dims: [{name: dp, size: 2}]
policy: safe-window
phase_table: phases.csv
switch_time_ms: 2.5
rails:
  - name: rail0
    switch: tl1://admin@127.0.0.1:3082
    slots: [1-65, 2-66, 3-67, 4-68]
)";

ControllerConfig parse_text(const std::string& text, const std::string& origin = "c.yaml") {
  return parse_controller_config(load_yaml_string(text, origin));
}

std::string replaced(std::string t, const std::string& from, const std::string& to) {
  auto pos = t.find(from);
  REQUIRE(pos != std::string::npos);
  return t.replace(pos, from.size(), to);
}

TEST_CASE("the controller file selects a policy; bad policy keys name file:line:col", "[phase][policy][config]") {
  auto c = parse_text(kPolicyFile, "/etc/jobs/c.yaml");
  CHECK(c.policy == Policy::kSafeWindow);
  CHECK(c.phase_table == "/etc/jobs/phases.csv");  // next to the file
  CHECK(c.switch_time_ms == 2.5);
  CHECK(c.windows.ops.empty());  // parse reads no file
  CHECK(parse_text(replaced(replaced(replaced(kPolicyFile, "safe-window", "greedy"), "phase_table: phases.csv\n", ""),
                            "switch_time_ms: 2.5\n", ""))
            .policy == Policy::kGreedy);
  CHECK(
      parse_text(replaced(replaced(replaced(kPolicyFile, "policy: safe-window\n", ""), "phase_table: phases.csv\n", ""),
                          "switch_time_ms: 2.5\n", ""))
          .policy == Policy::kOnRequest);
  CHECK_THROWS_WITH(parse_text(replaced(kPolicyFile, "safe-window", "lazy")),
                    "c.yaml:4:9: policy 'lazy' is not one of on-request, safe-window, greedy");
  CHECK_THROWS_WITH(parse_text(replaced(kPolicyFile, "phase_table: phases.csv\n", "")),
                    Catch::StartsWith("c.yaml:4:9: policy safe-window needs phase_table:"));
  CHECK_THROWS_WITH(parse_text(replaced(kPolicyFile, "switch_time_ms: 2.5\n", "")),
                    Catch::StartsWith("c.yaml:4:9: policy safe-window needs switch_time_ms:"));
  CHECK_THROWS_WITH(parse_text(replaced(kPolicyFile, "2.5", "0")),
                    "c.yaml:6:17: switch_time_ms must be > 0 and at most 3600000");
  CHECK_THROWS_WITH(parse_text(replaced(kPolicyFile, "safe-window", "on-request")),
                    "c.yaml:5:14: phase_table is for policy safe-window (this job's policy is on-request)");
}

TEST_CASE("the controller file selects greedy's allocator; a bad allocator names file:line:col",
          "[phase][policy][config][allocator]") {
  auto greedy = replaced(replaced(replaced(kPolicyFile, "safe-window", "greedy"), "phase_table: phases.csv\n", ""),
                         "switch_time_ms: 2.5\n", "");
  CHECK(parse_text(greedy).allocator == Allocator::kLargestDemand);  // today's, by default
  CHECK(parse_text(replaced(greedy, "policy: greedy\n", "policy: greedy\nallocator: orchestrrl\n")).allocator ==
        Allocator::kOrchestrRL);
  CHECK(parse_text(replaced(greedy, "policy: greedy\n", "policy: greedy\nallocator: uniform\n")).allocator ==
        Allocator::kUniform);
  CHECK_THROWS_WITH(parse_text(replaced(greedy, "policy: greedy\n", "policy: greedy\nallocator: fair\n")),
                    "c.yaml:5:12: allocator 'fair' is not one of largest-demand, uniform, orchestrrl");
  CHECK_THROWS_WITH(parse_text(replaced(kPolicyFile, "policy: safe-window\n", "policy: safe-window\nallocator: uniform\n")),
                    "c.yaml:5:12: allocator is for policy greedy, which allocates circuits (this job's policy is "
                    "safe-window)");
}

TEST_CASE("loading a safe-window controller file reads its phase table; the table's mistakes name it",
          "[phase][policy][config]") {
  TempFile table("index,group,type,bytes,idle_us\n0,pp0,send,1,300\n1,dp0s0,allreduce,2,40000\n");
  auto yaml = (table.dir / "c.yaml").string();
  std::ofstream(yaml) << kPolicyFile;
  auto c = load_controller_config(yaml);
  REQUIRE(c.windows.ops.size() == 2);
  CHECK(c.windows.ops[1].idle_us == 40000);
  std::ofstream(table.path) << "index,group,type,bytes,idle_us\n0,pp0,send,1,later\n";
  CHECK_THROWS_WITH(load_controller_config(yaml),
                    table.path + ":2:14: idle_us must be a non-negative integer, got 'later'");
}

}  // namespace policy_test
