// Experiment specs come from users, and their `forwarding:` section builds a fabric per mapping:
// any bytes must give a spec or an ocslab::Error naming the input, never a crash or a hang; a
// spec with forwarding that loads must also give every mapping's plans and planned pairs, and
// one with a firmware sweep (`sweep: {dwell_s}`; its `nic_models:` are parsed before the
// virtual-lab check refuses a model sweep here) a bounded plan whose schedule covers every point.
#include <cstddef>
#include <cstdint>
#include <string>

#include "ocslab/common/error.h"
#include "ocslab/forwarding/routes.h"
#include "ocslab/runner/experiment_spec.h"
#include "ocslab/runner/lab_forwarding.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 4096) return 0;
  std::string text(reinterpret_cast<const char*>(data), size);
  // Inventory specs only: a `lab.vlab` would read another file (the spec parser's own job).
  if (text.find("vlab") != std::string::npos) return 0;
  try {
    auto spec = ocslab::runner::parse_experiment_spec(ocslab::load_yaml_string(text, "/nonexistent/fuzz.yaml"));
    if (spec.sweep.enabled()) {
      const auto points = spec.sweep_points();
      if (points.empty() || points.size() > ocslab::runner::kMaxSweepPoints) __builtin_trap();
      if (spec.iterations() != spec.reconfigurations * static_cast<int>(points.size()) || spec.iterations() > 100000)
        __builtin_trap();
      if (spec.schedule().size() != static_cast<size_t>(spec.iterations())) __builtin_trap();
      for (const auto& p : points) {
        if (!(p.dwell_s >= 0.01 && p.dwell_s <= 3600)) __builtin_trap();
      }
    }
    if (!spec.forwarding.enabled) return 0;
    for (const auto& m : spec.mappings) {
      (void)ocslab::runner::lab_plans(spec, m);
      auto fabric = ocslab::runner::fabric_for(spec, m);
      auto routes = ocslab::forwarding::compute_routes(fabric, ocslab::runner::route_options(spec, fabric));
      for (const auto& a : spec.hosts)
        for (const auto& b : spec.hosts)
          if (a.name != b.name) (void)ocslab::runner::plan_pair(fabric, routes, a.name, b.name);
    }
  } catch (const ocslab::Error&) {
  }
  return 0;
}
