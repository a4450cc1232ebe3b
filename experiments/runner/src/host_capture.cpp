// Host probes through a phase-workload run, and the capture pieces every experiment type shares.
#include "ocslab/runner/host_capture.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <thread>

#include "ocslab/common/clock.h"
#include "ocslab/runner/capture_store.h"
#include "ocslab/runner/merge.h"
#include "ocslab/runner/ocs_power_monitor.h"
#include "ocslab/runner/run_context.h"
#include "ocslab/runner/run_types.h"
#include "ocslab/runner/target.h"

namespace ocslab::runner {

std::string host_stream(const std::string& host) { return "host." + host; }

std::function<void(Sample&)> clock_correction(const HostReport& r, int64_t before_ns, int64_t after_ns) {
  return [b = r.clock_before, a = r.clock_after, before_ns, after_ns](Sample& s) {
    double off = static_cast<double>(b.offset_ns);
    if (a.exchanges > 0 && after_ns > before_ns) {
      double f = std::clamp(static_cast<double>(s.t_ns - b.offset_ns - before_ns) / static_cast<double>(after_ns - before_ns),
                            0.0, 1.0);
      off = static_cast<double>(b.offset_ns) + f * static_cast<double>(a.offset_ns - b.offset_ns);
    }
    s.t_ns -= static_cast<int64_t>(off);
  };
}

void release_whole_spools(const CaptureStore& store, const std::vector<HostReport>& hosts,
                          const std::vector<HostTarget>& targets, const std::function<void(const std::string&)>& log,
                          HandshakeGate& gate) {
  std::map<std::string, CaptureStreamInfo> streams;
  for (auto& st : store.streams()) streams[st.name] = st;
  std::vector<std::string> errors(targets.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < targets.size(); ++i) {
    const HostReport* r = nullptr;
    for (const auto& h : hosts) {
      if (h.name == targets[i].name) r = &h;
    }
    if (!r || r->lost || r->started.capture.empty()) continue;
    auto st = streams.find(host_stream(r->name));
    const bool failed = st != streams.end() && !st->second.error.empty();
    const uint64_t on_disk = st == streams.end() ? 0 : st->second.last_seq;
    if (failed || on_disk < r->last_seq) {
      log(fmt::format("{}: capture {} is not whole in the results (seq {} of {}); its spool stays on the host", r->name,
                      r->started.capture, on_disk, r->last_seq));
      continue;
    }
    threads.emplace_back([&, i, capture = r->started.capture] { errors[i] = release_spool(targets[i], capture, &gate); });
  }
  for (auto& t : threads) t.join();
  for (const auto& e : errors) {
    if (!e.empty()) log(e + " (the agent's retention deletes it later)");
  }
}

std::string connect_summary(SessionPool& pool, std::chrono::steady_clock::duration took) {
  size_t reached = 0;
  const HostReport* slowest = nullptr;
  std::vector<HostReport> reports;
  for (auto& s : pool.sessions()) reports.push_back(s->report());
  for (const auto& r : reports) {
    if (r.hello.pid <= 0) continue;
    ++reached;
    if (!slowest || r.connect_time > slowest->connect_time) slowest = &r;
  }
  std::string out = fmt::format(
      "agents reached on {} of {} host(s) in {} ms, at most {} SSH handshake(s) at a time (peak {})", reached,
      reports.size(), std::chrono::duration_cast<std::chrono::milliseconds>(took).count(), pool.gate().limit(),
      pool.gate().peak());
  if (slowest) {
    const ConnectPhases& p = slowest->connect_phases;
    out += fmt::format("; slowest {} {} ms (queue {}, ssh {}, hello {}, clock {})", slowest->name,
                       slowest->connect_time.count(), p.queue.count(), p.ssh.count(), p.hello.count(), p.clock.count());
  }
  return out;
}

std::vector<CaptureInput> capture_inputs(const CaptureStore& store, const std::vector<HostReport>& hosts,
                                         int64_t before_ns, int64_t after_ns, std::vector<std::string>& problems) {
  std::map<std::string, CaptureStreamInfo> by_name;
  for (auto& st : store.streams()) {
    if (!st.error.empty()) {
      problems.push_back(fmt::format("capture {}: {} ({} row(s) not written; a host's agent keeps its samples in its "
                                     "spool)",
                                     st.name, st.error, st.dropped));
    }
    by_name[st.name] = st;
  }
  std::vector<CaptureInput> inputs;
  for (const auto& r : hosts) {
    auto it = by_name.find(host_stream(r.name));
    if (it != by_name.end()) inputs.push_back({it->second.path, clock_correction(r, before_ns, after_ns)});
  }
  for (const char* name : {kControlStream, kForwardingStream, kPowerStream, kGroundTruthStream}) {
    auto it = by_name.find(name);
    if (it != by_name.end()) inputs.push_back({it->second.path, {}});
  }
  return inputs;
}

HostCapture::HostCapture(Target& target, const RunContext& ctx, const std::string& folder, const std::string& run_id)
    : target_(target), ctx_(ctx), folder_(folder), targets_(host_targets(target, run_id)) {
  store_ = std::make_unique<CaptureStore>(folder + "/capture");
  pool_ = std::make_unique<SessionPool>(
      [this](const std::string& host, const agent::SeqSample& s) {
        store_->append(host_stream(host), s.sample, s.seq);
        std::lock_guard lock(tap_mu_);
        if (tap_) tap_(host, s.sample);
      },
      target.spec.connect_concurrency);
  for (const auto& t : targets_) pool_->add(t);
}

HostCapture::~HostCapture() {
  if (finished_) return;
  try {
    if (monitor_) monitor_->stop();
    pool_->stop_all();
    store_->close();
  } catch (const std::exception& e) {
    ctx_.log(std::string("stopping the probes after a failure: ") + e.what());
  }
}

namespace {
std::string per_host(const std::vector<HostTarget>& targets, const std::vector<std::string>& errors) {
  std::string out;
  for (size_t i = 0; i < errors.size(); ++i)
    if (!errors[i].empty()) out += "\n  " + targets[i].name + ": " + errors[i];
  return out;
}
}  // namespace

void HostCapture::start() {
  const auto t0 = std::chrono::steady_clock::now();
  std::string failed = per_host(targets_, pool_->connect_all());
  ctx_.log(connect_summary(*pool_, std::chrono::steady_clock::now() - t0));
  if (failed.empty()) {
    before_ns_ = realtime_ns();
    failed = per_host(targets_, pool_->start_all());
    if (!failed.empty()) failed = "cannot start the probes on every host:" + failed;
  } else {
    failed = "cannot reach the agents of every host:" + failed;
  }
  if (!failed.empty()) {
    pool_->stop_all();
    throw Error(failed);
  }
  const ExperimentSpec& spec = target_.spec;
  if (spec.power_monitor_ms > 0) {
    std::vector<WatchedPort> watched;
    for (const auto& h : spec.hosts)
      for (const auto& n : h.nics) watched.push_back({n.rx_port, h.name, n.name});
    PowerMonitorOptions pmo;
    pmo.interval = std::chrono::milliseconds(spec.power_monitor_ms);
    pmo.threshold_dbm = spec.power_threshold_dbm;
    SwitchAccess sw = target_.switch_access();
    monitor_ = std::make_unique<OcsPowerMonitor>(
        sw.url, sw.options, watched, [this](const Sample& s) { store_->append(kPowerStream, s); }, pmo);
    monitor_->start();
  }
  ctx_.log(fmt::format("probes running on {} host(s)", targets_.size()));
}

std::map<std::string, agent::ClockEstimate> HostCapture::clock_estimates() const {
  std::map<std::string, agent::ClockEstimate> out;
  for (const auto& s : pool_->sessions()) {
    auto r = s->report();
    if (r.clock_before.exchanges > 0) out[r.name] = r.clock_before;
  }
  return out;
}

void HostCapture::control(const Sample& s) { store_->append(kControlStream, s); }

void HostCapture::set_tap(Tap tap) {
  std::lock_guard lock(tap_mu_);
  tap_ = std::move(tap);
}

std::vector<std::string> HostCapture::unhealthy() const {
  std::vector<std::string> out;
  auto health = pool_->health();
  for (size_t k = 0; k < health.size() && k < targets_.size(); ++k) {
    if (health[k].state == HostState::kCapturing) continue;
    out.push_back(fmt::format("{}: {}{}", targets_[k].name, to_string(health[k].state),
                              health[k].error.empty() ? "" : ": " + health[k].error));
  }
  return out;
}

HostCapture::Outcome HostCapture::finish(const std::string& timeline_path, const std::string& run,
                                         const std::function<int(int64_t)>& iteration) {
  Outcome out;
  after_ns_ = realtime_ns();
  if (monitor_) {
    monitor_->stop();
    auto st = monitor_->stats();
    if (st.failed_polls > 0) {
      out.problems.push_back(fmt::format("switch power monitor: {} of {} polls failed (last: {})", st.failed_polls,
                                         st.polls + st.failed_polls, st.last_error));
    }
  }
  out.hosts = pool_->stop_all();
  finished_ = true;
  for (const auto& r : out.hosts)
    if (r.lost) out.problems.push_back("host " + r.name + " lost");
  if (target_.is_vlab()) {
    try {
      read_ground_truth(target_.lab.ground_truth(), before_ns_ - 1'000'000'000, realtime_ns(), target_.spec.hosts,
                        [this](const Sample& x) { store_->append(kGroundTruthStream, x); });
    } catch (const std::exception& e) {
      out.problems.push_back(e.what());
    }
  }
  store_->close();
  auto inputs = capture_inputs(*store_, out.hosts, before_ns_, after_ns_, out.problems);
  try {
    out.rows = merge_capture(inputs, timeline_path, run, iteration, store_->dir() + "/.merge");
    release_whole_spools(*store_, out.hosts, targets_, ctx_.logger(), pool_->gate());
  } catch (const Error& e) {
    out.problems.push_back(e.what());
  }
  return out;
}

}  // namespace ocslab::runner
