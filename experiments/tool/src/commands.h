// The `ocslab` subcommands other than vlab, one file each; run_ocslab dispatches on args[0].
// Each takes the full argument list (args[0] is its own name) and returns an ExitCode; they
// throw UsageError / ConfigError / Error for run_ocslab to report.
#pragma once
#include <iosfwd>
#include <string>
#include <vector>

#include "ocslab/common/error.h"

namespace ocslab::analysis {
struct Localisation;
}

namespace ocslab::cli {
// A bad command line: run_ocslab prints it and exits 1.
struct UsageError : Error {
  using Error::Error;
};

// A value given to an option that does not parse or is out of range (`--dwell abc`,
// `--dwell 0`): bad input, run_ocslab prints it and exits 2 (docs/exit-codes.md: a wrong option
// or a missing argument is the command line, 1; a wrong value is the input, 2).
struct BadValue : Error {
  using Error::Error;
};

// A failure whose exit code the command chose itself (`ocslab controller` reports its switches
// as ocsctl does): run_ocslab prints the message and exits with `code`.
struct CommandFailure : Error {
  CommandFailure(const std::string& what, int code) : Error(what), code(code) {}
  int code;
};

// "unknown <what> '<word>'. Did you mean '<nearest>'? (<help_command> --help)": the usage error of
// every word a command does not know, with the nearest of `candidates` (ocslab/common/suggest.h).
UsageError unknown_word(const std::string& what, const std::string& word, const std::vector<std::string>& candidates,
                        const std::string& help_command);  // cli_args.cpp

// `faults`: filled with the fault localisation of the analysed timeline (ocslab run names it).
int run_analyze(const std::vector<std::string>& args, std::ostream& out, std::ostream& err,
                std::vector<analysis::Localisation>* faults = nullptr);  // analyze_cli.cpp
int run_plot(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);     // plot_cli.cpp
int run_controller(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);  // controller_cli.cpp
int run_forwarding(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);  // forwarding_cli.cpp
int run_run(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);      // run_cli.cpp
int run_schedule(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);  // schedule_cli.cpp
int run_recover(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);  // run_cli.cpp
}  // namespace ocslab::cli
