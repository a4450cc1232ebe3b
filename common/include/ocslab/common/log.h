// Logging through spdlog to stderr, so stdout stays free for CSV / JSON output.
#pragma once

#include <spdlog/spdlog.h>

#include <string>

namespace ocslab {

// level: trace, debug, info, warn, error, off. Unknown names throw ocslab::Error.
void init_logging(const std::string& level);

// True when stderr is a terminal: progress output is shown only then.
bool stderr_is_terminal();

}  // namespace ocslab
