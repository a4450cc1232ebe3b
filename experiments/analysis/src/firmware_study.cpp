#include "ocslab/analysis/firmware_study.h"

#include <fmt/format.h>

#include <algorithm>
#include <iterator>
#include <map>
#include <nlohmann/json.hpp>
#include <numeric>
#include <ostream>
#include <tuple>

#include "ocslab/analysis/summary.h"
#include "ocslab/common/csv_writer.h"
#include "ocslab/common/error.h"

namespace ocslab::analysis {

std::optional<double> opus_reference_ms(const std::string& nic_model) {
  if (nic_model == "cx6dx-autoneg") return kOpusAutonegMs;
  if (nic_model == "cx6dx-no-autoneg") return kOpusNoAutonegMs;
  return std::nullopt;
}

std::vector<FirmwarePoint> firmware_points_from_meta(const nlohmann::json& meta, const std::string& path) {
  std::vector<FirmwarePoint> out;
  if (!meta.is_object() || !meta.contains("firmware_sweep")) return out;
  const auto& s = meta["firmware_sweep"];
  auto bad = [&](const std::string& what) { return ConfigError(path + ": firmware_sweep: " + what); };
  if (!s.is_object() || !s.contains("points") || !s["points"].is_array()) throw bad("no list of `points`");
  for (const auto& p : s["points"]) {
    if (!p.is_object() || !p.contains("nic_model") || !p["nic_model"].is_string() || !p.contains("dwell_s") ||
        !p["dwell_s"].is_number() || !p.contains("first_iteration") || !p["first_iteration"].is_number_integer() ||
        !p.contains("last_iteration") || !p["last_iteration"].is_number_integer())
      throw bad("a point has no `nic_model`, `dwell_s`, `first_iteration` and `last_iteration`");
    FirmwarePoint fp{p["nic_model"].get<std::string>(), p["dwell_s"].get<double>(), p["first_iteration"].get<int>(),
                     p["last_iteration"].get<int>(), std::nullopt};
    if (fp.first_iteration < 1 || fp.last_iteration < fp.first_iteration)
      throw bad(fmt::format("point {} has iterations {}..{}", fp.nic_model, fp.first_iteration, fp.last_iteration));
    if (p.contains("model_up_mean_ms") && p["model_up_mean_ms"].is_number())
      fp.model_up_mean_ms = p["model_up_mean_ms"].get<double>();
    out.push_back(std::move(fp));
  }
  return out;
}

namespace {

// One port's edges in one reconfiguration: its first light loss, the light's return after it,
// and the first link-up after that.
struct PortEdges {
  std::optional<int64_t> dark, back, up;
};

bool is_light(Kind k) { return k == Kind::kLightEmulator || k == Kind::kLightOcsPower; }
bool is_link(Kind k) { return k == Kind::kLinkEmulator || k == Kind::kLinkFirmware; }

// Every port's edges by (iteration, host, interface), and each command's issue time. Read from
// the timeline, not the breakdown: a link still down from the reconfiguration before (its
// link-up never came) has no down edge in this one, and the breakdown takes an up edge only
// after a down edge of the same reconfiguration.
struct StudyEdges {
  std::map<std::tuple<int, uint32_t, uint32_t>, PortEdges> ports;
  std::map<int, int64_t> issued;
};

StudyEdges study_edges(const Timeline& tl) {
  StudyEdges out;
  for (const auto& e : tl.events) {
    if (e.iteration < 1) continue;
    if (e.kind == Kind::kCommand) {
      out.issued.emplace(e.iteration, e.t_ns);
      continue;
    }
    const bool light = is_light(e.kind), link = is_link(e.kind);
    if (!light && !link) continue;
    PortEdges& p = out.ports[{e.iteration, e.host, e.subject}];
    if (light && e.value == 0 && !p.dark) p.dark = e.t_ns;
    if (light && e.value != 0 && p.dark && !p.back) p.back = e.t_ns;
    if (link && e.value != 0 && p.back && !p.up) p.up = e.t_ns;
  }
  return out;
}

// The point's interval: the median gap between its consecutive commands; and how many of its
// reconfigurations the timeline has.
void study_interval(const StudyEdges& edges, const FirmwarePoint& p, FirmwarePointStats& st) {
  std::vector<double> gaps;
  for (int it = p.first_iteration; it <= p.last_iteration; ++it) {
    auto at = edges.issued.find(it);
    if (at == edges.issued.end()) continue;
    ++st.reconfigurations;
    auto next = edges.issued.find(it + 1);
    if (it < p.last_iteration && next != edges.issued.end())
      gaps.push_back(static_cast<double>(next->second - at->second) / 1e9);
  }
  if (!gaps.empty()) {
    std::sort(gaps.begin(), gaps.end());
    st.interval_s = percentile(gaps, 50);
  }
}

// The point's ports whose light came back. A link counts as up when it came up within the
// point's interval after the command: the timeline's iterations end at the next command, but
// the last reconfiguration of a point is followed by the next point's waits, in which a link
// the next command would have caught still down comes up.
void study_rows(const StudyEdges& edges, const FirmwarePoint& p, FirmwarePointStats& st, std::vector<double>& ms) {
  study_interval(edges, p, st);
  const double window_s = st.interval_s.value_or(p.dwell_s);
  for (const auto& [key, port] : edges.ports) {
    const int it = std::get<0>(key);
    if (it < p.first_iteration || it > p.last_iteration || !port.back) continue;
    ++st.rows;
    auto issued = edges.issued.find(it);
    const bool in_time =
        port.up && (issued == edges.issued.end() || static_cast<double>(*port.up - issued->second) / 1e9 <= window_s);
    if (in_time) {
      ++st.up;
      ms.push_back(static_cast<double>(*port.up - *port.back) / 1e6);
    } else {
      ++st.not_up;
    }
  }
}

std::string study_field(const std::optional<double>& v, const char* f = "{:.3f}") {
  return v ? fmt::format(fmt::runtime(f), *v) : std::string();
}

}  // namespace

std::vector<FirmwarePointStats> firmware_study(const Timeline& tl, const std::vector<FirmwarePoint>& points) {
  std::vector<FirmwarePointStats> out;
  const StudyEdges edges = study_edges(tl);
  for (const auto& p : points) {
    FirmwarePointStats st;
    st.point = p;
    st.opus_ms = opus_reference_ms(p.nic_model);
    std::vector<double> ms;
    study_rows(edges, p, st, ms);
    if (!ms.empty()) {
      std::sort(ms.begin(), ms.end());
      st.min_ms = ms.front();
      st.max_ms = ms.back();
      st.median_ms = percentile(ms, 50);
      st.p90_ms = percentile(ms, 90);
      st.mean_ms = std::accumulate(ms.begin(), ms.end(), 0.0) / static_cast<double>(ms.size());
    }
    out.push_back(std::move(st));
  }
  return out;
}

const std::vector<std::string>& firmware_study_columns() {
  static const std::vector<std::string> c = {"nic_model",
                                             "dwell_s",
                                             "interval_s",
                                             "model_up_mean_ms",
                                             "opus_ms",
                                             "first_iteration",
                                             "last_iteration",
                                             "reconfigurations",
                                             "rows",
                                             "up",
                                             "not_up",
                                             "firmware_min_ms",
                                             "firmware_median_ms",
                                             "firmware_p90_ms",
                                             "firmware_max_ms",
                                             "firmware_mean_ms"};
  return c;
}

void write_firmware_study_csv(const std::vector<FirmwarePointStats>& stats, std::ostream& out) {
  CsvWriter w(out);
  w.header(firmware_study_columns());
  for (const auto& s : stats) {
    w.row({s.point.nic_model, fmt::format("{}", s.point.dwell_s), study_field(s.interval_s),
           study_field(s.point.model_up_mean_ms, "{}"), study_field(s.opus_ms, "{}"),
           std::to_string(s.point.first_iteration), std::to_string(s.point.last_iteration),
           std::to_string(s.reconfigurations), std::to_string(s.rows), std::to_string(s.up), std::to_string(s.not_up),
           study_field(s.min_ms), study_field(s.median_ms), study_field(s.p90_ms), study_field(s.max_ms),
           study_field(s.mean_ms)});
  }
  w.flush();
}

std::string firmware_study_text(const std::vector<FirmwarePointStats>& stats) {
  std::string out = "firmware link-up per NIC model and reconfiguration interval (firmware_study.csv)\n";
  out += fmt::format("{:<20} {:>8} {:>10} {:>6} {:>6} {:>10} {:>10} {:>10} {:>10}\n", "nic_model", "dwell_s",
                     "interval_s", "up", "not_up", "min_ms", "median_ms", "p90_ms", "max_ms");
  bool reference = false;
  for (const auto& s : stats) {
    reference = reference || s.opus_ms.has_value();
    out += fmt::format("{:<20} {:>8} {:>10} {:>6} {:>6} {:>10} {:>10} {:>10} {:>10}\n", s.point.nic_model,
                       s.point.dwell_s, study_field(s.interval_s), s.up, s.not_up, study_field(s.min_ms, "{:.1f}"),
                       study_field(s.median_ms, "{:.1f}"), study_field(s.p90_ms, "{:.1f}"),
                       study_field(s.max_ms, "{:.1f}"));
  }
  if (reference) {
    out += fmt::format(
        "Opus (ConnectX-6 Dx): about {:.0f} s with auto-negotiation, {:.0f} s without, up to about {:.0f} s under "
        "rapid successive reconfigurations\n",
        kOpusAutonegMs / 1000, kOpusNoAutonegMs / 1000, kOpusRapidMaxMs / 1000);
  }
  return out;
}

}  // namespace ocslab::analysis
