// Bounded waits for tests: instead of sleeping a fixed time and hoping an event happened, poll
// for the event itself until a deadline. Faster when the event comes early, and a clear failure
// (not a confusing later assertion) when it never comes.
#pragma once

#include <chrono>
#include <functional>
#include <stdexcept>
#include <string>
#include <thread>

namespace ocslab::testing {

// Asks pred every `every` until it holds or `timeout` has passed; returns whether it held. pred
// is asked once more at the deadline, so a slow last poll does not lose an event.
inline bool poll_until(const std::function<bool()>& pred, std::chrono::milliseconds timeout,
                       std::chrono::milliseconds every = std::chrono::milliseconds(10)) {
  // load-safe: the ceiling of this bounded wait: a hang guard its callers choose.
  const auto end = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    if (pred()) return true;
    if (std::chrono::steady_clock::now() >= end) return pred();
    // load-safe: the poll interval of a bounded wait.
    std::this_thread::sleep_for(every);  // the poll interval of a bounded wait, not a guess
  }
}

// poll_until where a timeout is an error: throws std::runtime_error("timed out after N ms
// waiting for <what>"), which Catch2 reports as the test case's failure.
inline void wait_until(const std::string& what, const std::function<bool()>& pred, std::chrono::milliseconds timeout,
                       std::chrono::milliseconds every = std::chrono::milliseconds(10)) {
  if (!poll_until(pred, timeout, every))
    throw std::runtime_error("timed out after " + std::to_string(timeout.count()) + " ms waiting for " + what);
}

}  // namespace ocslab::testing
