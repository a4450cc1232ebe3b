// One kind of experiment (the spec's `type:`) behind the pipeline's one interface: the runner
// resolves the target and opens the results folder, then hands both to the type, which runs
// and fills in the result. A new experiment type is a class here and a line in
// make_experiment_type (experiment_type.cpp). Pipeline: docs/architecture.md.
#pragma once

#include <memory>
#include <string>
#include <vector>

namespace ocslab::runner {

struct Target;
class RunContext;
struct RunResult;

class ExperimentType {
 public:
  virtual ~ExperimentType() = default;
  // Runs the experiment on the resolved target into result.folder. Throws ConfigError / Error
  // before anything was captured; after that, failures go into result.problems and the files
  // are written. Leaves the hosts as it found them (its agents and rank processes ended).
  virtual void run(Target& target, const RunContext& ctx, RunResult& result) = 0;
};

// The type the spec names (ExperimentSpec::type); Error naming it and the known ones otherwise.
std::unique_ptr<ExperimentType> make_experiment_type(const std::string& type);
std::vector<std::string> experiment_types();

// The types (reconfiguration.cpp, which also runs `outages`, and phase_workload.cpp).
std::unique_ptr<ExperimentType> make_reconfiguration_experiment();
std::unique_ptr<ExperimentType> make_phase_workload_experiment();

}  // namespace ocslab::runner
