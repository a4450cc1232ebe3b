#include "ocslab/ocsctl/types.h"

namespace ocslab::ocs {

std::string to_string(const Circuit& c) {
  return std::to_string(c.ingress) + "-" + std::to_string(c.egress);
}

}  // namespace ocslab::ocs
