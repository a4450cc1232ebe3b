// Idle windows of a phase-workload run (docs/experiments.md, "Idle windows"): per phase group,
// how long its circuits stay unused between two of its communication phases, i.e. the time in
// which the switch could move for the group's next phase without anyone waiting (the Opus
// paper's Figure 4, OrchestrRL's slack). Pure functions over one mode's op rows: the runner
// writes windows.csv and windows-summary.txt from them, ocslab_plot.py draws windows.png.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

#include "ocslab/phase/policy.h"
#include "ocslab/workloads/op_record.h"
#include "ocslab/workloads/schedule.h"

namespace ocslab::runner {

// A communication phase of group G on a rank is a maximal run of G's ops in the rank's op order
// over the measured steps (warm-up rows are skipped; management ops, group kind world, are left
// out of the order: they never reconfigure and do not split a phase). Groups are shim groups
// (workloads::shim_group: a sendrecv on a group of more than two ranks is its own pair group).
// The window between two phases is the time from end_ns of the phase's last op to wait_start_ns
// (entry of the pre hook) of the next phase's first op, both on the same rank's clock.
struct IdleWindow {
  std::string mode;
  int rank = 0;       // idle_windows(): the member with the smallest gap (lowest rank on a tie)
  std::string group;  // shim group
  int from_step = 0;  // the op that ends the phase: step and schedule index
  int from_op = 0;
  int step = 0;  // the op that starts the next phase: step and schedule index
  int to_op = 0;
  int members = 1;  // idle_windows(): ranks that had rows of both ops (the min is over them)
  double window_ms = 0;
  bool hides_switch = false;  // window_ms > switching_ms
};

// Per rank: one window per (rank, group, gap between consecutive phases of the group on that
// rank), in (rank, step, to_op) order. Throws ocslab::Error for a row whose index is not an op
// of the schedule. A schedule without a step (a torch job): the rows' own group, kind, step and
// index (the rank's learned step) place each op.
std::vector<IdleWindow> rank_idle_windows(const workloads::Schedule& s, const std::string& mode,
                                          const std::vector<workloads::OpRecord>& rows, double switching_ms);

// Per group (what the runner reports): the switch can move for a group only while none of its
// members uses the circuits, so a gap that is a phase boundary on at least one member rank is
// one window whose length is the minimum over the member ranks of each rank's own gap between
// the same two ops of the group (a member without another group's op in between still limits
// it: its gap is compute time). Per-rank differences only, so host clock offsets never enter.
// In (step, to_op, group, from_step, from_op) order.
std::vector<IdleWindow> idle_windows(const workloads::Schedule& s, const std::string& mode,
                                     const std::vector<workloads::OpRecord>& rows, double switching_ms);

// Opus's phase-to-phase window (its T_window, Fig. 4): the job's op sequence cut into phases,
// a phase a maximal run of consecutive ops (the schedule's step order, steps one after another,
// management ops left out) that the fabric serves without a change of topology; `starts`, per
// schedule op index, says which ops begin a new phase (phase_starts in phase_workload.h). The
// window between phase P and the next phase Q is Q's latest start minus P's latest end: over
// Q's ranks, each rank's entry to the pre hook (wait_start_ns) of its first op in Q, the latest;
// over P's op rows, the latest end_ns. Rows from several hosts: their times must be on one
// clock (the runner subtracts each host's offset first). Negative: some rank started Q before
// another finished P. Each window is labelled with Q's first op (group, type, bytes): Opus plots
// windows by the next op's volume, and OrchestrRL's slack is per op type.
struct PhaseWindow {
  std::string mode;
  int from_step = 0, from_op = 0;  // the last op of P (schedule step and index)
  int step = 0, to_op = 0;         // the first op of Q
  std::string next_group, next_type;
  uint64_t next_bytes = 0;
  int rank = 0;     // the rank whose start of Q was the latest
  int members = 0;  // ranks with op rows in Q
  double window_ms = 0;
  bool hides_switch = false;  // window_ms > switching_ms
};

// Measured steps only (warm-up rows are skipped). Throws ocslab::Error for a row whose index is
// not an op of the schedule, or `starts` of another length than the schedule's step. A schedule
// without a step (a torch job) has none.
std::vector<PhaseWindow> phase_windows(const workloads::Schedule& s, const std::string& mode,
                                       const std::vector<workloads::OpRecord>& rows, const std::vector<bool>& starts,
                                       double switching_ms);

// OrchestrRL's slack per op type: the phase windows grouped by the type of the op that follows.
struct TypeSlack {
  std::string mode, type;
  int windows = 0, hiding = 0;
  double min_ms = 0, p50_ms = 0;
};
std::vector<TypeSlack> slack_per_type(const std::vector<PhaseWindow>& windows);  // by (mode, type)

// The safe-window policy's table (phase::PhaseWindows, the phases.csv rows) from measured group
// windows: one row per op of the schedule's step, in order (group: the shim's; type: the op's;
// bytes), idle_us the median over the windows that end at that op (to_op) of their window_ms;
// 0 for an op no window ends at (its group's previous op ran just before it on every member, so
// its circuits are already up). Throws ocslab::ConfigError for a torch job (no step) or no
// window at all.
phase::PhaseWindows windows_table(const workloads::Schedule& s, const std::vector<IdleWindow>& windows);
// The group windows of a windows.csv (kind group, or every row of a file without kind), of the
// file's native mode when it has one, else its first mode: mode, group, to_op and window_ms.
// Throws ocslab::ConfigError naming path:line for a missing column or a bad number.
std::vector<IdleWindow> read_group_windows(const std::string& path);
// phases.csv (PhaseWindows::load reads it back); throws ocslab::Error naming the path.
void write_phase_table(const std::string& path, const phase::PhaseWindows& table);

// The pre-hook wait of a reconfigured op below which its reconfiguration counts as hidden by
// provisioning: max(1 ms, 10 % of the switching time). An on-demand reconfiguration waits at
// least the switching time; a provisioned one only the shim's round trip to the controller.
double hidden_threshold_ms(double switching_ms);

struct WindowSummary {
  std::string mode;
  double switching_ms = 0;
  int windows = 0;
  int hiding = 0;                 // windows with hides_switch
  double hiding_fraction = 0;     // hiding / windows (0 without windows)
  double p50_ms = 0, p90_ms = 0;  // of window_ms, linear interpolation (numpy's default); 0 without windows
  // Over the measured rows (one per rank and op) with reconfigured = 1: those whose pre-hook
  // wait (start_ns - wait_start_ns) is below threshold_ms.
  double threshold_ms = 0;
  int reconfigured_ops = 0;
  int hidden_reconfigs = 0;
  double reconfig_hidden_fraction = 0;  // hidden_reconfigs / reconfigured_ops (0 without any)
};

// windows: idle_windows() of the mode; rows: the same mode's op rows (for the reconfigurations).
WindowSummary summarize_windows(const std::string& mode, double switching_ms, const std::vector<IdleWindow>& windows,
                                const std::vector<workloads::OpRecord>& rows);

// windows.csv: mode,group,rank,members,from_step,from_op,step,to_op,window_ms,switching_ms,
// hides_switch,kind,next_type,next_bytes. kind "group": a group's window (IdleWindow; next_type and
// next_bytes are those of its op to_op); kind "phase": a phase-to-phase window (PhaseWindow; group
// is the next phase's first group).
const std::vector<std::string>& window_csv_columns();
std::vector<std::string> window_csv_fields(const IdleWindow& w, double switching_ms,
                                           const workloads::Schedule* s = nullptr);
std::vector<std::string> window_csv_fields(const PhaseWindow& w, double switching_ms);
// Writes windows.csv (every mode's windows, one header); throws ocslab::Error naming the path.
void write_windows_csv(const std::string& path, const std::vector<IdleWindow>& windows, double switching_ms);
// windows-summary.txt: one line per mode (count, hiding fraction, p50 / p90, reconfigurations
// hidden by provisioning), then the phase-to-phase windows and the slack per op type when given.
void print_window_summary(std::ostream& out, const std::vector<WindowSummary>& summaries,
                          const std::vector<PhaseWindow>& phases = {});

}  // namespace ocslab::runner
