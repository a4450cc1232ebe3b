// The option loop of the `ocslab` subcommands that take options (run, forwarding, controller): one pass over args[1..] that
// prints the help, hands each option (with its value on request) and each other word to the
// command, and raises the usage errors for a missing value or an unknown option.
#pragma once
#include <functional>
#include <iosfwd>
#include <string>
#include <vector>

namespace ocslab::cli {

// The word after the option being handled; UsageError "<option> needs a value" at the end.
using OptionValue = std::function<std::string()>;

// An option's handler: false when the command has no such option.
using OptionHandler = std::function<bool(const std::string& option, const OptionValue& value)>;

// Walks args[1..] in order: --help / -h prints `help` to out and stops; a word starting with '-'
// goes to on_option (UsageError "unknown option '<w>'. Did you mean '<option of help>'? (ocslab
// <command> --help)" when it declines), `--name=value` as `--name` with that value (UsageError when the option takes none);
// any other word goes to on_positional. Returns false when the help was printed (the
// command then exits 0), true when every word was handled.
bool parse_args(const std::vector<std::string>& args, const std::string& command, const char* help, std::ostream& out,
                const OptionHandler& on_option, const std::function<void(const std::string& word)>& on_positional);

}  // namespace ocslab::cli
