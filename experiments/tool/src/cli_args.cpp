#include "cli_args.h"

#include <fmt/format.h>

#include <ostream>

#include "commands.h"
#include "ocslab/common/suggest.h"

namespace ocslab::cli {

UsageError unknown_word(const std::string& what, const std::string& word, const std::vector<std::string>& candidates,
                        const std::string& help_command) {
  return UsageError(fmt::format("{} ({} --help)", unknown_word_message(what, word, candidates), help_command));
}

bool parse_args(const std::vector<std::string>& args, const std::string& command, const char* help, std::ostream& out,
                const OptionHandler& on_option, const std::function<void(const std::string& word)>& on_positional) {
  for (size_t i = 1; i < args.size(); ++i) {
    const std::string& word = args[i];
    if (word == "--help" || word == "-h") {
      out << help;
      return false;
    }
    if (word.empty() || word[0] != '-') {
      on_positional(word);
      continue;
    }
    // --name=value and --name value are the same option.
    const auto eq = word.find('=');
    const bool inline_value = word.rfind("--", 0) == 0 && eq != std::string::npos;
    const std::string name = inline_value ? word.substr(0, eq) : word;
    bool used = false;
    const OptionValue value = [&]() -> std::string {
      used = true;
      if (inline_value) return word.substr(eq + 1);
      if (i + 1 >= args.size()) throw UsageError(name + " needs a value");
      return args[++i];
    };
    // The options a command takes are the ones its help names.
    if (!on_option(name, value)) throw unknown_word("option", name, options_in_text(help), "ocslab " + command);
    if (inline_value && !used) throw UsageError(fmt::format("{} takes no value (ocslab {} --help)", name, command));
  }
  return true;
}

}  // namespace ocslab::cli
