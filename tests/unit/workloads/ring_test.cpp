// The ring arithmetic the verbs workload runs, executed here on n in-memory buffers exactly as
// the ranks would (each member sends to i + 1, receives from i - 1), and the nccl-tests
// bandwidth definitions.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "ocslab/workloads/ring.h"

using namespace ocslab::workloads;

namespace {

Schedule world(int n, OpType type, uint64_t bytes) {
  Schedule s;
  s.ranks = n;
  Group g;
  g.name = "g";
  g.kind = "dp";
  for (int r = 0; r < n; ++r) g.ranks.push_back(n - 1 - r);  // ring order differs from rank order
  s.groups.push_back(g);
  Op op;
  op.type = type;
  op.bytes = bytes;
  if (type == OpType::kSendRecv) {
    op.src = g.ranks[0];
    op.dst = g.ranks[1];
  }
  s.step.push_back(op);
  return s;
}

// Runs reduce-scatter and/or all-gather ring steps over bufs[i] (member i of the group).
// The reduction is r's, and after the reduce-scatter each member finishes its own chunk (avg
// divides), as the verbs backend does.
void simulate(std::vector<std::vector<float>>& bufs, bool reduce_scatter, bool all_gather, RedOp r = RedOp::kSum) {
  int n = static_cast<int>(bufs.size());
  uint64_t total = bufs[0].size();
  for (int phase = 0; phase < 2; ++phase) {
    if ((phase == 0 && !reduce_scatter) || (phase == 1 && !all_gather)) continue;
    for (int s = 0; s < n - 1; ++s) {
      // All members send at once: snapshot what each sends before anyone receives.
      std::vector<std::vector<float>> sent(static_cast<size_t>(n));
      for (int i = 0; i < n; ++i) {
        RingStep st = phase == 0 ? reduce_scatter_step(n, i, s) : all_gather_step(n, i, s);
        Chunk c = ring_chunk(total, n, st.send);
        sent[static_cast<size_t>(i)].assign(
            bufs[static_cast<size_t>(i)].begin() + static_cast<long>(c.offset),
            bufs[static_cast<size_t>(i)].begin() + static_cast<long>(c.offset + c.count));
      }
      for (int i = 0; i < n; ++i) {
        RingStep st = phase == 0 ? reduce_scatter_step(n, i, s) : all_gather_step(n, i, s);
        int left = (i + n - 1) % n;
        RingStep lst = phase == 0 ? reduce_scatter_step(n, left, s) : all_gather_step(n, left, s);
        REQUIRE(lst.send == st.recv);  // what the left neighbour sends is what i expects
        Chunk c = ring_chunk(total, n, st.recv);
        const auto& in = sent[static_cast<size_t>(left)];
        REQUIRE(in.size() == c.count);
        for (uint64_t k = 0; k < c.count; ++k) {
          float& dst = bufs[static_cast<size_t>(i)][c.offset + k];
          if (phase == 0) {
            reduce_into(r, &dst, &in[k], 1);
          } else {
            dst = in[k];
          }
        }
      }
    }
    if (phase == 0) {
      for (int i = 0; i < n; ++i) {
        Chunk own = ring_chunk(total, n, i);
        finish_reduction(r, bufs[static_cast<size_t>(i)].data() + own.offset, own.count, n);
      }
    }
  }
}

}  // namespace

TEST_CASE("ring chunks tile the buffer, sizes differ by at most one", "[workloads]") {
  for (uint64_t total : {0ull, 1ull, 3ull, 7ull, 1024ull, 1025ull, 262147ull}) {
    for (int n : {1, 2, 3, 4, 7, 8}) {
      uint64_t next = 0, lo = ~0ull, hi = 0;
      for (int i = 0; i < n; ++i) {
        Chunk c = ring_chunk(total, n, i);
        CHECK(c.offset == next);
        next = c.offset + c.count;
        lo = std::min(lo, c.count);
        hi = std::max(hi, c.count);
      }
      CHECK(next == total);
      CHECK(hi - lo <= 1);
    }
  }
  CHECK(ring_chunk(10, 4, 0).count == 3);
  CHECK(ring_chunk(10, 4, 1).offset == 3);
  CHECK(ring_chunk(10, 4, 3).offset == 8);
  CHECK(ring_chunk(10, 4, 3).count == 2);
}

