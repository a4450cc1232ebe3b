// A command line through /bin/sh with its standard output and error together, for tests that
// run a program as a user would (the collective workloads' command-line tests).
#pragma once

#include <sys/wait.h>

#include <cstdio>
#include <stdexcept>
#include <string>

namespace ocslab::testing {

struct ShellRun {
  int rc = -1;      // the exit status; -1 when killed by a signal
  std::string out;  // stdout and stderr
};

inline ShellRun shell(const std::string& cmd) {
  ShellRun r;
  FILE* p = ::popen((cmd + " 2>&1").c_str(), "r");
  if (!p) throw std::runtime_error("popen failed: " + cmd);
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
  int st = ::pclose(p);
  r.rc = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

}  // namespace ocslab::testing
