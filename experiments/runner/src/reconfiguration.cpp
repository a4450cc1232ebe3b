// The `reconfig-latency` experiment type: one agent session per host over SSH (clock offset
// measured before and after), the probes running while the switch alternates between the spec's
// mappings (every command's span recorded), host-based forwarding re-applied after each, the
// switch's power monitors and the emulator's ground truth, merged into the offset-corrected
// timeline.csv and meta.json.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <ostream>
#include <sstream>
#include <thread>

#include "ocslab/common/clock.h"
#include "ocslab/common/file.h"
#include "ocslab/ocsctl/driver.h"
#include "ocslab/ocsctl/ssh_session.h"
#include "ocslab/runner/experiment_type.h"
#include "ocslab/runner/lab_forwarding.h"
#include "ocslab/runner/ocs_power_monitor.h"
#include "ocslab/runner/run_context.h"
#include "ocslab/runner/runner.h"
#include "ocslab/runner/target.h"

namespace ocslab::runner {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

json clock_json(const agent::ClockEstimate& c) {
  if (c.exchanges == 0) return nullptr;
  return {{"offset_ns", c.offset_ns}, {"uncertainty_ns", c.uncertainty_ns}, {"rtt_ns", c.rtt_ns}, {"exchanges", c.exchanges}};
}

// Sleeps in small steps until `until` (monotonic ns) or an interrupt; calls tick every ~250 ms.
bool wait_until(int64_t until, const RunContext& ctx, const std::function<void()>& tick) {
  int64_t next_tick = 0;
  while (true) {
    if (ctx.interrupted()) return false;
    int64_t now = monotonic_ns();
    if (now >= until) return true;
    if (now >= next_tick) {
      if (tick) tick();
      next_tick = now + 250'000'000;
    }
    std::this_thread::sleep_for(std::chrono::nanoseconds(std::min<int64_t>(until - now, 20'000'000)));
  }
}

struct HostFacts {
  std::string kernel;
  json nics = json::array();
  std::string error;
};

// kernel and NIC driver / firmware strings, over a short SSH session of its own.
HostFacts query_facts(const ocs::SshOptions& ssh, const HostEntry& h) {
  HostFacts f;
  try {
    ocs::SshSession s(ssh);
    std::string cmd = "uname -r";
    for (const auto& n : h.nics) cmd += "; echo '@@" + n.name + "'; ethtool -i " + n.name + " 2>&1";
    auto r = s.exec(cmd, std::chrono::seconds(20));
    std::istringstream in(r.out);
    std::string line;
    std::getline(in, f.kernel);
    json* cur = nullptr;
    while (std::getline(in, line)) {
      if (line.rfind("@@", 0) == 0) {
        f.nics.push_back({{"name", line.substr(2)}});
        cur = &f.nics.back();
        continue;
      }
      if (!cur) continue;
      auto colon = line.find(": ");
      if (colon == std::string::npos) continue;
      std::string k = line.substr(0, colon), v = line.substr(colon + 2);
      if (k == "driver" || k == "version" || k == "firmware-version" || k == "bus-info") (*cur)[k] = v;
    }
  } catch (const std::exception& e) {
    f.error = e.what();
  }
  return f;
}

// Every host's facts at once, while nothing is measured yet.
std::vector<HostFacts> query_all_facts(const std::vector<ocs::SshOptions>& ssh, const std::vector<HostEntry>& hosts) {
  std::vector<HostFacts> facts(hosts.size());
  std::vector<std::thread> th;
  for (size_t i = 0; i < hosts.size(); ++i) th.emplace_back([&, i] { facts[i] = query_facts(ssh[i], hosts[i]); });
  for (auto& t : th) t.join();
  return facts;
}

// The probes the spec asks of each host (per-probe host filter, the host's data NICs by default).
std::map<std::string, std::vector<agent::ProbeRequest>> probe_requests(const ExperimentSpec& spec) {
  std::map<std::string, std::vector<agent::ProbeRequest>> requests;
  for (const auto& h : spec.hosts) {
    for (const auto& p : spec.probes) {
      if (!p.hosts.empty() && std::find(p.hosts.begin(), p.hosts.end(), h.name) == p.hosts.end()) continue;
      agent::ProbeRequest r;
      r.name = p.name;
      r.interval_ms = p.interval_ms;
      r.interfaces = p.interfaces;
      if (r.interfaces.empty()) {
        for (const auto& n : h.nics) r.interfaces.push_back(n.name);
      }
      if (p.name == "heartbeat" && p.interfaces.empty()) r.interfaces.clear();
      r.params = json::parse(p.params_json);
      requests[h.name].push_back(std::move(r));
    }
  }
  return requests;
}

// One RDMA probe pair per spec pair: the server side listens for the QP exchange, the client
// connects to it over the management network.
void add_rdma_requests(const ExperimentSpec& spec, std::map<std::string, std::vector<agent::ProbeRequest>>& requests) {
  for (size_t k = 0; k < spec.rdma.pairs.size(); ++k) {
    const Link& l = spec.rdma.pairs[k];
    const HostEntry& client = spec.hosts[l.a_host];
    const HostEntry& server = spec.hosts[l.b_host];
    // The server listens on its management address only: where the client connects.
    std::string control = fmt::format("{}:{}", server.mgmt, spec.rdma.port + static_cast<int>(k));
    auto request = [&](const std::string& nic, const char* role, const std::string& peer) {
      agent::ProbeRequest r;
      r.name = "rdma";
      r.interfaces = {nic};
      r.interval_ms = spec.rdma.interval_ms;
      r.params = {{"role", role},
                  {"control", control},
                  {"label", peer},
                  {"timeout", spec.rdma.timeout},
                  {"retry_cnt", spec.rdma.retry_cnt}};
      return r;
    };
    requests[server.name].push_back(request(l.b_nic, "server", client.name));
    requests[client.name].push_back(request(l.a_nic, "client", server.name));
  }
}

// One agent session per host. A virtual lab's guests get a daemon of this run's own (a reused
// lab may still run an old one).
std::vector<HostTarget> host_targets(const Target& target, const std::string& run_id) {
  const ExperimentSpec& spec = target.spec;
  auto requests = probe_requests(spec);
  add_rdma_requests(spec, requests);
  std::vector<HostTarget> out;
  for (const auto& h : spec.hosts) {
    HostTarget t;
    t.name = h.name;
    t.ssh = ssh_options(h);
    t.agent_command = h.agent + " serve --stdio";
    if (target.is_vlab()) {
      t.agent_command += " --socket /run/ocslab-agent/" + run_id + ".sock";
    } else if (!h.agent_socket.empty()) {
      t.agent_command += " --socket " + h.agent_socket;
    }
    t.probes = requests[h.name];
    if (t.probes.empty()) throw Error("host " + h.name + " has no probe to run (probes: in the spec)");
    out.push_back(std::move(t));
  }
  return out;
}

// "\n  host: error" for every host with one.
std::string per_host_errors(const std::vector<HostEntry>& hosts, const std::vector<std::string>& errors) {
  std::string failed;
  for (size_t i = 0; i < errors.size(); ++i) {
    if (!errors[i].empty()) failed += "\n  " + hosts[i].name + ": " + errors[i];
  }
  return failed;
}

// Host clock -> runner clock: each host's offset interpolated linearly between its estimate
// before and after the schedule.
void correct_clocks(std::vector<Sample>& samples, const std::vector<HostReport>& hosts, int64_t before_ns,
                    int64_t after_ns) {
  std::map<std::string, const HostReport*> by_name;
  for (const auto& r : hosts) by_name[r.name] = &r;
  for (auto& s : samples) {
    auto it = by_name.find(s.host);
    if (it == by_name.end()) continue;
    const auto& b = it->second->clock_before;
    const auto& a = it->second->clock_after;
    double off = static_cast<double>(b.offset_ns);
    if (a.exchanges > 0 && after_ns > before_ns) {
      double f = std::clamp(static_cast<double>(s.t_ns - b.offset_ns - before_ns) / static_cast<double>(after_ns - before_ns),
                            0.0, 1.0);
      off = static_cast<double>(b.offset_ns) + f * static_cast<double>(a.offset_ns - b.offset_ns);
    }
    s.t_ns -= static_cast<int64_t>(off);
  }
}

json host_meta(const HostEntry& h, const HostFacts& facts, const HostReport* r) {
  json j = {{"name", h.name}, {"kernel", facts.kernel}, {"nics", facts.nics}};
  if (!facts.error.empty()) j["facts_error"] = facts.error;
  if (!r) return j;
  j["agent"] = {{"host", r->hello.host}, {"pid", r->hello.pid}, {"version", r->hello.version}};
  j["clock_sync"] = r->hello.clock_sync;
  j["clock_before"] = clock_json(r->clock_before);
  j["clock_after"] = clock_json(r->clock_after);
  j["probes"] = json::array();
  for (const auto& p : r->started.probes) {
    j["probes"].push_back({{"name", p.name}, {"available", p.available}, {"method", p.method}, {"reason", p.reason}});
  }
  j["samples"] = r->samples;
  j["recovered_from_spool"] = r->recovered;
  j["last_seq"] = r->last_seq;
  j["lost"] = r->lost;
  j["errors"] = r->errors;
  j["connect_ms"] = r->connect_time.count();
  return j;
}

json reconfigurations_meta(const std::vector<ReconfigRecord>& recs) {
  json out = json::array();
  for (const auto& r : recs) {
    out.push_back({{"iteration", r.iteration}, {"mapping", r.mapping}, {"issued_ns", r.issued_ns},
                   {"acked_ns", r.acked_ns}, {"ok", r.ok}, {"error", r.error}, {"circuits_removed", r.removed},
                   {"circuits_added", r.added}});
  }
  return out;
}

// One run of the type: the steps of run(), in order, over the state they share.
class ReconfigurationRun {
 public:
  ReconfigurationRun(Target& target, const RunContext& ctx, RunResult& result)
      : target_(target), spec_(target.spec), ctx_(ctx), result_(result), sw_(target.switch_access()) {}

