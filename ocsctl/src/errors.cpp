// exit_code_of(): one mapping from OCS failures to the exit-code table, for ocsctl and ocslab.
#include "ocslab/ocsctl/errors.h"

#include "ocslab/common/exit_code.h"

namespace ocslab::ocs {

int exit_code_of(const OcsError& e) {
  if (dynamic_cast<const ApplyError*>(&e)) return kExitFailed;
  if (dynamic_cast<const DenyError*>(&e)) return kExitRefused;
  if (dynamic_cast<const PortError*>(&e)) return kExitInput;
  return kExitUnreachable;  // ConnectionError, TimeoutError, ProtocolError
}

}  // namespace ocslab::ocs
