#include "ocslab/agent/heartbeat_probe.h"

#include <chrono>

#include "ocslab/common/clock.h"
#include "ocslab/common/error.h"

namespace ocslab::agent {

HeartbeatProbe::HeartbeatProbe(std::string host, int interval_ms, std::string subject)
    : host_(std::move(host)), interval_ms_(interval_ms), subject_(std::move(subject)) {
  if (interval_ms_ < 1) throw Error("heartbeat: interval_ms must be >= 1, got " + std::to_string(interval_ms));
}

HeartbeatProbe::~HeartbeatProbe() { stop(); }

probes::ProbeStatus HeartbeatProbe::start(probes::SampleSink sink) {
  std::lock_guard lock(mutex_);
  if (started_) throw Error("heartbeat probe started twice");
  started_ = true;
  thread_ = std::thread([this, sink = std::move(sink)] { run(sink); });
  return {true, "timer (CLOCK_MONOTONIC)", ""};
}

void HeartbeatProbe::stop() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void HeartbeatProbe::run(probes::SampleSink sink) {
  // Ticks are scheduled from the start time, not from the previous tick, so a late tick does not
  // shift every later one: the rate stays exact over a long capture.
  auto start = std::chrono::steady_clock::now();
  // One Sample for every tick: its strings are set once, not copied per tick.
  Sample sample{0, 0, host_, "heartbeat", subject_, "heartbeat", 0, "count"};
  std::unique_lock lock(mutex_);
  for (long long n = 1;; ++n) {
    auto due = start + std::chrono::milliseconds(static_cast<long long>(interval_ms_) * n);
    if (wake_.wait_until(lock, due, [this] { return stopping_; })) return;
    lock.unlock();
    Timestamp ts = now();
    sample.t_ns = ts.realtime_ns;
    sample.mono_ns = ts.monotonic_ns;
    sample.value = static_cast<double>(n);
    sink(sample);
    lock.lock();
  }
}

}  // namespace ocslab::agent
