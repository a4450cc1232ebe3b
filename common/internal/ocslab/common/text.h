#pragma once
// Trimming shared by the text parsers. Formats differ in what counts as padding, so both kinds
// are here and each parser names the one its format uses.
#include <string>
#include <string_view>

namespace ocslab {

// Spaces and tabs (YAML-ish scalars, TL1 fields inside one line).
inline std::string_view trim_blanks(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// Spaces, tabs and line ends (whole TL1 / SCPI lines, XML text content).
inline std::string_view trim_space(std::string_view s) {
  auto space = [](char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; };
  while (!s.empty() && space(s.front())) s.remove_prefix(1);
  while (!s.empty() && space(s.back())) s.remove_suffix(1);
  return s;
}

// The last non-empty line of a command's output, without its line end: what a failed remote
// command said, for a message that names the cause without quoting all of it.
inline std::string last_line(std::string_view s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.remove_suffix(1);
  auto p = s.rfind('\n');
  return std::string(p == std::string_view::npos ? s : s.substr(p + 1));
}

}  // namespace ocslab
