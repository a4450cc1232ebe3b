// Every `ocslab` subcommand takes `--opt=value` as it takes `--opt value`: run in-process, each
// pair gives the same exit code and the same output, and a flag given a value is a usage error.
// Only validation paths are used: nothing boots, connects or writes outside a temp folder.
#include <catch2/catch.hpp>

#include <string>
#include <utility>
#include <vector>

#include "cli_run.h"
#include "ocslab/cli/ocslab_cli.h"
#include "ocslab/testing/source_dir.h"
#include "ocslab/testing/sshd_fixture.h"

using Catch::Matchers::Contains;
using vlab_unit::run_cli;

namespace {

std::string src(const std::string& rel) { return ocslab::testing::source_dir() + "/" + rel; }

// The two spellings of one command line: `--opt value` and `--opt=value` for the option at `at`.
std::pair<std::vector<std::string>, std::vector<std::string>> spellings(std::vector<std::string> args, size_t at) {
  std::vector<std::string> joined = args;
  joined[at] = args[at] + "=" + args[at + 1];
  joined.erase(joined.begin() + static_cast<long>(at) + 1);
  return {args, joined};
}

void same_either_way(const std::vector<std::string>& args, size_t at, int want_rc, const std::string& want_text) {
  auto [split, joined] = spellings(args, at);
  auto a = run_cli(split);
  auto b = run_cli(joined);
  INFO(args[0] << " " << args[at] << ": " << a.out << a.err << " / " << b.out << b.err);
  CHECK(a.rc == want_rc);
  CHECK(b.rc == want_rc);
  CHECK(a.out == b.out);
  CHECK(a.err == b.err);
  CHECK_THAT(a.out + a.err, Contains(want_text));
}

}  // namespace

TEST_CASE("every ocslab subcommand takes --opt=value as --opt value") {
  const std::string demo = src("experiments/specs/demo.yaml");
  const std::string fwd = src("tests/vlab/labs/fwdrun-ring.spec.yaml");
  ocslab::testing::TempDir cache;
  // run: a value the --check plan shows.
  same_either_way({"run", demo, "--check", "--reconfigurations", "3"}, 3, 0, "3 reconfiguration(s)");
  same_either_way({"run", demo, "--check", "--dwell", "0.5"}, 3, 0, "dwell 0.5 s");
  // forwarding: the mapping is looked up before any host is reached.
  same_either_way({"forwarding", "verify", fwd, "--mapping", "nosuch"}, 3, 1, "the spec has no mapping 'nosuch'");
  // analyze, plot, controller: each value is checked before anything is read.
  same_either_way({"analyze", cache.path(), "--dark-dbm", "abc"}, 2, 1, "--dark-dbm needs a number of dBm, got 'abc'");
  same_either_way({"plot", cache.path(), "--format", "gif"}, 2, 1, "--format is png or svg, got 'gif'");
  same_either_way({"controller", "none.yaml", "--duration", "-1"}, 2, 1,
                  "--duration needs a positive number of seconds, got '-1'");
  // vlab: the cache folder (empty here) is where the labs are looked for.
  same_either_way({"vlab", "status", "--cache", cache.path()}, 2, 0, "no virtual lab is up");
  same_either_way({"vlab", "down", "nosuch", "--cache", cache.path()}, 3, ocslab::cli::kExitFailed,
                  "no virtual lab named 'nosuch' under " + cache.path() + "/labs");
}

TEST_CASE("a flag given a value is a usage error naming it") {
  const std::string demo = src("experiments/specs/demo.yaml");
  auto r = run_cli({"run", demo, "--check=yes"});
  CHECK(r.rc == 1);
  CHECK_THAT(r.err, Contains("--check takes no value"));
  r = run_cli({"controller", "none.yaml", "--check=1"});
  CHECK(r.rc == 1);
  CHECK_THAT(r.err, Contains("--check takes no value"));
  r = run_cli({"run", demo, "--no-such=1"});
  CHECK(r.rc == 1);
  CHECK_THAT(r.err, Contains("unknown option '--no-such'"));
}
