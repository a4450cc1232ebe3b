// `ocslab analyze`: recompute breakdown.csv and the summary of a results folder or of any
// timeline file (an `ocslab-agent capture` included).
#include <fmt/format.h>
#include <algorithm>
#include <charconv>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <ostream>

#include "commands.h"
#include "ocslab/analysis/breakdown.h"
#include "ocslab/analysis/firmware_study.h"
#include "ocslab/analysis/localisation.h"
#include "ocslab/analysis/qp_timers.h"
#include "ocslab/analysis/summary.h"
#include "ocslab/analysis/survival.h"
#include "ocslab/analysis/timeline.h"
#include "ocslab/cli/ocslab_cli.h"
#include "ocslab/common/error.h"
#include "ocslab/common/file.h"
#include "ocslab/common/suggest.h"

namespace fs = std::filesystem;

namespace ocslab::cli {

namespace {

constexpr const char* kAnalyzeHelp = R"(ocslab analyze - per-layer reconfiguration latency from a timeline

Usage: ocslab analyze FOLDER|TIMELINE.csv [-o DIR] [--dark-dbm DBM] [--no-intents] [--json]
       ocslab analyze FOLDER|TIMELINE.csv --recommend-qp [--qp-margin FACTOR]

Reads FOLDER/timeline.csv (a results folder of `ocslab run`) or the given file (a timeline,
or the CSV of `ocslab-agent capture`, which has no run/iteration columns) and writes
  breakdown.csv   one row per reconfiguration x host x interface: each layer's edges and
                  the durations between them (control, switching, dark, firmware, carrier,
                  kernel, rdma, outage, total; ms)
  summary.txt     per duration: count, min, median, p90, p99, max over the `ok` rows; then
                  the fault localisation: for each reconfiguration that did not complete,
                  the host/interface whose layers stopped first (the earliest divergence from
                  the others), the layer (switch, light, firmware, carrier, rdma) and the
                  timeline rows that show it
  summary.json    the same, machine-readable (`faults`)
  firmware_study.csv  (a run with a firmware sweep: meta.json's firmware_sweep) per NIC model and
                  dwell: the reconfiguration interval, the firmware link-up (light back to link
                  up) min, median, p90, max and mean over the rows whose link came up, and how
                  many never came up before the next reconfiguration; printed after the summary
into FOLDER (for a file: the file's folder), then prints summary.txt. A timeline with survival
probes (RDMA subjects ending in :t<timeout>r<retry_cnt>, the `outages` experiment) also gets
  survival.csv         one row per outage x host x probe: the outcome (survived, errored,
                       stalled, untouched, not_applied), the predicted one, and its times
  survival_matrix.csv  per (timeout, retry_cnt) x planned outage length: the outcome counts and
                       the predicted boundaries (retry_cnt x T; Soft-RoCE's, at HZ=250)
and the summary is followed by one line per setting: measured and predicted boundary, agrees
or disagrees.

A file without an iteration column is cut into reconfigurations by its `ocs` `command`
rows, or when it has none, by the first light/firmware/carrier 1->0 edge more than 1 s after
the previous reconfiguration began.

When meta.json next to the timeline names the run's mappings (`mappings`, `initial_mapping`,
`reconfigurations`: written by `ocslab run`), each row also gets what its reconfiguration meant
to do to the port (intent: move, up, dark, stay, unknown): a port coming up from dark is
measured from the command (status ok once every probed layer came up, else incomplete), a
port whose circuit the new mapping removed is `disconnected`.

Options:
  -o, --output DIR  write the three files into DIR (created if missing)
  --dark-dbm DBM    rx_power_dbm below DBM counts as dark (default -30)
  --no-intents      ignore meta.json's mappings: judge every port by its edges alone
  --json            print summary.json instead of summary.txt
  --recommend-qp    print, instead of the summary, the smallest queue-pair settings (local ACK
                    timeout, retry count) that survive the p99 of the `ok` rows' outages (first
                    of light lost and carrier down, to carrier up) times the margin: as the
                    NCCL_IB_TIMEOUT/NCCL_IB_RETRY_CNT line a job sets and as verbs attributes
  --qp-margin FACTOR  multiply the p99 outage by FACTOR, at least 1 (default 2)
  -h, --help        this text

Exit codes (the table in ocslab --help): 0 done, 1 bad command line, 2 unreadable or malformed timeline (file:line).
Formats: docs/experiments.md
)";

// The intents of a run's reconfigurations from its meta.json: `mappings` ({name: [[host, nic,
// host, nic], ...]}), `initial_mapping` and `reconfigurations` ([{iteration, mapping, ok}]).
// None when the file or `mappings` is missing (older runs); ConfigError when they are malformed.
std::optional<analysis::Intents> intents_from_meta(const std::string& path) {
  std::error_code ec;
  if (!fs::exists(path, ec)) return std::nullopt;
  nlohmann::json j = nlohmann::json::parse(read_file_or_empty(path), nullptr, false);
  if (j.is_discarded() || !j.is_object())
    throw ConfigError(path + ": not a JSON object (--no-intents analyzes without it)");
  if (!j.contains("mappings")) return std::nullopt;
  auto bad = [&](const std::string& what) {
    return ConfigError(path + ": " + what + " (--no-intents analyzes without it)");
  };
  const auto& jm = j["mappings"];
  if (!jm.is_object()) throw bad("`mappings` is not an object of mapping names");
  std::map<std::string, analysis::MappingLinks> mappings;
  for (const auto& [name, links] : jm.items()) {
    analysis::MappingLinks m{name, {}};
    if (!links.is_array()) throw bad("mapping '" + name + "' is not a list of links");
    for (const auto& l : links) {
      if (!l.is_array() || l.size() != 4 || !std::all_of(l.begin(), l.end(), [](auto& x) { return x.is_string(); }))
        throw bad("mapping '" + name + "': a link is not [host, nic, host, nic]");
      m.links.push_back(
          {{l[0].get<std::string>(), l[1].get<std::string>()}, {l[2].get<std::string>(), l[3].get<std::string>()}});
    }
    mappings.emplace(name, std::move(m));
  }
  if (!j.contains("initial_mapping") || !j["initial_mapping"].is_string()) throw bad("`initial_mapping` is not a name");
  std::vector<analysis::AppliedMapping> applied;
  const auto& jr = j.contains("reconfigurations") ? j["reconfigurations"] : nlohmann::json::array();
  if (!jr.is_array()) throw bad("`reconfigurations` is not a list");
  for (const auto& r : jr) {
    if (!r.is_object() || !r.contains("iteration") || !r["iteration"].is_number_integer() || !r.contains("mapping") ||
        !r["mapping"].is_string())
      throw bad("a reconfiguration has no integer `iteration` and `mapping` name");
    bool ok = !r.contains("ok") || (r["ok"].is_boolean() && r["ok"].get<bool>());
    applied.push_back({r["iteration"].get<int>(), r["mapping"].get<std::string>(), ok});
  }
  analysis::Intents in = analysis::derive_intents(mappings, j["initial_mapping"].get<std::string>(), applied);
  in.from = path;
  return in;
}

// The switch ports in front of each host's NICs from meta.json's `switch_ports` ([[host, nic,
// tx, rx], ...], written by `ocslab run`), for the fault localisation to name; none when the
// file or the key is missing (older runs); ConfigError when it is malformed.
std::optional<std::map<analysis::Endpoint, analysis::SwitchPorts>> ports_from_meta(const std::string& path) {
  std::error_code ec;
  if (!fs::exists(path, ec)) return std::nullopt;
  nlohmann::json j = nlohmann::json::parse(read_file_or_empty(path), nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("switch_ports")) return std::nullopt;
  const auto& jp = j["switch_ports"];
  auto entry_ok = [](const nlohmann::json& e) {
    return e.is_array() && e.size() == 4 && e[0].is_string() && e[1].is_string() && e[2].is_number_integer() &&
           e[3].is_number_integer();
  };
  if (!jp.is_array() || !std::all_of(jp.begin(), jp.end(), entry_ok))
    throw ConfigError(path + ": `switch_ports` is not a list of [host, nic, tx port, rx port]");
  std::map<analysis::Endpoint, analysis::SwitchPorts> ports;
  for (const auto& e : jp)
    ports[{e[0].get<std::string>(), e[1].get<std::string>()}] = {e[2].get<int>(), e[3].get<int>()};
  return ports;
}

// A run with a firmware sweep (meta.json's firmware_sweep, firmware_study.h): writes
// firmware_study.csv into out_dir and returns its table; none without the file or the section.
std::optional<std::string> write_firmware_study(const std::string& meta_path, const analysis::Timeline& tl,
                                                const std::string& out_dir) {
  std::error_code ec;
  if (!fs::exists(meta_path, ec)) return std::nullopt;
  nlohmann::json j = nlohmann::json::parse(read_file_or_empty(meta_path), nullptr, false);
  if (j.is_discarded()) return std::nullopt;
  const auto points = analysis::firmware_points_from_meta(j, meta_path);
  if (points.empty()) return std::nullopt;
  const auto stats = analysis::firmware_study(tl, points);
  const std::string path = (fs::path(out_dir) / "firmware_study.csv").string();
  std::ofstream f(path, std::ios::trunc);
  if (!f) throw Error("cannot write '" + path + "'");
  analysis::write_firmware_study_csv(stats, f);
  f.close();
  if (!f) throw Error("cannot write '" + path + "'");
  return analysis::firmware_study_text(stats);
}

}  // namespace

int run_analyze(const std::vector<std::string>& args, std::ostream& out, std::ostream& err,
                std::vector<analysis::Localisation>* faults_out) {
  (void)err;
  std::string input, out_dir;
  bool json = false, no_intents = false, recommend = false;
  double qp_margin = analysis::kDefaultQpMargin;
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
        throw BadValue("--dark-dbm needs a number of dBm, got '" + v + "' (ocslab analyze --help)");
      options.dark_dbm = d;
    } else if (w == "--recommend-qp") {
      recommend = true;
    } else if (w == "--qp-margin") {
      std::string v = need(w);
      auto r = std::from_chars(v.data(), v.data() + v.size(), qp_margin);
      if (v.empty() || r.ec != std::errc() || r.ptr != v.data() + v.size() || !(qp_margin >= 1))
        throw BadValue("--qp-margin needs a factor of at least 1, got '" + v + "' (ocslab analyze --help)");
    } else if (w == "--json") {
      json = true;
    } else if (w == "--no-intents") {
      no_intents = true;
    } else if (w.size() > 1 && w[0] == '-') {
      throw unknown_word("option", args[i], options_in_text(kAnalyzeHelp), "ocslab analyze");
    } else if (input.empty()) {
      input = w;
    } else {
      throw UsageError(fmt::format("one FOLDER or TIMELINE.csv only, got '{}' and '{}'", input, w));
    }
  }
  if (recommend && json) throw UsageError("--recommend-qp prints text lines: leave out --json");
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
  // The run's mappings, next to the timeline (a results folder's meta.json).
  std::string meta_path = (fs::path(timeline_path).parent_path() / "meta.json").string();
  std::optional<analysis::Intents> intents;
  if (!no_intents) intents = intents_from_meta(meta_path);
  analysis::Breakdown b = analysis::compute_breakdown(tl, options, intents ? &*intents : nullptr);
  auto stats = analysis::summarize(b);
  auto ports = ports_from_meta(meta_path);
  std::vector<analysis::Localisation> faults = analysis::localise(b, &tl, ports ? &*ports : nullptr);
  analysis::SummaryContext ctx{timeline_path, tl.rows, tl.events.size(), options.dark_dbm, &faults, &tl};
  std::string text = analysis::summary_text(b, stats, ctx);
  std::string js = analysis::summary_json_text(analysis::summary_json(b, stats, ctx));

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
  // The survival experiment's files, when the timeline has survival probes (survival.h).
  std::optional<std::string> survival = analysis::write_survival_files(timeline_path, out_dir);
  // The firmware study's, when meta.json has a firmware sweep (firmware_study.h).
  std::optional<std::string> study = write_firmware_study(meta_path, tl, out_dir);
  if (recommend) {
    std::vector<double> outages = analysis::outages_from_breakdown(b);
    if (outages.empty())
      throw Error("--recommend-qp: no `ok` row of " + timeline_path +
                  " has an outage (light lost or carrier down, then carrier up) to size the settings for");
    out << analysis::recommendation_text(analysis::recommend_qp(std::move(outages), qp_margin));
  } else {
    out << (json ? js : text);
    if (survival && !json) out << "\n" << *survival;
    if (study && !json) out << "\n" << *study;
  }
  if (faults_out) {
    // A firmware study measures links that stay down until the next reconfiguration (its
    // not_up): a reconfiguration whose ports stopped at the firmware is a result, not a fault.
    if (study) std::erase_if(faults, [](const auto& f) { return f.layer == analysis::ChainLayer::kFirmware; });
    *faults_out = std::move(faults);
  }
  return kExitOk;
}

}  // namespace ocslab::cli
