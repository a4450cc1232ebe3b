// The ocsctl command line, as a function so tests can run it in-process. main.cpp is a
// one-line wrapper. Exit codes are documented in docs/ocsctl.md and `ocsctl --help`.
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

#include "ocslab/common/exit_code.h"

namespace ocslab::ocs {

// Exit codes: common/exit_code.h, the same table in every ocslab program. Here: kExitInput for a
// bad port, URL, mapping file, allow-list or credentials; kExitRefused when the switch refused a
// command; kExitUnreachable for no connection, a lost one, a timeout or garbage from the switch;
// kExitFailed when a reconfiguration failed part-way (what was done is printed); kExitInterrupted
// when bench was stopped (what was done is written and printed).
using namespace ocslab::exit_codes;

int run_ocsctl(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace ocslab::ocs
