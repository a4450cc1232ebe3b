// A request the kernel refused over netlink: the errno it answered and its extended ack
// message (extack), so callers can show the kernel's own reason next to the offending rule.
#pragma once

#include <string>
#include <utility>

#include "ocslab/common/error.h"

namespace ocslab::forwarding {

class KernelError : public Error {
 public:
  KernelError(std::string what, int err, std::string extack)
      : Error(std::move(what)), err_(err), extack_(std::move(extack)) {}
  int err() const { return err_; }
  const std::string& extack() const { return extack_; }

 private:
  int err_;
  std::string extack_;
};

}  // namespace ocslab::forwarding
