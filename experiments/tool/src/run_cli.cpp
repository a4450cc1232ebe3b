// `ocslab run SPEC.yaml`: the experiment (runner/), then `ocslab analyze` and `ocslab plot`
// over its folder, then the summary on standard output.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <signal.h>
#include <unistd.h>
#include <algorithm>

#include <atomic>
#include <chrono>
#include <iostream>
#include <map>
#include <optional>
#include <ostream>

#include "cli_args.h"
#include "commands.h"
#include "ocslab/analysis/localisation.h"
#include "ocslab/analysis/qp_timers.h"
#include "ocslab/analysis/survival.h"
#include "ocslab/analysis/summary.h"
#include "ocslab/cli/ocslab_cli.h"
#include "ocslab/cli/plot.h"
#include "ocslab/common/clock.h"
#include "ocslab/common/interrupt.h"
#include "ocslab/common/shell.h"
#include "ocslab/common/version.h"
#include "ocslab/ocsctl/errors.h"
#include "ocslab/runner/experiment_spec.h"
#include "ocslab/runner/fault_injection.h"
#include "ocslab/runner/phase_workload.h"
#include "ocslab/runner/runner.h"
#include "ocslab/runner/torch_ranks.h"

namespace ocslab::cli {

namespace {

const char* kRecoverHelp = R"(ocslab recover - finish the results folder of a run whose runner died

Usage: ocslab recover FOLDER [options]

For a reconfiguration-latency run whose `ocslab run` was killed (kill -9, an OOM kill, a
reboot of the runner's machine) after its probes started: reads FOLDER/run.json, reaches every
host's agent again over SSH (a virtual lab must still be up), stops its probes, fetches from
its spool every sample after the last one in FOLDER/capture/, measures the clock offsets, then
writes timeline.csv and meta.json as the run would have, runs the analysis and draws the plots.
meta.json gets `recovered`, and the gap in switch commands (the schedule stopped with the
runner) is a problem of the run. A spec with a `forwarding:` section has its forwarding cleared
on every host, as the run's end would have (`forwarding clear`; meta.json's
recovered.forwarding_cleared names the hosts, a host whose clear fails is a problem naming
it). The switch is left as it is unless --restore-switch. Refused,
touching nothing, when the run finished, when FOLDER has no run.json, or when the spec changed
since the run started.

Options:
  --restore-switch        also put the switch on the mapping an uninterrupted run ends with (the
                          schedule's last), within the spec's allow-list; recorded as restore /
                          restore_ack rows and in meta.json's recovered.switch_restored
  --cache DIR             virtual-lab cache (default $OCSLAB_VLAB_CACHE or ~/.cache/ocslab/vlab)
  --no-plot               skip timeline.png and cdf.png
  --json                  print summary.json instead of summary.txt

Exit codes (the table in ocslab --help): 0 never (a recovered run always has the gap as a
problem); 1 a bad command line; 5 recovered with problems (the gap, a host lost), or nothing to
recover. docs/experiments.md, "How a run is kept on disk".
)";

const char* kRunHelp = R"(ocslab run - a reconfiguration-latency experiment

Usage: ocslab run SPEC.yaml [options]

Starts the spec's virtual lab (or reuses it when it is up) or reaches the hosts of its
inventory over SSH, starts ocslab-agent on every host, applies the first mapping, then
reconfigures the switch between the spec's mappings while the probes record what every host
sees. Writes a results folder: timeline.csv, meta.json, breakdown.csv, summary.txt,
summary.json, timeline.png, cdf.png; prints the summary.

Options:
  -o, --output DIR        the results folder (default: <spec output>/<name>-<YYYYmmdd-HHMMSS>)
  --reconfigurations N    override schedule.reconfigurations (per point with a sweep)
  --dwell S               override schedule.dwell_s (seconds after each reconfiguration;
                          not with a sweep.dwell_s)
  --cache DIR             virtual-lab cache (default $OCSLAB_VLAB_CACHE or ~/.cache/ocslab/vlab)
  --no-plot               skip timeline.png and cdf.png
  --json                  print summary.json instead of summary.txt
  --json-stream           progress as JSON lines on stdout, one object per event: run_start,
                          reconfiguration (i of n), sweep_point, host_state, problem,
                          run_end (results folder, exit code); the summary then goes to stderr
  --check                 validate the spec (and the lab file it names) offline, as a run and
                          ocsctl would: ports, the switch URL, no password in it, duplicate
                          keys, the files it names, the switch password's source; print the
                          plan (a long schedule summarised) and stop, touching no host or switch;
                          with --json the plan, or the error with its file, line and col, as JSON

In a virtual lab, the spec's `faults:` injects faults: `- {kind: nic-held-down, nic: h3:eth1,
before_iteration: 2}` holds that NIC's link down from just before reconfiguration 2 to the end
of the run (its light returns, its firmware never raises the link); `- {kind: port-dark, port:
19, before_iteration: 2}` fails switch port 19 (its shutter closes: no light passes it). Both
are recorded in meta.json and the timeline; the lab's holds and dark ports are put back as
found when the run ends (docs/experiments.md, "Fault injection").

`sweep: {nic_model: [cx6dx-autoneg, cx6dx-no-autoneg], dwell_s: [5, 10, 20]}` runs the
schedule's reconfigurations at every (NIC model, dwell) point, setting each model on the
virtual lab's emulator (presets, or models the spec defines under `nic_models:`), and writes
firmware_study.csv and firmware_study.png: firmware link-up per model against the
reconfiguration interval (docs/experiments.md, "The firmware link-up study").

With `type: phase-workload` the spec runs a collective workload under the embedded phase
controller once per phase mode and writes phase-steps.csv, phase-summary.txt, phase.png and per
mode the ranks' rows, shim samples, controller events and timeline.csv; prints the per-step
table (docs/experiments.md, "Phase-workload experiments").

Exit codes (the table in ocslab --help): 0 the run was clean; 2 a bad spec (nothing touched);
3 the switch refused the login; 4 the switch cannot be reached; 5 the run had problems (a
failed reconfiguration, a lost host, failed switch polls, a rank that failed: each is printed as
"problem:" and kept in meta.json, and the results folder is still written; a reconfiguration
that did not complete on every port: printed as "fault:", the last line naming the host, NIC
and layer where the first one stopped, summary.txt has the evidence) or could not start;
130 Ctrl-C, which stops the schedule, stops the probes and writes what was captured.
Spec schema and every output column: docs/experiments.md.
)";

// `--check`'s line for an injected fault.
void print_fault(const runner::ExperimentSpec& spec, const runner::FaultSpec& f, std::ostream& out) {
  out << fmt::format("injected fault: {} {} ({})\n", runner::FaultInjector::describe(spec, f),
                     runner::FaultInjector::when(f), runner::FaultInjector::lasts(f));
}

// The survival axes of a phase-workload sweep (sweep.env, sweep.outage_ms): the runs, the outage,
// and per queue-pair setting what the timer arithmetic predicts at each length.
void print_survival_plan(const runner::ExperimentSpec& spec, std::ostream& out) {
  const auto& pw = *spec.phase_workload;
  if (pw.sweep_env.empty() && pw.sweep_outage_ms.empty()) return;
  size_t combos = 1;
  for (const auto& [name, values] : pw.sweep_env) combos *= values.size();
  const size_t lengths = std::max<size_t>(1, pw.sweep_outage_ms.size());
  const size_t switching = std::max<size_t>(1, pw.sweep_switching_ms.size());
  out << fmt::format("survival sweep: {} run(s) of the job ({} environment(s) x {} outage length(s) x {} switching "
                     "time(s) x {} repetition(s) x {} mode(s)), {}\n",
                     combos * lengths * switching * pw.repetitions * pw.modes.size(), combos, lengths, switching,
                     pw.repetitions, pw.modes.size(),
                     pw.sweep_shuffled ? fmt::format("in random order (seed {})", spec.seed) : "in the listed order");
  for (const auto& [name, values] : pw.sweep_env) out << fmt::format("  env {}: {}\n", name, fmt::join(values, ", "));
  std::vector<double> lengths_ms = pw.sweep_outage_ms;
  for (const auto& f : spec.faults) {
    if (f.kind != runner::kPortDark && f.kind != runner::kCircuitCut) continue;
    if (lengths_ms.empty() && f.for_ms > 0) lengths_ms.push_back(f.for_ms);
    out << fmt::format("  outage: {} {}, {} ms{}\n", runner::FaultInjector::describe(spec, f),
                       runner::FaultInjector::when(f), fmt::join(lengths_ms, ", "),
                       f.kind == runner::kCircuitCut
                           ? " (the circuit deleted, then made again: the outage adds the switch's switching twice)"
                           : " (the emulator's dark spell)");
  }
  std::vector<int> timeouts, retries;
  for (const auto& [name, values] : pw.sweep_env) {
    for (const auto& v : values) {
      if (name == runner::kEnvIbTimeout) timeouts.push_back(std::stoi(v));
      if (name == runner::kEnvIbRetryCnt) retries.push_back(std::stoi(v));
    }
    if (name == runner::kEnvIbPortFailover) {
      out << fmt::format("  {}: NCCL 2.29 or later moves a failed port's queue pairs to another port; an older "
                         "NCCL ignores it, ocslab-collbench-verbs too\n",
                         name);
    }
  }
  if (timeouts.empty()) timeouts.push_back(analysis::kNcclDefaultTimeout);
  if (retries.empty()) retries.push_back(analysis::kNcclDefaultRetryCnt);
  const bool verbs = pw.program.find("collbench-verbs") != std::string::npos;
  for (int t : timeouts) {
    for (int r : retries) {
      auto survives = analysis::survivable_outage_ns(t, r);
      std::vector<std::string> outcome;
      for (double ms : lengths_ms) {
        const bool ok = analysis::survives_outage(t, r, static_cast<int64_t>(ms * 1e6));
        outcome.push_back(fmt::format("{} {}", ms, ok ? "survives" : "errors"));
      }
      std::string soft;
      if (!spec.vlab.empty()) {
        auto b = analysis::softroce_survivable_outage_ns(t, r);
        soft = fmt::format(" (Soft-RoCE {} at HZ={})",
                           b ? fmt::format("{:.3f} ms", static_cast<double>(*b) / 1e6) : std::string("any length"),
                           analysis::kDefaultSoftRoceHz);
      }
      out << fmt::format("  timeout {} retry_cnt {}: survives outages up to {}{}; predicted: {}\n", t, r,
                         survives ? fmt::format("{:.3f} ms", static_cast<double>(*survives) / 1e6) : "any length",
                         soft, fmt::join(outcome, ", "));
    }
  }
  if (pw.program.find("collbench-nccl") != std::string::npos) {
    out << "  ocslab-collbench-nccl: one GPU per rank; this sweep runs on a lab with GPUs and RDMA NICs "
           "(NCCL reads the variables itself)\n";
  } else if (verbs) {
    out << "  ocslab-collbench-verbs takes NCCL_IB_TIMEOUT / NCCL_IB_RETRY_CNT as its --qp-timeout / --qp-retry\n";
  }
}

// `--check` of a phase-workload spec: placement, slots, the controller and each mode's command.
void print_phase_plan(const runner::ExperimentSpec& spec, std::ostream& out) {
  const auto& pw = *spec.phase_workload;
  const bool torch = pw.framework == runner::Framework::kTorch;
  out << fmt::format("spec {} is valid: phase-workload, {} rank(s) of {} ({}), modes:", spec.origin, pw.schedule.ranks,
                     torch ? "torch" : pw.program, torch ? pw.script : pw.schedule_path);
  for (const auto& m : pw.modes) out << " " << m;
  const auto rails = pw.rail_list();
  std::string names;
  for (const auto& r : rails) names += (names.empty() ? "" : ", ") + r.name;
  out << fmt::format("\njob {}: pp={} ({}), initial topo_id {}, rail{} {}, switch ports {}\n", pw.layout.job,
                     pw.layout.pp, pw.layout.describe_digits(), pw.initial.str(), rails.size() > 1 ? "s" : "", names,
                     spec.allow.to_string());
  auto slots = pw.slots(spec.hosts);
  for (size_t r = 0; r < pw.ranks.size(); ++r) {
    out << fmt::format("rank {}: {}:{} slot {}-{}\n", r, spec.hosts[pw.ranks[r].host].name, pw.ranks[r].nic,
                       slots[r].ingress, slots[r].egress);
  }
  // The other rails' NICs, and every rail's spares (the first rail's NICs are the lines above).
  for (size_t k = 0; k < rails.size(); ++k) {
    const auto rs = runner::PhaseWorkloadSpec::slots_of(rails[k], spec.hosts);
    for (size_t i = k == 0 ? rails[k].nics.size() : 0; i < rs.size(); ++i) {
      const bool spare = i >= rails[k].nics.size();
      const auto& p = spare ? rails[k].spares[i - rails[k].nics.size()] : rails[k].nics[i];
      out << fmt::format("rail {}: {}{}:{} slot {}-{}\n", rails[k].name, spare ? "spare " : fmt::format("rank {}: ", i),
                         spec.hosts[p.host].name, p.nic, rs[i].ingress, rs[i].egress);
    }
  }
  if (torch) {  // what the script's new_group calls should match (docs/workloads.md)
    out << "process groups the layout implies:\n";
    for (const auto& g : runner::torch_expected_groups(pw.layout)) out << "  " << g << "\n";
  }
  if (pw.detect) {
    out << fmt::format("detect: every {} ms, dark below {} dBm for {} readings\n", pw.detect->interval.count(),
                       pw.detect->threshold_dbm, pw.detect->dark_polls);
  }
  if (pw.detect_nic) {
    out << fmt::format("detect_nic: a rail NIC whose carrier or firmware link is down for {} ms under its circuits "
                       "has failed (the hosts' probes)\n",
                       pw.detect_nic->down_for.count());
  }
  runner::RankLaunch l;
  l.program = pw.program;
  const bool ssh = pw.launcher == runner::Launcher::kSsh;
  l.output_dir = ssh ? "<tmp>" : pw.shared_dir.empty() ? "<results>/<mode>" : pw.shared_dir + "/<run>/<mode>";
  l.schedule = ssh || !pw.shared_dir.empty() ? l.output_dir + "/schedule.yaml" : "<results>/schedule.yaml";
  l.controller = pw.controller_host + ":<port>";
  l.job = pw.layout.job;
  if (torch) {
    l.script = pw.script;
    l.python_path = runner::torch_python_path("");
    l.token_file = l.output_dir + "/controller.token";  // where the launchers write it; never the token
  }
  const auto& h0 = spec.hosts[pw.ranks.front().host];
  l.rendezvous = fmt::format("{}:{}", h0.mgmt.empty() ? h0.ssh_host : h0.mgmt, pw.rendezvous_port);
  if (ssh) out << "<tmp>: the folder `mktemp -d /tmp/ocslab-phase-<run>-<mode>.XXXXXXXXXX` makes on each host\n";
  if (std::find(pw.modes.begin(), pw.modes.end(), "native") != pw.modes.end()) {
    std::string unconnected;
    for (const auto& [g, nic] : pw.native_group_if) unconnected += fmt::format(" {} over {}", g, nic);
    out << fmt::format("native: the rail wired once as {} ({}); no controller{}\n", pw.native.str(),
                       pw.layout.describe_digits(), unconnected.empty() ? "" : ";" + unconnected);
  }
  if (!pw.sweep_switching_ms.empty()) {
    std::string pts;
    for (double ms : pw.sweep_switching_ms) pts += fmt::format("{}{:g}", pts.empty() ? "" : ", ", ms);
    out << fmt::format("sweep: switching {} ms, {} repetition(s), {}; native once per repetition\n", pts,
                       pw.repetitions,
                       pw.inject_delay ? "injected by the controller" : "set on the virtual lab's emulator");
  }
  if (!pw.sweep_link_gbps.empty()) {
    out << fmt::format("sweep: link rate {} Gbit/s, every mode (native included) at each, {} repetition(s); set on "
                       "the virtual lab's emulator\n",
                       fmt::join(pw.sweep_link_gbps, ", "), pw.repetitions);
  }
  print_survival_plan(spec, out);
  if (!spec.probes.empty() || spec.rdma.enabled) {
    std::string names;
    for (const auto& p : spec.probes) names += (names.empty() ? "" : ", ") + p.name;
    if (spec.rdma.enabled) names += std::string(names.empty() ? "" : ", ") + "rdma";
    out << fmt::format("probes: {} on every host through the whole run\n", names);
  }
  // The first run's sweep.env point, so that the command lines show how the ranks get it.
  for (const auto& [name, values] : pw.sweep_env) l.env.emplace_back(name, values.front());
  for (const auto& m : pw.modes) {
    l.mode = m;
    out << fmt::format("{} ({}):\n", m, runner::to_string(pw.launcher));
    if (pw.launcher == runner::Launcher::kSsh) {
      for (int r = 0; r < pw.schedule.ranks; ++r) {
        out << "  " << spec.hosts[pw.ranks[static_cast<size_t>(r)].host].name << "$ "
            << shell_join(runner::rank_argv(pw, spec.hosts, r, l)) << "\n";
      }
    } else {
      out << "  $ " << shell_join(runner::launcher_argv(pw, spec.hosts, l)) << "\n";
    }
  }
  for (const auto& f : spec.faults) print_fault(spec, f, out);
}

// A schedule of up to kScheduleListed reconfigurations is listed whole; a longer one (up to
// 100,000: a megabyte on one line) as its first and last kScheduleEnds and a count per mapping.
constexpr size_t kScheduleListed = 20;
constexpr size_t kScheduleEnds = 5;

// The schedule's mapping names: the first kScheduleEnds (all of a short schedule) and the last.
std::pair<std::vector<std::string>, std::vector<std::string>> schedule_ends(const runner::ExperimentSpec& spec,
                                                                            const std::vector<size_t>& sched) {
  const size_t head = sched.size() <= kScheduleListed ? sched.size() : kScheduleEnds;
  std::vector<std::string> first, last;
  for (size_t i = 0; i < head; ++i) first.push_back(spec.mappings[sched[i]].name);
  for (size_t i = std::max(head, sched.size() - std::min(sched.size(), kScheduleEnds)); i < sched.size(); ++i) {
    last.push_back(spec.mappings[sched[i]].name);
  }
  return {first, last};
}

std::map<std::string, size_t> schedule_counts(const runner::ExperimentSpec& spec, const std::vector<size_t>& sched) {
  std::map<std::string, size_t> n;
  for (auto m : sched) ++n[spec.mappings[m].name];
  return n;
}

void print_schedule(const runner::ExperimentSpec& spec, std::ostream& out) {
  const auto sched = spec.schedule();
  out << "schedule: " << spec.mappings[0].name;
  const auto ends = schedule_ends(spec, sched);
  for (const auto& m : ends.first) out << " -> " << m;
  if (ends.second.empty()) {
    out << "\n";
    return;
  }
  out << " -> ...";
  for (const auto& m : ends.second) out << " -> " << m;
  std::string counts;
  for (const auto& c : schedule_counts(spec, sched)) {
    counts += fmt::format("{}{} {}", counts.empty() ? "" : ", ", c.first, c.second);
  }
  out << fmt::format(" (the first and last {} of {}; {})\n", kScheduleEnds, sched.size(), counts);
}

// The RDMA pairs, and each pair's queue-pair settings when there is a matrix.
void print_rdma_plan(const runner::ExperimentSpec& spec, std::ostream& out) {
  if (!spec.rdma.enabled) return;
  out << "rdma pairs (client -> server, every " << spec.rdma.interval_ms << " ms):";
  for (const auto& l : spec.rdma.pairs) {
    out << " " << spec.hosts[l.a_host].name << ":" << l.a_nic << "->" << spec.hosts[l.b_host].name << ":" << l.b_nic;
  }
  out << "\n";
  if (spec.rdma.qp_matrix.empty()) return;
  std::vector<std::string> qps;
  for (const auto& q : spec.rdma.qp_matrix) qps.push_back(fmt::format("t{}r{}", q.timeout, q.retry_cnt));
  out << fmt::format("queue pairs per pair ({}, one TCP port each from {}): {}\n", qps.size(), spec.rdma.port,
                     fmt::join(qps, " "));
}

// A firmware sweep's points (runner::FirmwareSweep), in run order, each with its model's
// firmware link-up mean, its dwell and its reconfigurations; the time the schedule takes after
// the first warm-up (each point's settle and warm-up, then its dwells).
struct SweepPlanPoint {
  std::string nic_model;
  std::optional<double> up_mean_ms;  // none: the lab's own model
  double dwell_s = 0;
  int first = 0, last = 0;
};
std::vector<SweepPlanPoint> sweep_plan(const runner::ExperimentSpec& spec, double& seconds) {
  std::vector<SweepPlanPoint> out;
  seconds = 0;
  int i = 0;
  for (const auto& p : spec.sweep_points()) {
    SweepPlanPoint q{p.model ? p.model->name : "lab", std::nullopt, p.dwell_s, i + 1, i + spec.reconfigurations};
    if (p.model) q.up_mean_ms = p.model->up_mean_ms;
    i = q.last;
    seconds += spec.settle_s + spec.warmup_s + spec.reconfigurations * p.dwell_s;
    out.push_back(q);
  }
  return out;
}

void print_sweep_plan(const runner::ExperimentSpec& spec, std::ostream& out) {
  if (!spec.sweep.enabled()) return;
  double seconds = 0;
  const auto plan = sweep_plan(spec, seconds);
  out << fmt::format("sweep: {} NIC model(s) x {} dwell time(s) = {} point(s), {} reconfiguration(s) each ({} in all), "
                     "about {:.0f} s after the warm-up\n",
                     std::max<size_t>(spec.sweep.nic_models.size(), 1), std::max<size_t>(spec.sweep.dwell_s.size(), 1),
                     plan.size(), spec.reconfigurations, spec.iterations(), seconds);
  for (size_t k = 0; k < plan.size(); ++k) {
    const auto& p = plan[k];
    out << fmt::format("  point {}: NIC model {}{}, dwell {} s, reconfigurations {}..{}\n", k + 1, p.nic_model,
                       p.up_mean_ms ? fmt::format(" (firmware link-up mean {} ms)", *p.up_mean_ms)
                                    : std::string(" (the lab's own)"),
                       p.dwell_s, p.first, p.last);
  }
}

// `--check` of a reconfig-latency spec: hosts, schedule, switch ports, circuits, probes.
void print_reconfiguration_plan(const runner::ExperimentSpec& spec, std::ostream& out) {
  out << fmt::format("spec {} is valid: {} host(s), {} mapping(s), {} reconfiguration(s), dwell {} s\n", spec.origin,
                     spec.hosts.size(), spec.mappings.size(), spec.iterations(),
                     spec.sweep.dwell_s.empty() ? fmt::format("{}", spec.dwell_s)
                                                : fmt::format("{}", fmt::join(spec.sweep.dwell_s, "/")));
  print_sweep_plan(spec, out);
  print_schedule(spec, out);
  out << "switch ports: " << spec.allow.to_string() << "\n";
  for (const auto& m : spec.mappings) {
    out << m.name << ":";
    for (const auto& c : m.circuits) out << " " << c.ingress << "-" << c.egress;
    out << "\n";
  }
  out << "probes:";
  for (const auto& p : spec.probes) out << " " << p.name << " (" << p.interval_ms << " ms)";
  out << "\n";
  for (const auto& f : spec.faults) {
    print_fault(spec, f, out);
  }
  print_rdma_plan(spec, out);
}

// An outages spec's --check: the lit mapping, the outages and their order, the ports darkened,
// the probes and the queue-pair settings with what the arithmetic predicts for each.
void print_outages_plan(const runner::ExperimentSpec& spec, std::ostream& out) {
  const auto& o = spec.outages;
  const auto plan = spec.outage_plan();
  double total_ms = 0;
  for (double ms : plan) total_ms += ms + o.gap_ms;
  out << fmt::format("spec {} is valid: {} host(s), {} outage(s) ({} length(s) x {}), {} order, gap {} ms, "
                     "about {:.0f} s after the warm-up\n",
                     spec.origin, spec.hosts.size(), plan.size(), o.ms.size(), o.repetitions,
                     o.shuffled ? "random" : "as-listed", o.gap_ms, total_ms / 1000);
  std::vector<std::string> first;
  for (size_t i = 0; i < std::min<size_t>(plan.size(), 10); ++i) first.push_back(fmt::format("{}", plan[i]));
  out << fmt::format("outages (ms): {}{}\n", fmt::join(first, ", "), plan.size() > 10 ? ", ..." : "");
  const auto& m = spec.mappings.front();
  out << m.name << " (lit for the whole run):";
  for (const auto& c : m.circuits) out << " " << c.ingress << "-" << c.egress;
  out << "\n";
  std::vector<std::string> nics;
  for (const auto& [h, nic] : o.nics) nics.push_back(spec.hosts[h].name + ":" + nic);
  out << fmt::format("dark each time: {} (switch ports {})\n", fmt::join(nics, ", "), fmt::join(spec.outage_ports(), ", "));
  out << "probes:";
  for (const auto& p : spec.probes) out << " " << p.name << " (" << p.interval_ms << " ms)";
  out << "\n";
  print_rdma_plan(spec, out);
  if (!spec.rdma.enabled) return;
  for (const auto& qp : spec.rdma.settings()) {
    auto survives = analysis::survivable_outage_ns(qp.timeout, qp.retry_cnt);
    std::vector<std::string> outcome;
    for (double ms : o.ms) {
      bool ok = analysis::survives_outage(qp.timeout, qp.retry_cnt, static_cast<int64_t>(ms * 1e6));
      outcome.push_back(fmt::format("{} {}", ms, ok ? "survives" : "errors"));
    }
    out << fmt::format("  qp t{} r{}: survives outages up to {}; predicted: {}\n", qp.timeout, qp.retry_cnt,
                       survives ? fmt::format("{:.3f} ms", static_cast<double>(*survives) / 1e6) : "any length",
                       fmt::join(outcome, ", "));
  }
}


// What both types' `--check --json` carry: the spec, its lab and switch ports, its faults.
nlohmann::json plan_json_common(const runner::ExperimentSpec& spec) {
  nlohmann::json hosts = nlohmann::json::array();
  for (const auto& h : spec.hosts) {
    nlohmann::json nics = nlohmann::json::array();
    for (const auto& n : h.nics) nics.push_back({{"name", n.name}, {"tx_port", n.tx_port}, {"rx_port", n.rx_port}});
    hosts.push_back({{"name", h.name}, {"nics", nics}});
  }
  nlohmann::json faults = nlohmann::json::array();
  for (const auto& f : spec.faults) {
    faults.push_back({{"kind", f.kind},
                      {"what", runner::FaultInjector::describe(spec, f)},
                      {"when", runner::FaultInjector::when(f)},
                      {"where", f.where}});
  }
  return {{"valid", true},
          {"spec", spec.origin},
          {"type", spec.type},
          {"name", spec.name},
          {"vlab", spec.vlab},
          {"hosts", hosts},
          {"switch", {{"url", spec.switch_url}, {"ports", spec.allow.to_string()}}},
          {"faults", faults}};
}

// `probes` (name, interval) and `rdma` (enabled, interval, the client -> server pairs) of a plan.
void add_probes_json(const runner::ExperimentSpec& spec, nlohmann::json& j) {
  nlohmann::json probes = nlohmann::json::array();
  for (const auto& p : spec.probes) probes.push_back({{"name", p.name}, {"interval_ms", p.interval_ms}});
  j["probes"] = probes;
  std::vector<std::string> pairs;
  for (const auto& l : spec.rdma.pairs) {
    pairs.push_back(
        fmt::format("{}:{}->{}:{}", spec.hosts[l.a_host].name, l.a_nic, spec.hosts[l.b_host].name, l.b_nic));
  }
  j["rdma"] = {{"enabled", spec.rdma.enabled}, {"interval_ms", spec.rdma.interval_ms}, {"pairs", pairs}};
}

nlohmann::json reconfiguration_plan_json(const runner::ExperimentSpec& spec) {
  nlohmann::json j = plan_json_common(spec);
  nlohmann::json mappings = nlohmann::json::array();
  for (const auto& m : spec.mappings) {
    std::vector<std::string> circuits;
    for (const auto& c : m.circuits) circuits.push_back(fmt::format("{}-{}", c.ingress, c.egress));
    mappings.push_back({{"name", m.name}, {"circuits", circuits}});
  }
  const auto sched = spec.schedule();
  const auto ends = schedule_ends(spec, sched);
  j["mappings"] = mappings;
  j["reconfigurations"] = spec.reconfigurations;
  j["dwell_s"] = spec.dwell_s;
  j["schedule"] = {{"initial", spec.mappings[0].name},
                   {"count", sched.size()},
                   {"first", ends.first},
                   {"last", ends.second},
                   {"per_mapping", schedule_counts(spec, sched)}};
  add_probes_json(spec, j);
  if (spec.sweep.enabled()) {
    double seconds = 0;
    nlohmann::json points = nlohmann::json::array();
    for (const auto& p : sweep_plan(spec, seconds)) {
      points.push_back({{"nic_model", p.nic_model},
                        {"model_up_mean_ms", p.up_mean_ms ? nlohmann::json(*p.up_mean_ms) : nlohmann::json(nullptr)},
                        {"dwell_s", p.dwell_s},
                        {"first_iteration", p.first},
                        {"last_iteration", p.last}});
    }
    j["sweep"] = {{"points", points}, {"seconds", seconds}};
  }
  return j;
}

nlohmann::json outages_plan_json(const runner::ExperimentSpec& spec) {
  nlohmann::json j = plan_json_common(spec);
  const auto& o = spec.outages;
  std::vector<std::string> nics;
  for (const auto& [h, nic] : o.nics) nics.push_back(spec.hosts[h].name + ":" + nic);
  j["mapping"] = spec.mappings.front().name;
  j["outages"] = {{"ms", o.ms},           {"repetitions", o.repetitions}, {"gap_ms", o.gap_ms},
                  {"order", o.shuffled ? "random" : "as-listed"}, {"plan", spec.outage_plan()},
                  {"nics", nics},         {"ports", spec.outage_ports()}};
  add_probes_json(spec, j);
  nlohmann::json qp = nlohmann::json::array();
  for (const auto& q : spec.rdma.settings()) {
    auto survives = analysis::survivable_outage_ns(q.timeout, q.retry_cnt);
    qp.push_back({{"timeout", q.timeout},
                  {"retry_cnt", q.retry_cnt},
                  {"survives_ms", survives ? nlohmann::json(static_cast<double>(*survives) / 1e6) : nlohmann::json()}});
  }
  j["rdma"]["qp"] = qp;
  return j;
}

nlohmann::json phase_plan_json(const runner::ExperimentSpec& spec) {
  const auto& pw = *spec.phase_workload;
  nlohmann::json j = plan_json_common(spec);
  const bool torch = pw.framework == runner::Framework::kTorch;
  j["framework"] = torch ? "torch" : "collbench";
  j["program"] = pw.program;
  j[torch ? "script" : "schedule"] = torch ? pw.script : pw.schedule_path;
  j["modes"] = pw.modes;
  j["launcher"] = runner::to_string(pw.launcher);
  j["job"] = pw.layout.job;
  j["pp"] = pw.layout.pp;
  j["initial"] = pw.initial.str();
  const auto slots = pw.slots(spec.hosts);
  nlohmann::json ranks = nlohmann::json::array();
  for (size_t r = 0; r < pw.ranks.size(); ++r) {
    ranks.push_back({{"rank", r},
                     {"host", spec.hosts[pw.ranks[r].host].name},
                     {"nic", pw.ranks[r].nic},
                     {"ingress", slots[r].ingress},
                     {"egress", slots[r].egress}});
  }
  j["ranks"] = ranks;
  std::vector<std::string> rails;
  for (const auto& r : pw.rail_list()) rails.push_back(r.name);
  j["rails"] = rails;
  if (!pw.sweep_env.empty() || !pw.sweep_outage_ms.empty() || !pw.sweep_switching_ms.empty() ||
      !pw.sweep_link_gbps.empty()) {
    nlohmann::json env = nlohmann::json::object();
    for (const auto& [name, values] : pw.sweep_env) env[name] = values;
    j["sweep"] = {{"switching_ms", pw.sweep_switching_ms},
                  {"link_gbps", pw.sweep_link_gbps},
                  {"env", env},
                  {"outage_ms", pw.sweep_outage_ms},
                  {"repetitions", pw.repetitions},
                  {"order", pw.sweep_shuffled ? "random" : "as-listed"}};
  }
  return j;
}

// run_experiment with SIGINT / SIGTERM turned into a stop of the schedule (the results are
// still written); false when a signal came before anything was captured.
bool run_with_signals(const runner::ExperimentSpec& spec, runner::RunOptions& o, runner::RunResult& r,
                      std::ostream& err) {
  InterruptScope interrupt;
  o.interrupted = InterruptScope::flag();
  try {
    r = runner::run_experiment(spec, o);
  } catch (...) {
    interrupt.restore();
    if (interrupt.raised()) {
      err << "ocslab run: interrupted before anything was captured\n";
      return false;
    }
    throw;
  }
  interrupt.restore();
  return true;
}

// How `ocslab run` reports a finished run (flags of the command line).
struct ReportOptions {
  std::chrono::steady_clock::time_point started;
  bool plot = true;
  bool as_json = false;
};

int report_phase_run(const runner::RunResult& r, const ReportOptions& ro, std::ostream& out, std::ostream& err) {
  const bool plot = ro.plot;
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - ro.started).count();
  size_t rows = 0;
  for (const auto& f : r.steps) rows += static_cast<size_t>(f.rows);
  err << fmt::format("ocslab run: phase-workload, {} op row(s), {} timeline rows in {:.1f} s -> {}\n", rows, r.samples,
                     secs, r.folder);
  runner::print_step_table(out, r.steps);
  int rc = kExitOk;
  if (plot && !r.steps.empty()) rc = draw_plots(r.folder, err);
  for (const auto& p : r.problems) err << "ocslab run: problem: " << p << "\n";
  if (r.interrupted) return kExitInterrupted;
  if (!r.problems.empty()) rc = kExitFailed;  // a rank failed, rows missing, controller fallback
  return rc;
}

int report_reconfiguration_run(const runner::RunResult& r, const ReportOptions& ro, std::ostream& out,
                               std::ostream& err) {
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - ro.started).count();
  err << fmt::format("ocslab run: {} reconfiguration(s), {} timeline rows from {} host(s) in {:.1f} s -> {}\n",
                     r.reconfigurations.size(), r.samples, r.hosts.size(), secs, r.folder);
  std::vector<std::string> analyze_args = {"analyze", r.folder};
  if (ro.as_json) analyze_args.push_back("--json");
  std::vector<analysis::Localisation> faults;
  int rc = run_analyze(analyze_args, out, err, &faults);
  if (rc == kExitOk && ro.plot) rc = draw_plots(r.folder, err);
  for (const auto& p : r.problems) err << "ocslab run: problem: " << p << "\n";
  if (r.interrupted) return kExitInterrupted;
  // A failed reconfiguration, a lost host, failed switch polls, a port that did not come back:
  // the results are written, but a script must not take them for a clean run.
  if (rc == kExitOk && !r.problems.empty()) rc = kExitFailed;
  return report_faults(faults, r.folder, rc, err);
}

// What `ocslab run` prints for each experiment type: the --check plan and the report of a run.
// A new type (runner/experiment_type.h) adds its line here.
struct TypeCli {
  void (*print_plan)(const runner::ExperimentSpec&, std::ostream&);
  nlohmann::json (*plan_json)(const runner::ExperimentSpec&);
  int (*report)(const runner::RunResult&, const ReportOptions&, std::ostream&, std::ostream&);
};

const TypeCli& type_cli(const std::string& type) {
  static const std::map<std::string, TypeCli> table = {
      {runner::kReconfigLatency, {print_reconfiguration_plan, reconfiguration_plan_json, report_reconfiguration_run}},
      {runner::kPhaseWorkload, {print_phase_plan, phase_plan_json, report_phase_run}},
      {runner::kOutages, {print_outages_plan, outages_plan_json, report_reconfiguration_run}},
  };
  auto it = table.find(type);
  if (it == table.end()) throw Error("ocslab run: no report for experiment type '" + type + "'");
  return it->second;
}

}  // namespace

// The fault localisation of a run's reconfigurations that did not complete (summary.txt has
// the evidence): one line each, then a last line naming where the first one stopped, so the
// tail of a log says which host, NIC and layer to look at.
int report_faults(const std::vector<analysis::Localisation>& faults, const std::string& folder, int rc,
                  std::ostream& err) {
  if (faults.empty()) return rc;
  constexpr size_t kListed = 10;
  for (size_t i = 0; i < faults.size() && i < kListed; ++i)
    err << "ocslab run: fault: " << analysis::fault_headline(faults[i]) << "\n";
  if (faults.size() > kListed) err << fmt::format("ocslab run: fault: ... and {} more\n", faults.size() - kListed);
  const analysis::Localisation& f = faults.front();
  const char* layer = analysis::chain_layer_name(f.layer);
  std::string what = f.layer == analysis::ChainLayer::kSwitch ? "the switch did not acknowledge it"
                     : f.common ? fmt::format("every port stopped at {} (a shared cause)", layer)
                                : fmt::format("{}/{} stopped at {}", f.host, f.interface, layer);
  err << fmt::format(
      "ocslab run: {} reconfiguration(s) did not complete; the first, reconfiguration {}: {} "
      "(evidence: {}/summary.txt)\n",
      faults.size(), f.iteration, what, folder);
  return rc == kExitOk ? kExitFailed : rc;
}

nlohmann::json run_end_event(const runner::RunResult& r, int exit_code) {
  return runner::make_run_event("run_end",
                                {{"folder", r.folder},
                                 {"run_id", r.run_id},
                                 {"exit_code", exit_code},
                                 {"interrupted", r.interrupted},
                                 {"reconfigurations", r.reconfigurations.size()},
                                 {"samples", r.samples},
                                 {"problems", r.problems}},
                                realtime_ns());
}

int run_recover(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  std::string folder, cache;
  bool plot = true, as_json = false, restore_switch = false;
  auto option = [&](const std::string& a, const OptionValue& value) {
    if (a == "--cache") {
      cache = value();
    } else if (a == "--restore-switch") {
      restore_switch = true;
    } else if (a == "--no-plot") {
      plot = false;
    } else if (a == "--json") {
      as_json = true;
    } else {
      return false;
    }
    return true;
  };
  auto positional = [&](const std::string& a) {
    if (!folder.empty()) throw UsageError("one folder at a time (got '" + folder + "' and '" + a + "')");
    folder = a;
  };
  if (!parse_args(args, "recover", kRecoverHelp, out, option, positional)) return kExitOk;
  if (folder.empty()) throw UsageError("usage: ocslab recover FOLDER (ocslab recover --help)");
  runner::RunOptions o;
  o.cache_dir = cache;
  o.version = project_version();
  o.log = &err;
  ReportOptions ro{std::chrono::steady_clock::now(), plot, as_json};
  runner::RunResult r = runner::recover_run(folder, o, restore_switch);
  return report_reconfiguration_run(r, ro, out, err);
}

int run_run(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  std::string spec_path, output, cache;
  int reconfigs = -1;
  double dwell = -1;
  bool plot = true, as_json = false, check = false, json_stream = false;
  auto option = [&](const std::string& a, const OptionValue& value) {
    if (a == "-o" || a == "--output") {
      output = value();
    } else if (a == "--cache") {
      cache = value();
    } else if (a == "--reconfigurations") {
      std::string v = value();
      try {
        size_t used = 0;
        reconfigs = std::stoi(v, &used);
        if (used != v.size() || reconfigs < 1) throw std::invalid_argument(v);
      } catch (const std::exception&) {
        throw BadValue("--reconfigurations needs a positive number, got '" + v + "' (ocslab run --help)");
      }
    } else if (a == "--dwell") {
      std::string v = value();
      try {
        size_t used = 0;
        dwell = std::stod(v, &used);
        if (used != v.size() || !(dwell > 0)) throw std::invalid_argument(v);
      } catch (const std::exception&) {
        throw BadValue("--dwell needs a positive number of seconds, got '" + v + "' (ocslab run --help)");
      }
    } else if (a == "--no-plot") {
      plot = false;
    } else if (a == "--json") {
      as_json = true;
    } else if (a == "--json-stream") {
      json_stream = true;
    } else if (a == "--check") {
      check = true;
    } else {
      return false;
    }
    return true;
  };
  auto positional = [&](const std::string& a) {
    if (!spec_path.empty()) throw UsageError("one spec at a time (got '" + spec_path + "' and '" + a + "')");
    spec_path = a;
  };
  if (!parse_args(args, "run", kRunHelp, out, option, positional)) return kExitOk;
  if (spec_path.empty()) throw UsageError("usage: ocslab run SPEC.yaml (ocslab run --help)");
  if (json_stream && (as_json || check)) throw UsageError("--json-stream goes with neither --json nor --check");

  runner::ExperimentSpec spec = runner::load_experiment_spec(spec_path);  // ConfigError: exit 2, nothing touched
  if (reconfigs > 0) {
    spec.reconfigurations = reconfigs;
    for (const auto& f : spec.faults) {  // a fault after the shortened run's end would never happen
      if (f.before_iteration > spec.iterations()) {
        throw ConfigError(
            fmt::format("{}: before_iteration {} is after the run's last reconfiguration "
                        "(--reconfigurations {}): the fault would never be injected",
                        f.where, f.before_iteration, reconfigs));
      }
    }
  }
  if (dwell > 0 && !spec.sweep.dwell_s.empty()) {
    throw UsageError("--dwell: the spec's sweep.dwell_s gives every point's dwell (ocslab run --help)");
  }
  if (dwell > 0) spec.dwell_s = dwell;
  const TypeCli& type = type_cli(spec.type);
  if (check) {
    runner::check_switch_login(spec);  // the environment's part: a run needs it at the switch
    if (as_json) {
      out << type.plan_json(spec).dump(2) << "\n";
    } else {
      type.print_plan(spec, out);
    }
    return kExitOk;
  }

  runner::RunOptions o;
  o.cache_dir = cache;
  o.output_dir = output;
  o.version = project_version();
  if (json_stream) o.events = runner::json_lines_event_sink(out);
  bool tty = isatty(STDERR_FILENO) == 1;
  o.progress = tty ? &err : nullptr;
  o.log = &err;
  ReportOptions ro{std::chrono::steady_clock::now(), plot, as_json};
  runner::RunResult r;
  try {
    if (!run_with_signals(spec, o, r, err)) return kExitInterrupted;
  } catch (const ocs::OcsError& e) {
    // The switch stopped the run before its schedule began (not reached: 4, the login refused:
    // 3), with the code ocsctl gives it; once the schedule runs, a switch failure is a problem
    // of the run (5, with its results).
    throw CommandFailure(e.what(), ocs::exit_code_of(e));
  }
  if (!json_stream) return type.report(r, ro, out, err);
  // stdout carries only events: the summary the report prints goes to stderr.
  const int rc = type.report(r, ro, err, err);
  o.events(run_end_event(r, rc));
  return rc;
}

}  // namespace ocslab::cli
