// The ocslab-agent command line (serve, capture, probes), kept in the library so tests can run
// it in-process and main.cpp stays a one-liner.
#pragma once

#include <ostream>
#include <string>
#include <vector>

namespace ocslab::agent {

enum ExitCode {
  kExitOk = 0,
  kExitUsage = 1,        // bad command line
  kExitInput = 2,        // bad input: unknown probe, bad interval
  kExitUnavailable = 3,  // none of the requested probes can run on this host
  kExitServe = 4,        // cannot serve: socket taken, daemon not starting, spool unwritable
};

// args: without the program name.
int run_cli(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace ocslab::agent
