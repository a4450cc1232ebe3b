// The ocslab-agent command line (serve, capture, probes), kept in the library so tests can run
// it in-process and main.cpp stays a one-liner.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "ocslab/common/exit_code.h"

namespace ocslab::agent {

// Exit codes: common/exit_code.h (the same table in every ocslab program). Here: kExitInput for
// an unknown probe or a bad interval, kExitRefused when none of the requested probes can run on
// this host, kExitFailed when the daemon cannot serve (socket taken, not starting, spool unwritable).
using namespace ocslab::exit_codes;

// args: without the program name.
int run_cli(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace ocslab::agent
