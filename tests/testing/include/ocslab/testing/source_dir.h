// Where the tests find the repository's files (lab files, specs, fuzz corpora, scripts).
#pragma once

#include <string>

namespace ocslab::testing {

// $OCSLAB_SOURCE_DIR (every ctest entry sets it), else the source tree this build was configured
// from, so a test binary run by hand finds its files too.
std::string source_dir();

}  // namespace ocslab::testing
