#include "ocslab/common/periodic.h"

#include <fmt/format.h>

#include <string>

#include "ocslab/common/error.h"

namespace ocslab {

Periodic::Periodic(std::string what, std::chrono::milliseconds interval, std::function<void()> tick)
    : tick_(std::move(tick)), interval_(interval) {
  if (interval_.count() <= 0)
    throw Error(fmt::format("{}: the interval must be positive (got {} ms)", what, interval_.count()));
}

Periodic::~Periodic() { stop(); }

void Periodic::start() {
  std::lock_guard lock(mu_);
  if (thread_.joinable()) return;
  stop_ = false;
  thread_ = std::thread([this] { run(); });
}

bool Periodic::stop() {
  {
    std::lock_guard lock(mu_);
    if (!thread_.joinable()) return false;
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
  return true;
}

void Periodic::run() {
  auto next = std::chrono::steady_clock::now();
  std::unique_lock lock(mu_);
  while (!stop_) {
    lock.unlock();
    tick_();
    lock.lock();
    next += interval_;
    const auto t = std::chrono::steady_clock::now();
    if (next < t) next = t + interval_;
    cv_.wait_until(lock, next, [this] { return stop_; });
  }
}

}  // namespace ocslab
