// Summary statistics of a breakdown (summary.txt / summary.json): per duration column, over
// the rows with status `ok` that have a value, count, min, median, p90, p99 and max in ms; then
// the fault localisation of every reconfiguration that did not complete (localisation.h).
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "ocslab/analysis/breakdown.h"
#include "ocslab/analysis/localisation.h"

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
  // The fault localisation of the breakdown (localise()); null: the summary localises itself,
  // with `timeline_data` for the evidence's line numbers when it is given.
  const std::vector<Localisation>* faults = nullptr;
  const Timeline* timeline_data = nullptr;
};

std::string summary_text(const Breakdown& b, const std::vector<ColumnSummary>& s, const SummaryContext& c);
nlohmann::ordered_json summary_json(const Breakdown& b, const std::vector<ColumnSummary>& s, const SummaryContext& c);
// summary.json's text (indent 2, a newline at the end). A timeline's names are bytes, not
// always UTF-8: invalid sequences become U+FFFD instead of the exception nlohmann's dump throws.
std::string summary_json_text(const nlohmann::ordered_json& j);

// The "fault localisation" section of summary.txt (`timeline`: the path its line numbers are
// of), and one localisation as summary.json's `faults` has it.
std::string faults_text(const std::vector<Localisation>& faults, const std::string& timeline);
nlohmann::ordered_json fault_json(const Localisation& l);
// "reconfiguration 2 (mapping full): h3/eth1 stopped at firmware; 3 of 4 port(s) resumed"
std::string fault_headline(const Localisation& l);

// The "GID tables" section of summary.txt: empty when the breakdown has no GID change at all;
// one line when GIDs changed and every index kept the address it held; else a flag per
// reconfiguration and row after which a GID index no longer holds its address (GidLoss).
std::string gid_text(const Breakdown& b);
// summary.json's `gid` (only with Breakdown::has_gid): the counts and the flags.
nlohmann::ordered_json gid_json(const Breakdown& b);

}  // namespace ocslab::analysis
