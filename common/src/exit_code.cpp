#include "ocslab/common/exit_code.h"

namespace ocslab {

const char* exit_code_help() {
  return "Exit codes:\n"
         "  0    success\n"
         "  1    bad command line\n"
         "  2    bad input: a file, spec, port, URL or value (named in the message); an output cannot be written\n"
         "  3    refused before anything changed: the switch refused a command; nothing asked for can run here\n"
         "  4    a peer cannot be reached, the connection was lost, no reply in time, or garbage from the peer\n"
         "  5    failed after starting: what was done is printed, and restored where the program restores\n"
         "  6    failed, and restoring the previous state failed too (the message says what to run)\n"
         "  7    a check found a difference: installed state differs from the plan, wrong results\n"
         "  8    the hardware asked about is not there: no transceiver module plugged in\n"
         "  130  interrupted by Ctrl-C or SIGTERM: what was captured is kept\n"
         "(one table for every ocslab program: docs/exit-codes.md)\n";
}

}  // namespace ocslab