  void run() {
    open_switch();
    open_sessions();
    facts_ = query_all_facts(ssh_, spec_.hosts);
    run_start_ns_ = realtime_ns();
    setup_first_mapping();
    start_agents();
    start_power_monitor();
    run_schedule();
    stop_and_collect();
    std::string write_error = write_results();
    leave_guests();
    if (!write_error.empty()) throw ResultsNotWritten(write_error);
  }

 private:
  void open_switch() {
    driver_ = ocs::make_driver(sw_.url, sw_.options);
    info_ = driver_->info();
    ctx_.log(fmt::format("switch {} {} {} ({}x{})", sw_.url.to_string(), info_.vendor, info_.model, info_.ingress_ports,
                         info_.egress_ports));
  }

  void open_sessions() {
    pool_ = std::make_unique<SessionPool>([this](const std::string&, const agent::SeqSample& s) {
      std::lock_guard<std::mutex> lock(samples_mutex_);
      samples_.push_back(s.sample);
    });
    samples_.reserve(1 << 16);
    for (auto& t : host_targets(target_, result_.run_id)) {
      ssh_.push_back(t.ssh);
      pool_->add(std::move(t));
    }
  }

  // The first mapping, then host-based forwarding for it on every host before the agents start;
  // forwarding is cleared at the end, and by its destructor when the run is cut short.
  void setup_first_mapping() {
    setup_ = apply(spec_.mappings[0], "setup", 0);
    if (!setup_.ok) throw Error("cannot apply the first mapping '" + spec_.mappings[0].name + "': " + setup_.error);
    ctx_.log(fmt::format("mapping '{}' applied ({} circuit(s) made, {} removed)", setup_.mapping, setup_.added,
                         setup_.removed));
    fwd_ = forwarding_start(spec_, ssh_, result_.folder, ctx_.logger());
  }

