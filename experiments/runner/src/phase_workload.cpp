// Running a phase-workload experiment: per phase mode, the embedded controller + orchestrator
// over the spec's switch, the ranks (SSH or one mpirun / srun command), their files fetched,
// the per-step figures and the merged timeline.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ocslab/common/clock.h"
#include "ocslab/common/file.h"
#include "ocslab/common/secret.h"
#include "ocslab/ocsctl/driver.h"
#include "ocslab/ocsctl/ssh_session.h"
#include "ocslab/phase/port_watch.h"
#include "ocslab/runner/experiment_spec.h"
#include "ocslab/runner/experiment_type.h"
#include "ocslab/runner/host_capture.h"
#include "ocslab/runner/host_prep.h"
#include "ocslab/runner/phase_faults.h"
#include "ocslab/runner/phase_figures.h"
#include "ocslab/runner/phase_rails.h"
#include "ocslab/runner/phase_results.h"
#include "ocslab/runner/phase_workload.h"
#include "ocslab/runner/rank_launcher.h"
#include "ocslab/runner/remote_kill.h"
#include "ocslab/runner/run_context.h"
#include "ocslab/runner/run_types.h"
#include "ocslab/runner/target.h"
#include "ocslab/runner/torch_ranks.h"

namespace ocslab::runner {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

// A host's clock minus the runner's, from `date +%s%N` over SSH (ClockOffset).
ClockOffset measure_offset(const ocs::SshOptions& ssh) {
  ClockOffset best;
  try {
    ocs::SshSession s(ssh);
    for (int i = 0; i < 5; ++i) {
      int64_t t0 = realtime_ns();
      auto r = s.exec("date +%s%N", std::chrono::seconds(10));
      int64_t t1 = realtime_ns();
      int64_t remote = std::stoll(r.out);
      int64_t half = (t1 - t0) / 2;
      if (best.uncertainty_ns < 0 || half < best.uncertainty_ns) {
        best.uncertainty_ns = half;
        best.offset_ns = remote - (t0 + half);
      }
    }
  } catch (const std::exception& e) {
    best.error = e.what();
    best.uncertainty_ns = -1;
  }
  return best;
}

// workload.rxe and workload.pin_neighbours: done on the ranks' hosts before the first mode,
// undone (only what was added) when the run ends however it ends (HostPrep, host_prep.h).
void prepare_hosts(HostPrep& prep, const PhaseWorkloadSpec& pw, const std::function<void(const std::string&)>& log) {
  std::set<size_t> used;
  std::set<NicRef> nics;
  for (const auto& r : pw.ranks) {
    used.insert(r.host);
    nics.insert({r.host, r.nic});
  }
  prep.add_rxe({used.begin(), used.end()}, pw.rxe, log);
  if (!pw.pin_neighbours) return;
  // Every rank's data NIC with every other: any two ranks may share a circuit.
  std::vector<std::pair<NicRef, NicRef>> pairs;
  for (auto a = nics.begin(); a != nics.end(); ++a)
    for (auto b = std::next(a); b != nics.end(); ++b) pairs.emplace_back(*a, *b);
  prep.pin_neighbours(pairs, log);
}

// One run of the type: the steps of run(), in order. The ranks are started by the launcher
// (rank_launcher.h), the fabric driven by the rails (phase_rails.h), the files written by the
// results (phase_results.h); this class holds what ties them together for one mode.
class PhaseWorkloadRun {
 public:
  PhaseWorkloadRun(Target& target, const RunContext& ctx, RunResult& result)
      : target_(target),
        spec_(target.spec),
        pw_(*target.spec.phase_workload),
        ctx_(ctx),
        result_(result),
        folder_(fs::absolute(result.folder).string()),
        rails_(target, ctx, [this](const Sample& s) { control(s); }),
        results_(target, ctx, result, folder_, rails_) {}

