// `ocslab analyze`: recompute breakdown.csv and the summary of a results folder or of any
// timeline file (an `ocslab-agent capture` included).
#include <fmt/format.h>
#include <charconv>
#include <filesystem>
#include <fstream>
#include <ostream>

#include "commands.h"
#include "ocslab/common/suggest.h"
#include "ocslab/analysis/breakdown.h"
#include "ocslab/analysis/summary.h"
#include "ocslab/analysis/timeline.h"
#include "ocslab/cli/ocslab_cli.h"

namespace fs = std::filesystem;

namespace ocslab::cli {

namespace {

constexpr const char* kAnalyzeHelp = R"(ocslab analyze - per-layer reconfiguration latency from a timeline

Usage: ocslab analyze FOLDER|TIMELINE.csv [-o DIR] [--dark-dbm DBM] [--json]

Reads FOLDER/timeline.csv (a results folder of `ocslab run`) or the given file (a timeline,
or the CSV of `ocslab-agent capture`, which has no run/iteration columns) and writes
  breakdown.csv   one row per reconfiguration x host x interface: each layer's edges and
                  the durations between them (control, switching, dark, firmware, carrier,
                  kernel, rdma, outage, total; ms)
  summary.txt     per duration: count, min, median, p90, p99, max over the `ok` rows
  summary.json    the same, machine-readable
into FOLDER (for a file: the file's folder), then prints summary.txt.

A file without an iteration column is cut into reconfigurations by its `ocs` `command`
rows, or when it has none, by the first light/firmware/carrier 1->0 edge more than 1 s after
the previous reconfiguration began.

Options:
  -o, --output DIR  write the three files into DIR (created if missing)
  --dark-dbm DBM    rx_power_dbm below DBM counts as dark (default -30)
  --json            print summary.json instead of summary.txt
  -h, --help        this text

Exit codes (the table in ocslab --help): 0 done, 1 bad command line, 2 unreadable or malformed timeline (file:line).
Formats: docs/experiments.md
)";

}  // namespace

int run_analyze(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  (void)err;
  std::string input, out_dir;
  bool json = false;
  analysis::BreakdownOptions options;
  for (size_t i = 1; i < args.size(); ++i) {
    std::string w = args[i];
    std::string value;
    bool has_value = false;
    if (w.rfind("--", 0) == 0 && w.find('=') != std::string::npos) {
      value = w.substr(w.find('=') + 1);
      w = w.substr(0, w.find('='));
      has_value = true;
    }
    auto need = [&](const std::string& name) {
      if (has_value) return value;
      if (i + 1 >= args.size()) throw UsageError(name + " needs a value (ocslab analyze --help)");
      return args[++i];
    };
    if (w == "-h" || w == "--help") {
      out << kAnalyzeHelp;
      return kExitOk;
    } else if (w == "-o" || w == "--output") {
      out_dir = need(w);
    } else if (w == "--dark-dbm") {
      std::string v = need(w);
      double d = 0;
      auto r = std::from_chars(v.data(), v.data() + v.size(), d);
      if (v.empty() || r.ec != std::errc() || r.ptr != v.data() + v.size())
        throw UsageError("--dark-dbm needs a number of dBm, got '" + v + "'");
      options.dark_dbm = d;
    } else if (w == "--json") {
      json = true;
    } else if (w.size() > 1 && w[0] == '-') {
      throw unknown_word("option", args[i], options_in_text(kAnalyzeHelp), "ocslab analyze");
    } else if (input.empty()) {
      input = w;
    } else {
      throw UsageError(fmt::format("one FOLDER or TIMELINE.csv only, got '{}' and '{}'", input, w));
    }
  }
  if (input.empty()) throw UsageError("usage: ocslab analyze FOLDER|TIMELINE.csv [-o DIR] (ocslab analyze --help)");

  std::string timeline_path = input;
  std::error_code ec;
  if (fs::is_directory(input, ec)) {
    timeline_path = (fs::path(input) / "timeline.csv").string();
    if (out_dir.empty()) out_dir = input;
  } else if (out_dir.empty()) {
    out_dir = fs::path(input).parent_path().string();
    if (out_dir.empty()) out_dir = ".";
  }

  analysis::Timeline tl = analysis::read_timeline(timeline_path);
  analysis::Breakdown b = analysis::compute_breakdown(tl, options);
  auto stats = analysis::summarize(b);
  analysis::SummaryContext ctx{timeline_path, tl.rows, tl.events.size(), options.dark_dbm};
  std::string text = analysis::summary_text(b, stats, ctx);
  std::string js = analysis::summary_json(b, stats, ctx).dump(2) + "\n";

  fs::create_directories(out_dir, ec);
  if (ec) throw Error("cannot create the output folder '" + out_dir + "': " + ec.message());
  auto write = [&](const std::string& name, auto&& fill) {
    std::string path = (fs::path(out_dir) / name).string();
    std::ofstream f(path, std::ios::trunc);
    if (!f) throw Error("cannot write '" + path + "'");
    fill(f);
    f.close();  // the buffered tail reaches the file here: a full disk fails now, naming the file
    if (!f) throw Error("cannot write '" + path + "'");
  };
  write("breakdown.csv", [&](std::ostream& f) { analysis::write_breakdown_csv(b, f); });
  write("summary.txt", [&](std::ostream& f) { f << text; });
  write("summary.json", [&](std::ostream& f) { f << js; });
  out << (json ? js : text);
  return kExitOk;
}

}  // namespace ocslab::cli
