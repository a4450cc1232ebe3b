// Ctrl-C (SIGINT) and SIGTERM as a flag instead of the end of the process, for commands that
// stop cleanly (keep what was captured, stop what they started): while an InterruptScope lives,
// both signals set its flag; the handlers that were installed before come back on destruction
// or restore(). The flag stays readable after that. One scope at a time per process (the flag
// is the process's: a signal handler can reach nothing else).
#pragma once

#include <atomic>
#include <csignal>

namespace ocslab {

class InterruptScope {
 public:
  InterruptScope();  // clears the flag, then installs the handlers
  ~InterruptScope() { restore(); }
  InterruptScope(const InterruptScope&) = delete;
  InterruptScope& operator=(const InterruptScope&) = delete;

  void restore();  // the previous handlers back; idempotent
  bool raised() const { return flag()->load(); }
  // For options that poll it (RunOptions::interrupted, vlab::UpOptions::interrupted).
  static const std::atomic<bool>* flag();

 private:
  struct sigaction old_int_ {};
  struct sigaction old_term_ {};
  bool installed_ = false;
};

}  // namespace ocslab
