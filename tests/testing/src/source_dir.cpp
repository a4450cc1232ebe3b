#include "ocslab/testing/source_dir.h"

#include <cstdlib>

namespace ocslab::testing {

std::string source_dir() {
  const char* d = std::getenv("OCSLAB_SOURCE_DIR");
  return d && *d ? d : OCSLAB_TEST_SOURCE_DIR;
}

}  // namespace ocslab::testing
