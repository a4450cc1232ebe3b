// A netlink request the kernel refused: its errno and the extended-ack text (extack) the
// kernel gave, so callers can show the kernel's own reason next to the rule it concerned.
#pragma once

#include <string>

#include "ocslab/common/error.h"

namespace ocslab::forwarding {

class KernelError : public Error {
 public:
  KernelError(const std::string& what, int err, std::string extack)
      : Error(what), err(err), extack(std::move(extack)) {}
  int err;             // positive errno
  std::string extack;  // kernel's message; empty when it gave none
};

}  // namespace ocslab::forwarding
