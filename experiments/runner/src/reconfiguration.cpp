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
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <ostream>
#include <sstream>
#include <thread>

#include "ocslab/common/in_parallel.h"
#include "ocslab/common/bounded_line.h"
#include "ocslab/common/clock.h"
#include "ocslab/common/csv_reader.h"
#include "ocslab/common/file.h"
#include "ocslab/common/secret.h"
#include "ocslab/common/shell.h"
#include "ocslab/ocsctl/driver.h"
#include "ocslab/ocsctl/ssh_session.h"
#include "ocslab/runner/capture_store.h"
#include "ocslab/runner/experiment_type.h"
#include "ocslab/runner/fault_injection.h"
#include "ocslab/runner/forwarding_follow.h"
#include "ocslab/runner/host_capture.h"
#include "ocslab/runner/host_prep.h"
#include "ocslab/runner/lab_forwarding.h"
#include "ocslab/runner/merge.h"
#include "ocslab/runner/ocs_power_monitor.h"
#include "ocslab/runner/remote_kill.h"
#include "ocslab/runner/run_context.h"
#include "ocslab/runner/run_types.h"
#include "ocslab/runner/target.h"
#include "ocslab/vlab/lab_timing.h"

namespace ocslab::runner {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

json clock_json(const agent::ClockEstimate& c) {
  if (c.exchanges == 0) return nullptr;
  return {{"offset_ns", c.offset_ns}, {"uncertainty_ns", c.uncertainty_ns}, {"rtt_ns", c.rtt_ns}, {"exchanges", c.exchanges}};
}

// Sleeps in small steps until `until` (monotonic ns) or an interrupt; calls tick every ~250 ms.
bool wait_until(int64_t until, const RunContext& ctx, const std::function<void()>& tick,
                const std::function<void()>& each = nullptr) {
  int64_t next_tick = 0;
  while (true) {
    if (ctx.interrupted()) return false;
    int64_t now = monotonic_ns();
    if (now >= until) return true;
    if (now >= next_tick) {
      if (tick) tick();
      next_tick = now + 250'000'000;
    }
    if (each) each();  // every 20 ms: what must not wait for the next tick (a dark circuit's reroute)
    std::this_thread::sleep_for(std::chrono::nanoseconds(std::min<int64_t>(until - now, 20'000'000)));
  }
}

struct HostFacts {
  std::string kernel;
  json nics = json::array();
  std::string error;
};

// kernel and NIC driver / firmware strings, over a short SSH session of its own, its handshake
// through the run's gate (lab.connect_concurrency).
HostFacts query_facts(const ocs::SshOptions& ssh, const HostEntry& h, HandshakeGate& gate) {
  HostFacts f;
  try {
    HandshakeGate::Ticket ticket = gate.enter();
    ocs::SshSession s(ssh);
    ticket.release();
    std::string cmd = "uname -r";
    for (const auto& n : h.nics) cmd += "; echo " + shell_quote("@@" + n.name) + "; ethtool -i " + shell_quote(n.name) + " 2>&1";
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
std::vector<HostFacts> query_all_facts(const std::vector<ocs::SshOptions>& ssh, const std::vector<HostEntry>& hosts,
                                       HandshakeGate& gate) {
  std::vector<HostFacts> facts(hosts.size());
  in_parallel(hosts.size(), [&](size_t i) { facts[i] = query_facts(ssh[i], hosts[i], gate); });
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
        // A bond's carrier is up while any member's is: the carrier probe also reads the
        // primary's own link (HostEntry::link_interface), which phase.detect_nic watches.
        if (p.name == "carrier") {
          for (const auto& n : h.nics) {
            if (h.link_interface(n.name) != n.name) r.interfaces.push_back(h.link_interface(n.name));
          }
        }
      }
      if (p.name == "heartbeat" && p.interfaces.empty()) r.interfaces.clear();
      r.params = json::parse(p.params_json);
      if (p.name == "gid") {
        // The GID probe watches one interface: one request per NIC.
        for (const auto& itf : std::vector<std::string>(r.interfaces)) {
          r.interfaces = {itf};
          requests[h.name].push_back(r);
        }
        continue;
      }
      requests[h.name].push_back(std::move(r));
    }
  }
  return requests;
}

// One RDMA probe pair per spec pair and queue-pair setting: the server side listens for the QP
// exchange, the client connects to it over the management network. With a `qp:` matrix each
// setting's pair is labelled PEER:tTrR (one TCP port each, from rdma.port on).
void add_rdma_requests(const ExperimentSpec& spec, std::map<std::string, std::vector<agent::ProbeRequest>>& requests) {
  const auto settings = spec.rdma.settings();
  const bool matrix = !spec.rdma.qp_matrix.empty();
  int port = spec.rdma.port;
  for (const Link& l : spec.rdma.pairs) {
    const HostEntry& client = spec.hosts[l.a_host];
    const HostEntry& server = spec.hosts[l.b_host];
    for (const auto& qp : settings) {
      // The server listens on its management address only: where the client connects.
      std::string control = fmt::format("{}:{}", server.mgmt, port++);
      std::string suffix = matrix ? fmt::format(":t{}r{}", qp.timeout, qp.retry_cnt) : std::string();
      auto request = [&](const std::string& nic, const char* role, const std::string& peer) {
        agent::ProbeRequest r;
        r.name = "rdma";
        r.interfaces = {nic};
        r.interval_ms = spec.rdma.interval_ms;
        r.params = {{"role", role},
                    {"control", control},
                    {"label", peer + suffix},
                    {"timeout", qp.timeout},
                    {"retry_cnt", qp.retry_cnt}};
        return r;
      };
      requests[server.name].push_back(request(l.b_nic, "server", client.name));
      requests[client.name].push_back(request(l.a_nic, "client", server.name));
    }
  }
}

}  // namespace

