// The spec of the runner's `phase-workload` experiment type: a collective workload
// (ocslab-collbench-verbs or -nccl) run under the Opus-style phase controller that the runner
// embeds, once per phase mode (on-demand, provisioning), with the ranks launched over SSH (one
// per placement entry) or through one mpirun / srun command line, and the command lines the
// ranks get. The run itself: phase_workload.cpp (rank_launcher.h, phase_rails.h,
// phase_results.h, phase_figures.h). Spec schema: docs/experiments.md, "Phase-workload experiments".
#pragma once

#include <cstdint>
#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

#include "ocslab/common/config.h"
#include "ocslab/phase/controller.h"
#include "ocslab/phase/nic_watch.h"
#include "ocslab/phase/port_watch.h"
#include "ocslab/phase/topology.h"
#include "ocslab/workloads/op_record.h"
#include "ocslab/workloads/schedule.h"

namespace ocslab::runner {

struct ExperimentSpec;
struct RunOptions;
struct RunResult;
struct HostEntry;

enum class Launcher { kSsh, kMpirun, kSrun };
const char* to_string(Launcher l);

// What the ranks run: ocslab's collective workloads over a schedule file, or a PyTorch
// training script through the `ocslab` backend (torch_ranks.h).
enum class Framework { kCollbench, kTorch };

// One rank: the host it runs on and its NIC, whose switch ports are the rank's slot on the rail.
struct RankPlacement {
  size_t host = 0;  // index into ExperimentSpec::hosts
  std::string nic;
};

// One rail of a multi-rail job (phase.rails): each rank's NIC on it (on the rank's host), and
// its spare slots. The rail's slots are those NICs' ports, ranks first, then spares.
struct RailSpec {
  std::string name;
  std::vector<RankPlacement> nics;    // one per rank, in rank order
  std::vector<RankPlacement> spares;  // free NICs for a rank whose port on this rail fails
};

struct PhaseWorkloadSpec {
  // workload
  Framework framework = Framework::kCollbench;
  // framework torch: the training script (absolute, on the runner's machine); its arguments
  // are `args`. The job's rank count is then the layout's (schedule.ranks is set to it) and
  // `schedule` stays empty.
  std::string script;
  std::string program = "ocslab-collbench-verbs";  // a name (this build's binary is used in a
                                                   // virtual lab; PATH on real hosts) or a path
  std::string schedule_path;                       // absolute, on the runner's machine
  workloads::Schedule schedule;
  std::vector<std::string> modes;  // "native", "on-demand", "provisioning", in run order
  std::vector<RankPlacement> ranks;
  std::vector<std::string> args;  // extra arguments for every rank, after the runner's own
  int rendezvous_port = 18600;
  int profile_steps = 1;  // collbench's --profile-steps; torch: OCSLAB_PROFILE_STEPS, 0 = unset (the backend's 5)
  int timeout_s = 300;  // the ranks' --timeout-s; the runner waits for them this long plus a margin
  bool pass_if = true;  // add --if <rank's NIC> (on for ocslab-collbench-verbs)
  Launcher launcher = Launcher::kSsh;
  std::string launcher_program;            // mpirun / srun (or a path)
  std::vector<std::string> launcher_args;  // extra arguments for mpirun / srun
  // launcher.host: the lab host (a cluster node) the launcher runs on over SSH, where mpirun /
  // srun normally run; empty: this machine. Hosts are then named to it by their names.
  std::string launcher_host;
  // Folder every rank writes into, seen by the ranks: for ssh a per-run folder on each host
  // that the runner fetches and removes; for mpirun / srun a shared folder (default: the results
  // folder itself, which must then be on a file system the nodes share).
  std::string shared_dir;
  // Per-group interface overrides, passed as --group-if GROUP=NIC (e.g. world=lan0: the
  // management group over the hosts' LAN NIC instead of the rank's data NIC). A torch job names
  // group kinds (world, pp, a dimension), passed in OCSLAB_GROUP_IF (torch_ranks.h).
  std::vector<std::pair<std::string, std::string>> group_if;
  // Host preparation before the ranks start (ssh launcher; undone after the run):
  // permanent neighbour entries for every other rank's data NIC on each rank's data NIC (a
  // circuit change drops the carrier, which flushes learned entries, and a lost ARP costs a
  // 1 s retry), and a Soft-RoCE device on each named NIC of every rank's host that has none.
  bool pin_neighbours = false;
  std::vector<std::string> rxe;
  // native mode: no shim, no controller; the rail wired once as `native` (phase.native, else
  // the topology that connects the groups carrying the most bytes), and the groups it leaves
  // unconnected over their workload.native_group_if interface (a network that needs no circuit).
  phase::TopoId native;
  std::vector<std::pair<std::string, std::string>> native_group_if;
  std::vector<std::string> native_unconnected;  // the groups `native` leaves without a circuit
  // Switching-latency sweep (sweep:): every mode but native is run at each switching time,
  // `repetitions` times. In a virtual lab the emulator's switching time is set per point; with
  // `inject` (any switch) the runner's controller holds every reconfiguration that changed
  // circuits for the point's time before it releases the ranks. Empty: one run per mode at the
  // switch's own timing.
  std::vector<double> sweep_switching_ms;
  // Link-rate sweep (sweep.link_gbps, virtual labs only): every mode, native included, is run at
  // each rate, every lit circuit of the emulator capped at it (its data plane's token bucket;
  // a real lab caps its hosts with tc, docs/emulator.md). Empty: the lab's own rate.
  std::vector<double> sweep_link_gbps;
  // Survival axes (docs/experiments.md "Queue-pair settings through outages, under a job"):
  // environment variables given to every rank, one run per combination (e.g. NCCL_IB_TIMEOUT,
  // NCCL_IB_RETRY_CNT; ocslab-collbench-verbs takes its queue-pair settings from the same two),
  // and outage lengths, each the for_ms of every port-dark / circuit-cut fault in that run.
  std::vector<std::pair<std::string, std::vector<std::string>>> sweep_env;
  std::vector<double> sweep_outage_ms;
  // sweep.order: random runs every (point, repetition, mode) in an order seeded by the spec's
  // `seed`, so that a drift of the lab over the run does not line up with one axis; as-listed
  // (the default) nests the axes in the spec's order.
  bool sweep_shuffled = false;
  int repetitions = 1;
  bool inject_delay = false;
  // phase.safe_window_from (policy safe-window, instead of phase_table): "measured", the
  // windows of this run's native mode (the first mode) feed the later modes' policy; or the
  // absolute path of a previous run's windows.csv. Empty: phase_table, if any.
  std::string safe_window_from;
  // phase control
  phase::JobLayout layout;
  phase::TopoId initial;
  std::string rail = "rail0";
  // Where the runner's controller listens: phase.listen, else the address the ranks reach
  // (controller_host when it is an IP address; 127.0.0.1 in a virtual lab, whose guests reach
  // the runner's loopback at QEMU's 10.0.2.2, and when every rank is local). The controller
  // always requires the per-run token the runner hands the ranks over SSH.
  std::string listen_host = "127.0.0.1";
  int listen_port = 0;
  std::string controller_host;  // how the ranks reach the runner's controller
  int ack_timeout_ms = 10000;
  int max_retries = 2;
  // The orchestrator policy (phase.policy; docs/phase-control.md#orchestrator-policies) and,
  // for safe-window, its phase table with idle windows (loaded while parsing) and switch time.
  phase::Policy policy = phase::Policy::kOnRequest;
  // greedy's circuit allocator (phase.allocator; docs/phase-control.md#circuit-allocators).
  phase::Allocator allocator = phase::Allocator::kLargestDemand;
  std::string phase_table;
  double switch_time_ms = 0;
  phase::PhaseWindows windows;
  // After a mode's placement made circuits (from the previous mode's last topology): the wait
  // before its ranks start, for the links to come up (phase.settle_ms).
  int settle_ms = 0;

