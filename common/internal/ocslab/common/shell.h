// Words that reach a remote shell (commands run over SSH on lab hosts): quoted so that what a
// spec or a command line says stays one word, whatever characters it holds.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace ocslab {

// The word as the shell must see it: unchanged when it holds only characters no shell treats
// specially (letters, digits, _-./:=,@+%), else in single quotes with each ' written '\''.
// The empty word is ''.
std::string shell_quote(std::string_view word);

// The words quoted and joined by single spaces: one command line.
std::string shell_join(const std::vector<std::string>& argv);

}  // namespace ocslab