  void run() {
    const std::string schedule_text = read_file_or_empty(pw_.schedule_path);
    write_text(folder_ + "/schedule.yaml", schedule_text);
    token_ = random_token();  // this run's controller secret: the ranks get it over SSH
    program_ = install_program();
    const auto runs = plan();
    launcher_ = make_rank_launcher({target_, ctx_, folder_, result_.run_id, schedule_text, token_, runs.size()});
    measure_offsets();
    // The launcher first: an allocation Slurm refuses (or a name mpirun could not resolve) ends
    // the run before any host was prepared, and a refusal costs no host preparation and undo.
    launcher_->prepare();
    std::optional<HostPrep> prep;  // undone when the run ends, however it ends
    json host_preparation = json::object();
    if (pw_.pin_neighbours || !pw_.rxe.empty()) {
      prepare_hosts(prep.emplace(spec_), pw_, ctx_.logger());
      host_preparation = prep->record();
    }
    if (!spec_.probes.empty() || spec_.rdma.enabled) start_capture();
    {
      LabSwitching switching(target_, pw_, ctx_);  // a virtual lab's switching time, put back at the end
      for (size_t i = 0; i < runs.size(); ++i) {
        if (ctx_.interrupted()) break;
        if (runs[i].switching_ms >= 0) switching.set(runs[i].switching_ms);
        if (runs[i].link_gbps > 0) switching.set_link_gbps(runs[i].link_gbps);
        ctx_.log(fmt::format("[{}/{}] {}", i + 1, runs.size(), runs[i].label));
        run_mode(runs[i]);
        if (pw_.safe_window_from == "measured" && runs[i].mode == "native") use_measured_windows(runs[i]);
        if (capture_) {
          for (const auto& u : capture_->unhealthy()) note_host_problem(u);
        }
      }
    }
    result_.interrupted = ctx_.interrupted();
    results_.finish(capture_.get(), {program_, host_preparation, *launcher_, capture_ != nullptr});
  }

 private:
  // Every (mode, sweep point, repetition) in run order: per link rate, switching time, sweep.env
  // combination and outage length (each axis in the spec's order), each repetition runs the modes
  // in the spec's order; native (which never switches) runs at the first switching time only, but
  // at every link rate (it moves the same bytes).
  std::vector<RunPoint> plan() const {
    const bool swept = !pw_.sweep_switching_ms.empty();
    const bool any_sweep =
        swept || !pw_.sweep_link_gbps.empty() || !pw_.sweep_env.empty() || !pw_.sweep_outage_ms.empty();
    const std::vector<double> rates = pw_.sweep_link_gbps.empty() ? std::vector<double>{-1} : pw_.sweep_link_gbps;
    const std::vector<double> points = swept ? pw_.sweep_switching_ms : std::vector<double>{-1};
    const std::vector<double> outages = pw_.sweep_outage_ms.empty() ? std::vector<double>{-1} : pw_.sweep_outage_ms;
    std::vector<std::vector<std::pair<std::string, std::string>>> envs = {{}};
    for (const auto& [name, values] : pw_.sweep_env) {
      std::vector<std::vector<std::pair<std::string, std::string>>> next;
      for (const auto& e : envs) {
        for (const auto& v : values) {
          next.push_back(e);
          next.back().emplace_back(name, v);
        }
      }
      envs = std::move(next);
    }
    std::vector<RunPoint> out;
    for (double gbps : rates) {
      for (size_t pi = 0; pi < points.size(); ++pi) {
        for (const auto& env : envs) {
          for (double outage : outages) {
            for (int rep = 1; rep <= pw_.repetitions; ++rep) {
              for (const auto& mode : pw_.modes) {
                if (mode == "native" && pi > 0) continue;
                RunPoint r{mode, mode, mode == "native" ? -1.0 : points[pi], rep, env, outage, gbps};
                if (gbps > 0) r.label += fmt::format("-{:g}gbps", gbps);
                if (r.switching_ms >= 0) r.label += fmt::format("-{:g}ms", r.switching_ms);
                if (!env.empty()) r.label += "-" + env_label(env);
                if (outage >= 0) r.label += fmt::format("-out{:g}ms", outage);
                if (any_sweep || pw_.repetitions > 1) r.label += fmt::format("-r{}", rep);
                out.push_back(r);
              }
            }
          }
        }
      }
    }
    if (pw_.sweep_shuffled) {
      std::mt19937_64 rng(spec_.seed);
      std::shuffle(out.begin(), out.end(), rng);
    }
    return out;
  }

