// The `ocslab` front command, as a function so tests can run it in-process; main.cpp is a
// one-line wrapper. Today: `ocslab vlab ...` (the virtual lab). Exit codes in `ocslab --help`.
#pragma once

#include <cstddef>
#include <iosfwd>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "ocslab/common/exit_code.h"

namespace ocslab::runner {
struct RunResult;
}
namespace ocslab::analysis {
struct Localisation;
}

namespace ocslab::cli {

// Exit codes: common/exit_code.h, the same table in every ocslab program (named here as
// cli::kExit... too). Here: kExitInput for a bad lab file or spec (file:line:col in the message),
// kExitFailed when the lab could not start, a host died, a command failed or a run had problems.
using namespace ocslab::exit_codes;

int run_ocslab(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

// `ocslab vlab ssh HOST [--lab NAME] [COMMAND...]`: the index in args (as run_ocslab gets them)
// where the remote command starts; args.size() when there is none or args are not `vlab ssh`.
// Options before HOST, and ssh's own options right after it (--lab, --cache, --log-level,
// --help), are ocslab's; the first other word, or the word after `--`, starts the remote
// command, which goes to ssh untouched (its own --lab or --log-level included).
size_t vlab_ssh_remote_start(const std::vector<std::string>& args);

// The last event of `ocslab run --json-stream` (runner/run_events.h): the results folder, the
// exit code the run ends with, whether Ctrl-C stopped it, its counts and its problems.
nlohmann::json run_end_event(const runner::RunResult& r, int exit_code);

// How `ocslab run` ends a reconfiguration run whose summary localised faults (analysis/
// localisation.h): one "ocslab run: fault:" line each, then a last line naming the host, NIC
// and layer where the first one stopped. Returns kExitFailed (a run with problems) when there
// is a fault and `rc` is kExitOk, else `rc`.
int report_faults(const std::vector<analysis::Localisation>& faults, const std::string& folder, int rc,
                  std::ostream& err);

}  // namespace ocslab::cli
