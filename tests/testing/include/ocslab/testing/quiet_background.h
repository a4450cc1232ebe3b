// A case whose bounds are latencies of this machine (a guest kernel's lag behind its NIC, a
// loopback rank's step) stops the process group named by $OCSLAB_TEST_QUIET_PGID while it
// measures and lets it go on afterwards. .ci/run names the instrumented build it runs behind the
// tests: at idle priority it still slows the TCG guests by about 60 % (docs/testing.md). Unset,
// empty or a group that is gone: nothing is stopped.
#pragma once

#include <sys/types.h>

namespace ocslab::testing {

class QuietBackground {
 public:
  QuietBackground();
  ~QuietBackground();
  QuietBackground(const QuietBackground&) = delete;
  QuietBackground& operator=(const QuietBackground&) = delete;

 private:
  pid_t pgid_ = 0;  // the group stopped, 0 when none
};

}  // namespace ocslab::testing
