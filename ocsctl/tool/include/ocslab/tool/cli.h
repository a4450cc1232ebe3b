// The ocsctl command line, as a function so tests can run it in-process. main.cpp is a
// one-line wrapper. Exit codes are documented in docs/ocsctl.md and `ocsctl --help`.
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

namespace ocslab::ocs {

enum ExitCode : int {
  kExitOk = 0,
  kExitUsage = 1,          // bad command line
  kExitInput = 2,          // bad input: port, URL, mapping file, allow-list, credentials; unwritable output
  kExitDenied = 3,         // the switch refused a command
  kExitConnection = 4,     // cannot connect, connection lost, timeout, garbage from the switch
  kExitPartial = 5,        // a reconfiguration failed part-way (what was done is printed)
  kExitInterrupted = 130,  // bench stopped by Ctrl-C/SIGTERM (what was done is written and printed)
};

int run_ocsctl(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace ocslab::ocs
