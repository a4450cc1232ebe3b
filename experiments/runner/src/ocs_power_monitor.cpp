#include "ocslab/runner/ocs_power_monitor.h"

#include <cmath>
#include <set>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "ocslab/common/clock.h"
#include "ocslab/common/error.h"

namespace ocslab::runner {

namespace {

constexpr const char* kSource = "ocs_power";

std::string describe(const WatchedPort& w) { return fmt::format("port {} ({}/{})", w.port, w.host, w.interface); }

// A reading worth a new power_dbm sample: the first, a move of more than min_change_db, or a
// change between finite and not (a switch may report -inf or NaN for a dark port).
bool moved(const std::optional<double>& last, double now, double min_change_db) {
  if (!last) return true;
  if (std::isfinite(*last) != std::isfinite(now)) return true;
  if (!std::isfinite(now)) return !(std::isnan(*last) && std::isnan(now)) && *last != now;
  return std::fabs(now - *last) > min_change_db;
}

}  // namespace

OcsPowerMonitor::OcsPowerMonitor(const ocs::SwitchUrl& url, ocs::DriverOptions driver_options,
                                 std::vector<WatchedPort> ports, Sink sink, PowerMonitorOptions options)
    : ports_(std::move(ports)), sink_(std::move(sink)), options_(options) {
  // Validate before make_driver: a refused port must not depend on credentials being present.
  validate_ports(driver_options.allow);
  // The caller's options are usually the command session's: its callbacks record command
  // spans and switch events, which 50 power polls a second must not flood.
  driver_options.on_timing = nullptr;
  driver_options.on_event = nullptr;
  driver_ = ocs::make_driver(url, std::move(driver_options));
  init();
}

OcsPowerMonitor::OcsPowerMonitor(std::unique_ptr<ocs::OcsDriver> driver, std::vector<WatchedPort> ports, Sink sink,
                                 PowerMonitorOptions options)
    : driver_(std::move(driver)), ports_(std::move(ports)), sink_(std::move(sink)), options_(options) {
  if (!driver_) throw Error("ocs_power monitor: no driver");
  validate_ports(driver_->options().allow);
  init();
}

OcsPowerMonitor::~OcsPowerMonitor() { stop(); }

void OcsPowerMonitor::validate_ports(const std::optional<ocs::PortSet>& allow) const {
  if (ports_.empty()) throw Error("ocs_power monitor: no port to watch");
  if (options_.interval.count() <= 0) {
    throw Error(fmt::format("ocs_power monitor: interval must be positive (got {} ms)", options_.interval.count()));
  }
  if (!sink_) throw Error("ocs_power monitor: no sink");
  std::set<ocs::Port> seen;
  for (const auto& w : ports_) {
    if (w.port < 1) throw Error(fmt::format("ocs_power monitor: {}: ports are numbered from 1", describe(w)));
    if (!seen.insert(w.port).second) {
      throw Error(fmt::format("ocs_power monitor: {} is watched twice", describe(w)));
    }
    if (allow && !allow->contains(w.port)) {
      throw Error(fmt::format("ocs_power monitor: {} is outside the switch driver's allow-list ({})", describe(w),
                              allow->to_string()));
    }
  }
}

void OcsPowerMonitor::init() {
  for (const auto& w : ports_) request_.push_back(w.port);
  state_.resize(ports_.size());
}

void OcsPowerMonitor::start() {
  std::lock_guard lock(mutex_);
  if (thread_.joinable()) return;
  stop_ = false;
  // A restarted monitor reports every port afresh, as on its first start.
  state_.assign(ports_.size(), PortState{});
  failing_ = false;
  run_failures_ = 0;
  thread_ = std::thread([this] { run(); });
}

void OcsPowerMonitor::stop() {
  {
    std::lock_guard lock(mutex_);
    if (!thread_.joinable()) return;
    stop_ = true;
  }
  wake_.notify_all();
  thread_.join();
  try {
    driver_->close();
  } catch (const std::exception& e) {
    spdlog::debug("ocs_power monitor: {}: closing: {}", driver_->name(), e.what());
  }
}

PowerMonitorStats OcsPowerMonitor::stats() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

void OcsPowerMonitor::run() {
  // A fixed grid on the monotonic clock; a poll that overruns (reconnecting, a slow reply)
  // skips the ticks it missed rather than firing them back to back.
  auto next = std::chrono::steady_clock::now();
  std::unique_lock lock(mutex_);
  while (!stop_) {
    lock.unlock();
    poll_once();
    lock.lock();
    next += options_.interval;
    auto now = std::chrono::steady_clock::now();
    if (next < now) next = now + options_.interval;
    wake_.wait_until(lock, next, [this] { return stop_; });
  }
}

void OcsPowerMonitor::poll_once() {
  std::vector<ocs::PortPower> reply;
  std::string error;
  try {
    reply = driver_->power(request_);
  } catch (const std::exception& e) {
    error = e.what();
  }
  // The reply's time: right after its completion arrived, as the driver stamped it.
  Timestamp t;
  auto timing = driver_->last_timing();
  if (error.empty() && timing && timing->ok && timing->op == "power") {
    t = timing->acked;
  } else {
    t = now();
  }
  std::vector<const ocs::PortPower*> by_index(ports_.size(), nullptr);
  if (error.empty()) {
    for (const auto& p : reply) {
      for (size_t i = 0; i < ports_.size(); ++i) {
        if (ports_[i].port == p.port) by_index[i] = &p;
      }
    }
    for (size_t i = 0; i < ports_.size() && error.empty(); ++i) {
      if (!by_index[i])
        error = fmt::format("{}: the power reply has no reading for port {}", driver_->name(), ports_[i].port);
    }
  }

  if (!error.empty()) {
    bool first = !failing_;
    failing_ = true;
    ++run_failures_;
    {
      std::lock_guard lock(mutex_);
      ++stats_.failed_polls;
      if (first) ++stats_.failure_runs;
      stats_.last_error = error;
    }
    if (first)
      spdlog::warn("ocs_power monitor: power poll failed (retrying every {} ms): {}", options_.interval.count(), error);
    return;
  }
  if (failing_) {
    spdlog::info("ocs_power monitor: {}: power polls answered again after {} failed poll(s)", driver_->name(),
                 run_failures_);
    failing_ = false;
    run_failures_ = 0;
    // The readings resume: every port's power is emitted again, so the gap shows in the
    // timeline; light only where it changed across the gap.
    for (auto& s : state_) s.last_dbm.reset();
  }
  {
    std::lock_guard lock(mutex_);
    ++stats_.polls;
  }
  for (size_t i = 0; i < ports_.size(); ++i) {
    double dbm = by_index[i]->dbm;
    PortState& s = state_[i];
    if (moved(s.last_dbm, dbm, options_.min_change_db)) {
      s.last_dbm = dbm;
      emit(ports_[i], "power_dbm", dbm, "dBm", t);
    }
    bool light = dbm >= options_.threshold_dbm;  // false for NaN and -inf
    if (!s.light || *s.light != light) {
      s.light = light;
      emit(ports_[i], "light", light ? 1.0 : 0.0, "bool", t);
    }
  }
}

void OcsPowerMonitor::emit(const WatchedPort& w, const char* signal, double value, const char* unit,
                           const Timestamp& t) {
  Sample s;
  s.t_ns = t.realtime_ns;
  s.mono_ns = t.monotonic_ns;
  s.host = w.host;
  s.source = kSource;
  s.subject = w.interface;
  s.signal = signal;
  s.value = value;
  s.unit = unit;
  try {
    sink_(s);
  } catch (const std::exception& e) {
    // A sink that throws must not end monitoring; its failure is not ours to hide either.
    spdlog::error("ocs_power monitor: the sample sink failed: {}", e.what());
  }
  std::lock_guard lock(mutex_);
  ++stats_.samples;
}

}  // namespace ocslab::runner
