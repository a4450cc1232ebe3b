// What the runner's spec tests share: the source tree (also when the binary runs outside
// ctest), and a spec written inline parsed as if it were a file at a given place in the tree,
// so its relative paths (lab file, schedule) resolve as they would for that file.
#pragma once

#include <cstdlib>
#include <string>

#include "ocslab/common/config.h"
#include "ocslab/common/error.h"
#include "ocslab/runner/experiment_spec.h"
#include "ocslab/testing/source_dir.h"

namespace spec_test {

using ocslab::testing::source_dir;

// Next to the shipped examples in experiments/specs, so `../labs/four-hosts.yaml` resolves as for demo.yaml.
inline constexpr const char* kSpecsOrigin = "/experiments/specs/test.yaml";

// `origin`: the spec's would-be path, relative to the source tree.
inline ocslab::runner::ExperimentSpec parse(const std::string& text, const std::string& origin = kSpecsOrigin) {
  return ocslab::runner::parse_experiment_spec(ocslab::load_yaml_string(text, source_dir() + origin));
}

// The ConfigError's message, or "accepted" when the spec parses.
inline std::string error_of(const std::string& text, const std::string& origin = kSpecsOrigin) {
  try {
    parse(text, origin);
  } catch (const ocslab::ConfigError& e) {
    return e.what();
  }
  return "accepted";
}

}  // namespace spec_test
