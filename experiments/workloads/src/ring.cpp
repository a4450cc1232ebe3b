#include "ocslab/workloads/ring.h"

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
      return (dn - 1) / dn;
    case OpType::kSendRecv:
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

uint64_t buffer_floats(const Op& op) { return op.bytes / sizeof(float); }

float fill_value(int rank, uint64_t seq, uint64_t j) {
  // 1..250: never 0, so a sum over two or more members always differs from any one member's
  // input (an op that skipped the reduction cannot pass), and a sum over 65536 ranks stays
  // below 2^24, where float32 is exact.
  uint64_t v = 1 + (static_cast<uint64_t>(rank) * 131u + seq * 31u + j * 7u) % 250u;
  return static_cast<float>(v);
}

void fill_input(const Schedule& s, const Op& op, int rank, uint64_t seq, float* buf) {
  const Group& g = s.group_of(op);
  uint64_t total = buffer_floats(op);
  int n = static_cast<int>(g.ranks.size());
  int me = g.index_of(rank);
  switch (op.type) {
    case OpType::kAllReduce:
    case OpType::kReduceScatter:
      for (uint64_t j = 0; j < total; ++j) buf[j] = fill_value(rank, seq, j);
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
    case OpType::kBarrier:
      break;
  }
}

uint64_t count_wrong(const Schedule& s, const Op& op, int rank, uint64_t seq, const float* buf) {
  const Group& g = s.group_of(op);
  uint64_t total = buffer_floats(op);
  int n = static_cast<int>(g.ranks.size());
  uint64_t wrong = 0;
  auto sum_at = [&](uint64_t j) {
    float sum = 0;
    for (int m : g.ranks) sum += fill_value(m, seq, j);
    return sum;
  };
  switch (op.type) {
    case OpType::kAllReduce:
      for (uint64_t j = 0; j < total; ++j) wrong += buf[j] != sum_at(j);
      break;
    case OpType::kReduceScatter: {
      Chunk mine = ring_chunk(total, n, g.index_of(rank));
      for (uint64_t k = 0; k < mine.count; ++k) wrong += buf[mine.offset + k] != sum_at(mine.offset + k);
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
    case OpType::kBarrier:
      break;
  }
  return wrong;
}

}  // namespace ocslab::workloads
