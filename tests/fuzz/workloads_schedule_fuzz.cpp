// Schedule files come from users: any bytes must give a consistent schedule or an
// ocslab::Error, never a crash, a hang or a schedule the workloads could not run. The same bytes
// also go to `ocslab schedule generate`'s parallel-configuration parser: a configuration it
// accepts must generate a schedule the schedule parser reads back identically.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <set>
#include <string>

#include "ocslab/common/error.h"
#include "ocslab/workloads/ring.h"
#include "ocslab/workloads/schedule.h"
#include "ocslab/workloads/schedule_generator.h"

namespace {

void fuzz_generator(const std::string& text) {
  try {
    auto cfg = ocslab::workloads::parse_generator_config(text, "fuzz-config.yaml");
    if (1LL * cfg.tp * cfg.dp * cfg.pp * cfg.cp * cfg.ep != cfg.ranks) __builtin_trap();
    auto g = ocslab::workloads::generate_schedule(cfg);
    auto back = ocslab::workloads::parse_schedule(g.yaml, "fuzz-generated.yaml");
    if (back.digest() != g.schedule.digest() || back.ranks != cfg.ranks) __builtin_trap();
    if (g.reconfigurations.size() != static_cast<size_t>(cfg.steps + cfg.warmup)) __builtin_trap();
  } catch (const ocslab::Error&) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  fuzz_generator(text);
  try {
    auto s = ocslab::workloads::parse_schedule(text, "fuzz.yaml");
    if (s.ranks < 1 || s.groups.empty() || s.step.empty() || s.steps < 1 || s.warmup < 0) __builtin_trap();
    std::set<std::string> names;
    for (const auto& g : s.groups) {
      if (!names.insert(g.name).second || g.ranks.empty()) __builtin_trap();
      std::set<int> members;
      for (int r : g.ranks) {
        if (r < 0 || r >= s.ranks || !members.insert(r).second) __builtin_trap();
      }
    }
    for (const auto& op : s.step) {
      if (op.group >= s.groups.size()) __builtin_trap();
      const auto& g = s.group_of(op);
      uint64_t n = g.ranks.size();
      using ocslab::workloads::OpType;
      if (op.type == OpType::kBarrier ? op.bytes != 0 : op.bytes == 0 || op.bytes % 4 != 0) __builtin_trap();
      if ((op.type == OpType::kAllGather || op.type == OpType::kReduceScatter) && op.bytes % (4 * n) != 0) {
        __builtin_trap();
      }
      if (op.type == OpType::kSendRecv && (g.index_of(op.src) < 0 || g.index_of(op.dst) < 0 || op.src == op.dst)) {
        __builtin_trap();
      }
      // alltoall: n whole-float blocks; alltoallv: an n x n matrix of whole floats whose busiest
      // member's row or column sum is bytes, laid out inside buffer_floats; broadcast: a member root.
      if (op.type == OpType::kAllToAll && op.bytes % (4 * n) != 0) __builtin_trap();
      if ((op.type == OpType::kAllToAllV) != !op.sizes.empty()) __builtin_trap();
      if ((op.type == OpType::kBroadcast) != (op.root >= 0)) __builtin_trap();
      if (op.type == OpType::kBroadcast && g.index_of(op.root) < 0) __builtin_trap();
      if (op.type == OpType::kAllToAll || op.type == OpType::kAllToAllV) {
        if (op.type == OpType::kAllToAllV && op.sizes.size() != n * n) __builtin_trap();
        uint64_t busiest = 0;
        for (uint64_t m = 0; m < n; ++m) {
          auto l = ocslab::workloads::alltoall_layout(op, static_cast<int>(n), static_cast<int>(m));
          if (l.send.size() != n || l.recv.size() != n || l.total > ocslab::workloads::buffer_floats(op)) {
            __builtin_trap();
          }
          uint64_t at = 0;
          for (const auto& c : l.send) {
            if (c.offset != at) __builtin_trap();
            at += c.count;
          }
          if (at != l.recv_base) __builtin_trap();
          for (const auto& c : l.recv) {
            if (c.offset != at) __builtin_trap();
            at += c.count;
          }
          if (at != l.total) __builtin_trap();
          busiest = std::max({busiest, l.recv_base, l.total - l.recv_base});
        }
        if (busiest * 4 != op.bytes) __builtin_trap();
      }
      // The ring split of every op covers its buffer.
      uint64_t total = ocslab::workloads::buffer_floats(op), next = 0;
      for (uint64_t i = 0; i < n; ++i) {
        auto c = ocslab::workloads::ring_chunk(total, static_cast<int>(n), static_cast<int>(i));
        if (c.offset != next) __builtin_trap();
        next += c.count;
      }
      if (next != total) __builtin_trap();
    }
    // Modelled compute: every draw is in 0..kMaxComputeMs and the same when drawn again.
    using ocslab::workloads::ComputeTime;
    auto check_draws = [&](const ComputeTime& c, int index) {
      for (int rank = 0; rank < std::min(s.ranks, 3); ++rank) {
        for (int step = 0; step < 3; ++step) {
          int64_t d = c.draw_ns(s.seed, rank, step, index);
          if (d < 0 || static_cast<double>(d) > ocslab::workloads::kMaxComputeMs * 1e6) __builtin_trap();
          if (d != c.draw_ns(s.seed, rank, step, index)) __builtin_trap();
          if (!c.any() && d != 0) __builtin_trap();
        }
      }
    };
    check_draws(s.step_compute, ocslab::workloads::kStepCompute);
    for (size_t i = 0; i < s.step.size(); ++i) check_draws(s.step[i].compute, static_cast<int>(i));
  } catch (const ocslab::Error&) {
  }
  return 0;
}