  void start_agents() {
    std::string failed = per_host_errors(spec_.hosts, pool_->connect_all());
    if (!failed.empty()) {
      pool_->stop_all();
      throw Error("cannot reach the agents of every host:" + failed);
    }
    clock_before_ns_ = realtime_ns();
    failed = per_host_errors(spec_.hosts, pool_->start_all());
    if (!failed.empty()) {
      pool_->stop_all();
      throw Error("cannot start the probes on every host:" + failed);
    }
  }

  // The switch's own power monitors, on a session of their own; stamped on this machine's
  // clock, so kept apart from the host samples, which are corrected.
  void start_power_monitor() {
    if (spec_.power_monitor_ms <= 0) return;
    std::vector<WatchedPort> watched;
    for (const auto& h : spec_.hosts) {
      for (const auto& n : h.nics) watched.push_back({n.rx_port, h.name, n.name});
    }
    PowerMonitorOptions pmo;
    pmo.interval = std::chrono::milliseconds(spec_.power_monitor_ms);
    pmo.threshold_dbm = spec_.power_threshold_dbm;
    monitor_ = std::make_unique<OcsPowerMonitor>(
        sw_.url, sw_.options, watched, [this](const Sample& s) { monitor_samples_.push_back(s); }, pmo);
    monitor_->start();
  }

