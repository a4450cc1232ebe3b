// Timelines come from other machines' agents and from hand-edited files: any bytes must read as
// a timeline or give an ocslab::ConfigError, and any timeline must give a breakdown whose
// statuses agree with its edges and a summary over its ok rows.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <sstream>
#include <string>

#include "ocslab/analysis/breakdown.h"
#include "ocslab/analysis/summary.h"
#include "ocslab/analysis/timeline.h"
#include "ocslab/common/error.h"

using namespace ocslab::analysis;

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
    if (r.edges[kLightBack] && !r.edges[kLightLost]) __builtin_trap();  // up edges follow a down
    if (r.edges[kCarrierUp] && *r.edges[kCarrierUp] < *r.edges[kCarrierDown]) __builtin_trap();
  }
  for (const auto& s : summarize(b)) {
    if (s.count > ok) __builtin_trap();
    if (s.count && !(s.min <= s.median && s.median <= s.p90 && s.p90 <= s.p99 && s.p99 <= s.max)) __builtin_trap();
  }
  std::ostringstream out;
  write_breakdown_csv(b, out);
  std::string csv = out.str();
  if (std::count(csv.begin(), csv.end(), '\n') < static_cast<long>(b.rows.size() + 1)) __builtin_trap();
  return 0;
}
