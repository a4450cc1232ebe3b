// The arithmetic both workloads share and tests check on any machine: how a buffer splits into
// ring chunks, which chunk each ring step moves, bandwidth as nccl-tests defines it, and the
// deterministic data every rank fills and every result is verified against.
#pragma once

#include <cstdint>
#include <vector>

#include "ocslab/workloads/schedule.h"

namespace ocslab::workloads {

// Elements [offset, offset + count) of a buffer of `total` elements split into n near-equal
// chunks (the first total % n chunks are one element longer).
struct Chunk {
  uint64_t offset = 0;
  uint64_t count = 0;
};
Chunk ring_chunk(uint64_t total, int n, int i);

// Chunk indices of one ring step for the member at position i of an n-member ring, which sends
// to i + 1 and receives from i - 1. Reduce-scatter steps s = 0..n-2 leave the fully reduced
// chunk i at member i; all-gather steps s = 0..n-2 then spread every member's chunk.
struct RingStep {
  int send = 0;
  int recv = 0;
};
RingStep reduce_scatter_step(int n, int i, int s);
RingStep all_gather_step(int n, int i, int s);

// nccl-tests' definitions (doc/PERFORMANCE.md and src/<op>.cu there): algbw = bytes / time;
// busbw = algbw x 2(n-1)/n for allreduce, (n-1)/n for allgather, reducescatter and alltoall
// (bytes = each rank's whole send buffer, n blocks: nccl-tests' alltoall algbw is
// count x nranks x size / time), 1 for sendrecv and broadcast; 0 for a barrier (it moves no
// payload). alltoallv takes alltoall's factor, bytes being the busiest member's buffer
// (docs/workloads.md). GB/s = 1e9 bytes per second.
double bus_factor(OpType type, int n);
double algbw_gbps(uint64_t bytes, double seconds);
double busbw_gbps(OpType type, int n, uint64_t bytes, double seconds);

// Per-rank buffer size, in floats, that op needs (allgather: the gathered output; reducescatter:
// the input; the result lands in place at the member's chunk, as NCCL's in-place variants;
// alltoall and alltoallv: the send buffer followed by the receive buffer, for the member that
// needs most).
uint64_t buffer_floats(const Op& op);

// AllToAll and AllToAllV: where member `me` (position in the group of n) keeps what it sends to
// and receives from each member. The send blocks lie in member order from element 0, the
// receive blocks in member order after them (from recv_base); block j of send goes to member j,
// block j of recv came from member j. Other op types: empty.
struct AllToAllLayout {
  std::vector<Chunk> send, recv;  // by member position
  uint64_t recv_base = 0;         // = the send blocks' total
  uint64_t total = 0;             // send and receive blocks together, in floats
};
// Floats member `from` sends to member `to` in op (alltoall: bytes / 4n each).
uint64_t alltoall_floats(const Op& op, int n, int from, int to);
AllToAllLayout alltoall_layout(const Op& op, int n, int me);

// Broadcast as a pipelined ring: the buffer goes in kBroadcastChunks chunks (ring_chunk), each
// passed from the root along the group's ring order; a member forwards chunk c while it
// receives chunk c + 1.
inline constexpr int kBroadcastChunks = 8;

// The value rank puts at element j of its contribution to the op with sequence number seq
// (an integer in 1..250, so sums over any group are exact in float32 and exceed every single
// member's value).
float fill_value(int rank, uint64_t seq, uint64_t j);
constexpr float kUnwritten = -1.0f;  // fill of positions a rank expects to receive
// The input of a reduction with op r: fill_value, except for prod, where it is 1 or 2 so that a
// product over any group stays a power of two, exact in float32 up to 127 ranks.
float fill_value(RedOp r, int rank, uint64_t seq, uint64_t j);

// dst[k] = dst[k] (op) src[k] for k < count; avg accumulates the sum (finish_reduction divides).
void reduce_into(RedOp r, float* dst, const float* src, uint64_t count);
// The last step of a reduction over n members on the fully reduced values: avg divides by n.
void finish_reduction(RedOp r, float* buf, uint64_t count, int n);
// The exact result of op's reduction at element j over the group's members (sum and avg add in
// member order, as every transport does).
float expected_reduction(const Schedule& s, const Op& op, uint64_t seq, uint64_t j);

// Writes rank's input for op into buf (buffer_floats(op) elements; positions it must receive
// are kUnwritten). Ranks not involved in op must not call it.
void fill_input(const Schedule& s, const Op& op, int rank, uint64_t seq, float* buf);
// Number of elements of rank's result that differ from the exact expected values (0 for a
// barrier and for a sendrecv's sender).
uint64_t count_wrong(const Schedule& s, const Op& op, int rank, uint64_t seq, const float* buf);

}  // namespace ocslab::workloads
