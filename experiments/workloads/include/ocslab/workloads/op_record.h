// What a workload measured for each collective on each rank, and the three ways it leaves the
// program: per-rank ops CSV, per-rank tidy Sample CSV (the runner's timeline shape) and the
// nccl-tests-like table rank 0 prints over every rank's records.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "ocslab/common/sample.h"
#include "ocslab/workloads/schedule.h"

namespace ocslab::workloads {

struct OpRecord {
  int rank = 0;
  std::string host;
  int step = 0;
  bool warmup = false;
  int index = 0;  // position in the step
  uint64_t seq = 0;
  std::string group, kind;
  OpType type = OpType::kAllReduce;
  int group_size = 0;
  uint64_t bytes = 0;
  int64_t start_ns = 0;       // CLOCK_REALTIME when the collective started (after the compute and the pre hook)
  int64_t end_ns = 0;         // CLOCK_REALTIME when it completed on this rank (before the post hook)
  int64_t duration_ns = 0;    // the same span on CLOCK_MONOTONIC
  int64_t wait_ns = 0;        // time inside pre_communication + post_communication
  int64_t wait_start_ns = 0;  // CLOCK_REALTIME when pre_communication was entered
  uint64_t wrong = 0;         // result elements that differ from the exact expected value
  bool verified = false;      // false with --no-verify
  // The phase hooks' decision (HookOutcome): "none" without a controller.
  std::string phase = "none";
  bool reconfigured = false, provisioned = false, fallback = false;
  std::string topo;
  // Modelled compute this rank spent (CLOCK_MONOTONIC, measured around it) before the op:
  // the op's own compute_ms, and the schedule's per-step compute_ms, which is spent before the
  // rank's first op of the step and so is recorded on that op's row (0 on the others).
  int64_t compute_ns = 0;
  int64_t step_compute_ns = 0;
  bool barrier = false;  // the op made a controller round trip (HookOutcome::barrier); last column
};

// Columns of ops-rank<R>.csv, in order (docs/workloads.md).
const std::vector<std::string>& op_csv_columns();
std::vector<std::string> op_csv_fields(const OpRecord& r);
// Reads an ops CSV back (for the table and for tests); throws ConfigError "path:line: ..." on
// malformed input. Files written before the compute and barrier columns (the header without
// compute_ns, step_compute_ns and barrier, or without barrier) read too, with those 0 / false.
std::vector<OpRecord> parse_op_csv(const std::string& text, const std::string& origin);

// The Samples of one op for the timeline: op_start (value = bytes, B), op_end (value = time,
// ms), busbw (GB/s), with a shim (phase != "none") reconfigured / provisioned / fallback
// (0 or 1, stamped when the wait began) and, when wait_ns > 0 (always, in a measured run: even no-op hooks take
// the clock reads around them), reconfig_wait (ms, stamped when the wait began).
// source = "collbench", subject = "r<rank>/<group>/<op>#<index>".
std::vector<Sample> op_samples(const OpRecord& r);

// Compact one-line form for sending records to rank 0 over the rendezvous.
std::string encode_records(const std::vector<OpRecord>& records);
std::vector<OpRecord> decode_records(const std::string& text);

// One table row: an op of the step aggregated over the measured (non warm-up) steps. Each
// step's time is the slowest participating rank's duration (monotonic clocks, so no clock
// offset enters); the row's time is the mean over steps.
struct TableRow {
  int index = 0;
  std::string group, kind;
  OpType type = OpType::kAllReduce;
  int group_size = 0;
  uint64_t bytes = 0;
  double time_us = 0, algbw = 0, busbw = 0, wait_us = 0;
  uint64_t wrong = 0;
  int steps = 0;
};
std::vector<TableRow> summarize(const std::vector<OpRecord>& all_ranks);

// Prints the table in nccl-tests' layout (header lines start with '#').
void print_table(std::ostream& out, const Schedule& s, const std::string& backend, const std::vector<TableRow>& rows,
                 const std::vector<OpRecord>& all_ranks);

}  // namespace ocslab::workloads
