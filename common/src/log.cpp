#include "ocslab/common/log.h"

#include <spdlog/sinks/stdout_color_sinks.h>
#include <unistd.h>

#include "ocslab/common/error.h"

namespace ocslab {

void init_logging(const std::string& level) {
  auto lvl = spdlog::level::from_str(level);
  if (lvl == spdlog::level::off && level != "off") {
    throw Error("unknown log level '" + level + "' (use trace, debug, info, warn, error, off)");
  }
  // Called once per command; in-process callers (tests, the runner) may call it again.
  auto logger = spdlog::get("ocslab");
  if (!logger) logger = spdlog::stderr_color_mt("ocslab");
  logger->set_pattern("%H:%M:%S.%e %^%l%$ %v");
  logger->set_level(lvl);
  spdlog::set_default_logger(logger);
}

bool stderr_is_terminal() { return isatty(STDERR_FILENO) == 1; }

}  // namespace ocslab