  // Warm-up (after the settle time when the first mapping made circuits: links come up), then
  // each reconfiguration and its dwell; Ctrl-C ends it early.
  void run_schedule() {
    auto schedule = spec_.schedule();
    const int n = static_cast<int>(schedule.size());
    double settle = setup_.added > 0 ? spec_.settle_s : 0.0;
    int64_t warm_until = monotonic_ns() + static_cast<int64_t>((settle + spec_.warmup_s) * 1e9);
    bool go = wait_until(warm_until, ctx_, [&] {
      check_hosts();
      status_line(0, n, "warm-up", warm_until - monotonic_ns());
    });
    for (int i = 1; go && i <= n; ++i) {
      const Mapping& m = spec_.mappings[schedule[static_cast<size_t>(i - 1)]];
      if (!reconfigure(m, i)) break;
      int64_t until = monotonic_ns() + static_cast<int64_t>(spec_.dwell_s * 1e9);
      go = wait_until(until, ctx_, [&] {
        check_hosts();
        status_line(i, n, "-> " + m.name, until - monotonic_ns());
      });
    }
    if (progress()) *progress() << "\r\033[K" << std::flush;
    result_.interrupted = ctx_.interrupted();
    if (result_.interrupted) ctx_.log("interrupted: stopping the probes and keeping what was captured");
  }

  // Reconfiguration i; false when forwarding could not follow it (the run stops).
  bool reconfigure(const Mapping& m, int i) {
    auto rec = apply(m, "command", i);
    if (!rec.ok) {
      problem(fmt::format("reconfiguration {} to '{}' failed: {} (marked; the run goes on)", i, m.name, rec.error));
    }
    result_.reconfigurations.push_back(rec);
    if (!fwd_ || !rec.ok) return true;
    try {
      forwarding_reconfigured(*fwd_, m, i, result_.folder);
    } catch (const std::exception& e) {
      result_.problems.push_back(std::string(e.what()) + " (the run stops)");
      ctx_.log(e.what());
      return false;
    }
    return true;
  }

  // One switch command and its two control samples (issue, ack).
  ReconfigRecord apply(const Mapping& m, const char* signal_issue, int iteration) {
    ReconfigRecord rec;
    rec.iteration = iteration;
    rec.mapping = m.name;
    rec.issued_ns = realtime_ns();
    try {
      ocs::ApplyReport report;
      try {
        report = driver_->apply(m.circuits, ocs::ApplyMode::kReplace);
      } catch (const ocs::ConnectionError& e) {
        // A session the switch dropped since the last command: apply reads the circuits before
        // it changes anything, so one retry on a fresh connection is safe.
        ctx_.log(fmt::format("switch connection lost ({}); reconnecting", e.what()));
        rec.issued_ns = realtime_ns();
        report = driver_->apply(m.circuits, ocs::ApplyMode::kReplace);
      }
      rec.acked_ns = report.finished.realtime_ns;
      for (const auto& c : report.calls) {
        if (c.op != "list" && c.op != "info") {
          rec.issued_ns = c.issued.realtime_ns;
          break;
        }
      }
      rec.removed = report.diff.remove.size();
      rec.added = report.diff.add.size();
      rec.ok = true;
    } catch (const std::exception& e) {
      rec.acked_ns = realtime_ns();
      rec.error = e.what();
    }
    const bool command = std::string(signal_issue) == "command";
    control_.push_back(Sample{rec.issued_ns, 0, "switch", "ocs", m.name, signal_issue, 1, ""});
    control_.push_back(
        Sample{rec.acked_ns, 0, "switch", "ocs", m.name, command ? "ack" : "setup_ack", rec.ok ? 1.0 : 0.0, "bool"});
    return rec;
  }