  // Spare slots on the rail (phase.spares, HOST:NIC each, no rank's NIC): where the controller
  // moves a rank whose port failed. With phase.detect the rail's circuits are watched through
  // the switch's power monitors (phase::PortWatch) and a failed port is masked
  // (Controller::port_failed); docs/phase-control.md#failed-ports-detection-masking-recovery.
  std::vector<RankPlacement> spares;
  std::optional<phase::PortWatchOptions> detect;
  // phase.detect_nic: the hosts' side (phase::NicWatch): a rail slot whose NIC's link stays down,
  // as the spec's carrier or firmware probe reads it, for down_for while its circuits are made is
  // a failed port, masked the same way. Needs those probes on every rail NIC's host.
  std::optional<phase::NicWatchOptions> detect_nic;
  // phase.rails: several rails, one orchestrator each under the one controller (each rank has a
  // NIC per rail; the rails share the spec's switch on disjoint ports). Empty: the one rail
  // `rail` on the ranks' placement NICs with `spares`.
  std::vector<RailSpec> rails;

  // The job's rails: `rails`, or the one rail the placement and `spares` make.
  std::vector<RailSpec> rail_list() const;
  // A rail's slots (each NIC: tx_port -> ingress, rx_port -> egress): the ranks' in rank order,
  // then the spares'.
  static std::vector<phase::Slot> slots_of(const RailSpec& rail, const std::vector<HostEntry>& hosts);
  // The first rail's slots.
  std::vector<phase::Slot> slots(const std::vector<HostEntry>& hosts) const;
};

// Parses the `workload:` and `phase:` sections of a spec whose `type` is phase-workload; the
// lab and switch are already in spec. Validates everything (schedule file and groups against
// the job layout, placement against the hosts, launcher constraints) and throws ConfigError
// naming file:line:col.
PhaseWorkloadSpec parse_phase_workload(const YamlDoc& doc, const ExperimentSpec& spec);

// What one rank (or one launcher command) is told, independent of how it is started.
// The survival axes' known variables (sweep.env): NCCL's IB transport takes the queue pairs'
// local ACK timeout exponent and retry count from the first two, ocslab-collbench-verbs too;
// NCCL 2.29 and later move a failed port's queue pairs to another port with the third.
inline constexpr const char* kEnvIbTimeout = "NCCL_IB_TIMEOUT";
inline constexpr const char* kEnvIbRetryCnt = "NCCL_IB_RETRY_CNT";
inline constexpr const char* kEnvIbPortFailover = "NCCL_IB_RESILIENCY_PORT_FAILOVER";

// Per op of the schedule's step: whether it begins a new phase, i.e. needs a topology other than
// the one the op before it left (the phase layout's digits for its group's stages, as the
// controller composes them on demand; management ops never do). The steady state: the second
// step from the initial topology, so a phase that runs on from one step into the next is one
// phase. Empty for a torch job (no step).
std::vector<bool> phase_starts(const PhaseWorkloadSpec& pw);

// A sweep.env point in a folder name: each variable without NCCL's "NCCL_IB_" / "NCCL_" prefix,
// lower case, followed by its value, joined by '.': {NCCL_IB_TIMEOUT 18, NCCL_IB_RETRY_CNT 7}
// -> "timeout18.retry_cnt7". Characters a folder name should not hold become '_'.
std::string env_label(const std::vector<std::pair<std::string, std::string>>& env);

struct RankLaunch {
  std::string program;
  std::string schedule;    // the schedule's path as the ranks see it
  std::string output_dir;  // as the ranks see it
  std::string controller;  // HOST:PORT
  std::string job;
  std::string mode;
  std::string rendezvous;  // HOST:PORT of rank 0
  std::string token_file;  // the controller's token, as the ranks see it (a 0600 file); only its path is in argv
  std::string job_id;      // srun: the runner's Slurm allocation (--jobid)
  std::vector<std::string> launcher_args;  // the runner's own, before the spec's launcher.args
  // framework torch (last, so the collective workloads' brace-initialised launches stay as
  // they are): the training script as the ranks see it, and PYTHONPATH for the ocslab package
  // (empty: the installed package, on python3's own path).
  std::string script = {};
  std::string python_path = {};
  // The run's sweep.env point: set in every rank's environment (NAME, VALUE).
  std::vector<std::pair<std::string, std::string>> env = {};
};

// The argv of rank r under the ssh launcher: program, schedule, --rank/--nranks/--rendezvous,
// --host, --output, the controller flags, --if when pass_if, --timeout-s, then spec.args; for
// framework torch, torch_rank_argv's. The one place the framework picks a rank's command.
std::vector<std::string> rank_argv(const PhaseWorkloadSpec& spec, const std::vector<HostEntry>& hosts, int rank,
                                   const RankLaunch& l);
// The one command line of the mpirun / srun launchers (rank and world size come from the
// launcher's environment; hosts in placement order, block distribution); for framework torch
// ending in torch_launcher_tail's.
std::vector<std::string> launcher_argv(const PhaseWorkloadSpec& spec, const std::vector<HostEntry>& hosts,
                                       const RankLaunch& l);
// The srun launcher's allocation: salloc --no-shell over the placement's nodes and tasks per
// node, named job_name, for `minutes`, waiting at most 60 s for the nodes.
std::vector<std::string> salloc_argv(const PhaseWorkloadSpec& spec, const std::vector<HostEntry>& hosts,
                                     const std::string& job_name, int minutes);

}  // namespace ocslab::runner