  // phase.safe_window_from: measured: the native run's group windows become the safe-window
  // table of the modes after it (written as phases-measured.csv, a phase_table for later runs).
  void use_measured_windows(const RunPoint& native) {
    std::vector<IdleWindow> measured;
    for (const auto& w : results_.group_windows()) {
      if (w.mode == native.label) measured.push_back(w);
    }
    try {
      auto table = windows_table(pw_.schedule, measured);
      write_phase_table(folder_ + "/phases-measured.csv", table);
      ctx_.log(fmt::format("safe-window: the windows of {} ({} measured) are the table from now on "
                           "(phases-measured.csv)",
                           native.label, measured.size()));
      rails_.use_windows(std::move(table));
    } catch (const std::exception& e) {
      result_.problems.push_back(fmt::format("safe_window_from: measured: {}: {}", native.label, e.what()));
      ctx_.log("problem: safe_window_from: measured: " + std::string(e.what()));
    }
  }

  // probes: the agents' capture through every mode. Their clock estimates replace the SSH
  // round-trip ones for the rank samples: the ranks' lanes then line up with the probes' to the
  // estimate's uncertainty.
  void start_capture() {
    capture_ = std::make_unique<HostCapture>(target_, ctx_, folder_, result_.run_id);
    capture_->start();
    auto& offsets = results_.clock_offsets();
    for (const auto& [host, c] : capture_->clock_estimates()) {
      host_offsets_[host] = c.offset_ns;
      auto it = offsets.find(host);
      if (it == offsets.end()) continue;
      it->second.offset_ns = c.offset_ns;
      it->second.uncertainty_ns = c.uncertainty_ns;
      it->second.error.clear();
      it->second.by = "agent";
    }
  }

  // Rail k's slots as NICs the hosts' probes read (phase.detect_nic): the rail's NICs, then its
  // spares, in the order of its slots.
  std::vector<phase::WatchedNic> watched_nics(size_t k) const {
    const RailSpec& rail = rails_.rails()[k];
    const auto& slots = rails_.slots()[k];
    std::vector<phase::WatchedNic> out;
    for (const auto* list : {&rail.nics, &rail.spares}) {
      for (const auto& p : *list) {
        const HostEntry& h = spec_.hosts[p.host];
        out.push_back({slots[out.size()], h.name, p.nic, h.link_interface(p.nic)});
      }
    }
    return out;
  }

  // The switch's rows of the rails (setup, command, ack) into the capture, when one runs.
  void control(const Sample& s) {
    if (capture_) capture_->control(s);
  }

  void note_host_problem(const std::string& p) {
    if (!host_problems_.insert(p).second) return;
    result_.problems.push_back("probes: " + p);
    ctx_.log("problem: probes: " + p);
  }
  const HostEntry& host_of_rank(int r) const { return spec_.hosts[pw_.ranks[static_cast<size_t>(r)].host]; }

  // The program the ranks run: in a virtual lab this build's copy, installed where guests see it.
  std::string install_program() const {
    if (!target_.is_vlab() || pw_.program.find('/') != std::string::npos) return pw_.program;
    return install_binary(exe_dir(ctx_.options().self_exe) + "/" + pw_.program, target_.bin_dir(), pw_.program);
  }

  // Rank samples carry their host's clock: measured once per host whose ranks the launcher
  // started there, subtracted in the timelines (the step figures only ever subtract times of
  // one rank and do not need it).
  void measure_offsets() {
    if (!launcher_->host_clocks()) return;
    std::set<size_t> used;
    for (const auto& r : pw_.ranks) used.insert(r.host);
    for (size_t h : used) results_.clock_offsets()[spec_.hosts[h].name] = measure_offset(ssh_options(spec_.hosts[h]));
  }

