// Timelines come from other machines' agents and from hand-edited files: any bytes must read as
// a timeline or give an ocslab::ConfigError, and any timeline must give a breakdown whose
// statuses agree with its edges (an `unseen` row has no carrier edge, announced or polled) and a
// summary over its ok rows; with intents, the rows of ports that move, stay or are unknown as
// without, and the new rules only for ports coming up or going dark; and a fault localisation naming, for each
// reconfiguration that did not complete, one of its stopped ports at the lowest layer any of them stopped at, never a
// port meant to go dark, in a summary.json that reads back as JSON.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <sstream>
#include <string>

#include "ocslab/analysis/breakdown.h"
#include "ocslab/analysis/localisation.h"
#include "ocslab/analysis/summary.h"
#include "ocslab/analysis/timeline.h"
#include "ocslab/common/error.h"

using namespace ocslab::analysis;

namespace {

// The localisation of a breakdown agrees with its rows (see the file's comment).
void check_localisation(const Breakdown& b, const Timeline& t) {
  std::map<std::pair<std::string, int>, std::vector<const BreakdownRow*>> stopped;
  for (const auto& r : b.rows) {
    auto layer = stopped_layer(r);
    if (layer.has_value() != (r.status == Status::kFailed || r.status == Status::kIncomplete)) __builtin_trap();
    if (layer) stopped[{r.run, r.iteration}].push_back(&r);
  }
  auto faults = localise(b, &t);
  if (faults.size() != stopped.size()) __builtin_trap();
  std::set<uint32_t> lines;
  for (const auto& e : t.events) lines.insert(e.line);
  for (const auto& l : faults) {
    auto it = stopped.find({l.run, l.iteration});
    if (it == stopped.end() || l.stopped.size() != it->second.size() || l.stopped.empty()) __builtin_trap();
    bool named = false;
    for (const BreakdownRow* r : it->second) {
      if (*stopped_layer(*r) < l.layer) __builtin_trap();  // the earliest divergence is the lowest layer
      named = named || (r->host == l.host && r->interface == l.interface && *stopped_layer(*r) == l.layer);
    }
    if (!named || l.stopped.front().host != l.host || l.stopped.front().interface != l.interface) __builtin_trap();
    if (l.resumed > l.ports || l.stopped.size() > l.ports || l.verdict.empty() || l.evidence.empty()) __builtin_trap();
    for (const auto& e : l.evidence)
      if (e.text.empty() || (e.line && !lines.count(e.line))) __builtin_trap();  // a line the timeline kept
  }
  SummaryContext c{"fuzz.csv", t.rows, t.events.size(), -30, &faults, &t};
  auto j = summary_json(b, summarize(b), c);
  if (j["faults"].size() != faults.size()) __builtin_trap();
  if (nlohmann::json::parse(summary_json_text(j), nullptr, false).is_discarded()) __builtin_trap();
  if (summary_text(b, summarize(b), c).find("fault localisation: ") == std::string::npos) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  Timeline t;
  try {
    t = parse_timeline(text, "fuzz.csv");
  } catch (const ocslab::ConfigError& e) {
    if (std::string(e.what()).rfind("fuzz.csv:", 0) != 0) __builtin_trap();  // file:line first
    return 0;
  }
  if (t.events.size() > t.rows) __builtin_trap();
  Breakdown b = compute_breakdown(t, {.dark_dbm = -30});
  size_t ok = 0;
  for (const auto& r : b.rows) {
    if (r.iteration < 1 || r.host == "switch") __builtin_trap();
    if (r.status == Status::kOk) {
      ++ok;
      // ok: every layer that went down came back.
      for (auto [down, up] : {std::pair{kLightLost, kLightBack},
                              {kFirmwareDown, kFirmwareUp},
                              {kCarrierDown, kCarrierUp},
                              {kRdmaStalled, kRdmaResumed}})
        if (r.edges[down] && !r.edges[up]) __builtin_trap();
    }
    // unseen: the light was dark for at least the minimum (or longer than int64 spans: no
    // duration) and came back, or the firmware-layer link went down and came back; the carrier
    // has no edge, announced or polled.
    if (r.status == Status::kUnseen) {
      const auto dark = r.duration_ns(kDark);
      const bool long_dark = r.edges[kLightLost] && r.edges[kLightBack] &&
                             !(dark && *dark < BreakdownOptions{}.unseen_min_ns);
      const bool bounced = r.edges[kFirmwareDown] && r.edges[kFirmwareUp];
      if (!(long_dark || bounced) || r.edges[kCarrierDown] || r.edges[kCarrierUp] || r.edges[kCarrierBitDown] ||
          r.edges[kCarrierBitUp])
        __builtin_trap();
    }
    if (r.edges[kLightBack] && !r.edges[kLightLost]) __builtin_trap();  // up edges follow a down
    if (r.edges[kCarrierUp] && *r.edges[kCarrierUp] < *r.edges[kCarrierDown]) __builtin_trap();
    if (r.edges[kCarrierBitUp] && (!r.edges[kCarrierBitDown] || *r.edges[kCarrierBitUp] < *r.edges[kCarrierBitDown]))
      __builtin_trap();
  }
  for (const auto& s : summarize(b)) {
    if (s.count > ok) __builtin_trap();
    if (s.count && !(s.min <= s.median && s.median <= s.p90 && s.p90 <= s.p99 && s.p99 <= s.max)) __builtin_trap();
  }
  std::ostringstream out;
  write_breakdown_csv(b, out);
  std::string csv = out.str();
  if (std::count(csv.begin(), csv.end(), '\n') < static_cast<long>(b.rows.size() + 1)) __builtin_trap();
  check_localisation(b, t);

  // The same timeline with an intent for every row (chosen from its names): the same rows; a
  // port that moves, stays or is unknown reads as without intents; only a port meant to go dark
  // is disconnected; a port coming up has no down edges and no up edge before its command.
  Intents in;
  for (const auto& r : b.rows) {
    auto& it = in.iterations[r.iteration];
    it.mapping = r.mapping;
    it.ports[{r.host, r.interface}] = static_cast<Intent>(
        std::hash<std::string>{}(r.host + "/" + r.interface + "#" + std::to_string(r.iteration)) % 5);
  }
  Breakdown bi = compute_breakdown(t, {.dark_dbm = -30}, &in);
  if (!bi.has_intents || bi.rows.size() != b.rows.size()) __builtin_trap();
  for (size_t k = 0; k < bi.rows.size(); ++k) {
    const BreakdownRow &r = bi.rows[k], &old = b.rows[k];
    if (r.host != old.host || r.interface != old.interface || r.iteration != old.iteration) __builtin_trap();
    if (r.intent != in.at(r.run, r.iteration, r.mapping, r.host, r.interface)) __builtin_trap();
    if ((r.status == Status::kDisconnected) != (r.intent == Intent::kDark && old.status != Status::kFailed))
      __builtin_trap();
    if (r.intent == Intent::kDark && r.edges != old.edges) __builtin_trap();
    if (r.intent == Intent::kMove || r.intent == Intent::kStay || r.intent == Intent::kUnknown) {
      if (r.status != old.status || r.edges != old.edges) __builtin_trap();
    }
    if (r.intent == Intent::kUp) {
      for (Edge e : {kLightLost, kFirmwareDown, kCarrierDown, kRdmaStalled, kCarrierBitDown})
        if (r.edges[e]) __builtin_trap();
      for (Edge e : {kLightBack, kFirmwareUp, kCarrierUp, kRdmaResumed, kCarrierBitUp})
        if (r.edges[e] && r.edges[kIssued] && *r.edges[e] < *r.edges[kIssued]) __builtin_trap();
      if (r.status == Status::kDisconnected) __builtin_trap();
    }
  }
  std::ostringstream outi;
  write_breakdown_csv(bi, outi);
  // The intent column ends the header, or comes before the gid probe's two counts.
  if (outi.str().find(",total_ms,intent\n") == std::string::npos &&
      outi.str().find(",total_ms,intent,gid_changes,neigh_changes\n") == std::string::npos)
    __builtin_trap();
  for (const auto& s : summarize(bi))
    if (s.count && !(s.min <= s.median && s.median <= s.max)) __builtin_trap();
  check_localisation(bi, t);
  for (const auto& l : localise(bi))
    for (const auto& p : l.stopped)
      for (const auto& r : bi.rows)
        if (r.iteration == l.iteration && r.run == l.run && r.host == p.host && r.interface == p.interface &&
            r.status == Status::kDisconnected)
          __builtin_trap();  // a port meant to go dark is not a fault
  return 0;
}
