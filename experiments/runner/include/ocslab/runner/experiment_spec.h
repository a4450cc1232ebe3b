// The experiment spec (`ocslab run SPEC.yaml`): which lab (a virtual-lab file to start or
// reuse, or an inventory of real hosts), which switch and ports, the mappings to alternate,
// the schedule, the probes and the output folder. Parsed and validated completely, every host,
// NIC and port cross-checked, before any host or switch is touched; every error names
// file:line:col. Schema: docs/experiments.md.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ocslab/common/config.h"
#include "ocslab/ocsctl/port_set.h"
#include "ocslab/ocsctl/types.h"
#include "ocslab/runner/forwarding_spec.h"
#include "ocslab/runner/handshake_gate.h"

namespace ocslab::runner {

struct NicEntry {
  std::string name;  // interface on the host ("eth1", "ens1f0")
  ocs::Port tx_port = 0, rx_port = 0;
  // A virtual lab's standby NIC: the NIC it backs up in a bond (docs/virtual-lab.md, "Standby
  // NICs"). It can be a rail's spare but carries no rank: the bond's traffic is the primary's.
  std::string standby_for = {};
};

struct HostEntry {
  std::string name;
  // Real hosts only (a virtual lab's are filled in from its state when it is up):
  std::string ssh_host;  // address or name the runner connects to
  int ssh_port = 22;
  std::string user = "root";
  std::string identity_file;  // empty: ssh-agent, then ~/.ssh defaults
  std::string known_hosts;    // empty: ~/.ssh/known_hosts
  std::string agent = "ocslab-agent";  // the agent's path on the host
  std::string agent_socket;  // the agent daemon's socket; empty: the agent's default
  std::string mgmt;  // how other hosts reach it for out-of-band exchanges (RDMA probe); default ssh_host
  std::vector<NicEntry> nics;
  const NicEntry* nic(const std::string& n) const;
  // The netdev whose carrier is this NIC's own link: the NIC's name, or, for a virtual lab's NIC
  // with a standby (the two a bond named after it), its renamed member `<nic>p`
  // (docs/virtual-lab.md#standby-nics). A carrier probe's default interfaces include it.
  std::string link_interface(const std::string& n) const;
};

struct Link {
  size_t a_host = 0, b_host = 0;  // indexes into ExperimentSpec::hosts
  std::string a_nic, b_nic;
};

struct Mapping {
  std::string name;
  std::vector<Link> links;
  std::vector<ocs::Circuit> circuits;  // a.tx -> b.rx and b.tx -> a.rx for each link, sorted
};

// One probe kind as the spec asks for it; expanded per host by the runner.
struct ProbeSpec {
  std::string name;                 // carrier, firmware, rx_power, heartbeat
  std::vector<std::string> hosts;   // empty: every host
  std::vector<std::string> interfaces;  // empty: the host's data NICs
  int interval_ms = 1;
  std::string params_json = "{}";   // extra agent params (probe specific), as JSON
};

struct RdmaSpec {
  bool enabled = false;
  int interval_ms = 10;
  int timeout = 14;     // local ACK timeout exponent: 4.096 us x 2^timeout
  int retry_cnt = 7;
  int port = 18520;     // first TCP port of the QP exchanges (one per pair); probes::kRdmaControlPort, off perftest's 18515
  // Permanent neighbour entries between the two NICs of every pair for the run (HostPrep,
  // host_prep.h): what a hardware QP's address vector gives. Empty: on a virtual lab without
  // host-based forwarding (which owns the neighbour tables then), off on real hosts.
  std::optional<bool> pin_neighbours;
  // Client host/nic -> server host/nic. From `pairs: mappings` every link of every mapping
  // gives one pair (a side is the client), so traffic resumes after every reconfiguration.
  std::vector<Link> pairs;
  // `qp: {timeout: [..], retry_cnt: [..]}`: a queue-pair matrix. Every pair runs one probe per
  // (timeout, retry_cnt) of the product instead of one with timeout/retry_cnt, each labelled
  // `PEER:tTrR` (docs/experiments.md, "The survival matrix"). Empty: no matrix.
  struct QpPoint {
    int timeout = 14, retry_cnt = 7;
    bool operator==(const QpPoint&) const = default;
  };
  std::vector<QpPoint> qp_matrix;
  // The settings every pair runs: the matrix, or the one of timeout/retry_cnt.
  std::vector<QpPoint> settings() const;
};

// The `outages` type's plan (`outages:`): circuits dark for exact lengths, each of `ms`
// `repetitions` times, in random order (seeded) or as listed, `gap_ms` apart (from light back to
// the next outage). Each outage darkens every listed NIC's circuit both ways (its tx_port and
// rx_port shutters) through the virtual lab's emulator (a dark spell), one iteration each.
struct OutageSpec {
  std::vector<std::pair<size_t, std::string>> nics;  // host index, NIC; default: every NIC of the mapping
  std::vector<double> ms;
  int repetitions = 1;
  double gap_ms = 1000;
  bool shuffled = true;
};
// The longest outage: the emulator's dark spell is at most this long.
inline constexpr double kMaxOutageMs = 600'000;

enum class Order { kAlternate, kRandom };

// A NIC link model a firmware sweep sets on the virtual lab's emulator: one of its presets, or
// one the spec defines under `nic_models:` in the lab file's `nic_model` syntax.
struct NicModelChoice {
  std::string name;
  std::string yaml;         // what the lab's timing control is given (vlab::LabTiming::nic_link)
  double up_mean_ms = 0;    // the model's firmware link-up mean (before the rapid spread and cap)
  std::string where;        // file:line:col of the name in sweep.nic_model, for messages
};

// The firmware study (`sweep: {nic_model: [...], dwell_s: [...]}` of a reconfig-latency spec):
// schedule.reconfigurations reconfigurations at each (model, dwell) point, models outer, in the
// order given; each point starts with the settle and warm-up waits. No nic_model: the lab's own
// model throughout (then a real lab may sweep dwell_s too).
struct FirmwareSweep {
  std::vector<NicModelChoice> nic_models;
  std::vector<double> dwell_s;  // empty: schedule.dwell_s at every point
  struct Point {
    const NicModelChoice* model = nullptr;  // null: the lab's own
    double dwell_s = 0;
  };
  bool enabled() const { return !nic_models.empty() || !dwell_s.empty(); }
};
// The most (model, dwell) points one sweep may have.
inline constexpr size_t kMaxSweepPoints = 1000;

inline constexpr const char* kNicHeldDown = "nic-held-down";
inline constexpr const char* kPortDark = "port-dark";
inline constexpr const char* kSwitchUnreachable = "switch-unreachable";
inline constexpr const char* kAgentKilled = "agent-killed";
inline constexpr const char* kRankKilled = "rank-killed";
inline constexpr const char* kCircuitCut = "circuit-cut";

// One injected fault (`faults:`), from just before reconfiguration before_iteration's command
// to the end of the run, then undone. Virtual lab only: nic-held-down: the NIC's link is held
// down by the lab's emulated firmware (light returning never brings it up). port-dark: a switch
// port fails (its shutter closed: no light passes it either way). switch-unreachable: the
// switch's control plane answers nothing for for_ms (then it serves what was sent meanwhile); it
// ends by itself. Any lab: agent-killed: the host's capture daemon is killed (SIGKILL, over SSH);
// the host is lost for the rest of the run, and nothing is undone. In a phase-workload spec a
// fault comes at a step (at_step: when the controller gets the step's first request) or a time
// (after_s: after the ranks started) of every run of the job, instead of before_iteration, and
// rank-killed kills one rank's process (SIGKILL, over SSH; any lab). Outages of a planned
// length (phase-workload; docs/experiments.md "Queue-pair settings through outages, under a
// job"): port-dark with for_ms is the emulator's dark spell (virtual lab: the port dark exactly
// for_ms, then lit again by the emulator); circuit-cut (any switch) deletes the circuit on the
// port through the switch's driver and makes it again for_ms after the deletion's
// acknowledgement, so the outage also holds the switch's own switching time twice.
struct FaultSpec {
  std::string kind = kNicHeldDown;
  size_t host = 0;  // index into ExperimentSpec::hosts; port-dark: the NIC on the port
  std::string nic;  // empty for agent-killed
  ocs::Port port = 0;  // port-dark, circuit-cut: the switch port (the NIC's tx_port or rx_port)
  double for_ms = 0;   // switch-unreachable, circuit-cut: how long; port-dark: 0 (to the end of the run) or a dark spell
  int before_iteration = 1;  // 1..reconfigurations (reconfig-latency; 0 in a phase-workload spec)
  int rank = -1;             // rank-killed: the rank (host: its host)
  int at_step = -1;          // phase-workload: the step (0 = the first, warm-up included); -1: after_s
  double after_s = -1;       // phase-workload: seconds after the ranks started; -1: at_step
  std::string where;         // file:line:col of the entry, for messages
};

struct PhaseWorkloadSpec;  // phase_workload.h

inline constexpr const char* kReconfigLatency = "reconfig-latency";
inline constexpr const char* kPhaseWorkload = "phase-workload";
inline constexpr const char* kOutages = "outages";

struct ExperimentSpec;
// Whether the run pins the RDMA pairs' neighbours (RdmaSpec::pin_neighbours and its default).
bool rdma_pins_neighbours(const ExperimentSpec& spec);

struct ExperimentSpec {
  std::string type = kReconfigLatency;  // or kPhaseWorkload: then phase_workload is set, no mappings
  std::shared_ptr<const PhaseWorkloadSpec> phase_workload;
  std::string name;
  std::string origin;  // the spec file
  // lab
  std::string vlab;        // absolute path of the virtual-lab file; empty: real hosts
  std::string vlab_name;   // that lab's name
  bool keep_lab = true;    // leave a virtual lab the runner started running afterwards
  std::vector<HostEntry> hosts;  // from the vlab file or the inventory
  // lab.connect_concurrency: at most this many SSH handshakes to the hosts at once (the runner's
  // session pools, HandshakeGate); below sshd's default MaxStartups (10:30:100) by default.
  int connect_concurrency = kDefaultConnectConcurrency;
  // switch
  std::string switch_url;        // empty with a virtual lab: the lab's
  std::string switch_url_where;  // file:line:col of switch.url, for messages
  ocs::PortSet allow;            // defaults to the ports of every NIC the mappings name
  std::string switch_identity_file, switch_known_hosts;
  // The switch's own power monitors on every host's receive port (source ocs_power), polled on
  // a second session; 0: off.
  int power_monitor_ms = 0;
  double power_threshold_dbm = -25;
  // what to do
  std::vector<Mapping> mappings;  // at least two; the first is applied at setup
  int reconfigurations = 10;
  double dwell_s = 5;     // after each reconfiguration command returns
  double warmup_s = 2;    // probes running on the first mapping before the first reconfiguration
  double settle_s = 5;    // wait after setup when the first mapping changed circuits (links come up)
  Order order = Order::kAlternate;
  std::vector<ProbeSpec> probes;
  RdmaSpec rdma;
  ForwardingSpec forwarding;  // host-based forwarding per mapping (forwarding_spec.h); off unless given
  std::vector<FaultSpec> faults;  // injected faults, in the spec's order
  OutageSpec outages;             // type outages: the plan (one mapping, lit for the whole run)
  FirmwareSweep sweep;            // reconfig-latency: the firmware study's points; off unless given
  uint64_t seed = 1;
  std::string output = "results";  // a folder <output>/<name>-<YYYYmmdd-HHMMSS> is made in it
  // The sweep's points in run order (one point, the schedule's dwell_s and the lab's model,
  // without a sweep).
  std::vector<FirmwareSweep::Point> sweep_points() const;
  // Every reconfiguration of the run: reconfigurations at each sweep point.
  int iterations() const;
  // The mapping of reconfiguration i (1..N), given the seed: alternate cycles through the
  // mappings after the first; random picks any mapping other than the current one.
  // An outages spec: mapping 0 every time (its circuits stay; only light changes).
  std::vector<size_t> schedule() const;
  // An outages spec: the length of outage i (1..N) at [i - 1], given the seed.
  std::vector<double> outage_plan() const;
  // An outages spec: the switch ports its NICs' circuits go dark through (tx and rx of each).
  std::vector<ocs::Port> outage_ports() const;
  size_t host_index(const std::string& name) const;  // throws Error
  std::string host_names() const;                     // "h1, h2, h3": for messages naming the lab's hosts
};

// Throws ConfigError naming file:line:col.
ExperimentSpec load_experiment_spec(const std::string& path);
ExperimentSpec parse_experiment_spec(const YamlDoc& doc);

// What the run will need from this machine's environment rather than from the spec, checked
// offline (`ocslab run --check`): a password for switch.url where its protocol logs in with one
// (raw TL1), from $OCSLAB_OCS_PASSWORD bound to the switch's host or the credentials file
// (credentials.h). Throws ConfigError at switch.url naming the variables and the file, never a
// password.
void check_switch_login(const ExperimentSpec& spec);

}  // namespace ocslab::runner