// A virtual lab's guests get a daemon of this run's own (a reused lab may still run an old one).
std::vector<HostTarget> host_targets(const Target& target, const std::string& run_id) {
  const ExperimentSpec& spec = target.spec;
  auto requests = probe_requests(spec);
  add_rdma_requests(spec, requests);
  // The RDMA probes' control connections are authenticated with a secret of this run's, handed
  // to both sides over the SSH-authenticated agent sessions (never written to the results).
  const std::string rdma_secret = random_token();
  for (auto& [host, list] : requests)
    for (auto& r : list)
      if (r.name == "rdma") r.params["secret"] = rdma_secret;
  std::vector<HostTarget> out;
  for (const auto& h : spec.hosts) {
    HostTarget t;
    t.name = h.name;
    t.ssh = ssh_options(h);
    t.agent_command = h.agent + " serve --stdio";
    if (target.is_vlab()) {
      t.agent_command += " --socket /run/ocslab-agent/" + run_id + ".sock";
    } else if (!h.agent_socket.empty()) {
      t.agent_command += " --socket " + shell_quote(h.agent_socket);
    }
    t.probes = requests[h.name];
    t.run = spool_run_id(run_id);
    if (t.probes.empty()) throw Error("host " + h.name + " has no probe to run (probes: in the spec)");
    out.push_back(std::move(t));
  }
  return out;
}

