#include <catch2/catch.hpp>

#include <set>
#include <string>

#include "ocslab/common/error.h"
#include "ocslab/workloads/schedule.h"

using namespace ocslab;
using namespace ocslab::workloads;
using Catch::Matchers::Contains;

namespace {

std::string src(const std::string& rel) { return std::string(OCSLAB_TEST_SOURCE_DIR) + "/" + rel; }

const char* kHead = R"(name: t
ranks: 4
groups:
  - {name: dp, kind: dp, ranks: [0, 1, 2, 3]}
  - {name: pp, kind: pp, ranks: [0, 2]}
step:
)";

std::string error_of(const std::string& text) {
  try {
    parse_schedule(text, "s.yaml");
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "no error";
}

}  // namespace

TEST_CASE("the shipped example schedules parse into what they say", "[workloads]") {
  Schedule s = load_schedule(src("experiments/workloads/schedules/3d-dp-pp-tp.yaml"));
  CHECK(s.name == "3d-dp-pp-tp-8");
  CHECK(s.ranks == 8);
  CHECK(s.steps == 10);
  CHECK(s.warmup == 2);
  REQUIRE(s.groups.size() == 12);
  CHECK(s.step.size() == 20);
  // Every rank is in exactly one group of each kind (TP=2 x PP=2 x DP=2).
  for (const char* kind : {"tp", "pp", "dp"}) {
    std::multiset<int> seen;
    for (const auto& g : s.groups) {
      if (g.kind == kind) seen.insert(g.ranks.begin(), g.ranks.end());
    }
    CHECK(seen == std::multiset<int>{0, 1, 2, 3, 4, 5, 6, 7});
  }
  // The backward send of the first pipeline goes stage 1 -> stage 0.
  const Op& back = s.step[10];
  CHECK(s.group_of(back).name == "pp-r0-t0");
  CHECK(back.type == OpType::kSendRecv);
  CHECK(back.src == 2);
  CHECK(back.dst == 0);
  CHECK(s.step[2].src == 0);  // 2-rank group without src/dst: the first member sends
  CHECK(s.step[2].dst == 2);
  CHECK(s.max_buffer_bytes() == 64u << 20);

  Schedule v = load_schedule(src("experiments/workloads/schedules/dp-pp-4.yaml"));
  CHECK(v.ranks == 4);
  CHECK(v.step.back().type == OpType::kBarrier);
  CHECK(v.step.back().bytes == 0);
  CHECK(v.involves(v.step[0], 0));
  CHECK(v.involves(v.step[0], 1));
  CHECK_FALSE(v.involves(v.step[0], 2));
  CHECK(v.involves(v.step[4], 3));
  CHECK_FALSE(v.involves(v.step[4], 1));

  // The one-GPU smoke schedule: one rank, the largest buffer is the 1 GiB allreduce.
  Schedule one = load_schedule(src("experiments/workloads/schedules/one-gpu.yaml"));
  CHECK(one.ranks == 1);
  REQUIRE(one.groups.size() == 1);
  CHECK(one.step.size() == 7);
  CHECK(one.max_buffer_bytes() == 1u << 30);
  CHECK(one.step.back().type == OpType::kBarrier);
}

TEST_CASE("byte counts take binary suffixes", "[workloads]") {
  CHECK(parse_bytes("4096") == 4096);
  CHECK(parse_bytes("64KiB") == 65536);
  CHECK(parse_bytes("64K") == 65536);
  CHECK(parse_bytes("4MiB") == 4u << 20);
  CHECK(parse_bytes("1G") == 1u << 30);
  CHECK(parse_bytes("12B") == 12);
  CHECK_THROWS_WITH(parse_bytes("4MB"), Contains("unknown suffix 'MB'"));
  CHECK_THROWS_WITH(parse_bytes("lots"), Contains("bad byte count 'lots'"));
  CHECK_THROWS_WITH(parse_bytes("99999999999999999999G"), Contains("bad byte count"));
  CHECK_THROWS_WITH(parse_bytes("9999999999999G"), Contains("too large"));
}

