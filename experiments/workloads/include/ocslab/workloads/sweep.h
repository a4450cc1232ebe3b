// The size sweep of nccl-tests (all_reduce_perf and its siblings) in the collbench programs:
// without --schedule they run one collective over every rank for sizes -b..-e (x -f or + -i),
// -n timed iterations per size after -w warm-up ones and -c checked ones, and print nccl-tests'
// table on rank 0, with -J its JSON document. The options keep nccl-tests' letters and meanings
// (docs/workloads.md lists them and what differs).
#pragma once

#include <boost/program_options.hpp>
#include <nlohmann/json.hpp>

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "ocslab/workloads/collbench.h"
#include "ocslab/workloads/rendezvous.h"
#include "ocslab/workloads/schedule.h"

namespace ocslab::workloads {

struct SweepOptions {
  OpType collective = OpType::kAllReduce;  // --collective (nccl-tests: the binary's name)
  uint64_t min_bytes = 32ull << 20;        // -b
  uint64_t max_bytes = 32ull << 20;        // -e
  uint64_t step_bytes = 1ull << 20;        // -i, used when step_factor is 1
  uint64_t step_factor = 1;                // -f; > 1 multiplies
  int iters = 20;                          // -n
  int warmup_iters = 1;                    // -w
  int check = 1;                           // -c: checked iterations per size after the timed ones; 0 none
  int average = 1;                         // -a: 0 rank 0's time, 1 mean over ranks, 2 min, 3 max
  int ngpus = 1;                           // -g
  std::vector<RedOp> redops{RedOp::kSum};  // -o; "all" = every one
  std::string datatype = "float";          // -d
  std::string output_file;                 // -J
  int root = 0;                            // --root: broadcast's root (nccl-tests' -r; here -r is --rank)
};

// nccl-tests' options (short letters and long names as there) and --collective.
void add_sweep_options(boost::program_options::options_description& desc);
// Names of the sweep options present in vm ("-b/--minbytes", ...), for refusing them with --schedule.
std::vector<std::string> sweep_options_given(const boost::program_options::variables_map& vm);
// Reads and checks them; throws ocslab::Error naming the option.
SweepOptions sweep_options(const boost::program_options::variables_map& vm);

// A size as nccl-tests reads it: a number, optionally fractional, with an optional K, M or G
// (binary: 1K = 1024; "KiB"/"MiB"/"GiB" and a trailing "B" are accepted too). Throws naming the text.
uint64_t parse_sweep_size(std::string_view text);

// The sizes nccl-tests' loop visits: min, then x factor (factor > 1) or + step_bytes, while <= max.
std::vector<uint64_t> sweep_sizes(const SweepOptions& w);

// The sweep as a schedule the transports run: one group "world" (kind world) of every rank, one
// op per reduction op and size (sizes rounded down to whole floats per rank, as nccl-tests rounds
// its counts), steps = iters, warmup = warmup_iters. Throws when a size holds no float per rank,
// or when sendrecv is asked for with other than 2 ranks.
Schedule sweep_schedule(const SweepOptions& w, int nranks);

// One row of the table: rank 0's view after combining every rank's time per -a.
struct SweepRow {
  uint64_t bytes = 0;  // nccl-tests' size column
  uint64_t count = 0;  // elements: the buffer for allreduce / sendrecv / broadcast, one rank's part for allgather /
                       // reducescatter, one block for alltoall
  RedOp redop = RedOp::kSum;
  OpType type = OpType::kAllReduce;
  int root = -1;  // broadcast's root; -1 for the others, as nccl-tests prints
  double time_us = 0, algbw = 0, busbw = 0;
  uint64_t wrong = 0;  // over ranks and checked iterations
  bool checked = false;
};

// This rank's figures per op of the sweep schedule.
struct SweepRankResult {
  std::vector<double> time_us;  // mean of the timed iterations
  std::vector<uint64_t> wrong;
};

// Runs the sweep on this rank: warm-up iterations of every size, then per size a barrier, the
// timed iterations back to back (no check in between, as nccl-tests), then the checked ones.
SweepRankResult run_sweep(const Schedule& s, const SweepOptions& w, Backend& backend, Rendezvous& rv);

// Rows from every rank's result (index = rank), time per -a.
std::vector<SweepRow> combine_sweep(const Schedule& s, const SweepOptions& w,
                                    const std::vector<SweepRankResult>& ranks);
std::string encode_sweep_result(const SweepRankResult& r);
SweepRankResult decode_sweep_result(const std::string& blob);

// One line per rank for the table's "Using devices" block and the JSON's config.devices.
struct SweepDevice {
  int rank = 0;
  int pid = 0;
  std::string host;
  std::string device;  // the backend's describe()
};
std::string encode_sweep_device(const SweepDevice& d);
SweepDevice decode_sweep_device(const std::string& blob);

struct SweepReport {
  std::string program;  // "ocslab-collbench-verbs"
  std::string backend;  // "verbs"
  int nranks = 1;
  std::vector<SweepDevice> devices;
  std::vector<SweepRow> rows;
  std::vector<std::string> args;     // argv, for the JSON
  std::string start_time, end_time;  // "%Y-%m-%d %H:%M:%S", as nccl-tests
};

// nccl-tests' table: the header (nThread / nGpus / sizes / iterations line, devices), one row per
// size and op (in-place columns only: every transport here works in place), the footer
// (out-of-bounds values, average bus bandwidth, "Collective test concluded").
void print_sweep_table(std::ostream& out, const SweepOptions& w, const SweepReport& r);
// nccl-tests' JSON document (-J; its version 3 keys: version, start_time, args, env, config with
// devices, results with in_place / out_of_place, out_of_bounds, average_bus_bandwidth, errors,
// end_time), in that order; env holds only the NCCL_, OCSLAB_, OMPI_, PMI_, SLURM_ and CUDA_ variables.
nlohmann::ordered_json sweep_json(const SweepOptions& w, const SweepReport& r);
// Mean busbw over the rows, as nccl-tests' "Avg bus bandwidth".
double sweep_avg_busbw(const std::vector<SweepRow>& rows);

// The whole sweep after the transport is set up: run, gather at rank 0, print, write -J there.
// Returns 0, or kExitMismatch when a checked result was wrong.
int run_sweep_and_report(const Schedule& s, const CommonOptions& o, const SweepOptions& w, const std::string& program,
                         const std::string& backend_name, Backend& backend, Rendezvous& rv,
                         const std::vector<std::string>& args);

}  // namespace ocslab::workloads