  std::ostream* progress() const { return ctx_.options().progress; }

  void problem(const std::string& msg) {
    result_.problems.push_back(msg);
    if (progress()) *progress() << "\n";
    ctx_.log(msg);
  }

  void status_line(int i, int n, const std::string& what, int64_t left_ns) {
    if (!progress()) return;
    std::string hosts;
    auto health = pool_->health();
    for (size_t k = 0; k < health.size(); ++k) {
      const auto& h = health[k];
      bool ok = h.state == HostState::kCapturing;
      hosts += fmt::format(" {}:{}{}", spec_.hosts[k].name, ok ? "" : std::string(to_string(h.state)) + ",", h.samples);
    }
    *progress() << fmt::format("\r\033[K[{:>3}/{}] {} {:.1f}s |{}", i, n, what, std::max<int64_t>(left_ns, 0) / 1e9,
                               hosts)
                << std::flush;
  }

  void check_hosts() {
    auto health = pool_->health();
    for (size_t k = 0; k < health.size(); ++k) {
      const std::string& name = spec_.hosts[k].name;
      if (health[k].state == HostState::kLost && !reported_lost_[name]) {
        reported_lost_[name] = true;
        problem(fmt::format("host {} lost: {} (the run goes on without it)", name, health[k].error));
      }
    }
  }

  // Stop the monitor and the agents (recovering what a lost session spooled), clear forwarding.
  void stop_and_collect() {
    clock_after_ns_ = realtime_ns();
    if (monitor_) {
      monitor_->stop();
      auto st = monitor_->stats();
      if (st.failed_polls > 0) {
        result_.problems.push_back(fmt::format("switch power monitor: {} of {} polls failed (last: {})", st.failed_polls,
                                               st.polls + st.failed_polls, st.last_error));
      }
    }
    result_.hosts = pool_->stop_all();
    if (fwd_) {
      for (const auto& e : fwd_->clear())
        if (!e.empty()) result_.problems.push_back("forwarding clear failed: " + e);
    }
    check_hosts();
    for (const auto& r : result_.hosts) {
      if (r.lost && !reported_lost_[r.name]) result_.problems.push_back("host " + r.name + " lost");
    }
    run_end_ns_ = realtime_ns();
    driver_->close();
  }