TEST_CASE("ring allreduce, allgather and reducescatter give the exact expected data", "[workloads]") {
  for (int n : {1, 2, 3, 4, 5, 8}) {
    for (uint64_t floats : {static_cast<uint64_t>(n) * 3, static_cast<uint64_t>(n) * 256 + 1}) {
      for (OpType type : {OpType::kAllReduce, OpType::kAllGather, OpType::kReduceScatter}) {
        Schedule s = world(n, type, floats * 4);
        const Op& op = s.step[0];
        const Group& g = s.groups[0];
        uint64_t seq = 17;
        std::vector<std::vector<float>> bufs(static_cast<size_t>(n), std::vector<float>(floats));
        for (int i = 0; i < n; ++i)
          fill_input(s, op, g.ranks[static_cast<size_t>(i)], seq, bufs[static_cast<size_t>(i)].data());
        INFO("n " << n << " floats " << floats << " " << op_name(type));
        // Before the collective, a member's buffer is not the result (except trivially, n = 1).
        if (n > 1) CHECK(count_wrong(s, op, g.ranks[0], seq, bufs[0].data()) > 0);
        simulate(bufs, type != OpType::kAllGather, type != OpType::kReduceScatter);
        for (int i = 0; i < n; ++i) {
          CHECK(count_wrong(s, op, g.ranks[static_cast<size_t>(i)], seq, bufs[static_cast<size_t>(i)].data()) == 0);
        }
        // One flipped element of the result is found.
        if (n > 1) {
          bufs[1][ring_chunk(floats, n, 1).offset] += 1;
          CHECK(count_wrong(s, op, g.ranks[1], seq, bufs[1].data()) == 1);
        }
      }
    }
  }
  // Allreduce with fewer elements than ranks (empty chunks) and an uneven split.
  for (uint64_t floats : {2ull, 1025ull}) {
    Schedule s = world(4, OpType::kAllReduce, floats * 4);
    std::vector<std::vector<float>> bufs(4, std::vector<float>(floats));
    for (int i = 0; i < 4; ++i)
      fill_input(s, s.step[0], s.groups[0].ranks[static_cast<size_t>(i)], 3, bufs[static_cast<size_t>(i)].data());
    simulate(bufs, true, true);
    for (int i = 0; i < 4; ++i)
      CHECK(count_wrong(s, s.step[0], s.groups[0].ranks[static_cast<size_t>(i)], 3,
                        bufs[static_cast<size_t>(i)].data()) == 0);
  }
}

