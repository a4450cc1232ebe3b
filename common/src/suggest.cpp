#include "ocslab/common/suggest.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>

namespace ocslab {

size_t edit_distance(std::string_view a, std::string_view b) {
  // Three rows of the dynamic-programming table: two back for the swap of neighbours.
  std::vector<size_t> before(b.size() + 1), previous(b.size() + 1), current(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) previous[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    current[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      current[j] = std::min({previous[j] + 1, current[j - 1] + 1, previous[j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        current[j] = std::min(current[j], before[j - 2] + 1);
      }
    }
    before.swap(previous);
    previous.swap(current);
  }
  return previous[b.size()];
}

std::optional<std::string> closest_word(std::string_view word, const std::vector<std::string>& candidates) {
  const size_t dashes = std::min(word.find_first_not_of('-'), word.size());
  const size_t length = word.size() - dashes;
  const size_t limit = length <= 4 ? 1 : length <= 8 ? 2 : 3;
  std::optional<std::string> best;
  size_t best_distance = limit + 1;
  for (const auto& c : candidates) {
    if (c == word) return std::nullopt;
    const size_t d = edit_distance(word, c);
    if (d < best_distance) {
      best_distance = d;
      best = c;
    }
  }
  // A word cut short (--interval for --interval-ms) is further than a typo but just as clear.
  if (!best && length >= 3) {
    for (const auto& c : candidates) {
      if (c.size() > word.size() && std::string_view(c).substr(0, word.size()) == word) return c;
    }
  }
  return best;
}

std::string did_you_mean(std::string_view word, const std::vector<std::string>& candidates) {
  auto best = closest_word(word, candidates);
  return best ? fmt::format(" Did you mean '{}'?", *best) : std::string();
}

std::vector<std::string> options_in_text(std::string_view help) {
  std::vector<std::string> out;
  for (size_t i = help.find("--"); i != std::string_view::npos; i = help.find("--", i + 2)) {
    if (i > 0 && (std::isalnum(static_cast<unsigned char>(help[i - 1])) || help[i - 1] == '-')) continue;
    size_t end = i + 2;
    while (end < help.size() &&
           (std::isalnum(static_cast<unsigned char>(help[end])) || help[end] == '-' || help[end] == '_')) {
      ++end;
    }
    if (end == i + 2 || !std::isalpha(static_cast<unsigned char>(help[i + 2]))) continue;
    std::string name(help.substr(i, end - i));
    while (name.back() == '-') name.pop_back();
    if (std::find(out.begin(), out.end(), name) == out.end()) out.push_back(name);
  }
  return out;
}

std::string unknown_word_message(std::string_view what, std::string_view word,
                                 const std::vector<std::string>& candidates) {
  return fmt::format("unknown {} '{}'.{}", what, word, did_you_mean(word, candidates));
}

}  // namespace ocslab
