// The phase-workload run's per-step figures, pure functions of the ranks' op rows and the
// controller's events: step time split into compute, communication and fabric wait per mode,
// the sweep points and slope, the printed tables and the CSV columns of phase-steps.csv and
// sweep.csv. Nothing here touches a host, a switch or a file.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "ocslab/phase/controller.h"
#include "ocslab/workloads/op_record.h"
#include "ocslab/workloads/schedule.h"

namespace ocslab::runner {

// The step of a shim group's seq-th op (seq counts the group's ops over the steps, from 1);
// -1 for a group the schedule's step does not have or a seq below 1.
class StepOfSeq {
 public:
  explicit StepOfSeq(const workloads::Schedule& s);
  // A job without a schedule (a torch job, whose step its ranks learned): the group's seq-th op
  // is the seq-th row of the group in a member's rows (in the rank's order), in that row's step.
  StepOfSeq(const workloads::Schedule& s, const std::vector<workloads::OpRecord>& rows);
  int operator()(const std::string& group, int64_t seq) const;

 private:
  std::map<std::string, int> per_step_;
  std::map<std::pair<std::string, int64_t>, int> of_rows_;
};

// Per rank, the ops of one step it takes part in (a step's op rows from that rank).
std::vector<int> ops_per_step_of_ranks(const workloads::Schedule& s);

// "12.345" (three decimals), or "" for a negative value (not measured / not swept).
std::string ms_or_empty(double v);

// One step of one mode, from the ranks' rows and the controller's events.
struct StepFigures {
  std::string mode;
  double switching_ms = -1;  // the sweep point (-1: the switch's own timing, no sweep)
  int repetition = 1;
  int step = 0;
  bool warmup = false;
  int rank = 0;              // the slowest rank, whose split is reported
  double step_ms = 0;        // that rank: end of its previous step's last op (post hook included)
                             // -> end of this step's last op; step 0 starts at its first pre hook
  double compute_ms = 0;     // step_ms - comm_ms - wait_ms: everything outside the ops and the hooks
  double comm_ms = 0;        // sum of its ops' durations
  double wait_ms = 0;        // sum of its time in the phase hooks (fabric wait)
  double max_wait_ms = 0;    // the largest per-rank wait of the step
  int reconfigurations = 0;  // distinct (group, seq) the controller reprogrammed the rails for
  int reconfigured_ops = 0;  // ops of the step whose rows say the fabric changed for them
  int rows = 0;              // op rows of every rank
  int barriers = 0;          // controller round trips: distinct (group, op) some rank asked the controller for
  double relative = 0;       // step_ms / native's mean measured step time (0: no native mode ran)
  double link_gbps = -1;     // the sweep.link_gbps point (-1: the lab's own rate, no such sweep)
  // The reported rank's bytes over its ops' time (nccl-tests' algorithm bandwidth of the step),
  // Gbit/s; 0 when its ops took no time.
  double algbw_gbps = 0;
};

// Per-step figures of one mode. events: the controller's; reconfigurations are mapped to the
// step of the op they served through the shim group sequence numbers.
std::vector<StepFigures> step_figures(const workloads::Schedule& s, const std::string& mode,
                                      const std::vector<workloads::OpRecord>& rows,
                                      const std::vector<phase::ControllerEvent>& events);

const std::vector<std::string>& step_csv_columns();
std::vector<std::string> step_csv_fields(const StepFigures& f);
// Every step's step_ms relative to native's mean measured step time (figures of mode native).
void set_relative_to_native(std::vector<StepFigures>& figures);

// The printed table: one row per step and mode (per sweep point and repetition when swept),
// then per mode the means over measured steps, the overhead relative to native, and the
// provisioning / on-demand ratio when both ran.
void print_step_table(std::ostream& out, const std::vector<StepFigures>& figures);

// One row of sweep.csv: a mode at one switching time, one repetition, over its measured steps.
struct SweepPoint {
  std::string mode;
  double switching_ms = -1;
  double link_gbps = -1;  // the link-rate point (-1: none)
  int repetition = 1;
  int steps = 0;
  double step_ms = 0, step_ms_sd = 0;
  double relative = 0;  // to native's mean (0: no native)
  double reconfigs_per_step = 0;
  double wait_ms = 0;  // fabric wait per step
  double barriers_per_step = 0;
  double estimate_ms = -1;  // T_native + N_reconfig x T_switch (-1: native, or no native)
  double algbw_gbps = 0;    // mean of the steps' algbw_gbps
};
std::vector<SweepPoint> sweep_points(const std::vector<StepFigures>& figures);
const std::vector<std::string>& sweep_csv_columns();
std::vector<std::string> sweep_csv_fields(const SweepPoint& p);
// Least-squares slope of step time (ms) over switching time (ms) for one mode's points, and the
// mean reconfigurations per step it should match; nullopt with fewer than two distinct points.
struct SweepSlope {
  double slope = 0;
  double reconfigs_per_step = 0;
};
std::optional<SweepSlope> sweep_slope(const std::vector<SweepPoint>& points, const std::string& mode);
// The overhead lines of summary.txt: per mode at 0 ms switching (or the switch's own timing
// without a sweep) step time vs native, fabric wait and barriers per step; the on-demand slope.
void print_overhead(std::ostream& out, const std::vector<SweepPoint>& points);

}  // namespace ocslab::runner
