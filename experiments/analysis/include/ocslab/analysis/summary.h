// Summary statistics of a breakdown (summary.txt / summary.json): per duration column, over
// the rows with status `ok` that have a value, count, min, median, p90, p99 and max in ms.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "ocslab/analysis/breakdown.h"

namespace ocslab::analysis {

struct ColumnSummary {
  std::string column;  // "control_ms", ...
  size_t count = 0;
  // ms; meaningless when count == 0
  double min = 0, median = 0, p90 = 0, p99 = 0, max = 0;
};

// The p-th percentile (0..100) of sorted values, interpolating linearly between order
// statistics like numpy.percentile's default. `sorted` must not be empty.
double percentile(const std::vector<double>& sorted, double p);

std::vector<ColumnSummary> summarize(const Breakdown& b);

// What the summary is about, for its header lines.
struct SummaryContext {
  std::string timeline;  // path
  size_t timeline_rows = 0;
  size_t kept_rows = 0;
  double dark_dbm = -30;
};

std::string summary_text(const Breakdown& b, const std::vector<ColumnSummary>& s, const SummaryContext& c);
nlohmann::ordered_json summary_json(const Breakdown& b, const std::vector<ColumnSummary>& s, const SummaryContext& c);

}  // namespace ocslab::analysis
