// AllToAll, AllToAllV and Broadcast (docs/workloads.md): their schedule syntax and its errors at
// file:line:col, the buffer layout every transport shares, the data check on results delivered
// as a correct transport delivers them (and on wrong ones), and nccl-tests' bandwidth factors.
#include <catch2/catch.hpp>

#include <algorithm>
#include <string>
#include <vector>

#include "ocslab/common/error.h"
#include "ocslab/workloads/ring.h"
#include "ocslab/workloads/schedule.h"

using namespace ocslab;
using namespace ocslab::workloads;
using Catch::Matchers::Contains;

// Named, not anonymous: the unity build puts this file in one unit with its neighbours (the test
// cases too, so no using-directive leaks into them).
namespace a2a_test {

std::string src(const std::string& rel) { return std::string(OCSLAB_TEST_SOURCE_DIR) + "/" + rel; }

// Line 7 is the first op.
const char* kHead = R"(name: t
ranks: 4
groups:
  - {name: ep, kind: ep, ranks: [0, 1, 2, 3]}
  - {name: pp, kind: pp, ranks: [0, 2]}
step:
)";

std::string error_of(const std::string& op_line) {
  try {
    parse_schedule(std::string(kHead) + op_line, "s.yaml");
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "no error";
}

Schedule one(const std::string& op_line) { return parse_schedule(std::string(kHead) + op_line, "s.yaml"); }

// Every member's buffer after a correct transport ran op: each member's input (fill_input), then
// alltoall(v): member i's send block j copied into member j's receive block i; broadcast: the
// root's buffer everywhere.
std::vector<std::vector<float>> deliver(const Schedule& s, const Op& op, uint64_t seq) {
  const Group& g = s.group_of(op);
  const int n = static_cast<int>(g.ranks.size());
  std::vector<std::vector<float>> in(static_cast<size_t>(n)), out;
  for (int i = 0; i < n; ++i) {
    in[static_cast<size_t>(i)].assign(buffer_floats(op), -7.0f);
    fill_input(s, op, g.ranks[static_cast<size_t>(i)], seq, in[static_cast<size_t>(i)].data());
  }
  out = in;
  for (int j = 0; j < n; ++j) {
    if (op.type == OpType::kBroadcast) {
      out[static_cast<size_t>(j)] = in[static_cast<size_t>(g.index_of(op.root))];
      continue;
    }
    AllToAllLayout mine = alltoall_layout(op, n, j);
    for (int i = 0; i < n; ++i) {
      Chunk from = alltoall_layout(op, n, i).send[static_cast<size_t>(j)];
      Chunk to = mine.recv[static_cast<size_t>(i)];
      REQUIRE(from.count == to.count);
      std::copy_n(in[static_cast<size_t>(i)].begin() + static_cast<long>(from.offset), from.count,
                  out[static_cast<size_t>(j)].begin() + static_cast<long>(to.offset));
    }
  }
  return out;
}

uint64_t wrong_of(const Schedule& s, const Op& op, uint64_t seq, const std::vector<std::vector<float>>& bufs) {
  uint64_t w = 0;
  const Group& g = s.group_of(op);
  for (size_t m = 0; m < g.ranks.size(); ++m) w += count_wrong(s, op, g.ranks[m], seq, bufs[m].data());
  return w;
}


TEST_CASE("alltoall, alltoallv and broadcast parse with their sizes and root", "[workloads][alltoall]") {
  Schedule s = load_schedule(src("experiments/workloads/schedules/moe-4.yaml"));
  REQUIRE(s.step.size() == 4);
  const Op& bc = s.step[0];
  CHECK(bc.type == OpType::kBroadcast);
  CHECK(bc.root == 1);
  CHECK(bc.bytes == 64 * 1024);
  CHECK(buffer_floats(bc) == 16384);
  const Op& a2a = s.step[1];
  CHECK(a2a.type == OpType::kAllToAll);
  CHECK(a2a.bytes == 64 * 1024);  // each rank's send buffer, as nccl-tests' size
  CHECK(alltoall_floats(a2a, 4, 0, 3) == 4096);
  CHECK(buffer_floats(a2a) == 2 * 16384);  // send blocks, then receive blocks
  const Op& dispatch = s.step[2];
  CHECK(dispatch.type == OpType::kAllToAllV);
  REQUIRE(dispatch.sizes.size() == 16);
  CHECK(dispatch.sizes[0 * 4 + 2] == 24 * 1024);  // rank 0 to expert 2
  CHECK(dispatch.sizes[2 * 4 + 0] == 0);
  // bytes: the busiest member's buffer. Rows 36, 36, 44, 44 KiB; columns 24, 28, 92, 16 KiB.
  CHECK(dispatch.bytes == 92 * 1024);
  // Member 2 sends 44 KiB and receives 92 KiB: the largest send + receive buffer.
  CHECK(buffer_floats(dispatch) == (44 + 92) * 1024 / 4);
  CHECK(s.max_buffer_bytes() == (44 + 92) * 1024);
  const Op& combine = s.step[3];
  for (int i = 0; i < 4; ++i) {
    for (int j = 0; j < 4; ++j) {
      CHECK(combine.sizes[static_cast<size_t>(i * 4 + j)] == dispatch.sizes[static_cast<size_t>(j * 4 + i)]);
    }
  }
  CHECK(combine.bytes == 92 * 1024);

  // Layout: send blocks from 0 in member order, receive blocks after them.
  AllToAllLayout l = alltoall_layout(dispatch, 4, 2);
  CHECK(l.send[0].offset == 0);
  CHECK(l.send[0].count == 0);
  CHECK(l.send[1].count == 2048);
  CHECK(l.recv_base == 44 * 256);
  CHECK(l.recv[0].offset == l.recv_base);
  CHECK(l.recv[0].count == 24 * 256);  // what rank 0 sends to expert 2
  CHECK(l.total == (44 + 92) * 256);

  // The default root is the group's first member; root names a global rank.
  CHECK(one("  - {group: pp, op: broadcast, bytes: 64}\n").step[0].root == 0);
  CHECK(one("  - {group: pp, op: broadcast, bytes: 64, root: 2}\n").step[0].root == 2);
  // The shipped phase example parses as well.
  Schedule p = load_schedule(src("experiments/workloads/schedules/moe-4-phase.yaml"));
  CHECK(p.step.size() == 7);
}

TEST_CASE("alltoall, alltoallv and broadcast errors name file:line:col", "[workloads][alltoall]") {
  // A matrix of the wrong shape: rows, then a row's length.
  CHECK_THAT(error_of("  - {group: ep, op: alltoallv, sizes: [[4, 4, 4, 4], [4, 4, 4, 4], [4, 4, 4, 4]]}\n"),
             Contains("s.yaml:7:39: alltoallv on group 'ep': sizes must be a list of 4 rows (one per member of the "
                      "group, in its order), got 3 row(s)"));
  CHECK_THAT(error_of("  - {group: ep, op: alltoallv, sizes: [[4, 4, 4, 4], [4, 4, 4], [4, 4, 4, 4], [4, 4, 4, 4]]}\n"),
             Contains("s.yaml:7:54: alltoallv on group 'ep': sizes row 1 (member rank 1) must list 4 byte counts, got 3"));
  CHECK_THAT(error_of("  - {group: ep, op: alltoallv, sizes: 64}\n"),
             Contains("s.yaml:7:39: alltoallv on group 'ep': sizes must be a list of 4 rows"));
  CHECK_THAT(error_of("  - {group: pp, op: alltoallv, sizes: [[4, 4], [4]]}\n"),
             Contains("s.yaml:7:48: alltoallv on group 'pp': sizes row 1 (member rank 2) must list 2 byte counts"));
  // Negative sizes, and other bad entries.
  CHECK_THAT(error_of("  - {group: pp, op: alltoallv, sizes: [[4, -8], [4, 4]]}\n"),
             Contains("s.yaml:7:44: alltoallv on group 'pp': sizes[0][1] = -8 is negative (bytes from rank 0 to rank 2)"));
  CHECK_THAT(error_of("  - {group: pp, op: alltoallv, sizes: [[4, 4], [-4KiB, 4]]}\n"),
             Contains("s.yaml:7:49: alltoallv on group 'pp': sizes[1][0] = -4KiB is negative"));
  CHECK_THAT(error_of("  - {group: pp, op: alltoallv, sizes: [[4, 6], [4, 4]]}\n"),
             Contains("s.yaml:7:44: alltoallv on group 'pp': sizes[0][1] = 6 must be a multiple of 4"));
  CHECK_THAT(error_of("  - {group: pp, op: alltoallv, sizes: [[4, 4x], [4, 4]]}\n"),
             Contains("s.yaml:7:44: alltoallv on group 'pp': bad byte count '4x'"));
  CHECK_THAT(error_of("  - {group: pp, op: alltoallv, sizes: [[0, 0], [0, 0]]}\n"),
             Contains("s.yaml:7:39: alltoallv on group 'pp': every size is 0"));
  CHECK_THAT(error_of("  - {group: pp, op: alltoallv, bytes: 64, sizes: [[4, 4], [4, 4]]}\n"),
             Contains("s.yaml:7:39: alltoallv on group 'pp': an alltoallv's sizes come from its matrix"));
  CHECK_THAT(error_of("  - {group: pp, op: alltoallv}\n"), Contains("s.yaml:7:5: missing key 'sizes'"));
  CHECK_THAT(error_of("  - {group: pp, op: alltoall, bytes: 64, sizes: [[4, 4], [4, 4]]}\n"),
             Contains("s.yaml:7:49: alltoall on group 'pp': sizes is for alltoallv only"));
  // alltoall: n equal blocks of whole floats.
  CHECK_THAT(error_of("  - {group: ep, op: alltoall, bytes: 1000}\n"),
             Contains("s.yaml:7:38: alltoall on group 'ep': bytes 1000 is not a multiple of 16 (4-byte floats x 4 "
                      "ranks)"));
  // A broadcast root outside the group, outside the world; root on another op.
  CHECK_THAT(error_of("  - {group: pp, op: broadcast, bytes: 64, root: 1}\n"),
             Contains("s.yaml:7:49: broadcast on group 'pp': root rank 1 is not a member of the group"));
  CHECK_THAT(error_of("  - {group: ep, op: broadcast, bytes: 64, root: 4}\n"),
             Contains("s.yaml:7:49: broadcast on group 'ep': root: rank 4 is outside the world of 4 rank(s) (0..3)"));
  CHECK_THAT(error_of("  - {group: ep, op: broadcast, bytes: 64, root: -1}\n"),
             Contains("s.yaml:7:49: broadcast on group 'ep': root: rank -1 is outside the world"));
  CHECK_THAT(error_of("  - {group: ep, op: allreduce, bytes: 64, root: 0}\n"),
             Contains("s.yaml:7:49: allreduce on group 'ep': root is for broadcast only"));
  CHECK_THAT(error_of("  - {group: ep, op: broadcast}\n"), Contains("s.yaml:7:5: missing key 'bytes'"));
}

TEST_CASE("the digest tells alltoallv matrices and broadcast roots apart", "[workloads][alltoall]") {
  uint64_t a = one("  - {group: pp, op: alltoallv, sizes: [[4, 8], [8, 4]]}\n").digest();
  CHECK(one("  - {group: pp, op: alltoallv, sizes: [[4, 8], [8, 4]]}\n").digest() == a);
  CHECK(one("  - {group: pp, op: alltoallv, sizes: [[8, 4], [8, 4]]}\n").digest() != a);
  uint64_t b = one("  - {group: ep, op: broadcast, bytes: 64, root: 1}\n").digest();
  CHECK(one("  - {group: ep, op: broadcast, bytes: 64, root: 2}\n").digest() != b);
  // The other ops' digests do not change with the new fields.
  CHECK(one("  - {group: ep, op: allreduce, bytes: 64}\n").digest() ==
        one("  - {group: ep, op: allreduce, bytes: 64}\n").digest());
}

TEST_CASE("alltoall, alltoallv and broadcast results are verified exactly", "[workloads][alltoall]") {
  Schedule s = load_schedule(src("experiments/workloads/schedules/moe-4.yaml"));
  for (size_t i = 0; i < s.step.size(); ++i) {
    const Op& op = s.step[i];
    INFO("op " << i << " " << op_name(op.type));
    const uint64_t seq = 17 + i;
    auto good = deliver(s, op, seq);
    CHECK(wrong_of(s, op, seq, good) == 0);
    // Nothing delivered: every received element is wrong (broadcast: all but the root's).
    std::vector<std::vector<float>> none(4, std::vector<float>(buffer_floats(op)));
    for (size_t m = 0; m < 4; ++m) fill_input(s, op, s.group_of(op).ranks[m], seq, none[m].data());
    uint64_t received = 0;
    for (int m = 0; m < 4; ++m) {
      if (op.type == OpType::kBroadcast) {
        received += m == s.group_of(op).index_of(op.root) ? 0 : op.bytes / 4;
      } else {
        received += alltoall_layout(op, 4, m).total - alltoall_layout(op, 4, m).recv_base;
      }
    }
    CHECK(wrong_of(s, op, seq, none) == received);
    // Another step's data (a stale buffer) is found.
    CHECK(wrong_of(s, op, seq + 1, good) > 0);
  }
  // alltoallv: two blocks delivered to each other's places, or one element off, are found.
  const Op& v = s.step[2];
  auto bufs = deliver(s, v, 5);
  AllToAllLayout l = alltoall_layout(v, 4, 1);  // member 1 receives 4, 12, 8, 4 KiB
  std::vector<float>& b1 = bufs[1];
  Chunk r0 = l.recv[0], r3 = l.recv[3];
  REQUIRE(r0.count == r3.count);
  std::swap_ranges(b1.begin() + static_cast<long>(r0.offset), b1.begin() + static_cast<long>(r0.offset + r0.count),
                   b1.begin() + static_cast<long>(r3.offset));
  CHECK(count_wrong(s, v, 1, 5, b1.data()) > 0);
  auto again = deliver(s, v, 5);
  again[2][alltoall_layout(v, 4, 2).recv[2].offset + 3] += 1.0f;  // member 2's copy to itself
  CHECK(wrong_of(s, v, 5, again) == 1);
  // broadcast: the root's own buffer is checked too; the wrong root's data is wrong everywhere.
  const Op& bc = s.step[0];
  auto bb = deliver(s, bc, 9);
  bb[1][0] = 0;  // rank 1 is the root
  CHECK(wrong_of(s, bc, 9, bb) == 1);
  Op other = bc;
  other.root = 3;
  CHECK(wrong_of(s, other, 9, deliver(s, bc, 9)) > 0);
}

TEST_CASE("alltoall, alltoallv and broadcast take nccl-tests' bus bandwidth factors", "[workloads][alltoall]") {
  // nccl-tests' alltoall.cu: algbw = count x nranks x typesize / time = the send buffer / time,
  // busbw = algbw x (n - 1) / n; broadcast.cu: busbw = algbw.
  CHECK(bus_factor(OpType::kAllToAll, 8) == Approx(7.0 / 8));
  CHECK(bus_factor(OpType::kAllToAll, 4) == Approx(0.75));
  CHECK(bus_factor(OpType::kAllToAllV, 4) == Approx(0.75));
  CHECK(bus_factor(OpType::kBroadcast, 8) == Approx(1.0));
  CHECK(bus_factor(OpType::kBroadcast, 2) == Approx(1.0));
  CHECK(bus_factor(OpType::kAllToAll, 1) == 0);
  // 64 KiB per rank's send buffer in 1 ms on 4 ranks: algbw 0.065536 GB/s, busbw x 3/4.
  CHECK(algbw_gbps(65536, 0.001) == Approx(0.065536));
  CHECK(busbw_gbps(OpType::kAllToAll, 4, 65536, 0.001) == Approx(0.049152));
  CHECK(busbw_gbps(OpType::kBroadcast, 4, 65536, 0.001) == Approx(0.065536));
  CHECK(busbw_gbps(OpType::kAllToAllV, 4, 92 * 1024, 0.001) == Approx(92 * 1024 * 0.75 / 1e6));
}

}  // namespace a2a_test
