// One exit-code table for every ocslab program (ocsctl, ocslab, ocslab-agent, the collbench
// programs): a program uses the codes that apply to it, each with the meaning written here.
// docs/exit-codes.md is the same table for readers; exit_code_help() is the text --help prints.
#pragma once

namespace ocslab {

// In a namespace of its own so that a program's CLI namespace can take every code with one
// `using namespace ocslab::exit_codes;` (and tests can name them as cli::kExitFailed and the like).
namespace exit_codes {

enum ExitCode : int {
  kExitOk = 0,
  kExitUsage = 1,         // bad command line (the message names the option or argument)
  kExitInput = 2,         // bad input: a file, spec, port, URL or value (named); an output that cannot be written
  kExitRefused = 3,       // refused before anything changed: the switch refused a command, nothing asked for can
                          // run on this host
  kExitUnreachable = 4,   // a peer (switch, host, daemon) cannot be reached, the connection was lost, no reply came
                          // in time, or the peer sent garbage
  kExitFailed = 5,        // failed after starting; what was done is printed, and restored where the program restores
  kExitNotRestored = 6,   // failed, and restoring the previous state failed too (the message says what to run)
  kExitMismatch = 7,      // a check found a difference: installed state differs from the plan, wrong results
  kExitAbsent = 8,        // the hardware asked about is not there: no transceiver module plugged in
  kExitInterrupted = 130  // stopped by Ctrl-C or SIGTERM; what was captured is kept
};

}  // namespace exit_codes
using namespace exit_codes;

// The table as the "Exit codes:" section of --help (every program prints the same one).
const char* exit_code_help();

}  // namespace ocslab
