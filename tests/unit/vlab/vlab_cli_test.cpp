// `ocslab vlab ssh` in-process, without booting anything: where ocslab's own words end and the
// remote command begins, and how the lab is chosen, against lab states recorded in a
// throwaway cache (no host of theirs ever matches, so ssh is never executed).
#include <catch2/catch.hpp>

#include <unistd.h>

#include <filesystem>
#include <sstream>

#include "cli_run.h"
#include "ocslab/cli/ocslab_cli.h"
#include "ocslab/testing/sshd_fixture.h"
#include "ocslab/vlab/lab_state.h"

namespace fs = std::filesystem;
using Catch::Matchers::Contains;
using ocslab::cli::vlab_ssh_remote_start;

namespace {

struct Cache {
  ocslab::testing::TempDir dir;  // removed with the cache
  const std::string& path = dir.path();
  // A lab as `up` records it; its processes are long gone, which ssh's lookup does not check.
  void add_lab(const std::string& name, const std::string& host) const {
    ocslab::vlab::LabState s;
    s.name = name;
    s.dir = ocslab::vlab::labs_dir(path) + "/" + name;
    s.phase = "running";
    ocslab::vlab::HostState h;
    h.name = host;
    h.ssh_port = 2222;
    s.hosts.push_back(h);
    fs::create_directories(s.dir);
    s.save();
  }
};

using Result = vlab_unit::CliResult;
using vlab_unit::run_cli;

}  // namespace

TEST_CASE("vlab ssh: ssh's options after HOST are ocslab's, the remote command starts at the first other word") {
  using V = std::vector<std::string>;
  // The documented form: --lab after HOST.
  CHECK(vlab_ssh_remote_start(V{"vlab", "ssh", "h1", "--lab", "L", "ls", "-l"}) == 5);
  CHECK(vlab_ssh_remote_start(V{"vlab", "ssh", "h1", "--lab=L", "--cache", "C", "uname", "-a"}) == 6);
  CHECK(vlab_ssh_remote_start(V{"vlab", "ssh", "--lab", "L", "h1", "ls"}) == 5);
  CHECK(vlab_ssh_remote_start(V{"vlab", "ssh", "h1", "--help"}) == 4);
  // No remote command: an interactive session.
  CHECK(vlab_ssh_remote_start(V{"vlab", "ssh", "h1", "--lab", "L"}) == 5);
  CHECK(vlab_ssh_remote_start(V{"vlab", "ssh", "h1"}) == 3);
  // Options the remote command has of its own stay in it, ocslab's names included.
  CHECK(vlab_ssh_remote_start(V{"vlab", "ssh", "h1", "ocslab-agent", "capture", "--log-level", "debug"}) == 3);
  CHECK(vlab_ssh_remote_start(V{"vlab", "ssh", "h1", "-t", "top"}) == 3);
  CHECK(vlab_ssh_remote_start(V{"vlab", "ssh", "h1", "--lab", "L", "env", "--lab", "x"}) == 5);
  // `--` ends ocslab's words, before or after HOST.
  CHECK(vlab_ssh_remote_start(V{"vlab", "ssh", "h1", "--", "--lab", "x"}) == 4);
  CHECK(vlab_ssh_remote_start(V{"vlab", "ssh", "--", "h1", "--lab", "x"}) == 4);
  // The global --log-level: before `vlab`, between the command words, after HOST.
  CHECK(vlab_ssh_remote_start(V{"--log-level", "debug", "vlab", "ssh", "h1", "--log-level=info", "top"}) == 6);
  CHECK(vlab_ssh_remote_start(V{"vlab", "--log-level", "debug", "ssh", "h1", "top"}) == 5);
  // A missing value is left to the option parser to report.
  CHECK(vlab_ssh_remote_start(V{"vlab", "ssh", "h1", "--lab"}) == 4);
  // Not `vlab ssh`: no remote command.
  CHECK(vlab_ssh_remote_start(V{"vlab", "status", "--lab", "x"}) == 4);
  CHECK(vlab_ssh_remote_start(V{"run", "ssh", "h1", "ls"}) == 4);
  CHECK(vlab_ssh_remote_start(V{}) == 0);
}

TEST_CASE("vlab ssh HOST --lab NAME picks that lab when several are up") {
  Cache c;
  c.add_lab("clifix-a", "h1");
  c.add_lab("clifix-b", "h2");
  // Without --lab the choice is refused...
  Result r = run_cli({"vlab", "ssh", "h9", "--cache", c.path, "ls"});
  CHECK(r.rc == ocslab::cli::kExitFailed);
  CHECK_THAT(r.err, Contains("several labs are up (") && Contains("name one with --lab"));
  // ...with --lab after HOST, as documented, the lab is clifix-a (which has no h9, only h1).
  r = run_cli({"vlab", "ssh", "h9", "--lab", "clifix-a", "--cache", c.path, "ls"});
  CHECK(r.rc == ocslab::cli::kExitFailed);
  CHECK_THAT(r.err, Contains("lab clifix-a has no host 'h9' (hosts: h1)"));
  r = run_cli({"vlab", "ssh", "h9", "--cache=" + c.path, "--lab=clifix-b"});
  CHECK_THAT(r.err, Contains("lab clifix-b has no host 'h9' (hosts: h2)"));
  // A --log-level inside the remote command is the remote command's, not ocslab's.
  r = run_cli({"vlab", "ssh", "h9", "--lab", "clifix-a", "--cache", c.path, "agent", "--log-level", "bogus"});
  CHECK(r.rc == ocslab::cli::kExitFailed);
  CHECK_THAT(r.err, Contains("lab clifix-a has no host 'h9'"));
  // ocslab's own --log-level is still checked wherever it comes before the remote command.
  r = run_cli({"vlab", "ssh", "h9", "--log-level", "bogus", "--lab", "clifix-a", "--cache", c.path, "ls"});
  CHECK_THAT(r.err, Contains("unknown log level 'bogus'"));
}

TEST_CASE("vlab ssh with no lab up names the lab it was asked for") {
  Cache c;
  Result r = run_cli({"vlab", "ssh", "h1", "--lab", "clifix-none", "--cache", c.path, "uname"});
  CHECK(r.rc == ocslab::cli::kExitFailed);
  CHECK_THAT(r.err, Contains("no virtual lab named 'clifix-none'"));
  r = run_cli({"vlab", "ssh", "h1", "--cache", c.path});
  CHECK_THAT(r.err, Contains("no virtual lab is up"));
  r = run_cli({"vlab", "ssh", "--cache", c.path});
  CHECK(r.rc == ocslab::cli::kExitUsage);
  CHECK_THAT(r.err, Contains("usage: ocslab vlab ssh HOST [--lab NAME] [COMMAND...]"));
  r = run_cli({"vlab", "ssh", "h1", "--lab"});
  CHECK(r.rc == ocslab::cli::kExitUsage);
  CHECK_THAT(r.err, Contains("--lab needs a value"));
}