  RankLaunch launch_settings(const RunPoint& point, int controller_port) const {
    const std::string& mode = point.mode;
    const HostEntry& host0 = host_of_rank(0);
    RankLaunch l;
    l.program = program_;
    l.controller = fmt::format("{}:{}", pw_.controller_host, controller_port);
    l.job = pw_.layout.job;
    l.mode = mode;
    l.rendezvous = fmt::format("{}:{}", host0.mgmt.empty() ? host0.ssh_host : host0.mgmt, pw_.rendezvous_port);
    l.env = point.env;
    if (pw_.framework == Framework::kTorch) {
      l.script = pw_.script;
      l.python_path = torch_python_path(ctx_.options().self_exe);
    }
    return l;
  }

  // rank-killed: SIGKILL to the rank's process over the session opened for it before the ranks
  // started, only while it is still the program the runner started there (its /proc/PID/comm).
  void kill_rank(const ModeRun& m, int r, RemoteKiller& killer) const {
    const long long pid = m.pids ? (*m.pids)[static_cast<size_t>(r)].load() : 0;
    // The program's name, not argv[0]: a torch rank's command starts with env, which execs python3.
    const std::string program = fs::path(m.launch.program).filename().string();
    killer.kill(pid, program, fmt::format("rank {} on {}", r, host_of_rank(r).name));
  }

