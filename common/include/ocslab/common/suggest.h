// What every command line says about a word it does not know: the word itself and, when one
// of the valid words is close enough to be a typo of it, that word ("unknown command 'lsit'.
// Did you mean 'list'?"). Shared by ocsctl, ocslab, ocslab-agent and the collbench programs so
// that a mistyped subcommand or option reads the same everywhere (docs/conventions.md).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ocslab {

// Optimal-string-alignment distance: insertions, deletions, substitutions and swaps of two
// neighbouring characters each cost 1 ("lsit" is 1 from "list", where plain Levenshtein says 2).
size_t edit_distance(std::string_view a, std::string_view b);

// The candidate nearest to `word`, when it is near enough to be a typo: at most 1 edit for
// words of up to 4 characters, 2 up to 8, 3 beyond (leading dashes do not count towards the
// length), or else the first candidate that starts with the word (3 characters at least, dashes
// not counted). The first of equally near candidates wins; an exact match is not a suggestion.
std::optional<std::string> closest_word(std::string_view word, const std::vector<std::string>& candidates);

// " Did you mean 'X'?" for the closest candidate, or "" when none is close.
std::string did_you_mean(std::string_view word, const std::vector<std::string>& candidates);

// The long options (--name) a help text mentions, in order of first appearance: the valid
// options of a command whose parser has no table to ask (`ocslab`'s hand-written ones).
std::vector<std::string> options_in_text(std::string_view help);

// The text every program prints for a word it does not know, e.g.
// unknown_word_message("command", "lsit", {"list", ...}) ==
//   "unknown command 'lsit'. Did you mean 'list'?"
std::string unknown_word_message(std::string_view what, std::string_view word,
                                 const std::vector<std::string>& candidates);

}  // namespace ocslab
