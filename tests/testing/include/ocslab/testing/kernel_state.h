// Kernel state dumps compared independent of order. `ip -j route/neigh/link/addr` and
// `tc -j filter` list entries in the kernel's walk order (hash tables whose order changes as they
// grow, with a per-boot seed), so two dumps of the same state may list it differently. Compare
// them as sorted multisets of entries: the same entries (duplicates included) in any order.
#pragma once

#include <algorithm>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace ocslab::testing {

// A JSON array dump's entries, sorted by their compact text (nlohmann keeps object keys sorted,
// so equal entries have equal text). A non-array is returned as it is.
inline nlohmann::json sorted_entries(nlohmann::json dump) {
  if (!dump.is_array()) return dump;
  std::vector<std::pair<std::string, nlohmann::json>> keyed;
  for (auto& e : dump) keyed.emplace_back(e.dump(), std::move(e));
  std::sort(keyed.begin(), keyed.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  nlohmann::json out = nlohmann::json::array();
  for (auto& [text, e] : keyed) out.push_back(std::move(e));
  return out;
}

// A text dump's lines (one entry per line, as `ip -o` prints them), sorted.
inline std::vector<std::string> sorted_lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  std::sort(lines.begin(), lines.end());
  return lines;
}

}  // namespace ocslab::testing