  // Every sample on the runner's clock, in time order: the hosts' (corrected), the switch
  // commands, forwarding, the power monitor, a virtual lab's ground truth.
  std::vector<Sample> merged_samples() {
    std::vector<Sample> all;
    {
      std::lock_guard<std::mutex> lock(samples_mutex_);
      all = std::move(samples_);
    }
    correct_clocks(all, result_.hosts, clock_before_ns_, clock_after_ns_);
    all.insert(all.end(), control_.begin(), control_.end());
    if (fwd_) {
      auto rows = fwd_->samples();
      all.insert(all.end(), rows.begin(), rows.end());
    }
    all.insert(all.end(), monitor_samples_.begin(), monitor_samples_.end());
    if (target_.is_vlab()) {
      try {
        auto gt = read_ground_truth(target_.lab.ground_truth(), run_start_ns_ - 1'000'000'000, run_end_ns_, spec_.hosts);
        all.insert(all.end(), gt.begin(), gt.end());
      } catch (const std::exception& e) {
        result_.problems.push_back(e.what());
        ctx_.log(e.what());
      }
    }
    std::stable_sort(all.begin(), all.end(), [](const Sample& a, const Sample& b) { return a.t_ns < b.t_ns; });
    return all;
  }

  // timeline.csv, then meta.json. timeline.csv is the only copy of the merged, clock-corrected
  // samples: a write that fails (full disk) fails the run, once the guests are left as they
  // were found. Returns that failure ("" when both were written).
  std::string write_results() {
    auto all = merged_samples();
    std::vector<int64_t> issued;
    for (const auto& r : result_.reconfigurations) issued.push_back(r.issued_ns);
    std::sort(issued.begin(), issued.end());
    std::string write_error;
    try {
      write_timeline(result_.folder + "/timeline.csv", all, result_.run_id,
                     [&](int64_t t) { return iteration_of(t, issued); });
    } catch (const Error& e) {
      write_error = e.what();
      result_.problems.push_back(write_error);
      ctx_.log(write_error);
    }
    result_.samples = all.size();
    try {
      write_text(result_.folder + "/meta.json", meta().dump(2) + "\n");
    } catch (const Error& e) {
      if (write_error.empty()) write_error = e.what();
    }
    return write_error;
  }

  json meta() const {
    json meta;
    meta["run"] = result_.run_id;
    meta["ocslab_version"] = ctx_.options().version;
    meta["agent_protocol"] = agent::kProtocolVersion;
    meta["started"] = iso_time(run_start_ns_);
    meta["finished"] = iso_time(run_end_ns_);
    meta["interrupted"] = result_.interrupted;
    meta["spec"] = {{"file", fs::absolute(spec_.origin).string()}, {"name", spec_.name},
                    {"text", read_file_or_empty(spec_.origin)}, {"reconfigurations", spec_.reconfigurations},
                    {"dwell_s", spec_.dwell_s}, {"warmup_s", spec_.warmup_s}, {"seed", spec_.seed}};
    meta["switch"] = {{"url", sw_.url.to_string()}, {"vendor", info_.vendor},   {"model", info_.model},
                      {"serial", info_.serial},     {"version", info_.version}, {"allow", spec_.allow.to_string()}};
    if (target_.is_vlab()) {
      meta["lab"] = {{"vlab", spec_.vlab}, {"name", spec_.vlab_name}, {"dir", target_.lab.dir},
                     {"kernel", target_.lab.kernel}, {"started_by_run", target_.started_lab}};
    }
    meta["hosts"] = json::array();
    for (size_t i = 0; i < spec_.hosts.size(); ++i) {
      const HostReport* r = nullptr;
      for (const auto& h : result_.hosts) {
        if (h.name == spec_.hosts[i].name) r = &h;
      }
      meta["hosts"].push_back(host_meta(spec_.hosts[i], facts_[i], r));
    }
    meta["reconfigurations"] = reconfigurations_meta(result_.reconfigurations);
    meta["problems"] = result_.problems;
    meta["timeline_rows"] = result_.samples;
    return meta;
  }

  // A virtual lab's guests: this run's agents end (the lab itself is the pipeline's).
  void leave_guests() {
    if (!target_.is_vlab()) return;
    for (size_t i = 0; i < result_.hosts.size(); ++i) {
      if (result_.hosts[i].hello.pid <= 0) continue;
      try {
        ocs::SshSession s(ssh_[i]);
        s.exec(fmt::format("kill {} 2>/dev/null; true", result_.hosts[i].hello.pid), std::chrono::seconds(10));
      } catch (const std::exception& e) {
        spdlog::warn("could not stop the agent on {}: {}", result_.hosts[i].name, e.what());
      }
    }
  }

  Target& target_;
  const ExperimentSpec& spec_;
  const RunContext& ctx_;
  RunResult& result_;
  const SwitchAccess sw_;
  // Destroyed in reverse order: the monitor joins first, forwarding clears before the sessions go.
  std::unique_ptr<ocs::OcsDriver> driver_;
  ocs::SwitchInfo info_;
  std::mutex samples_mutex_;
  std::vector<Sample> samples_;
  std::unique_ptr<SessionPool> pool_;
  std::vector<ocs::SshOptions> ssh_;
  std::vector<HostFacts> facts_;
  int64_t run_start_ns_ = 0, run_end_ns_ = 0, clock_before_ns_ = 0, clock_after_ns_ = 0;
  ReconfigRecord setup_;
  std::vector<Sample> control_;
  std::unique_ptr<LabForwarding> fwd_;
  std::map<std::string, bool> reported_lost_;
  std::vector<Sample> monitor_samples_;      // written by the monitor's thread until stop() joins it
  std::unique_ptr<OcsPowerMonitor> monitor_;  // declared after: its destructor joins first
};

class Reconfiguration final : public ExperimentType {
 public:
  void run(Target& target, const RunContext& ctx, RunResult& result) override {
    ReconfigurationRun(target, ctx, result).run();
  }
};

}  // namespace

std::unique_ptr<ExperimentType> make_reconfiguration_experiment() { return std::make_unique<Reconfiguration>(); }

}  // namespace ocslab::runner
