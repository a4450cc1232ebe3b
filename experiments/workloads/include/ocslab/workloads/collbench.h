// The part of ocslab-collbench-verbs and ocslab-collbench-nccl that does not depend on the
// transport: command line, the step loop (hooks, timing, verification, records), the output
// folder and rank 0's table. A transport implements Backend.
#pragma once

#include <boost/program_options.hpp>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "ocslab/common/csv_writer.h"
#include "ocslab/workloads/hooks.h"
#include "ocslab/workloads/op_record.h"
#include "ocslab/workloads/rendezvous.h"
#include "ocslab/workloads/schedule.h"

namespace ocslab::workloads {

// Spends d on this host's CPU and returns when it is over (docs/workloads.md "Modelled
// compute"): sleeps on CLOCK_MONOTONIC until 200 us before the end, then spins on the clock for
// the rest, so the time is exact to a few microseconds without burning a core for long ones.
void host_compute(std::chrono::nanoseconds d);

// One transport's way of running the schedule's ops on this rank.
class Backend {
 public:
  virtual ~Backend() = default;
  // Writes this rank's input for op (fill_input) into the buffer the op runs on.
  virtual void prepare(const Op& op, uint64_t seq) = 0;
  // Runs this rank's part of op and returns when it completed on this rank. Throws
  // ocslab::Error naming the op and peer on a transport failure.
  virtual void run(const Op& op) = 0;
  // count_wrong over this rank's result.
  virtual uint64_t verify(const Op& op, uint64_t seq) = 0;
  // Spends d of modelled compute before op (the op's own compute_ms, or the step's before its
  // first op) and returns when it is over. Default: on the CPU (host_compute). A GPU transport
  // runs it on the device, on the op's stream.
  virtual void compute(const Op& op, std::chrono::nanoseconds d) {
    (void)op;
    host_compute(d);
  }
  // The device and setup in one line for the log ("rxe_eth1 (eth1, ...), 2 queue pair(s)").
  virtual std::string describe() const { return {}; }
};

struct CommonOptions {
  std::string schedule_path;  // empty: the size sweep (sweep.h)
  int rank = -1;              // -1: not given and no launcher names it
  int nranks = -1;
  std::string rendezvous;  // HOST:PORT of rank 0
  std::string rendezvous_token;   // the run's secret (RendezvousOptions::token); empty: none
  std::string rendezvous_listen;  // rank 0's bind address; empty: the rendezvous host
  std::string host;        // label in the records (default: this machine's hostname)
  std::string output;      // folder for ops-rank<R>.csv and timeline-rank<R>.csv; empty: none
  std::chrono::milliseconds timeout{120000};
  bool verify = true;
  int steps = -1, warmup = -1;  // overrides of the schedule's
};

// Adds the shared options to desc.
void add_common_options(boost::program_options::options_description& desc);
// Reads them back, with rank / world size from the launcher's environment when not given
// (OMPI_COMM_WORLD_RANK/SIZE, PMI_RANK/SIZE, SLURM_PROCID/NTASKS) and the rendezvous from
// --ranks (rank 0's host) or OCSLAB_RENDEZVOUS. Throws ocslab::Error on a malformed value; what
// is missing (schedule, rank) is left empty / -1 for the caller, which knows the mode.
CommonOptions common_options(const boost::program_options::variables_map& vm);
// The launcher's local rank (OMPI_COMM_WORLD_LOCAL_RANK, SLURM_LOCALID, MPI_LOCALRANKID,
// LOCAL_RANK), -1 when none is set.
int launcher_local_rank();

// Runs the schedule's warm-up and measured steps on this rank: for every op it takes part in,
// prepare, compute (the step's before the rank's first op of the step, then the op's; each
// drawn per rank, step and op and timed into the record), pre hook, run (timed), post hook,
// verify. Wrong data is counted in the record and
// named on stderr (op, step, schedule line); transport and hook failures throw. on_record (when
// given) gets each record as soon as its op is verified, so what ran is kept however the loop ends.
std::vector<OpRecord> run_steps(const Schedule& s, int rank, const std::string& host, Backend& backend,
                                PhaseHooks& hooks, bool verify,
                                const std::function<void(const OpRecord&)>& on_record = {});

// Writes ops-rank<R>.csv and timeline-rank<R>.csv into folder (created when missing).
void write_outputs(const std::string& folder, int rank, const std::vector<OpRecord>& records);

// The same two files written as the ops complete: each record reaches the files (flushed to the
// kernel) when add() returns, so a rank that fails or is killed leaves every op it finished.
class OutputWriter {
 public:
  OutputWriter(const std::string& folder, int rank);
  void add(const OpRecord& r);
  void close();  // throws ocslab::Error naming a file that could not be written

 private:
  std::unique_ptr<CsvWriter> ops_, timeline_;
};

// The whole program after the transport is set up: run, write the rank's files, gather every
// rank's records at rank 0 and print the table there. Returns the process exit code (0, or 7
// when any rank saw wrong data).
int run_and_report(const Schedule& s, const CommonOptions& o, const std::string& backend_name, Backend& backend,
                   PhaseHooks& hooks, Rendezvous& rv);

// The tag every rank must agree on in the rendezvous.
std::string rendezvous_tag(const Schedule& s, const std::string& backend_name);

}  // namespace ocslab::workloads
