// What the in-process `ocslab analyze` tests share: a scratch folder and one CLI call with its
// exit code and both output streams.
#pragma once

#include <catch2/catch.hpp>

#include <stdlib.h>

#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "ocslab/cli/ocslab_cli.h"

namespace analyze_cli_support {

struct Dir {
  std::string path;
  Dir() {
    char tmpl[] = "/tmp/ocslab-analyze-test-XXXXXX";
    REQUIRE(::mkdtemp(tmpl) != nullptr);
    path = tmpl;
  }
  ~Dir() { std::filesystem::remove_all(path); }
};

struct Result {
  int rc;
  std::string out, err;
};

inline Result run_cli(const std::vector<std::string>& args) {
  std::ostringstream out, err;
  int rc = ocslab::cli::run_ocslab(args, out, err);
  return {rc, out.str(), err.str()};
}

}  // namespace analyze_cli_support
