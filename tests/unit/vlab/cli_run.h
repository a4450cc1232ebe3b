// The `ocslab` CLI run in-process by the unit_vlab tests: exit code and both streams.
#pragma once

#include <sstream>
#include <string>
#include <vector>

#include "ocslab/cli/ocslab_cli.h"

namespace vlab_unit {

struct CliResult {
  int rc;
  std::string out, err;
};

inline CliResult run_cli(const std::vector<std::string>& args) {
  std::ostringstream out, err;
  int rc = ocslab::cli::run_ocslab(args, out, err);
  return {rc, out.str(), err.str()};
}

}  // namespace vlab_unit
