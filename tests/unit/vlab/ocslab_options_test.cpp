// Every `ocslab` subcommand takes `--opt=value` as it takes `--opt value`: run in-process, each
// pair gives the same exit code and the same output, and a flag given a value is a usage error.
// Only validation paths are used: nothing boots, connects or writes outside a temp folder.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <string>
#include <utility>
#include <vector>

#include "cli_run.h"
#include "ocslab/cli/ocslab_cli.h"
#include "ocslab/runner/runner.h"
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
  // analyze, plot, controller: each value is checked before anything is read (a bad value is
  // bad input, exit 2: docs/exit-codes.md).
  same_either_way({"analyze", cache.path(), "--dark-dbm", "abc"}, 2, 2, "--dark-dbm needs a number of dBm, got 'abc'");
  same_either_way({"plot", cache.path(), "--format", "gif"}, 2, 2, "--format is png or svg, got 'gif'");
  same_either_way({"controller", "none.yaml", "--duration", "-1"}, 2, 2,
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

TEST_CASE("an unknown command or option is named with the nearest valid one") {
  const std::string demo = src("experiments/specs/demo.yaml");
  auto r = run_cli({"rnu", demo});
  CHECK(r.rc == 1);
  CHECK_THAT(r.err, Contains("ocslab: unknown command 'rnu'. Did you mean 'run'? (ocslab --help)"));
  r = run_cli({"vlab", "stauts"});
  CHECK(r.rc == 1);
  CHECK_THAT(r.err, Contains("unknown vlab command 'stauts'. Did you mean 'status'?"));
  r = run_cli({"vlab", "status", "--jsno"});
  CHECK(r.rc == 1);
  CHECK_THAT(r.err, Contains("unknown option '--jsno'. Did you mean '--json'?"));
  r = run_cli({"run", demo, "--no-plto"});
  CHECK(r.rc == 1);
  CHECK_THAT(r.err, Contains("unknown option '--no-plto'. Did you mean '--no-plot'? (ocslab run --help)"));
  r = run_cli({"forwarding", "aply", demo});
  CHECK(r.rc == 1);
  CHECK_THAT(r.err, Contains("unknown forwarding command 'aply'. Did you mean 'apply'?"));
  r = run_cli({"analyze", "x", "--jsn"});
  CHECK(r.rc == 1);
  CHECK_THAT(r.err, Contains("Did you mean '--json'?"));
  r = run_cli({"plot", "x", "--describ"});
  CHECK(r.rc == 1);
  CHECK_THAT(r.err, Contains("Did you mean '--describe'?"));
  r = run_cli({"frobnicate"});
  CHECK(r.rc == 1);
  CHECK_THAT(r.err, Contains("unknown command 'frobnicate'. (ocslab --help)"));
}

TEST_CASE("with --json a failure is a JSON object on stdout") {
  auto r = run_cli({"rnu", "--json"});
  CHECK(r.rc == 1);
  auto j = nlohmann::json::parse(r.out);  // one document, nothing else on stdout
  CHECK(j["exit_code"] == 1);
  CHECK_THAT(j["error"].get<std::string>(), Contains("Did you mean 'run'?"));
  r = run_cli({"run", src("no/such/spec.yaml"), "--json"});
  CHECK(r.rc != 0);
  j = nlohmann::json::parse(r.out);
  CHECK(j["exit_code"] == r.rc);
  CHECK_THAT(j["error"].get<std::string>(), Contains("no/such/spec.yaml"));
  // Without --json stdout stays empty; a --json in the remote command of `vlab ssh` is not ocslab's.
  r = run_cli({"rnu"});
  CHECK(r.out.empty());
  r = run_cli({"vlab", "ssh", "h1", "--cache", "/nonexistent-ocslab-cache", "cat", "--json"});
  CHECK(r.rc != 0);
  CHECK(r.out.empty());
}

TEST_CASE("ocslab forwarding takes --json for verify only") {
  const std::string spec = src("experiments/specs/demo.yaml");  // not read: the option is refused first
  auto r = run_cli({"forwarding", "apply", spec, "--json"});
  CHECK(r.rc == 1);
  CHECK_THAT(r.err, Contains("--json only applies to `ocslab forwarding verify`"));
  CHECK(nlohmann::json::parse(r.out)["exit_code"] == 1);
  r = run_cli({"forwarding", "--help"});
  CHECK(r.rc == 0);
  CHECK_THAT(r.out, Contains("--json prints the matrix"));
}

TEST_CASE("ocslab run --json-stream: the option and the run_end event") {
  const std::string demo = src("experiments/specs/demo.yaml");
  auto r = run_cli({"run", demo, "--json-stream", "--check"});
  CHECK(r.rc == 1);
  CHECK_THAT(r.err, Contains("--json-stream goes with neither --json nor --check"));
  CHECK(nlohmann::json::parse(r.out)["exit_code"] == 1);  // the failure is a JSON line too
  r = run_cli({"run", "--help"});
  CHECK_THAT(r.out, Contains("--json-stream"));

  ocslab::runner::RunResult result;
  result.folder = "results/demo-20261126-120000";
  result.run_id = "demo-20261126-120000";
  result.reconfigurations.resize(3);
  result.samples = 1234;
  result.problems = {"host h2 lost"};
  auto e = ocslab::cli::run_end_event(result, 5);
  CHECK(e["event"] == "run_end");
  CHECK(e["folder"] == result.folder);
  CHECK(e["run_id"] == result.run_id);
  CHECK(e["exit_code"] == 5);
  CHECK(e["interrupted"] == false);
  CHECK(e["reconfigurations"] == 3);
  CHECK(e["samples"] == 1234);
  CHECK(e["problems"] == nlohmann::json::array({"host h2 lost"}));
  CHECK(e["t_ns"].get<int64_t>() > 0);
}