TEST_CASE("every reduction op (-o) of the ring gives the exact expected data, and a wrong element is found",
          "[workloads][sweep]") {
  for (RedOp r : {RedOp::kSum, RedOp::kProd, RedOp::kMax, RedOp::kMin, RedOp::kAvg}) {
    for (int n : {1, 2, 3, 5, 8}) {
      for (OpType type : {OpType::kAllReduce, OpType::kReduceScatter}) {
        uint64_t floats = static_cast<uint64_t>(n) * 40;
        Schedule s = world(n, type, floats * 4);
        s.step[0].redop = r;
        const Op& op = s.step[0];
        const Group& g = s.groups[0];
        std::vector<std::vector<float>> bufs(static_cast<size_t>(n), std::vector<float>(floats));
        for (int i = 0; i < n; ++i)
          fill_input(s, op, g.ranks[static_cast<size_t>(i)], 9, bufs[static_cast<size_t>(i)].data());
        INFO(redop_name(r) << " n " << n << " " << op_name(type));
        if (r == RedOp::kProd) {
          for (float v : bufs[0]) CHECK((v == 1.0f || v == 2.0f));  // powers of two: exact products
        }
        simulate(bufs, true, type == OpType::kAllReduce, r);
        for (int i = 0; i < n; ++i) {
          CHECK(count_wrong(s, op, g.ranks[static_cast<size_t>(i)], 9, bufs[static_cast<size_t>(i)].data()) == 0);
        }
        // The same buffers checked as another reduction are wrong somewhere (n > 1): the check
        // knows which op ran.
        if (n > 1) {
          Schedule other = s;
          other.step[0].redop = r == RedOp::kSum ? RedOp::kMax : RedOp::kSum;
          CHECK(count_wrong(other, other.step[0], g.ranks[0], 9, bufs[0].data()) > 0);
          bufs[0][ring_chunk(floats, n, 0).offset] += 1;
          CHECK(count_wrong(s, op, g.ranks[0], 9, bufs[0].data()) == 1);
        }
      }
    }
  }
  CHECK(redop_name(parse_redop("avg")) == "avg");
  CHECK_THROWS_WITH(parse_redop("mulsum"), Catch::Contains("unknown reduction op 'mulsum'") && Catch::Contains("prod"));
}

TEST_CASE("sendrecv: the receiver checks the sender's data, the sender checks nothing", "[workloads]") {
  Schedule s = world(2, OpType::kSendRecv, 64);
  const Op& op = s.step[0];
  std::vector<float> a(16), b(16);
  fill_input(s, op, op.src, 5, a.data());
  fill_input(s, op, op.dst, 5, b.data());
  CHECK(b[0] == kUnwritten);
  CHECK(count_wrong(s, op, op.dst, 5, b.data()) == 16);
  b = a;
  CHECK(count_wrong(s, op, op.dst, 5, b.data()) == 0);
  CHECK(count_wrong(s, op, op.dst, 6, b.data()) > 0);  // another iteration's data is wrong
  CHECK(count_wrong(s, op, op.src, 5, a.data()) == 0);
}

TEST_CASE("fill values stay exact when summed over the largest world", "[workloads]") {
  float max = 0, min = 1000;
  for (int r = 0; r < 300; ++r) {
    for (uint64_t j = 0; j < 300; ++j) {
      max = std::max(max, fill_value(r, 12345, j));
      min = std::min(min, fill_value(r, 12345, j));
    }
  }
  CHECK(max <= 250);
  CHECK(min >= 1);                    // never 0: an unreduced input never equals a sum over two or more members
  CHECK(250.0 * 65536 < 16777216.0);  // 2^24: every partial sum is an exactly representable integer
  CHECK(fill_value(0, 0, 0) != fill_value(1, 0, 0));
  CHECK(fill_value(0, 0, 0) != fill_value(0, 1, 0));
}

TEST_CASE("algbw and busbw follow nccl-tests' definitions", "[workloads]") {
  // 1 GB in 1 s on 8 ranks.
  CHECK(algbw_gbps(1'000'000'000, 1.0) == Approx(1.0));
  CHECK(busbw_gbps(OpType::kAllReduce, 8, 1'000'000'000, 1.0) == Approx(1.75));   // 2 * 7 / 8
  CHECK(busbw_gbps(OpType::kAllGather, 8, 1'000'000'000, 1.0) == Approx(0.875));  // 7 / 8
  CHECK(busbw_gbps(OpType::kReduceScatter, 8, 1'000'000'000, 1.0) == Approx(0.875));
  CHECK(busbw_gbps(OpType::kSendRecv, 2, 1'000'000'000, 1.0) == Approx(1.0));
  CHECK(busbw_gbps(OpType::kBarrier, 8, 0, 1.0) == 0);
  CHECK(busbw_gbps(OpType::kAllReduce, 2, 4'000'000, 0.002) == Approx(2.0));  // 2 GB/s x 2 * 1 / 2
  CHECK(bus_factor(OpType::kAllReduce, 1) == 0);
  CHECK(algbw_gbps(100, 0) == 0);
}
