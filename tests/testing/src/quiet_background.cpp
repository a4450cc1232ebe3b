#include "ocslab/testing/quiet_background.h"

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace ocslab::testing {

QuietBackground::QuietBackground() {
  const char* env = std::getenv("OCSLAB_TEST_QUIET_PGID");
  if (!env || !*env) return;
  char* end = nullptr;
  errno = 0;
  long v = std::strtol(env, &end, 10);
  // Only a process group other than this process's own and init's.
  if (errno != 0 || *end != '\0' || v <= 1 || static_cast<pid_t>(v) == ::getpgrp()) {
    std::fprintf(stderr, "OCSLAB_TEST_QUIET_PGID='%s' is not another process group: nothing stopped\n", env);
    return;
  }
  const auto pgid = static_cast<pid_t>(v);
  if (::kill(-pgid, SIGSTOP) != 0) {
    if (errno != ESRCH) std::fprintf(stderr, "cannot stop process group %d: %s\n", pgid, std::strerror(errno));
    return;  // ESRCH: it finished already
  }
  pgid_ = pgid;
  std::fprintf(stderr, "stopped process group %d (OCSLAB_TEST_QUIET_PGID) while this case measures\n", pgid);
}

QuietBackground::~QuietBackground() {
  if (pgid_ == 0) return;
  if (::kill(-pgid_, SIGCONT) == 0) std::fprintf(stderr, "process group %d goes on\n", pgid_);
}

}  // namespace ocslab::testing
