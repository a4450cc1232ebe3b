#include "cli_args.h"

#include <fmt/format.h>

#include <ostream>

#include "commands.h"

namespace ocslab::cli {

bool parse_args(const std::vector<std::string>& args, const std::string& command, const char* help, std::ostream& out,
                const OptionHandler& on_option, const std::function<void(const std::string& word)>& on_positional) {
  for (size_t i = 1; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--help" || a == "-h") {
      out << help;
      return false;
    }
    if (a.empty() || a[0] != '-') {
      on_positional(a);
      continue;
    }
    const OptionValue value = [&]() -> std::string {
      if (i + 1 >= args.size()) throw UsageError(a + " needs a value");
      return args[++i];
    };
    if (!on_option(a, value)) throw UsageError(fmt::format("unknown option '{}' (ocslab {} --help)", a, command));
  }
  return true;
}

}  // namespace ocslab::cli
