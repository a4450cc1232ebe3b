#include "ocslab/common/version.h"

#ifndef OCSLAB_VERSION
#error "OCSLAB_VERSION must be defined by common/CMakeLists.txt (the project's version)"
#endif

namespace ocslab {

const char* project_version() { return OCSLAB_VERSION; }

}  // namespace ocslab