namespace {

// "\n  host: error" for every host with one.
std::string per_host_errors(const std::vector<HostEntry>& hosts, const std::vector<std::string>& errors) {
  std::string failed;
  for (size_t i = 0; i < errors.size(); ++i) {
    if (!errors[i].empty()) failed += "\n  " + hosts[i].name + ": " + errors[i];
  }
  return failed;
}

// Where a host's connect went (ConnectPhases), for meta.json.
json connect_phases_json(const ConnectPhases& p) {
  return {{"queue", p.queue.count()}, {"ssh", p.ssh.count()}, {"hello", p.hello.count()}, {"clock", p.clock.count()}};
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
  // The agent's capture id and spool file: `ocslab recover` releases the spool by that id.
  j["capture"] = r->started.capture;
  j["spool"] = r->started.spool;
  j["samples"] = r->samples;
  j["recovered_from_spool"] = r->recovered;
  j["sessions_resumed"] = r->resumed;
  j["last_seq"] = r->last_seq;
  j["lost"] = r->lost;
  j["errors"] = r->errors;
  j["connect_ms"] = r->connect_time.count();
  j["connect_phases_ms"] = connect_phases_json(r->connect_phases);
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

// The reconfigurations of a run as its control stream recorded them (`ocslab recover`): each
// `command` row and the `ack` after it; the setup apply is not one.
std::vector<ReconfigRecord> control_records(const std::string& path) {
  std::vector<ReconfigRecord> out;
  std::ifstream in(path);
  std::string line;
  if (!std::getline(in, line)) return out;
  auto header = split_csv_line(line);
  auto col = [&](const char* name) {
    return static_cast<size_t>(std::find(header.begin(), header.end(), name) - header.begin());
  };
  const size_t ct = col("t_ns"), csub = col("subject"), csig = col("signal"), cv = col("value");
  if (std::max({ct, csub, csig, cv}) >= header.size()) throw Error(path + ": not a capture file (header)");
  while (std::getline(in, line)) {
    auto f = split_csv_line(line);
    if (f.size() < header.size()) continue;
    if (f[csig] == "command") {
      ReconfigRecord r;
      r.iteration = static_cast<int>(out.size()) + 1;
      r.mapping = f[csub];
      r.issued_ns = std::stoll(f[ct]);
      out.push_back(r);
    } else if (f[csig] == "ack" && !out.empty() && out.back().acked_ns == 0) {
      out.back().acked_ns = std::stoll(f[ct]);
      out.back().ok = std::stod(f[cv]) == 1;
      if (!out.back().ok) out.back().error = "refused or failed (see the run's log)";
    }
  }
  return out;
}

// The NIC link model of a virtual lab's emulator, set per firmware-sweep point through the lab's
// timing control (`ocslab vlab timing`) and put back as the run found it: its preset name (when
// it has one) and every field, so the lab's timing reads as before. A lab whose NICs have
// different models ("mixed") cannot be put back by one model: that is an error of restore().
class LabNicModel {
 public:
  explicit LabNicModel(std::string lab_dir) : dir_(std::move(lab_dir)), original_(vlab::lab_timing(dir_)) {}
  ~LabNicModel() {
    try {
      restore();
    } catch (const std::exception& e) {
      spdlog::warn("could not put the virtual lab's NIC model back: {}", e.what());
    }
  }
  LabNicModel(const LabNicModel&) = delete;
  LabNicModel& operator=(const LabNicModel&) = delete;

  vlab::TimingState set(const NicModelChoice& m) {
    vlab::LabTiming t;
    t.nic_link = m.yaml;
    changed_ = true;
    return vlab::set_lab_timing(dir_, t, kTimingWait);
  }

  // "" when nothing was changed (or it is back already), else the line to log.
  std::string restore() {
    if (!changed_) return "";
    changed_ = false;
    const vlab::TimingState& o = original_;
    if (o.nic_model == "mixed") {
      throw Error("the lab's NICs had different models; all have the sweep's last one now (`ocslab vlab down` and "
                  "`up` give them the lab file's again)");
    }
    std::string yaml = "{";
    const auto presets = emu::NicLinkParams::preset_names();
    if (std::find(presets.begin(), presets.end(), o.nic_model) != presets.end()) {
      yaml += "preset: " + o.nic_model + ", ";
    }
    yaml += fmt::format("los_ms: {}, firmware_up_ms: {}, rapid_window_ms: {}, rapid_extra_ms: {}", o.los_ms,
                        o.firmware_up.to_yaml(), o.rapid_window_ms, o.rapid_extra.to_yaml());
    if (o.max_up_ms > 0) yaml += fmt::format(", max_up_ms: {}", o.max_up_ms);
    vlab::LabTiming t;
    t.nic_link = yaml + "}";
    const vlab::TimingState now = vlab::set_lab_timing(dir_, t, kTimingWait);
    return "virtual lab NIC model put back: " + now.summary();
  }

 private:
  // The supervisor answers in milliseconds; `ocslab vlab timing`'s own limit.
  static constexpr std::chrono::seconds kTimingWait{10};
  std::string dir_;
  vlab::TimingState original_;
  bool changed_ = false;
};

// One run of the type: the steps of run(), in order, over the state they share.
class ReconfigurationRun {
 public:
  ReconfigurationRun(Target& target, const RunContext& ctx, RunResult& result)
      : target_(target), spec_(target.spec), ctx_(ctx), result_(result), sw_(target.switch_access()) {}

  void run() {
    open_switch();
    open_sessions();
    facts_ = query_all_facts(ssh_, spec_.hosts, *gate_);
    run_start_ns_ = realtime_ns();
    setup_first_mapping();
    prepare_hosts();
    start_agents();
    write_start_record();
    try {
      start_power_monitor();
      start_faults();
      run_schedule();
    } catch (...) {
      abandon_capture();
      throw;
    }
    stop_and_collect();
    release_faults();
    restore_nic_model();
    std::string write_error = write_results();
    if (write_error.empty()) {
      std::vector<HostTarget> targets;
      for (auto& s : pool_->sessions()) targets.push_back(s->target());
      release_spools(targets);
    }
    leave_guests();
    if (!write_error.empty()) throw ResultsNotWritten(write_error);
  }

  // `ocslab recover`: the run whose runner died after it wrote run.json (start, the record of
  // write_start_record). Each host's agent is reached again: its probes are stopped and every
  // sample after the last one in capture/ is fetched from its spool; then the folder is
  // finished as run() would have (clock_after measured now). The switch is not touched.
  void recover(const json& start, bool restore_switch) {
    run_start_ns_ = start.at("run_start_ns").get<int64_t>();
    clock_before_ns_ = start.at("clock_before_ns").get<int64_t>();
    const json& sw = start.at("switch");
    info_.vendor = sw.value("vendor", "");
    info_.model = sw.value("model", "");
    info_.serial = sw.value("serial", "");
    info_.version = sw.value("version", "");
    const json& hosts = start.at("hosts");
    if (hosts.size() != spec_.hosts.size()) throw Error("run.json: its hosts are not the spec's");
    for (const auto& h : hosts) facts_.push_back({h.value("kernel", ""), h.value("nics", json::array()), ""});
    store_ = CaptureStore::resume(result_.folder + "/capture");
    std::map<std::string, uint64_t> on_disk;
    for (const auto& st : store_->streams()) on_disk[st.name] = st.last_seq;
    auto targets = host_targets(target_, result_.run_id);
    for (size_t i = 0; i < targets.size(); ++i) {
      const json& h = hosts[i];
      agent::HelloInfo hello;
      hello.host = h.at("agent").value("host", "");
      hello.pid = h.at("agent").value("pid", 0LL);
      hello.version = h.at("agent").value("version", 0);
      hello.clock_sync = h.value("clock_sync", "");
      agent::ClockEstimate before;
      if (h.contains("clock_before") && h["clock_before"].is_object()) {
        before.offset_ns = h["clock_before"].value("offset_ns", int64_t{0});
        before.uncertainty_ns = h["clock_before"].value("uncertainty_ns", int64_t{0});
        before.rtt_ns = h["clock_before"].value("rtt_ns", int64_t{0});
        before.exchanges = h["clock_before"].value("exchanges", 0);
      }
      ssh_.push_back(targets[i].ssh);
      const std::string stream = host_stream(targets[i].name);
      const uint64_t from = on_disk[stream];
      HostSession session(
          targets[i],
          [this](const std::string& host, const agent::SeqSample& x) { store_->append(host_stream(host), x.sample, x.seq); },
          gate_);
      HostReport r = session.reattach(hello, from);
      r.clock_before = before;
      r.started.capture = h.value("capture", "");  // run.json has them from the start
      r.started.spool = h.value("spool", "");
      ctx_.log(fmt::format("{}: {} sample(s) on disk, {} fetched from the agent's spool{}", r.name, from, r.samples,
                           r.lost ? " (agent gone: " + (r.errors.empty() ? std::string() : r.errors.back()) + ")" : ""));
      result_.hosts.push_back(std::move(r));
    }
    clock_after_ns_ = run_end_ns_ = recovered_ns_ = realtime_ns();
    result_.reconfigurations = control_records(result_.folder + "/capture/" + kControlStream + ".csv");
    int64_t last_control = 0;
    for (const auto& r : result_.reconfigurations) last_control = std::max({last_control, r.issued_ns, r.acked_ns});
    result_.problems.push_back(fmt::format(
        "the runner ended before the run did; `ocslab recover` finished the folder at {}: switch commands after {} are "
        "not recorded",
        iso_time(recovered_ns_), last_control ? iso_time(last_control) : std::string("the start")));
    for (const auto& r : result_.hosts) {
      if (r.lost) result_.problems.push_back("host " + r.name + " lost");
    }
    clear_left_forwarding();
    recovered_faults_ = FaultInjector::release_journal(result_.folder + "/" + kFaultJournal, result_.problems,
                                                       [this](const std::string& m) { ctx_.log(m); });
    if (restore_switch) restore_final_mapping();
    std::string write_error = write_results();
    if (write_error.empty()) release_spools(targets);
    leave_guests();
    if (!write_error.empty()) throw ResultsNotWritten(write_error);
  }

 private:
  // Once the results are written (capture/ closed and synced, timeline.csv and meta.json in
  // place), each host's spool whose capture is whole on disk goes (spool.delete), all hosts at
  // once. A host that was lost, or whose capture stream failed or stops short of the agent's
  // last seq, keeps its spool (the agent's retention deletes it later). Failures are logged:
  // the run's data is safe either way.
  void release_spools(const std::vector<HostTarget>& targets) {
    release_whole_spools(*store_, result_.hosts, targets, ctx_.logger(), *gate_);
  }

  // `ocslab recover` of a run with a `forwarding:` section: the runner applied forwarding on
  // every host before run.json was written, and the clear at its end (or from LabForwarding's
  // destructor) never ran. Each host gets the same `forwarding clear` (ocslab's routes,
  // neighbours, macvlans, clsacts and filters, by its journal; nothing else). A host whose clear
  // fails is a problem naming it, and keeps its state for `ocslab forwarding clear SPEC`.
  void clear_left_forwarding() {
    if (!spec_.forwarding.enabled) return;
    LabForwarding fwd(spec_, forwarding_access(spec_, ssh_), ctx_.logger());
    const auto errors = fwd.clear();
    for (size_t i = 0; i < errors.size(); ++i) {
      if (errors[i].empty()) {
        recovered_forwarding_.push_back(spec_.hosts[i].name);
      } else {
        result_.problems.push_back(fmt::format(
            "forwarding clear on {} failed: {} (its forwarding is still applied: ocslab forwarding clear SPEC)",
            spec_.hosts[i].name, errors[i]));
      }
    }
    ctx_.log(fmt::format("forwarding: the run's routes, neighbours and relay filters cleared on {} of {} host(s)",
                         recovered_forwarding_.size(), errors.size()));
  }

  // RESULTS/run.json: what `ocslab recover` needs if this process dies from here on (meta.json
  // as far as it is known now, the agents' pids and clock offsets, the times the clock
  // correction starts from). Replaced atomically; a failure to write it is a problem, not fatal.
  void write_start_record() {
    for (auto& s : pool_->sessions()) result_.hosts.push_back(s->report());
    json j = meta();
    result_.hosts.clear();
    j["run_start_ns"] = run_start_ns_;
    j["clock_before_ns"] = clock_before_ns_;
    try {
      write_text(result_.folder + "/run.json", j.dump(2) + "\n");
    } catch (const Error& e) {
      result_.problems.push_back(std::string(e.what()) + " (`ocslab recover` cannot finish this run if it dies)");
      ctx_.log(e.what());
    }
  }

  void open_switch() {
    driver_ = ocs::make_driver(sw_.url, sw_.options);
    info_ = driver_->info();
    ctx_.log(fmt::format("switch {} {} {} ({}x{})", sw_.url.to_string(), info_.vendor, info_.model, info_.ingress_ports,
                         info_.egress_ports));
  }

  void open_sessions() {
    // Every sample goes to disk as it arrives (RESULTS/capture/); nothing of a run is kept in
    // memory, whatever its length.
    store_ = std::make_unique<CaptureStore>(result_.folder + "/capture");
    pool_ = std::make_unique<SessionPool>(
        [this](const std::string& host, const agent::SeqSample& s) {
          store_->append(host_stream(host), s.sample, s.seq);
          if (follow_ && s.sample.source == "carrier") {  // forwarding.reroute_on_dark: a host's carrier
            Sample x = s.sample;
            x.host = host;
            follow_->observe(x, realtime_ns());
          }
        },
        gate_);
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
    const auto& f = spec_.forwarding;
    if (fwd_ && (f.reroute_on_dark || f.make_before_break || f.verify_change))
      follow_ = std::make_unique<ForwardingFollower>(*fwd_, spec_.mappings[0], result_.folder);
  }

  // probes.rdma.pin_neighbours (on by default in a virtual lab): each pair's NICs get permanent
  // neighbour entries for each other before the queue pairs start, removed when the run ends.
  void prepare_hosts() {
    if (!spec_.rdma.enabled || !rdma_pins_neighbours(spec_)) return;
    std::vector<std::pair<NicRef, NicRef>> pairs;
    for (const Link& l : spec_.rdma.pairs) pairs.push_back({{l.a_host, l.a_nic}, {l.b_host, l.b_nic}});
    prep_ = std::make_unique<HostPrep>(spec_);
    prep_->pin_neighbours(pairs, [this](const std::string& m) { ctx_.log(m); });
  }

  void start_agents() {
    const auto t0 = std::chrono::steady_clock::now();
    std::string failed = per_host_errors(spec_.hosts, pool_->connect_all());
    ctx_.log(connect_summary(*pool_, std::chrono::steady_clock::now() - t0));
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
        sw_.url, sw_.options, watched,
        [this](const Sample& s) {
          store_->append(kPowerStream, s);
          if (follow_) follow_->observe(s, s.t_ns);  // forwarding.reroute_on_dark: which circuits are dark
        },
        pmo);
    monitor_->start();
  }

  // faults: (a virtual lab's) NICs held down and ports darkened, and (any lab's) agents killed,
  // from just before their reconfiguration; each fault and its release is a row of the control
  // stream, and faults.json the journal `ocslab recover` undoes them from.
  void start_faults() {
    if (spec_.faults.empty()) return;
    faults_ = std::make_unique<FaultInjector>(
        spec_, target_.is_vlab() ? target_.lab.dir : std::string(),
        [this](const Sample& s) { store_->append(kControlStream, s); }, [this](const std::string& m) { ctx_.log(m); },
        result_.folder + "/" + kFaultJournal, [this](const FaultSpec& f) { kill_agent(f.host); });
  }

  // agent-killed: SIGKILL to the daemon that said hello for the host (no goodbye, as a crash),
  // over a session of its own, and only when that pid is still an ocslab-agent.
  void kill_agent(size_t host) {
    const auto& name = spec_.hosts.at(host).name;
    long long pid = 0;
    for (auto& s : pool_->sessions()) {
      if (s->target().name == name) pid = s->hello().pid;
    }
    kill_program(ssh_.at(host), pid, "ocslab-agent", name + "'s agent");
  }


  // Once the probes stopped (a release brings the link up, which is not part of the last
  // reconfiguration), and before the capture closes: the lab's holds as the run found them.
  void release_faults() {
    if (!faults_) return;
    for (const auto& p : faults_->release()) problem(p);
  }

  // Warm-up (after the settle time when the first mapping made circuits: links come up), then
  // each reconfiguration and its dwell; Ctrl-C ends it early.
  void run_schedule() {
    if (spec_.type == kOutages) return run_outages();
    if (spec_.sweep.enabled()) return run_sweep();
    auto schedule = spec_.schedule();
    const int n = static_cast<int>(schedule.size());
    bool go = warm_up(n);
    for (int i = 1; go && i <= n; ++i) go = step(i, n, schedule, spec_.dwell_s);
    schedule_ended();
  }

  // Reconfiguration i of n (its faults first), then its dwell; false when the run stops.
  bool step(int i, int n, const std::vector<size_t>& schedule, double dwell_s) {
    const Mapping& m = spec_.mappings[schedule[static_cast<size_t>(i - 1)]];
    if (faults_) {
      for (const auto& p : faults_->before_reconfiguration(i)) problem(p);
    }
    if (!reconfigure(m, i)) return false;
    return hold(static_cast<int64_t>(dwell_s * 1e9), i, n, "-> " + m.name);
  }

  // The firmware study (`sweep:`): after the warm-up, each point in turn: its NIC model set on
  // the lab's emulator (when it names one), the settle and warm-up waits, then
  // schedule.reconfigurations reconfigurations at the point's dwell. The lab's model is put
  // back when the run ends (restore_nic_model).
  void run_sweep() {
    const auto points = spec_.sweep_points();
    const auto schedule = spec_.schedule();
    const int n = static_cast<int>(schedule.size());
    bool go = warm_up(n);
    int i = 0;
    for (size_t k = 0; go && k < points.size(); ++k) {
      go = start_point(points[k], k, i, n);
      for (int j = 0; go && j < spec_.reconfigurations; ++j) go = step(++i, n, schedule, points[k].dwell_s);
    }
    schedule_ended();
  }

  // Sweep point k (0-based) after `done` reconfigurations: its model, then the waits; false when
  // the model could not be set (a problem; the run stops: the points after it would measure the
  // wrong model) or on an interrupt.
  bool start_point(const FirmwareSweep::Point& p, size_t k, int done, int n) {
    json rec = planned_point(p, k);
    bool ok = true;
    if (p.model) {
      try {
        if (!nic_model_) nic_model_ = std::make_unique<LabNicModel>(target_.lab.dir);
        const vlab::TimingState now = nic_model_->set(*p.model);
        rec["applied_ns"] = realtime_ns();
        rec["timing"] = now.summary();
        ctx_.log(fmt::format("sweep point {}: NIC model {} ({}), dwell {} s", k + 1, p.model->name,
                             now.summary(), p.dwell_s));
      } catch (const std::exception& e) {
        rec["error"] = e.what();
        problem(fmt::format("sweep point {} ({}, dwell {} s): the NIC model was not set: {} (the run stops)", k + 1,
                            p.model->name, p.dwell_s, e.what()));
        ok = false;
      }
    }
    sweep_applied_.push_back(rec);
    ctx_.event("sweep_point", {{"point", k + 1}, {"points", spec_.sweep_points().size()},
                               {"nic_model", rec["nic_model"]}, {"dwell_s", p.dwell_s}, {"ok", ok},
                               {"first_iteration", done + 1}});
    if (!ok) return false;
    return hold(static_cast<int64_t>((spec_.settle_s + spec_.warmup_s) * 1e9), done, n,
                fmt::format("point {}: {}, dwell {} s", k + 1, rec["nic_model"].get<std::string>(), p.dwell_s));
  }

  // Point k as the spec plans it: its model, dwell and iterations (meta.json's firmware_sweep).
  json planned_point(const FirmwareSweep::Point& p, size_t k) const {
    const int per = spec_.reconfigurations;
    json rec = {{"point", k + 1},
                {"nic_model", p.model ? p.model->name : std::string("lab")},
                {"dwell_s", p.dwell_s},
                {"first_iteration", static_cast<int>(k) * per + 1},
                {"last_iteration", static_cast<int>(k + 1) * per}};
    if (p.model) {
      rec["model"] = p.model->yaml;
      rec["model_up_mean_ms"] = p.model->up_mean_ms;
    }
    return rec;
  }

  // meta.json's firmware_sweep: the axes and every point (as applied, or as planned where the run
  // never got to it or `ocslab recover` finishes the folder).
  json sweep_meta() const {
    json names = json::array();
    for (const auto& m : spec_.sweep.nic_models) names.push_back(m.name);
    json points = json::array();
    const auto plan = spec_.sweep_points();
    for (size_t k = 0; k < plan.size(); ++k) {
      json p = k < sweep_applied_.size() ? sweep_applied_[k] : planned_point(plan[k], k);
      p["reached"] = k < sweep_applied_.size();
      points.push_back(p);
    }
    return {{"nic_model", names}, {"dwell_s", spec_.sweep.dwell_s},
            {"reconfigurations_per_point", spec_.reconfigurations}, {"points", points}};
  }

  // The lab's NIC model as the run found it, once the probes stopped (a sweep changed it).
  void restore_nic_model() {
    if (!nic_model_) return;
    try {
      const std::string line = nic_model_->restore();
      if (!line.empty()) ctx_.log(line);
    } catch (const std::exception& e) {
      problem(std::string("the virtual lab's NIC model was not put back: ") + e.what());
    }
  }

  // The warm-up (after the settle time when the first mapping made circuits: links come up);
  // false on an interrupt.
  bool warm_up(int n) {
    double settle = setup_.added > 0 ? spec_.settle_s : 0.0;
    return hold(static_cast<int64_t>((settle + spec_.warmup_s) * 1e9), 0, n, "warm-up");
  }

  // Waits ns from now, checking the hosts and showing step i of n; false on an interrupt.
  bool hold(int64_t ns, int i, int n, const std::string& what) {
    const int64_t until = monotonic_ns() + ns;
    return wait_until(
        until, ctx_,
        [&] {
          check_hosts();
          status_line(i, n, what, until - monotonic_ns());
        },
        [&] { follow_check(i); });
  }

  void schedule_ended() {
    if (progress()) *progress() << "\r\033[K" << std::flush;
    result_.interrupted = ctx_.interrupted();
    if (result_.interrupted) ctx_.log("interrupted: stopping the probes and keeping what was captured");
  }

  // An outages spec: after the warm-up, each outage of the plan through the lab's emulator (a
  // dark spell on every listed NIC's tx and rx port), then its length and the gap. Each is an
  // iteration of the control stream: `command` when asked for, `ack` when the lab applied it
  // (subject outage-<MS>ms); the spell itself is timed by the emulator and is in its ground truth.
  void run_outages() {
    const auto plan = spec_.outage_plan();
    const auto ports = spec_.outage_ports();
    const int n = static_cast<int>(plan.size());
    bool go = warm_up(n);
    for (int i = 1; go && i <= n; ++i) {
      const double ms = plan[static_cast<size_t>(i - 1)];
      ReconfigRecord rec;
      rec.iteration = i;
      rec.mapping = fmt::format("outage-{}ms", ms);
      rec.issued_ns = realtime_ns();
      try {
        vlab::LabTiming t;
        t.dark_spell_ports.assign(ports.begin(), ports.end());
        t.dark_spell_ms = fmt::format("{}", ms);
        vlab::set_lab_timing(target_.lab.dir, t, std::chrono::seconds(10));
        rec.ok = true;
      } catch (const std::exception& e) {
        rec.error = e.what();
        problem(fmt::format("outage {} ({} ms) not applied: {} (marked; the run goes on)", i, ms, rec.error));
      }
      rec.acked_ns = realtime_ns();
      store_->append(kControlStream, Sample{rec.issued_ns, 0, "switch", "ocs", rec.mapping, "command", 1, ""});
      store_->append(kControlStream, Sample{rec.acked_ns, 0, "switch", "ocs", rec.mapping, "ack", rec.ok ? 1.0 : 0.0, "bool"});
      result_.reconfigurations.push_back(rec);
      ctx_.event("outage", {{"i", i}, {"n", n}, {"ms", ms}, {"ok", rec.ok}, {"error", rec.error},
                            {"issued_ns", rec.issued_ns}, {"acked_ns", rec.acked_ns}});
      // The spell began when the lab applied it (before the ack): its end plus the gap.
      go = hold(static_cast<int64_t>((ms + spec_.outages.gap_ms) * 1e6), i, n, rec.mapping);
    }
    schedule_ended();
  }

  // forwarding.reroute_on_dark: routes around the circuits of the current mapping that are dark
  // now (a failed reroute is a problem of the run, which goes on).
  void follow_check(int i) {
    if (follow_) follow_step([&] { follow_->check(i); });
  }

  // One step of ForwardingFollower: its problems (a failed reroute or bridge, a matrix that could
  // not be taken) are the run's, which goes on with what the hosts hold.
  void follow_step(const std::function<void()>& step) {
    const size_t before = follow_->problems().size();
    try {
      step();
    } catch (const std::exception& e) {
      problem(std::string("forwarding: ") + e.what());
    }
    for (size_t k = before; k < follow_->problems().size(); ++k) problem(follow_->problems()[k]);
  }

  // Reconfiguration i; false when forwarding could not follow it (the run stops).
  bool reconfigure(const Mapping& m, int i) {
    // make-before-break: the routes that can move onto kept circuits move first
    if (follow_) follow_step([&] { follow_->before_switch(m, i); });
    auto rec = apply(m, "command", i);
    if (!rec.ok) {
      problem(fmt::format("reconfiguration {} to '{}' failed: {} (marked; the run goes on)", i, m.name, rec.error));
    }
    result_.reconfigurations.push_back(rec);
    ctx_.event("reconfiguration", {{"i", i},
                                   {"n", spec_.schedule().size()},
                                   {"mapping", m.name},
                                   {"ok", rec.ok},
                                   {"error", rec.error},
                                   {"issued_ns", rec.issued_ns},
                                   {"acked_ns", rec.acked_ns},
                                   {"added", rec.added},
                                   {"removed", rec.removed}});
    if (follow_) follow_step([&] { follow_->after_switch(m, i, rec.ok); });  // verify_change: the matrix
    if (!fwd_ || !rec.ok) return true;
    try {
      forwarding_reconfigured(*fwd_, m, i, result_.folder);
    } catch (const std::exception& e) {
      result_.problems.push_back(std::string(e.what()) + " (the run stops)");
      ctx_.log(e.what());
      return false;
    }
    if (follow_) follow_->reconfigured(m, true);
    return true;
  }

  // One switch command and its two control samples (issue, ack).
  // `ocslab recover --restore-switch`: the mapping an uninterrupted run leaves on the switch.
  void restore_final_mapping() {
    const auto schedule = spec_.schedule();
    const Mapping& m = spec_.mappings[schedule.empty() ? 0 : schedule.back()];
    try {
      open_switch();
    } catch (const std::exception& e) {
      result_.problems.push_back(fmt::format("--restore-switch: cannot reach the switch: {}", e.what()));
      return;
    }
    ReconfigRecord rec = apply(m, "restore", -1);
    if (rec.ok) {
      restored_mapping_ = m.name;
      ctx_.log(fmt::format("switch restored to the schedule's last mapping '{}' ({} circuit(s) made, {} removed)",
                           m.name, rec.added, rec.removed));
    } else {
      result_.problems.push_back(fmt::format("--restore-switch: mapping '{}' not applied: {}", m.name, rec.error));
    }
    driver_->close();
  }

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
    store_->append(kControlStream, Sample{rec.issued_ns, 0, "switch", "ocs", m.name, signal_issue, 1, ""});
    store_->append(kControlStream,
                   Sample{rec.acked_ns, 0, "switch", "ocs", m.name, command ? std::string("ack") : std::string(signal_issue) + "_ack",
                          rec.ok ? 1.0 : 0.0, "bool"});
    return rec;
  }

