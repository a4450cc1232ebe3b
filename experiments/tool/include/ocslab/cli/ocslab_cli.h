// The `ocslab` front command, as a function so tests can run it in-process; main.cpp is a
// one-line wrapper. Today: `ocslab vlab ...` (the virtual lab). Exit codes in `ocslab --help`.
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

namespace ocslab::cli {

enum ExitCode : int {
  kExitOk = 0,
  kExitUsage = 1,   // bad command line
  kExitInput = 2,   // bad lab file (file:line:col in the message)
  kExitFailed = 3,  // the lab could not start, a host died, a command failed
  kExitInterrupted = 130,
};

int run_ocslab(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace ocslab::cli
