// The `ocslab` CLI run in-process by the unit_vlab tests: exit code and both streams.
#pragma once

#include <stdlib.h>

#include <optional>
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

// An environment variable set (or unset) for one test, put back as found.
class EnvVar {
 public:
  EnvVar(const char* name, const char* value) : name_(name) {
    if (const char* old = ::getenv(name)) old_ = old;
    if (value) {
      ::setenv(name, value, 1);
    } else {
      ::unsetenv(name);
    }
  }
  ~EnvVar() {
    if (old_) {
      ::setenv(name_, old_->c_str(), 1);
    } else {
      ::unsetenv(name_);
    }
  }
  EnvVar(const EnvVar&) = delete;
  EnvVar& operator=(const EnvVar&) = delete;

 private:
  const char* name_;
  std::optional<std::string> old_;
};

}  // namespace vlab_unit
