// A thread that calls a function on a fixed grid of the monotonic clock until stopped: the loop
// behind the phase controller's watches (port_watch.h, nic_watch.h). A call that overruns its
// slot starts the grid again from its end instead of firing the missed calls back to back.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

namespace ocslab {

class Periodic {
 public:
  // Throws ocslab::Error naming `what` for an interval that is not positive.
  Periodic(std::string what, std::chrono::milliseconds interval, std::function<void()> tick);
  ~Periodic();  // stop()
  Periodic(const Periodic&) = delete;
  Periodic& operator=(const Periodic&) = delete;

  void start();  // idempotent; the first call comes at once
  // Idempotent; waits for a call in progress, makes no further one. True if it was running.
  bool stop();

 private:
  void run();

  std::function<void()> tick_;
  std::chrono::milliseconds interval_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace ocslab
