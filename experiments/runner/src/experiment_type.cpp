#include "ocslab/runner/experiment_type.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <functional>
#include <utility>

#include "ocslab/common/error.h"
#include "ocslab/runner/experiment_spec.h"

namespace ocslab::runner {

namespace {

using Factory = std::unique_ptr<ExperimentType> (*)();

const std::vector<std::pair<std::string, Factory>>& table() {
  static const std::vector<std::pair<std::string, Factory>> t = {
      {kReconfigLatency, &make_reconfiguration_experiment},
      {kPhaseWorkload, &make_phase_workload_experiment},
      // The reconfiguration run with dark spells for reconfigurations (run_outages).
      {kOutages, &make_reconfiguration_experiment},
  };
  return t;
}

}  // namespace

std::unique_ptr<ExperimentType> make_experiment_type(const std::string& type) {
  for (const auto& [name, make] : table()) {
    if (name == type) return make();
  }
  throw Error(fmt::format("unknown experiment type '{}' (known: {})", type, fmt::join(experiment_types(), ", ")));
}

std::vector<std::string> experiment_types() {
  std::vector<std::string> out;
  for (const auto& e : table()) out.push_back(e.first);
  return out;
}

}  // namespace ocslab::runner
