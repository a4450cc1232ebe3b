#include "ocslab/analysis/summary.h"

#include <fmt/format.h>
#include <algorithm>
#include <array>
#include <cmath>

namespace ocslab::analysis {

double percentile(const std::vector<double>& sorted, double p) {
  double h = (static_cast<double>(sorted.size()) - 1) * p / 100.0;
  auto lo = static_cast<size_t>(std::floor(h));
  size_t hi = std::min(lo + 1, sorted.size() - 1);
  return sorted[lo] + (h - static_cast<double>(lo)) * (sorted[hi] - sorted[lo]);
}

std::vector<ColumnSummary> summarize(const Breakdown& b) {
  std::vector<ColumnSummary> out;
  for (int d = 0; d < kDurationCount; ++d) {
    std::vector<double> v;
    for (const auto& r : b.rows) {
      if (r.status != Status::kOk) continue;
      if (auto ns = r.duration_ns(static_cast<Duration>(d))) v.push_back(static_cast<double>(*ns) / 1e6);
    }
    std::sort(v.begin(), v.end());
    ColumnSummary s;
    s.column = duration_columns()[static_cast<size_t>(d)];
    s.count = v.size();
    if (!v.empty()) {
      s.min = v.front();
      s.max = v.back();
      s.median = percentile(v, 50);
      s.p90 = percentile(v, 90);
      s.p99 = percentile(v, 99);
    }
    out.push_back(s);
  }
  return out;
}

namespace {

std::array<size_t, kStatusCount> status_counts(const Breakdown& b) {
  std::array<size_t, kStatusCount> n{};
  for (const auto& r : b.rows) ++n[static_cast<size_t>(r.status)];
  return n;
}

constexpr std::array<Intent, 5> kIntents = {Intent::kMove, Intent::kUp, Intent::kDark, Intent::kStay,
                                            Intent::kUnknown};

std::array<size_t, kIntents.size()> intent_counts(const Breakdown& b) {
  std::array<size_t, kIntents.size()> n{};
  for (const auto& r : b.rows)
    for (size_t k = 0; k < kIntents.size(); ++k) n[k] += r.intent == kIntents[k];
  return n;
}

// The summary's localisation: the caller's, else computed here.
std::vector<Localisation> faults_of(const Breakdown& b, const SummaryContext& c) {
  return c.faults ? *c.faults : localise(b, c.timeline_data);
}

}  // namespace

std::string fault_headline(const Localisation& l) {
  std::string where;
  if (!l.run.empty()) where += "run " + l.run;
  if (!l.mapping.empty()) where += (where.empty() ? "" : ", ") + std::string("mapping ") + l.mapping;
  return fmt::format("reconfiguration {}{}: {}", l.iteration, where.empty() ? "" : " (" + where + ")", l.verdict);
}

std::string faults_text(const std::vector<Localisation>& faults, const std::string& timeline) {
  if (faults.empty()) return "fault localisation: none (every reconfiguration completed on every port that took part)\n";
  std::string t = fmt::format("fault localisation: {} reconfiguration(s) did not complete\n", faults.size());
  for (const auto& l : faults) {
    t += fault_headline(l) + "\n";
    for (const auto& e : l.evidence) {
      if (e.line > 0 && timeline.empty())
        t += fmt::format("  line {}  {}\n", e.line, e.text);
      else if (e.line > 0)
        t += fmt::format("  {}:{}  {}\n", timeline, e.line, e.text);
      else
        t += fmt::format("  {}\n", e.text);
    }
  }
  return t;
}

nlohmann::ordered_json fault_json(const Localisation& l) {
  nlohmann::ordered_json j;
  j["run"] = l.run;
  j["iteration"] = l.iteration;
  j["mapping"] = l.mapping;
  j["host"] = l.host;
  j["interface"] = l.interface;
  j["port"] = l.port ? nlohmann::ordered_json{{"tx", l.port->tx}, {"rx", l.port->rx}} : nlohmann::ordered_json(nullptr);
  j["layer"] = chain_layer_name(l.layer);
  j["common"] = l.common;
  j["ports"] = l.ports;
  j["resumed"] = l.resumed;
  j["verdict"] = l.verdict;
  nlohmann::ordered_json stopped = nlohmann::ordered_json::array();
  for (const auto& s : l.stopped) {
    stopped.push_back({{"host", s.host},
                       {"interface", s.interface},
                       {"layer", chain_layer_name(s.layer)},
                       {"last_edge_ns", s.last_edge_ns ? nlohmann::ordered_json(*s.last_edge_ns) : nullptr}});
  }
  j["stopped"] = stopped;
  nlohmann::ordered_json evidence = nlohmann::ordered_json::array();
  for (const auto& e : l.evidence)
    evidence.push_back({{"line", e.line ? nlohmann::ordered_json(e.line) : nullptr}, {"text", e.text}});
  j["evidence"] = evidence;
  return j;
}

namespace {

// "reconfiguration 2 (run r, mapping m)"
std::string reconfiguration_name(const BreakdownRow& r) {
  std::string where;
  if (!r.run.empty()) where += "run " + r.run;
  if (!r.mapping.empty()) where += (where.empty() ? "" : ", ") + std::string("mapping ") + r.mapping;
  return fmt::format("reconfiguration {}{}", r.iteration, where.empty() ? "" : " (" + where + ")");
}

std::string gid_loss_text(const GidLoss& l) {
  std::string after = l.now.empty() ? "now empty" : "now " + l.now;
  after += l.moved_to ? fmt::format("; the address is at index {}", *l.moved_to) : "; the address is in no index";
  return fmt::format("GID index {} of {} no longer holds {} ({})", l.index, l.table, l.held, after);
}

}  // namespace

std::string gid_text(const Breakdown& b) {
  size_t changes = 0, neigh = 0, flagged = 0;
  std::string lines;
  std::string last;  // the reconfiguration of the previous flag, counted once
  for (const auto& r : b.rows) {
    changes += static_cast<size_t>(r.gid_changes);
    neigh += static_cast<size_t>(r.neigh_changes);
    if (r.gid_lost.empty()) continue;
    const std::string name = reconfiguration_name(r);
    if (name != last) ++flagged;
    last = name;
    for (const auto& l : r.gid_lost)
      lines += fmt::format("{}: {}/{} {}: a queue pair created with it sends from a GID that is gone\n", name, r.host,
                           r.interface, gid_loss_text(l));
  }
  if (changes == 0) return "";
  if (flagged == 0)
    return fmt::format(
        "GID tables: {} GID change(s), {} neighbour change(s); every GID index kept the address it held\n", changes,
        neigh);
  return fmt::format(
             "GID tables: {} reconfiguration(s) left a GID index without the address it held ({} GID change(s), "
             "{} neighbour change(s))\n",
             flagged, changes, neigh) +
         lines;
}

nlohmann::ordered_json gid_json(const Breakdown& b) {
  nlohmann::ordered_json j;
  int changes = 0, neigh = 0;
  nlohmann::ordered_json flags = nlohmann::ordered_json::array();
  for (const auto& r : b.rows) {
    changes += r.gid_changes;
    neigh += r.neigh_changes;
    for (const auto& l : r.gid_lost) {
      flags.push_back(
          {{"run", r.run},
           {"iteration", r.iteration},
           {"mapping", r.mapping},
           {"host", r.host},
           {"interface", r.interface},
           {"table", l.table},
           {"index", l.index},
           {"held", l.held},
           {"now", l.now.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(l.now)},
           {"moved_to", l.moved_to ? nlohmann::ordered_json(*l.moved_to) : nlohmann::ordered_json(nullptr)}});
    }
  }
  j["gid_changes"] = changes;
  j["neigh_changes"] = neigh;
  j["flags"] = flags;
  return j;
}

std::string summary_text(const Breakdown& b, const std::vector<ColumnSummary>& s, const SummaryContext& c) {
  auto n = status_counts(b);
  std::string t =
      fmt::format("timeline     {} ({} rows, {} read by the breakdown)\n", c.timeline, c.timeline_rows, c.kept_rows);
  t += fmt::format("cut by       {}\n", b.iterations_from);
  t += fmt::format("reconfigs    {}\n", b.iterations);
  t += fmt::format(
      "rows         {} host/interface rows: {} ok, {} failed, {} unaffected, {} incomplete, {} disconnected{}{}\n",
      b.rows.size(), n[0], n[1], n[2], n[3], n[4], n[5] ? fmt::format(", {} lost (no capture)", n[5]) : "",
      n[6] ? fmt::format(", {} unseen (dark, no carrier transition)", n[6]) : "");
  if (b.has_intents) {
    auto k = intent_counts(b);
    t += fmt::format("intents      from {}: {} move, {} up, {} dark, {} stay, {} unknown\n",
                     b.intents_from.empty() ? "the caller" : b.intents_from, k[0], k[1], k[2], k[3], k[4]);
  }
  t += fmt::format("\nduration (ms) over ok rows\n");
  t += fmt::format("{:<13} {:>6} {:>12} {:>12} {:>12} {:>12} {:>12}\n", "column", "count", "min", "median", "p90",
                   "p99", "max");
  for (const auto& x : s) {
    if (x.count == 0) {
      t += fmt::format("{:<13} {:>6} {:>12} {:>12} {:>12} {:>12} {:>12}\n", x.column, 0, "-", "-", "-", "-", "-");
    } else {
      t += fmt::format("{:<13} {:>6} {:>12.3f} {:>12.3f} {:>12.3f} {:>12.3f} {:>12.3f}\n", x.column, x.count, x.min,
                       x.median, x.p90, x.p99, x.max);
    }
  }
  t += "\n" + faults_text(faults_of(b, c), c.timeline);
  if (auto g = gid_text(b); !g.empty()) t += "\n" + g;
  return t;
}

std::string summary_json_text(const nlohmann::ordered_json& j) {
  return j.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n";
}

nlohmann::ordered_json summary_json(const Breakdown& b, const std::vector<ColumnSummary>& s, const SummaryContext& c) {
  auto n = status_counts(b);
  nlohmann::ordered_json j;
  j["timeline"] = c.timeline;
  j["timeline_rows"] = c.timeline_rows;
  j["rows_read"] = c.kept_rows;
  j["dark_dbm"] = c.dark_dbm;
  j["iterations_from"] = b.iterations_from;
  j["reconfigurations"] = b.iterations;
  j["rows"] = b.rows.size();
  j["status"] = {{"ok", n[0]}, {"failed", n[1]}, {"unaffected", n[2]}, {"incomplete", n[3]}, {"disconnected", n[4]}, {"lost", n[5]},
                 {"unseen", n[6]}};
  if (b.has_intents) {
    auto k = intent_counts(b);
    nlohmann::ordered_json o;
    o["from"] = b.intents_from;
    for (size_t i = 0; i < kIntents.size(); ++i) o[intent_name(kIntents[i])] = k[i];
    j["intents"] = o;
  }
  nlohmann::ordered_json cols = nlohmann::ordered_json::object();
  for (const auto& x : s) {
    nlohmann::ordered_json o;
    o["count"] = x.count;
    for (auto [k, v] : {std::pair{"min", x.min}, {"median", x.median}, {"p90", x.p90}, {"p99", x.p99}, {"max", x.max}})
      o[k] = x.count ? nlohmann::ordered_json(v) : nlohmann::ordered_json(nullptr);
    cols[x.column] = o;
  }
  j["durations_ms"] = cols;
  nlohmann::ordered_json faults = nlohmann::ordered_json::array();
  for (const auto& l : faults_of(b, c)) faults.push_back(fault_json(l));
  j["faults"] = faults;
  if (b.has_gid) j["gid"] = gid_json(b);
  return j;
}

}  // namespace ocslab::analysis
