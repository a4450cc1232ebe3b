// A thread-safe sink that keeps every Sample a probe emits, for tests: take a copy, filter by
// signal, or wait (bounded) until the samples so far satisfy a condition.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "ocslab/common/sample.h"

namespace ocslab::testing {

class SampleCollector {
 public:
  std::function<void(const Sample&)> sink() {
    return [this](const Sample& s) {
      std::lock_guard lock(mu_);
      samples_.push_back(s);
      cv_.notify_all();
    };
  }
  std::vector<Sample> samples() const {
    std::lock_guard lock(mu_);
    return samples_;
  }
  std::vector<Sample> signal(const std::string& name) const {
    std::vector<Sample> out;
    for (const auto& s : samples()) {
      if (s.signal == name) out.push_back(s);
    }
    return out;
  }
  // Waits until pred(all samples so far) holds or timeout passes; returns whether it held.
  bool wait(const std::function<bool(const std::vector<Sample>&)>& pred, std::chrono::milliseconds timeout) {
    std::unique_lock lock(mu_);
    // load-safe: an event wait (pred over the samples); timeout is its hang guard.
    return cv_.wait_for(lock, timeout, [&] { return pred(samples_); });
  }
  // Waits until some sample satisfies pred. The 10 s are a hang guard, not an expected latency: a
  // probe's thread can be descheduled for a second on a loaded 2-core machine under ASan.
  template <typename Pred>
  bool wait_for_sample(Pred pred) {
    return wait(
        [&](const std::vector<Sample>& all) {
          for (const auto& s : all) {
            if (pred(s)) return true;
          }
          return false;
        },
        std::chrono::seconds(10));
  }

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Sample> samples_;
};

}  // namespace ocslab::testing