TEST_CASE("schedule errors name the file, line, group and rank", "[workloads]") {
  CHECK_THAT(error_of(std::string(kHead) + "  - {group: tp, op: allreduce, bytes: 1024}\n"),
             Contains("s.yaml:7:13: unknown group 'tp' (groups: dp, pp)"));
  CHECK_THAT(
      error_of("ranks: 2\ngroups:\n  - {name: dp, kind: dp, ranks: [0, 2]}\nstep:\n  - {group: dp, op: barrier}\n"),
      Contains("s.yaml:3:37: group 'dp': rank 2 is outside the world of 2 rank(s) (0..1)"));
  CHECK_THAT(
      error_of("ranks: 2\ngroups:\n  - {name: dp, kind: dp, ranks: [1, 1]}\nstep:\n  - {group: dp, op: barrier}\n"),
      Contains("s.yaml:3:37: group 'dp': rank 1 listed twice"));
  CHECK_THAT(error_of("ranks: 2\ngroups:\n  - {name: dp, kind: dp, ranks: [0]}\n  - {name: dp, kind: pp, ranks: [1]}\n"
                      "step:\n  - {group: dp, op: barrier}\n"),
             Contains("s.yaml:4:12: group 'dp' defined twice (also at line 3)"));
  CHECK_THAT(error_of("ranks: 2\ngroups:\n  - {name: x, kind: zz, ranks: [0]}\nstep:\n  - {group: x, op: barrier}\n"),
             Contains("s.yaml:3:21: group 'x': unknown kind 'zz' (known: dp, pp, tp, cp, ep, sp, world)"));
  CHECK_THAT(error_of(std::string(kHead) + "  - {group: dp, op: gather, bytes: 1024}\n"),
             Contains("s.yaml:7:21: unknown op 'gather' (known: allreduce, allgather, reducescatter, sendrecv, "
                      "barrier, alltoall, alltoallv, broadcast)"));
  CHECK_THAT(
      error_of(std::string(kHead) + "  - {group: dp, op: allgather, bytes: 1000}\n"),
      Contains("s.yaml:7:39: allgather on group 'dp': bytes 1000 is not a multiple of 16 (4-byte floats x 4 ranks)"));
  CHECK_THAT(error_of(std::string(kHead) + "  - {group: dp, op: allreduce, bytes: 6}\n"),
             Contains("allreduce on group 'dp': bytes 6 is not a multiple of 4"));
  CHECK_THAT(error_of(std::string(kHead) + "  - {group: dp, op: allreduce, bytes: 4XB}\n"),
             Contains("s.yaml:7:39: allreduce on group 'dp': bad byte count '4XB'"));
  CHECK_THAT(error_of(std::string(kHead) + "  - {group: dp, op: allreduce}\n"),
             Contains("s.yaml:7:5: missing key 'bytes'"));
  CHECK_THAT(error_of(std::string(kHead) + "  - {group: pp, op: sendrecv, bytes: 64, src: 0, dst: 1}\n"),
             Contains("s.yaml:7:55: sendrecv on group 'pp': dst rank 1 is not a member of the group"));
  CHECK_THAT(error_of(std::string(kHead) + "  - {group: dp, op: sendrecv, bytes: 64}\n"),
             Contains("sendrecv on group 'dp': the group has 4 ranks: say which sends (src) and which receives (dst)"));
  CHECK_THAT(error_of(std::string(kHead) + "  - {group: dp, op: sendrecv, bytes: 64, src: 0}\n"),
             Contains("give both src and dst"));
  CHECK_THAT(error_of(std::string(kHead) + "  - {group: dp, op: sendrecv, bytes: 64, src: 9, dst: 1}\n"),
             Contains("sendrecv on group 'dp': rank 9 is outside the world of 4 rank(s)"));
  CHECK_THAT(error_of(std::string(kHead) + "  - {group: dp, op: allreduce, bytes: 64, src: 0}\n"),
             Contains("src/dst are for sendrecv only"));
  CHECK_THAT(error_of(std::string(kHead) + "  - {group: dp, op: barrier, bytes: 64}\n"),
             Contains("a barrier moves no data"));
  CHECK_THAT(error_of(std::string(kHead) + "  - {group: dp, op: barrier, size: 64}\n"),
             Contains("s.yaml:7:30: unknown key 'size'"));
  CHECK_THAT(error_of("ranks: 0\ngroups: []\nstep: []\n"), Contains("s.yaml:1:8: ranks must be 1..65536"));
  CHECK_THAT(error_of("ranks: 2\nsteps: 0\ngroups: []\nstep: []\n"), Contains("s.yaml:2:8: steps must be"));
  CHECK_THAT(error_of("ranks: 2\ngroups: []\nstep: []\n"), Contains("groups must be a non-empty list"));
  CHECK_THAT(error_of(std::string(kHead) + "  []\n"), Contains("step must be a non-empty list"));
  CHECK_THAT(error_of("- a\n- b\n"), Contains("s.yaml:1:1: a schedule is a mapping"));
  CHECK_THAT(error_of("ranks: [\n"), Contains("s.yaml:2:1: YAML syntax error"));
  CHECK_THROWS_WITH(load_schedule("/nonexistent/s.yaml"), Contains("/nonexistent/s.yaml: cannot open"));
}

TEST_CASE("the schedule digest changes with any group member or op, not with layout", "[workloads]") {
  const std::string a = std::string(kHead) + "  - {group: dp, op: allreduce, bytes: 1024}\n";
  const std::string flow =
      "name: t\nranks: 4\ngroups:\n- name: dp\n  kind: dp\n  ranks: [0, 1, 2, 3]\n- name: pp\n"
      "  kind: pp\n  ranks: [0, 2]\nstep:\n- {group: dp, op: allreduce, bytes: 1KiB}\n";
  uint64_t d = parse_schedule(a, "a").digest();
  CHECK(parse_schedule(flow, "b").digest() == d);
  std::string other_rank = a;
  other_rank.replace(other_rank.find("[0, 2]"), 6, "[0, 3]");
  CHECK(parse_schedule(other_rank, "c").digest() != d);
  CHECK(parse_schedule(std::string(kHead) + "  - {group: dp, op: allreduce, bytes: 2048}\n", "d").digest() != d);
  CHECK(parse_schedule(std::string(kHead) + "  - {group: pp, op: allreduce, bytes: 1024}\n", "e").digest() != d);
}
