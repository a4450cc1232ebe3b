#include "ocslab/workloads/ring.h"

#include <algorithm>
#include <cmath>

namespace ocslab::workloads {

namespace {
int mod(int a, int n) { return ((a % n) + n) % n; }
}  // namespace

Chunk ring_chunk(uint64_t total, int n, int i) {
  uint64_t un = static_cast<uint64_t>(n), ui = static_cast<uint64_t>(i);
  uint64_t base = total / un, extra = total % un;
  Chunk c;
  c.count = base + (ui < extra ? 1 : 0);
  c.offset = ui * base + (ui < extra ? ui : extra);
  return c;
}

RingStep reduce_scatter_step(int n, int i, int s) { return {mod(i - s - 1, n), mod(i - s - 2, n)}; }

RingStep all_gather_step(int n, int i, int s) { return {mod(i - s, n), mod(i - s - 1, n)}; }

double bus_factor(OpType type, int n) {
  if (n < 1) return 0;
  double dn = n;
  switch (type) {
    case OpType::kAllReduce:
      return 2.0 * (dn - 1) / dn;
    case OpType::kAllGather:
    case OpType::kReduceScatter:
    case OpType::kAllToAll:
    case OpType::kAllToAllV:
      return (dn - 1) / dn;
    case OpType::kSendRecv:
    case OpType::kBroadcast:
      return 1.0;
    case OpType::kBarrier:
      return 0.0;
  }
  return 0;
}

double algbw_gbps(uint64_t bytes, double seconds) {
  return seconds > 0 ? static_cast<double>(bytes) / 1e9 / seconds : 0.0;
}

double busbw_gbps(OpType type, int n, uint64_t bytes, double seconds) {
  return algbw_gbps(bytes, seconds) * bus_factor(type, n);
}

uint64_t alltoall_floats(const Op& op, int n, int from, int to) {
  if (op.type == OpType::kAllToAll) return op.bytes / sizeof(float) / static_cast<uint64_t>(n);
  if (op.type != OpType::kAllToAllV) return 0;
  return op.sizes.at(static_cast<size_t>(from) * static_cast<size_t>(n) + static_cast<size_t>(to)) / sizeof(float);
}

AllToAllLayout alltoall_layout(const Op& op, int n, int me) {
  AllToAllLayout l;
  if (op.type != OpType::kAllToAll && op.type != OpType::kAllToAllV) return l;
  uint64_t at = 0;
  for (int j = 0; j < n; ++j) {
    uint64_t c = alltoall_floats(op, n, me, j);
    l.send.push_back({at, c});
    at += c;
  }
  l.recv_base = at;
  for (int j = 0; j < n; ++j) {
    uint64_t c = alltoall_floats(op, n, j, me);
    l.recv.push_back({at, c});
    at += c;
  }
  l.total = at;
  return l;
}

uint64_t buffer_floats(const Op& op) {
  if (op.type == OpType::kAllToAll) return 2 * (op.bytes / sizeof(float));
  if (op.type == OpType::kAllToAllV) {
    // The matrix is n x n; the member that sends and receives most sets the size.
    size_t n = 0;
    while (n * n < op.sizes.size()) ++n;
    uint64_t most = 0;
    for (size_t i = 0; i < n; ++i) {
      uint64_t b = 0;
      for (size_t j = 0; j < n; ++j) b += op.sizes[i * n + j] + op.sizes[j * n + i];
      most = std::max(most, b);
    }
    return most / sizeof(float);
  }
  return op.bytes / sizeof(float);
}

float fill_value(int rank, uint64_t seq, uint64_t j) {
  // 1..250: never 0, so a sum over two or more members always differs from any one member's
  // input (an op that skipped the reduction cannot pass), and a sum over 65536 ranks stays
  // below 2^24, where float32 is exact.
  uint64_t v = 1 + (static_cast<uint64_t>(rank) * 131u + seq * 31u + j * 7u) % 250u;
  return static_cast<float>(v);
}

float fill_value(RedOp r, int rank, uint64_t seq, uint64_t j) {
  if (r != RedOp::kProd) return fill_value(rank, seq, j);
  return static_cast<float>(1 + (static_cast<uint64_t>(rank) * 131u + seq * 31u + j * 7u) % 2u);
}

void reduce_into(RedOp r, float* dst, const float* src, uint64_t count) {
  switch (r) {
    case RedOp::kSum:
    case RedOp::kAvg:
      for (uint64_t k = 0; k < count; ++k) dst[k] += src[k];
      break;
    case RedOp::kProd:
      for (uint64_t k = 0; k < count; ++k) dst[k] *= src[k];
      break;
    case RedOp::kMax:
      for (uint64_t k = 0; k < count; ++k) dst[k] = std::max(dst[k], src[k]);
      break;
    case RedOp::kMin:
      for (uint64_t k = 0; k < count; ++k) dst[k] = std::min(dst[k], src[k]);
      break;
  }
}

void finish_reduction(RedOp r, float* buf, uint64_t count, int n) {
  if (r != RedOp::kAvg) return;
  for (uint64_t k = 0; k < count; ++k) buf[k] /= static_cast<float>(n);
}

float expected_reduction(const Schedule& s, const Op& op, uint64_t seq, uint64_t j) {
  const Group& g = s.group_of(op);
  float acc = fill_value(op.redop, g.ranks.front(), seq, j);
  for (size_t m = 1; m < g.ranks.size(); ++m) {
    float v = fill_value(op.redop, g.ranks[m], seq, j);
    reduce_into(op.redop, &acc, &v, 1);
  }
  finish_reduction(op.redop, &acc, 1, static_cast<int>(g.ranks.size()));
  return acc;
}

void fill_input(const Schedule& s, const Op& op, int rank, uint64_t seq, float* buf) {
  const Group& g = s.group_of(op);
  uint64_t total = buffer_floats(op);
  int n = static_cast<int>(g.ranks.size());
  int me = g.index_of(rank);
  switch (op.type) {
    case OpType::kAllReduce:
    case OpType::kReduceScatter:
      for (uint64_t j = 0; j < total; ++j) buf[j] = fill_value(op.redop, rank, seq, j);
      break;
    case OpType::kAllGather: {
      Chunk mine = ring_chunk(total, n, me);
      for (uint64_t j = 0; j < total; ++j) buf[j] = kUnwritten;
      for (uint64_t k = 0; k < mine.count; ++k) buf[mine.offset + k] = fill_value(rank, seq, k);
      break;
    }
    case OpType::kSendRecv:
      for (uint64_t j = 0; j < total; ++j) buf[j] = rank == op.src ? fill_value(rank, seq, j) : kUnwritten;
      break;
    case OpType::kBroadcast:
      for (uint64_t j = 0; j < total; ++j) buf[j] = rank == op.root ? fill_value(rank, seq, j) : kUnwritten;
      break;
    case OpType::kAllToAll:
    case OpType::kAllToAllV: {
      // Element k of the block for member j is the sender's value at its send-buffer position,
      // so a block delivered to the wrong member or at the wrong place differs.
      AllToAllLayout l = alltoall_layout(op, n, me);
      for (uint64_t j = 0; j < l.recv_base; ++j) buf[j] = fill_value(rank, seq, j);
      for (uint64_t j = l.recv_base; j < l.total; ++j) buf[j] = kUnwritten;
      break;
    }
    case OpType::kBarrier:
      break;
  }
}

uint64_t count_wrong(const Schedule& s, const Op& op, int rank, uint64_t seq, const float* buf) {
  const Group& g = s.group_of(op);
  uint64_t total = buffer_floats(op);
  int n = static_cast<int>(g.ranks.size());
  uint64_t wrong = 0;
  // Sums, products of powers of two, max and min are exact; an average is a division, which a
  // transport may do as a multiplication by 1/n first (NCCL's avg): a few ulps are allowed there.
  auto differs = [&](float got, uint64_t j) {
    float want = expected_reduction(s, op, seq, j);
    if (op.redop != RedOp::kAvg) return got != want;
    return !(std::fabs(got - want) <= 1e-5f * std::fabs(want));
  };
  switch (op.type) {
    case OpType::kAllReduce:
      for (uint64_t j = 0; j < total; ++j) wrong += differs(buf[j], j);
      break;
    case OpType::kReduceScatter: {
      Chunk mine = ring_chunk(total, n, g.index_of(rank));
      for (uint64_t k = 0; k < mine.count; ++k) wrong += differs(buf[mine.offset + k], mine.offset + k);
      break;
    }
    case OpType::kAllGather:
      for (int c = 0; c < n; ++c) {
        Chunk ch = ring_chunk(total, n, c);
        for (uint64_t k = 0; k < ch.count; ++k) wrong += buf[ch.offset + k] != fill_value(g.ranks[c], seq, k);
      }
      break;
    case OpType::kSendRecv:
      if (rank == op.dst) {
        for (uint64_t j = 0; j < total; ++j) wrong += buf[j] != fill_value(op.src, seq, j);
      }
      break;
    case OpType::kBroadcast:
      for (uint64_t j = 0; j < total; ++j) wrong += buf[j] != fill_value(op.root, seq, j);
      break;
    case OpType::kAllToAll:
    case OpType::kAllToAllV: {
      int me = g.index_of(rank);
      AllToAllLayout mine = alltoall_layout(op, n, me);
      for (int i = 0; i < n; ++i) {
        // Where member i kept the block it sent here.
        Chunk sent = alltoall_layout(op, n, i).send[static_cast<size_t>(me)];
        Chunk got = mine.recv[static_cast<size_t>(i)];
        for (uint64_t k = 0; k < got.count; ++k) {
          wrong += buf[got.offset + k] != fill_value(g.ranks[static_cast<size_t>(i)], seq, sent.offset + k);
        }
      }
      break;
    }
    case OpType::kBarrier:
      break;
  }
  return wrong;
}

}  // namespace ocslab::workloads