  void run_mode(const RunPoint& point) {
    ModeRun m;
    m.point = point;
    m.label = point.label;
    m.dir = folder_ + "/" + m.label;
    fs::create_directories(m.dir);
    const size_t first_reconfig = rails_.reconfig_count();
    m.first_reconfig = first_reconfig;
    auto rails = rails_.open(m.point, m.placement_added);
    // faults: injected in this run of the job at their step or time (phase_faults.h).
    // rank-killed: a session to each such rank's host opened now, so the kill lands at its step
    // (remote_kill.h); before `faults`, whose thread uses them, so destroyed after it.
    std::map<int, std::unique_ptr<RemoteKiller>> killers;
    for (const auto& f : spec_.faults) {
      if (f.kind == kRankKilled && !killers.count(f.rank))
        killers[f.rank] = std::make_unique<RemoteKiller>(ssh_options(host_of_rank(f.rank)));
    }
    // The run's own faults: with a sweep.outage_ms point, every outage fault lasts that long.
    // Declared before `faults`, which holds a reference to it.
    ExperimentSpec fault_spec;
    std::unique_ptr<PhaseFaults> faults;
    if (!spec_.faults.empty()) {
      fault_spec.hosts = spec_.hosts;
      fault_spec.faults = spec_.faults;
      for (auto& f : fault_spec.faults) {
        if (m.point.outage_ms > 0 && (f.kind == kPortDark || f.kind == kCircuitCut)) f.for_ms = m.point.outage_ms;
      }
      faults = std::make_unique<PhaseFaults>(
          fault_spec, target_.is_vlab() ? target_.lab.dir : std::string(),
          [step_of = StepOfSeq(pw_.schedule)](const phase::ControllerEvent& e) { return step_of(e.group, e.seq); },
          [this, label = m.label](const std::string& line) { ctx_.log(label + ": " + line); }, m.dir + "/faults.json",
          [this, &m, &killers](const FaultSpec& f) { kill_rank(m, f.rank, *killers.at(f.rank)); });
      faults->set_switch([sw = target_.switch_access()] { return ocs::make_driver(sw.url, sw.options); });
    }
    std::optional<phase::Controller> ctl;  // none in native mode: the fabric stays as wired
    if (m.point.mode != "native") {
      auto co = rails_.controller_options(rails, m.point, token_);
      if (faults) co.on_event = [p = faults.get()](const phase::ControllerEvent& e) { p->on_event(e); };
      ctl.emplace(std::move(co));
      ctl->start();
    }
    // phase.detect: each rail's circuits watched through the switch's power monitors (a driver
    // session per rail); a failed port is masked by the controller onto a spare slot.
    std::vector<std::unique_ptr<phase::PortWatch>> watches;
    if (ctl && pw_.detect) {
      SwitchAccess sw = target_.switch_access();
      phase::Controller* c = &*ctl;
      for (const auto& rail : rails) {
        watches.push_back(std::make_unique<phase::PortWatch>(
            rail, ocs::make_driver(sw.url, sw.options),
            [c](const phase::PortFailure& f) { c->port_failed(f.rail, f.port, f.evidence, f.seen_mono_ns); },
            *pw_.detect));
        watches.back()->start();
      }
    }
    // phase.detect_nic: the same from the hosts' side, on the carrier and firmware samples the
    // capture streams in (each on the runner's clock through its host's offset).
    std::vector<std::unique_ptr<phase::NicWatch>> nic_watches;
    struct TapReset {  // however this run ends, the capture stops calling into nic_watches first
      HostCapture* capture = nullptr;
      ~TapReset() {
        if (capture) capture->set_tap(nullptr);
      }
    } tap_reset;
    if (ctl && pw_.detect_nic && capture_) {
      phase::Controller* c = &*ctl;
      for (size_t k = 0; k < rails.size(); ++k) {
        nic_watches.push_back(std::make_unique<phase::NicWatch>(
            rails[k], watched_nics(k),
            [c](const phase::PortFailure& f) { c->port_failed(f.rail, f.port, f.evidence, f.seen_mono_ns); },
            *pw_.detect_nic));
      }
      capture_->set_tap([this, &nic_watches](const std::string& host, const Sample& s) {
        auto off = host_offsets_.find(host);
        const int64_t at = s.t_ns - (off == host_offsets_.end() ? 0 : off->second);
        std::string layer;
        if (s.source == "carrier" && (s.signal == "carrier" || s.signal == "carrier_bit")) layer = "carrier";
        if (s.source == "firmware" && s.signal == "link") layer = "firmware";
        for (auto& w : nic_watches) {
          if (!layer.empty()) w->reading(host, s.subject, layer, s.value != 0, at);
          w->heard(host, at);  // after the reading: the host's state is known to here
        }
      });
      tap_reset.capture = capture_.get();
      for (auto& w : nic_watches) w->start();
    }
    m.launch = launch_settings(m.point, ctl ? ctl->port() : 0);
    m.started_ns = realtime_ns();
    if (faults) faults->start();
    launcher_->run(m);
    m.ended_ns = realtime_ns();
    if (faults) {
      for (auto& p : faults->stop()) m.problem(m.label + ": " + p);
      for (auto& p : faults->release()) m.problem(m.label + ": " + p);
      m.fault_rows = faults->rows();
      m.faults = faults->record();
    }
    std::vector<phase::ControllerEvent> events;
    for (auto& w : watches) w->stop();
    if (tap_reset.capture) capture_->set_tap(nullptr);  // before the watches it feeds stop
    for (auto& w : nic_watches) w->stop();
    if (ctl) {
      ctl->stop();
      events = ctl->events();
      const auto masks = port_masks(events);
      for (const auto& p : ctl->problems()) {
        if (!recovered_port_note(masks, p)) m.problems.push_back(m.label + ": controller: " + p);
      }
      if (ctl->in_fallback()) m.problems.push_back(m.label + ": the controller fell back to the giant ring");
    }
    // After the mode's rows are read: a torch job's steps come from them.
    const StepOfSeq step_of = results_.finish_mode(m, events, ctl && ctl->in_fallback());
    rails_.join_reconfigs(first_reconfig, events, step_of);
  }

  Target& target_;
  const ExperimentSpec& spec_;
  const PhaseWorkloadSpec& pw_;
  const RunContext& ctx_;
  RunResult& result_;
  const std::string folder_;              // absolute
  std::string token_;                     // the controllers' shared secret for this run
  std::string program_;                   // as the ranks' hosts see it
  std::unique_ptr<HostCapture> capture_;  // probes: (probes: in the spec) through every mode
  std::map<std::string, int64_t> host_offsets_;  // host clock minus the runner's, from the agents
  PhaseRails rails_;
  PhaseResults results_;
  std::unique_ptr<RankLauncher> launcher_;
  std::set<std::string> host_problems_;  // reported once each
};

class PhaseWorkload final : public ExperimentType {
 public:
  void run(Target& target, const RunContext& ctx, RunResult& result) override {
    PhaseWorkloadRun(target, ctx, result).run();
  }
};

}  // namespace

std::unique_ptr<ExperimentType> make_phase_workload_experiment() { return std::make_unique<PhaseWorkload>(); }

}  // namespace ocslab::runner
