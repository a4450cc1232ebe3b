#include "ocslab/runner/runner.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <ostream>
#include <sstream>
#include <thread>

#include "ocslab/common/clock.h"
#include "ocslab/common/csv_writer.h"
#include "ocslab/ocsctl/driver.h"
#include "ocslab/ocsctl/ssh_session.h"
#include "ocslab/runner/lab_forwarding.h"
#include "ocslab/runner/ocs_power_monitor.h"
#include "ocslab/vlab/lab_control.h"
#include "ocslab/vlab/lab_state.h"

namespace ocslab::runner {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

std::string timestamp_for_name() {
  auto t = std::time(nullptr);
  std::tm tm{};
  localtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y%m%d-%H%M%S", &tm);
  return buf;
}

std::string iso_time(int64_t ns) {
  std::time_t s = static_cast<std::time_t>(ns / 1'000'000'000);
  std::tm tm{};
  gmtime_r(&s, &tm);
  char buf[40];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  return fmt::format("{}.{:03d}Z", buf, static_cast<int>((ns / 1'000'000) % 1000));
}

json clock_json(const agent::ClockEstimate& c) {
  if (c.exchanges == 0) return nullptr;
  return {{"offset_ns", c.offset_ns}, {"uncertainty_ns", c.uncertainty_ns}, {"rtt_ns", c.rtt_ns}, {"exchanges", c.exchanges}};
}

// Sleeps in small steps until `until` (monotonic ns) or an interrupt; calls tick every ~250 ms.
bool wait_until(int64_t until, const std::atomic<bool>* interrupted, const std::function<void()>& tick) {
  int64_t next_tick = 0;
  while (true) {
    if (interrupted && interrupted->load()) return false;
    int64_t now = monotonic_ns();
    if (now >= until) return true;
    if (now >= next_tick) {
      if (tick) tick();
      next_tick = now + 250'000'000;
    }
    std::this_thread::sleep_for(std::chrono::nanoseconds(std::min<int64_t>(until - now, 20'000'000)));
  }
}

// Copies src over dst atomically (a running agent keeps its old file).
void install_binary(const std::string& src, const std::string& dst) {
  fs::create_directories(fs::path(dst).parent_path());
  std::string tmp = dst + ".new." + std::to_string(getpid());
  std::error_code ec;
  fs::copy_file(src, tmp, fs::copy_options::overwrite_existing, ec);
  if (ec) throw Error(fmt::format("cannot copy the agent {} into the lab ({}): {}", src, tmp, ec.message()));
  fs::permissions(tmp, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec | fs::perms::others_read |
                           fs::perms::others_exec);
  fs::rename(tmp, dst, ec);
  if (ec) throw Error(fmt::format("cannot install the agent at {}: {}", dst, ec.message()));
}

std::string exe_dir(const std::string& self) {
  std::error_code ec;
  auto p = fs::read_symlink(self.empty() ? "/proc/self/exe" : self, ec);
  if (ec) p = self.empty() ? fs::path("/proc/self/exe") : fs::path(self);
  return p.parent_path().string();
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

}  // namespace

SwitchAccess switch_access(const ExperimentSpec& spec, const vlab::LabState& lab) {
  ocs::DriverOptions dopt;
  dopt.allow = spec.allow;
  dopt.identity_file = spec.switch_identity_file;
  dopt.known_hosts_file = spec.switch_known_hosts;
  std::string url_text = spec.switch_url;
  if (url_text.empty()) {
    url_text = lab.switch_url();
    dopt.password = lab.switch_password;
  }
  return {ocs::SwitchUrl::parse(url_text), dopt};
}

RunResult run_experiment(const ExperimentSpec& spec_in, const RunOptions& opt) {
  ExperimentSpec spec = spec_in;
  RunResult result;
  auto log = [&](const std::string& msg) {
    spdlog::info("{}", msg);
    if (opt.log) *opt.log << "ocslab run: " << msg << "\n" << std::flush;
  };
  auto interrupted = [&] { return opt.interrupted && opt.interrupted->load(); };

  // 1. The lab.
  vlab::LabState lab;
  bool started_lab = false;
  std::string cache = opt.cache_dir.empty() ? vlab::default_cache_dir() : opt.cache_dir;
  if (!spec.vlab.empty()) {
    std::string dir = vlab::labs_dir(cache) + "/" + spec.vlab_name;
    bool running = false;
    if (fs::exists(dir + "/state.json")) {
      lab = vlab::lab_status(dir);
      running = lab.phase == "running" &&
                std::all_of(lab.hosts.begin(), lab.hosts.end(), [](const auto& h) { return h.alive; });
      if (!running) {
        log("virtual lab '" + spec.vlab_name + "' is not healthy (" + lab.phase + "); restarting it");
        vlab::lab_down(dir, [](const std::string&) {});
      } else if (fs::weakly_canonical(lab.spec) != fs::weakly_canonical(spec.vlab)) {
        // Same name, another file: its switch and NIC settings may differ from what the spec expects.
        throw Error(fmt::format("a virtual lab named '{}' is up from {}, not {}; stop it first (ocslab vlab down {})",
                                spec.vlab_name, lab.spec, spec.vlab, spec.vlab_name));
      }
    }
    if (!running) {
      vlab::UpOptions up;
      up.cache_dir = cache;
      up.self_exe = opt.self_exe;
      up.interrupted = opt.interrupted;
      log("starting virtual lab " + spec.vlab);
      lab = vlab::lab_up(spec.vlab, up, [&](const std::string& m) {
        if (opt.progress) *opt.progress << "\r\033[K" << m << std::flush;
      });
      if (opt.progress) *opt.progress << "\r\033[K";
      started_lab = true;
    } else {
      log("using the running virtual lab '" + spec.vlab_name + "'");
    }
    for (auto& h : spec.hosts) {
      const auto& hs = lab.host(h.name);
      h.ssh_host = "127.0.0.1";
      h.ssh_port = hs.ssh_port;
      h.user = "root";
      h.identity_file = lab.client_key();
      h.known_hosts = lab.known_hosts();
      h.agent = lab.dir + "/bin/ocslab-agent";
    }
    std::string agent_src = opt.agent_binary.empty() ? exe_dir(opt.self_exe) + "/ocslab-agent" : opt.agent_binary;
    install_binary(agent_src, lab.dir + "/bin/ocslab-agent");
  }
  std::string run_id = spec.name + "-" + timestamp_for_name();
  result.run_id = run_id;
  result.folder = opt.output_dir.empty() ? spec.output + "/" + run_id : opt.output_dir;
  if (!opt.output_dir.empty()) result.run_id = run_id = fs::path(opt.output_dir).filename().string();
  fs::create_directories(result.folder);
  log("results in " + result.folder);
  if (spec.type == kPhaseWorkload) {  // experiment-type dispatch: phase_workload.cpp
    run_phase_workload(spec, opt, spec.switch_url.empty() ? lab.switch_url() : spec.switch_url,
                       spec.switch_url.empty() ? lab.switch_password : "", spec.vlab.empty() ? "" : lab.dir + "/bin", result);
    if (started_lab && !spec.keep_lab) vlab::lab_down(lab.dir, [](const std::string&) {});
    return result;
  }

  // 2. The switch.
  const SwitchAccess sw = switch_access(spec, lab);
  const ocs::SwitchUrl& url = sw.url;
  const ocs::DriverOptions& dopt = sw.options;  // also the power monitor's
  auto driver = ocs::make_driver(url, dopt);
  ocs::SwitchInfo info = driver->info();
  log(fmt::format("switch {} {} {} ({}x{})", url.to_string(), info.vendor, info.model, info.ingress_ports,
                  info.egress_ports));

  // 3. Sessions and the samples they deliver.
  std::mutex samples_mutex;
  std::vector<Sample> samples;
  samples.reserve(1 << 16);
  SessionPool pool([&](const std::string&, const agent::SeqSample& s) {
    std::lock_guard<std::mutex> lock(samples_mutex);
    samples.push_back(s.sample);
  });
  std::vector<ocs::SshOptions> ssh_of;
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
  for (size_t k = 0; k < spec.rdma.pairs.size(); ++k) {
    const Link& l = spec.rdma.pairs[k];
    const HostEntry& client = spec.hosts[l.a_host];
    const HostEntry& server = spec.hosts[l.b_host];
    int port = spec.rdma.port + static_cast<int>(k);
    agent::ProbeRequest s;
    s.name = "rdma";
    s.interfaces = {l.b_nic};
    s.interval_ms = spec.rdma.interval_ms;
    s.params = {{"role", "server"}, {"control", fmt::format("0.0.0.0:{}", port)}, {"label", client.name},
                {"timeout", spec.rdma.timeout}, {"retry_cnt", spec.rdma.retry_cnt}};
    requests[server.name].push_back(s);
    agent::ProbeRequest c;
    c.name = "rdma";
    c.interfaces = {l.a_nic};
    c.interval_ms = spec.rdma.interval_ms;
    c.params = {{"role", "client"}, {"control", fmt::format("{}:{}", server.mgmt, port)}, {"label", server.name},
                {"timeout", spec.rdma.timeout}, {"retry_cnt", spec.rdma.retry_cnt}};
    requests[client.name].push_back(c);
  }
  for (const auto& h : spec.hosts) {
    HostTarget t;
    t.name = h.name;
    t.ssh.host = h.ssh_host;
    t.ssh.port = h.ssh_port;
    t.ssh.user = h.user;
    t.ssh.identity_file = h.identity_file;
    t.ssh.known_hosts_file = h.known_hosts;
    t.agent_command = h.agent + " serve --stdio";
    // A virtual lab's guests get a daemon of this run's own (a reused lab may still run an old one).
    if (!spec.vlab.empty()) {
      t.agent_command += " --socket /run/ocslab-agent/" + run_id + ".sock";
    } else if (!h.agent_socket.empty()) {
      t.agent_command += " --socket " + h.agent_socket;
    }
    t.probes = requests[h.name];
    if (t.probes.empty()) throw Error("host " + h.name + " has no probe to run (probes: in the spec)");
    ssh_of.push_back(t.ssh);
    pool.add(std::move(t));
  }

  // Host facts (kernel, NIC driver and firmware) in parallel, while nothing is measured yet.
  std::vector<HostFacts> facts(spec.hosts.size());
  {
    std::vector<std::thread> th;
    for (size_t i = 0; i < spec.hosts.size(); ++i) {
      th.emplace_back([&, i] { facts[i] = query_facts(ssh_of[i], spec.hosts[i]); });
    }
    for (auto& t : th) t.join();
  }

  // 4. The first mapping, then the agents.
  int64_t run_start_ns = realtime_ns();
  std::vector<Sample> control;
  auto apply = [&](const Mapping& m, const char* signal_issue, int iteration) {
    ReconfigRecord rec;
    rec.iteration = iteration;
    rec.mapping = m.name;
    rec.issued_ns = realtime_ns();
    try {
      ocs::ApplyReport report;
      try {
        report = driver->apply(m.circuits, ocs::ApplyMode::kReplace);
      } catch (const ocs::ConnectionError& e) {
        // A session the switch dropped since the last command: apply reads the circuits before
        // it changes anything, so one retry on a fresh connection is safe.
        log(fmt::format("switch connection lost ({}); reconnecting", e.what()));
        rec.issued_ns = realtime_ns();
        report = driver->apply(m.circuits, ocs::ApplyMode::kReplace);
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
    control.push_back(Sample{rec.issued_ns, 0, "switch", "ocs", m.name, signal_issue, 1, ""});
    control.push_back(Sample{rec.acked_ns, 0, "switch", "ocs", m.name, std::string(signal_issue) == "command" ? "ack" : "setup_ack",
                             rec.ok ? 1.0 : 0.0, "bool"});
    return rec;
  };
  auto setup = apply(spec.mappings[0], "setup", 0);
  if (!setup.ok) throw Error("cannot apply the first mapping '" + spec.mappings[0].name + "': " + setup.error);
  log(fmt::format("mapping '{}' applied ({} circuit(s) made, {} removed)", setup.mapping, setup.added, setup.removed));
  // Host-based forwarding for the first mapping on every host before the agents start; cleared
  // at the end, and by its destructor when the run is cut short (lab_forwarding.h).
  auto fwd = forwarding_start(spec, ssh_of, result.folder, log);

  auto errors = pool.connect_all();
  std::string failed;
  for (size_t i = 0; i < errors.size(); ++i) {
    if (!errors[i].empty()) failed += "\n  " + spec.hosts[i].name + ": " + errors[i];
  }
  if (!failed.empty()) {
    pool.stop_all();
    throw Error("cannot reach the agents of every host:" + failed);
  }
  int64_t clock_before_ns = realtime_ns();
  errors = pool.start_all();
  for (size_t i = 0; i < errors.size(); ++i) {
    if (!errors[i].empty()) failed += "\n  " + spec.hosts[i].name + ": " + errors[i];
  }
  if (!failed.empty()) {
    pool.stop_all();
    throw Error("cannot start the probes on every host:" + failed);
  }

  // 5. The schedule.
  auto schedule = spec.schedule();
  int n = static_cast<int>(schedule.size());
  auto status_line = [&](int i, const std::string& what, int64_t left_ns) {
    if (!opt.progress) return;
    std::string hosts;
    auto health = pool.health();
    for (size_t k = 0; k < health.size(); ++k) {
      const auto& h = health[k];
      bool ok = h.state == HostState::kCapturing;
      hosts += fmt::format(" {}:{}{}", spec.hosts[k].name, ok ? "" : std::string(to_string(h.state)) + ",", h.samples);
    }
    *opt.progress << fmt::format("\r\033[K[{:>3}/{}] {} {:.1f}s |{}", i, n, what, std::max<int64_t>(left_ns, 0) / 1e9, hosts)
                  << std::flush;
  };
  std::map<std::string, bool> reported_lost;
  auto check_hosts = [&] {
    auto health = pool.health();
    for (size_t k = 0; k < health.size(); ++k) {
      if (health[k].state == HostState::kLost && !reported_lost[spec.hosts[k].name]) {
        reported_lost[spec.hosts[k].name] = true;
        std::string msg = fmt::format("host {} lost: {} (the run goes on without it)", spec.hosts[k].name, health[k].error);
        result.problems.push_back(msg);
        if (opt.progress) *opt.progress << "\n";
        log(msg);
      }
    }
  };
  // The switch's own power monitors, on a session of their own.
  std::vector<Sample> monitor_samples;  // written by the monitor's thread until stop() joins it
  std::unique_ptr<OcsPowerMonitor> monitor;  // declared after: its destructor joins first
  if (spec.power_monitor_ms > 0) {
    std::vector<WatchedPort> watched;
    for (const auto& h : spec.hosts) {
      for (const auto& n : h.nics) watched.push_back({n.rx_port, h.name, n.name});
    }
    PowerMonitorOptions pmo;
    pmo.interval = std::chrono::milliseconds(spec.power_monitor_ms);
    pmo.threshold_dbm = spec.power_threshold_dbm;
    monitor = std::make_unique<OcsPowerMonitor>(
        url, dopt, watched,
        // Stamped on this machine's clock: kept apart from the host samples, which are corrected.
        [&](const Sample& s) { monitor_samples.push_back(s); },
        pmo);
    monitor->start();
  }
  // Links the first mapping made need time to come up (firmware link-up) before the warm-up.
  double settle = setup.added > 0 ? spec.settle_s : 0.0;
  int64_t warm_until = monotonic_ns() + static_cast<int64_t>((settle + spec.warmup_s) * 1e9);
  bool go = wait_until(warm_until, opt.interrupted, [&] {
    check_hosts();
    status_line(0, "warm-up", warm_until - monotonic_ns());
  });
  for (int i = 1; go && i <= n; ++i) {
    const Mapping& m = spec.mappings[schedule[static_cast<size_t>(i - 1)]];
    auto rec = apply(m, "command", i);
    if (!rec.ok) {
      std::string msg = fmt::format("reconfiguration {} to '{}' failed: {} (marked; the run goes on)", i, m.name, rec.error);
      result.problems.push_back(msg);
      if (opt.progress) *opt.progress << "\n";
      log(msg);
    }
    result.reconfigurations.push_back(rec);
    if (fwd && rec.ok) {
      try {
        forwarding_reconfigured(*fwd, m, i, result.folder);
      } catch (const std::exception& e) {
        result.problems.push_back(std::string(e.what()) + " (the run stops)");
        log(e.what());
        break;
      }
    }
    int64_t until = monotonic_ns() + static_cast<int64_t>(spec.dwell_s * 1e9);
    go = wait_until(until, opt.interrupted, [&] {
      check_hosts();
      status_line(i, "-> " + m.name, until - monotonic_ns());
    });
  }
  if (opt.progress) *opt.progress << "\r\033[K" << std::flush;
  result.interrupted = interrupted();
  if (result.interrupted) log("interrupted: stopping the probes and keeping what was captured");

  // 6. Stop, recover, merge.
  int64_t clock_after_ns = realtime_ns();
  if (monitor) {
    monitor->stop();
    auto st = monitor->stats();
    if (st.failed_polls > 0) {
      result.problems.push_back(fmt::format("switch power monitor: {} of {} polls failed (last: {})", st.failed_polls,
                                            st.polls + st.failed_polls, st.last_error));
    }
  }
  result.hosts = pool.stop_all();
  if (fwd) {
    for (const auto& e : fwd->clear())
      if (!e.empty()) result.problems.push_back("forwarding clear failed: " + e);
  }
  check_hosts();
  for (const auto& r : result.hosts) {
    if (r.lost && !reported_lost[r.name]) result.problems.push_back("host " + r.name + " lost");
  }
  int64_t run_end_ns = realtime_ns();
  driver->close();

  std::vector<Sample> all;
  {
    std::lock_guard<std::mutex> lock(samples_mutex);
    all = std::move(samples);
  }
  // Host clock -> runner clock: offsets interpolated linearly between the two estimates.
  std::map<std::string, const HostReport*> by_name;
  for (const auto& r : result.hosts) by_name[r.name] = &r;
  for (auto& s : all) {
    auto it = by_name.find(s.host);
    if (it == by_name.end()) continue;
    const auto& b = it->second->clock_before;
    const auto& a = it->second->clock_after;
    double off = static_cast<double>(b.offset_ns);
    if (a.exchanges > 0 && clock_after_ns > clock_before_ns) {
      double f = std::clamp(static_cast<double>(s.t_ns - b.offset_ns - clock_before_ns) /
                                static_cast<double>(clock_after_ns - clock_before_ns),
                            0.0, 1.0);
      off = static_cast<double>(b.offset_ns) + f * static_cast<double>(a.offset_ns - b.offset_ns);
    }
    s.t_ns -= static_cast<int64_t>(off);
  }
  all.insert(all.end(), control.begin(), control.end());
  if (fwd) {
    auto rows = fwd->samples();
    all.insert(all.end(), rows.begin(), rows.end());
  }
  all.insert(all.end(), monitor_samples.begin(), monitor_samples.end());
  if (!spec.vlab.empty()) {
    try {
      auto gt = read_ground_truth(lab.ground_truth(), run_start_ns - 1'000'000'000, run_end_ns, spec.hosts);
      all.insert(all.end(), gt.begin(), gt.end());
    } catch (const std::exception& e) {
      result.problems.push_back(e.what());
      log(e.what());
    }
  }
  std::stable_sort(all.begin(), all.end(), [](const Sample& a, const Sample& b) { return a.t_ns < b.t_ns; });
  std::vector<int64_t> issued;
  for (const auto& r : result.reconfigurations) issued.push_back(r.issued_ns);
  std::sort(issued.begin(), issued.end());
  // timeline.csv is the only copy of the merged, clock-corrected samples: a write that fails
  // (full disk) fails the run, once the guests below are left as they were found.
  std::string write_error;
  try {
    CsvWriter w(result.folder + "/timeline.csv");
    auto cols = sample_csv_columns();
    cols.push_back("run");
    cols.push_back("iteration");
    w.header(cols);
    for (const auto& s : all) {
      auto f = sample_csv_fields(s);
      f.push_back(run_id);
      f.push_back(std::to_string(iteration_of(s.t_ns, issued)));
      w.row(f);
    }
    w.close();
  } catch (const Error& e) {
    write_error = e.what();
    result.problems.push_back(write_error);
    log(write_error);
  }
  result.samples = all.size();

  // 7. meta.json
  json meta;
  meta["run"] = run_id;
  meta["ocslab_version"] = opt.version;
  meta["agent_protocol"] = agent::kProtocolVersion;
  meta["started"] = iso_time(run_start_ns);
  meta["finished"] = iso_time(run_end_ns);
  meta["interrupted"] = result.interrupted;
  std::ifstream spec_file(spec.origin);
  std::stringstream spec_text;
  spec_text << spec_file.rdbuf();
  meta["spec"] = {{"file", fs::absolute(spec.origin).string()}, {"name", spec.name}, {"text", spec_text.str()},
                  {"reconfigurations", spec.reconfigurations}, {"dwell_s", spec.dwell_s}, {"warmup_s", spec.warmup_s},
                  {"seed", spec.seed}};
  meta["switch"] = {{"url", url.to_string()},   {"vendor", info.vendor},   {"model", info.model},
                    {"serial", info.serial},    {"version", info.version}, {"allow", spec.allow.to_string()}};
  if (!spec.vlab.empty()) meta["lab"] = {{"vlab", spec.vlab}, {"name", spec.vlab_name}, {"dir", lab.dir}, {"kernel", lab.kernel}, {"started_by_run", started_lab}};
  meta["hosts"] = json::array();
  for (size_t i = 0; i < spec.hosts.size(); ++i) {
    const HostReport* r = by_name.count(spec.hosts[i].name) ? by_name[spec.hosts[i].name] : nullptr;
    json h = {{"name", spec.hosts[i].name}, {"kernel", facts[i].kernel}, {"nics", facts[i].nics}};
    if (!facts[i].error.empty()) h["facts_error"] = facts[i].error;
    if (r) {
      h["agent"] = {{"host", r->hello.host}, {"pid", r->hello.pid}, {"version", r->hello.version}};
      h["clock_sync"] = r->hello.clock_sync;
      h["clock_before"] = clock_json(r->clock_before);
      h["clock_after"] = clock_json(r->clock_after);
      h["probes"] = json::array();
      for (const auto& p : r->started.probes) {
        h["probes"].push_back({{"name", p.name}, {"available", p.available}, {"method", p.method}, {"reason", p.reason}});
      }
      h["samples"] = r->samples;
      h["recovered_from_spool"] = r->recovered;
      h["last_seq"] = r->last_seq;
      h["lost"] = r->lost;
      h["errors"] = r->errors;
      h["connect_ms"] = r->connect_time.count();
    }
    meta["hosts"].push_back(h);
  }
  meta["reconfigurations"] = json::array();
  for (const auto& r : result.reconfigurations) {
    meta["reconfigurations"].push_back({{"iteration", r.iteration}, {"mapping", r.mapping}, {"issued_ns", r.issued_ns},
                                        {"acked_ns", r.acked_ns}, {"ok", r.ok}, {"error", r.error},
                                        {"circuits_removed", r.removed}, {"circuits_added", r.added}});
  }
  meta["problems"] = result.problems;
  meta["timeline_rows"] = result.samples;
  {
    std::ofstream out(result.folder + "/meta.json");
    out << meta.dump(2) << "\n";
    out.close();  // the buffered tail reaches the file (or fails) here, not in the destructor
    if (!out && write_error.empty()) write_error = "cannot write " + result.folder + "/meta.json";
  }

  // 8. Leave the guests as we found them: this run's agents end; a lab we started stops unless kept.
  if (!spec.vlab.empty()) {
    for (size_t i = 0; i < result.hosts.size(); ++i) {
      if (result.hosts[i].hello.pid <= 0) continue;
      try {
        ocs::SshSession s(ssh_of[i]);
        s.exec(fmt::format("kill {} 2>/dev/null; true", result.hosts[i].hello.pid), std::chrono::seconds(10));
      } catch (const std::exception& e) {
        spdlog::warn("could not stop the agent on {}: {}", result.hosts[i].name, e.what());
      }
    }
    if (started_lab && !spec.keep_lab) {
      log("stopping the virtual lab (lab.keep: false)");
      vlab::lab_down(lab.dir, [](const std::string&) {});
    }
  }
  if (!write_error.empty()) throw Error(write_error);
  return result;
}

}  // namespace ocslab::runner