  std::ostream* progress() const { return ctx_.options().progress; }

  void problem(const std::string& msg) {
    result_.problems.push_back(msg);
    ctx_.event("problem", {{"message", msg}});
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
      const std::string state = to_string(health[k].state);
      if (host_states_[name] != state) {
        host_states_[name] = state;
        ctx_.event("host_state",
                   {{"host", name}, {"state", state}, {"samples", health[k].samples}, {"error", health[k].error}});
      }
      if (health[k].resumed > resumed_seen_[name]) {
        resumed_seen_[name] = health[k].resumed;
        ctx_.log(fmt::format("host {}: {}", name, health[k].resume_note));
        ctx_.event("host_resumed", {{"host", name}, {"note", health[k].resume_note}});
      }
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

  // The probes were started and the run is cut short (an exception in the schedule): every
  // host's probes are stopped, what they sent so far stays in capture/ on disk, and injected
  // faults are released (the lab's holds as the run found them). Errors here
  // are logged, not thrown: the original one is what the caller must see.
  void abandon_capture() {
    try {
      if (monitor_) monitor_->stop();
      result_.hosts = pool_->stop_all();
    } catch (const std::exception& e) {
      ctx_.log(std::string("stopping the probes after a failure: ") + e.what());
    }
    if (faults_) {
      for (const auto& p : faults_->release()) ctx_.log(p);  // release() reports, never throws
    }
    try {
      store_->close();
    } catch (const std::exception& e) {
      ctx_.log(std::string("closing the capture after a failure: ") + e.what());
    }
  }

  // The streams timeline.csv is merged from, on the runner's clock, in merge order: the hosts'
  // (clock-corrected), the switch commands, forwarding, the power monitor, a virtual lab's ground
  // truth. Appends forwarding's rows and the ground truth first, then closes the store.
  std::vector<CaptureInput> close_capture() {
    if (fwd_) {
      for (const auto& row : fwd_->samples()) store_->append(kForwardingStream, row);
      if (follow_)
        for (const auto& row : follow_->samples()) store_->append(kForwardingStream, row);
    }
    if (target_.is_vlab()) {
      try {
        read_ground_truth(target_.lab.ground_truth(), run_start_ns_ - 1'000'000'000, run_end_ns_, spec_.hosts,
                          [this](const Sample& x) { store_->append(kGroundTruthStream, x); });
      } catch (const std::exception& e) {
        result_.problems.push_back(e.what());
        ctx_.log(e.what());
      }
    }
    store_->close();
    return capture_inputs(*store_, result_.hosts, clock_before_ns_, clock_after_ns_, result_.problems);
  }

  // timeline.csv, then meta.json, each replaced atomically. The capture files stay: they are the
  // raw record timeline.csv was merged from. A write that fails (full disk) fails the run, once
  // the guests are left as they were found. Returns that failure ("" when both were written).
  std::string write_results() {
    auto inputs = close_capture();
    std::vector<int64_t> issued;
    for (const auto& r : result_.reconfigurations) {
      // A fault injected for a reconfiguration (a port darkened just before its command) starts
      // that iteration, however long the lab took to apply it: its light loss is this
      // reconfiguration's, not the dwell's of the one before.
      const int64_t injected = faults_ ? faults_->injected_ns(r.iteration) : 0;
      issued.push_back(injected ? std::min(r.issued_ns, injected + kIterationGuardNs) : r.issued_ns);
    }
    std::sort(issued.begin(), issued.end());
    std::string write_error;
    try {
      result_.samples = merge_capture(inputs, result_.folder + "/timeline.csv", result_.run_id,
                                      [&](int64_t t) { return iteration_of(t, issued); }, store_->dir() + "/.merge");
    } catch (const Error& e) {
      write_error = e.what();
      result_.problems.push_back(write_error);
      ctx_.log(write_error);
    }
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
    meta["connect"] = {{"concurrency", gate_->limit()}, {"peak", gate_->peak()}};
    meta["reconfigurations"] = reconfigurations_meta(result_.reconfigurations);
    // Every mapping's links and the one applied at setup: `ocslab analyze` derives from them
    // what each reconfiguration meant to do to each port (move, come up, go dark, stay).
    meta["mappings"] = json::object();
    for (const auto& m : spec_.mappings) {
      json links = json::array();
      for (const auto& l : m.links)
        links.push_back({spec_.hosts[l.a_host].name, l.a_nic, spec_.hosts[l.b_host].name, l.b_nic});
      meta["mappings"][m.name] = links;
    }
    meta["initial_mapping"] = spec_.mappings.empty() ? std::string() : spec_.mappings[0].name;
    // What the runner changed on the hosts for the run (and undid after it).
    meta["host_preparation"] = prep_ ? prep_->record() : json::object();
    meta["host_preparation"]["pin_neighbours"] = spec_.rdma.enabled && rdma_pins_neighbours(spec_);
    // The switch ports in front of every NIC: the fault localisation names them.
    meta["switch_ports"] = json::array();
    for (const auto& h : spec_.hosts)
      for (const auto& n : h.nics) meta["switch_ports"].push_back({h.name, n.name, n.tx_port, n.rx_port});
    // Injected faults (`faults:`), each with when it was held and released.
    meta["faults"] = faults_ ? faults_->record() : recovered_faults_;
    if (follow_) meta["forwarding"] = follow_->record();
    if (spec_.sweep.enabled()) meta["firmware_sweep"] = sweep_meta();
    meta["problems"] = result_.problems;
    meta["timeline_rows"] = result_.samples;
    if (recovered_ns_) {
      meta["recovered"] = {{"by", "ocslab recover"}, {"at", iso_time(recovered_ns_)}};
      if (!restored_mapping_.empty()) meta["recovered"]["switch_restored"] = restored_mapping_;
      if (spec_.forwarding.enabled) meta["recovered"]["forwarding_cleared"] = recovered_forwarding_;
    }
    // The raw record timeline.csv was merged from (docs/experiments.md, "How a run is kept on
    // disk"): per stream its file, rows, the last agent sequence number on disk and any write
    // failure.
    meta["capture"] = json::array();
    if (store_) {
      for (const auto& st : store_->streams()) {
        meta["capture"].push_back({{"stream", st.name},
                                   {"file", fs::relative(st.path, result_.folder).string()},
                                   {"rows", st.rows},
                                   {"last_seq", st.last_seq},
                                   {"dropped", st.dropped},
                                   {"error", st.error}});
      }
    }
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
  std::unique_ptr<CaptureStore> store_;  // before pool_: the sessions' threads append to it
  // Every SSH handshake to the hosts (pool, reattach, spool.delete): lab.connect_concurrency.
  std::shared_ptr<HandshakeGate> gate_ = std::make_shared<HandshakeGate>(spec_.connect_concurrency);
  std::unique_ptr<SessionPool> pool_;
  std::vector<ocs::SshOptions> ssh_;
  std::vector<HostFacts> facts_;
  int64_t run_start_ns_ = 0, run_end_ns_ = 0, clock_before_ns_ = 0, clock_after_ns_ = 0;
  int64_t recovered_ns_ = 0;  // `ocslab recover` finished the folder then
  std::string restored_mapping_;  // --restore-switch: the mapping put back on the switch
  ReconfigRecord setup_;
  std::unique_ptr<LabForwarding> fwd_;
  std::unique_ptr<ForwardingFollower> follow_;  // forwarding that follows the fabric (null: not asked for)
  std::unique_ptr<HostPrep> prep_;  // pinned neighbours, undone when the run object goes
  std::map<std::string, bool> reported_lost_;
  std::map<std::string, int> resumed_seen_;
  std::map<std::string, std::string> host_states_;  // the last state reported per host (host_state events)
  std::unique_ptr<OcsPowerMonitor> monitor_;  // declared after: its destructor joins first
  // After store_: a run cut short releases its holds (appending their rows) before the store goes.
  std::unique_ptr<FaultInjector> faults_;
  json recovered_faults_ = json::array();     // `ocslab recover`: the journal's faults
  std::unique_ptr<LabNicModel> nic_model_;    // a firmware sweep's model changes (null: none yet)
  std::vector<json> sweep_applied_;           // the firmware sweep's points reached, in order
  json recovered_forwarding_ = json::array();  // `ocslab recover`: the hosts whose forwarding it cleared
};

class Reconfiguration final : public ExperimentType {
 public:
  void run(Target& target, const RunContext& ctx, RunResult& result) override {
    ReconfigurationRun(target, ctx, result).run();
  }
};

}  // namespace

std::unique_ptr<ExperimentType> make_reconfiguration_experiment() { return std::make_unique<Reconfiguration>(); }

RunResult recover_run(const std::string& folder, const RunOptions& opt, bool restore_switch) {
  const std::string record = folder + "/run.json";
  if (!fs::exists(record)) {
    throw Error(folder + ": no run.json (not a results folder of `ocslab run`, or its run ended before the probes " +
                "started: nothing was captured)");
  }
  if (fs::exists(folder + "/timeline.csv") && fs::exists(folder + "/meta.json")) {
    throw Error(folder + ": the run finished (timeline.csv and meta.json are there): nothing to recover");
  }
  json start;
  try {
    start = json::parse(read_file(record));
  } catch (const json::exception& e) {
    throw Error(record + ": not JSON: " + e.what());
  }
  const std::string spec_file = start.at("spec").at("file").get<std::string>();
  if (read_file_or_empty(spec_file) != start.at("spec").value("text", "")) {
    throw Error(spec_file + " changed since the run started: recovery needs the spec the run used (its text is in " +
                record + ")");
  }
  ExperimentSpec spec = load_experiment_spec(spec_file);
  if (spec.type != kReconfigLatency) throw Error(record + ": only reconfig-latency runs are recovered");
  const RunContext ctx(opt);
  TargetOptions t;
  t.cache_dir = opt.cache_dir;
  t.self_exe = opt.self_exe;
  t.agent_binary = opt.agent_binary;
  t.lab = LabUse::kRunning;  // the lab the run used must still be up: its agents hold the spools
  t.log = ctx.logger();
  Target target = resolve_target(spec, t);
  RunResult result;
  result.folder = folder;
  result.run_id = start.at("run").get<std::string>();
  result.interrupted = false;
  ctx.log("recovering " + result.run_id + " in " + folder);
  ReconfigurationRun(target, ctx, result).recover(start, restore_switch);
  return result;
}

}  // namespace ocslab::runner
