#include "ocslab/common/error.h"

#include <cstring>

namespace ocslab {

SystemError::SystemError(const std::string& what, int err)
    : Error(what + ": " + std::strerror(err)), code_(err) {}

}  // namespace ocslab
