// The survival analysis reads timelines from other machines and hand-edited files: any bytes
// must read as a survival result or give an ocslab::ConfigError naming fuzz.csv:line, and any
// result must be consistent: every row's setting in the matrix, counts that add up to the queue
// pairs of the rows that were applied, boundaries on the grid with the longest survived an all-survived length,
// and two CSV files and a summary with one line per setting.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <sstream>
#include <set>
#include <string>
#include <tuple>

#include "ocslab/analysis/survival.h"
#include "ocslab/common/error.h"

using namespace ocslab::analysis;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  Survival s;
  try {
    s = parse_survival(text, "fuzz.csv");
  } catch (const ocslab::ConfigError& e) {
    if (std::string(e.what()).rfind("fuzz.csv:", 0) != 0) __builtin_trap();  // file:line first
    return 0;
  }
  if (!std::is_sorted(s.grid.begin(), s.grid.end())) __builtin_trap();
  if (s.not_applied > s.outages) __builtin_trap();
  // The matrix counts queue pairs: a row and the row of its other end (host and peer swapped)
  // in one outage and setting count once.
  std::set<std::tuple<std::string, int, int, int, std::string, std::string>> pairs;
  for (const auto& r : s.rows) {
    if (r.outcome != Outcome::kNotApplied)
      pairs.insert({r.run, r.iteration, r.timeout, r.retry_cnt, std::min(r.host, r.peer), std::max(r.host, r.peer)});
    if (!std::binary_search(s.grid.begin(), s.grid.end(), r.outage_ms)) __builtin_trap();
    if (r.error_after_ms && r.outcome != Outcome::kErrored) __builtin_trap();
    if (r.resume_after_light_ms && r.outcome != Outcome::kSurvived) __builtin_trap();
  }
  size_t counted = 0;
  for (const auto& set : s.settings) {
    if (set.points.size() != s.grid.size()) __builtin_trap();
    for (const auto& p : set.points) {
      counted += p.total();
      if (set.longest_survived_ms == p.outage_ms && p.survived + p.untouched != p.total()) __builtin_trap();
    }
    if (set.shortest_errored_ms && !std::binary_search(s.grid.begin(), s.grid.end(), *set.shortest_errored_ms))
      __builtin_trap();
  }
  if (counted != pairs.size()) __builtin_trap();
  std::ostringstream rows, matrix;
  write_survival_csv(s, rows);
  write_survival_matrix_csv(s, matrix);
  const std::string r = rows.str(), m = matrix.str();
  if (static_cast<size_t>(std::count(r.begin(), r.end(), '\n')) < s.rows.size() + 1) __builtin_trap();
  std::string summary = survival_summary(s);
  if (summary.find("disagreements: ") == std::string::npos) __builtin_trap();
  if (static_cast<size_t>(std::count(summary.begin(), summary.end(), '\n')) != s.settings.size() + 2) __builtin_trap();
  return 0;
}
