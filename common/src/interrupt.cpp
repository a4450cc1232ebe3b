#include "ocslab/common/interrupt.h"

namespace ocslab {

namespace {

std::atomic<bool> g_raised{false};

void on_signal(int) { g_raised = true; }

}  // namespace

InterruptScope::InterruptScope() {
  g_raised = false;
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  ::sigaction(SIGINT, &sa, &old_int_);
  ::sigaction(SIGTERM, &sa, &old_term_);
  installed_ = true;
}

void InterruptScope::restore() {
  if (!installed_) return;
  ::sigaction(SIGINT, &old_int_, nullptr);
  ::sigaction(SIGTERM, &old_term_, nullptr);
  installed_ = false;
}

const std::atomic<bool>* InterruptScope::flag() { return &g_raised; }

}  // namespace ocslab
