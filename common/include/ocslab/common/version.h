// The version every program's --version prints after its name ("ocsctl 0.1.0"): the project's
// CMake version (project(ocslab VERSION ...)), compiled into this one place.
#pragma once

namespace ocslab {

const char* project_version();

}  // namespace ocslab
