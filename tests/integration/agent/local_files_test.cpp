// The ocslab-agent binary and its local files: the runtime folder of a non-root agent (run as
// nobody through setpriv), and the lock, the log and the spool folder of any agent, each planted
// as a symlink or owned by another user: refused with a message naming the path, and nothing
// written through the link.
#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "ocslab/common/file.h"
#include "ocslab/common/process.h"
#include "ocslab/testing/sshd_fixture.h"

// This file's helpers in a namespace of its own: the unity build compiles it together with
// the other tests of its binary.
namespace local_files_test {

using Catch::Matchers::Contains;
namespace fs = std::filesystem;

namespace {

constexpr uid_t kNobody = 65534;

// ocslab-agent ARGS as nobody, with XDG_RUNTIME_DIR set to xdg (unset when empty); bounded by
// timeout(1) so an agent that wrongly starts serving cannot hang the test. 20 s: an agent that
// serves stdin until its end needs well under a second, but under ASan beside other entries one
// took over 5 s (status 124, the sanitizer stage of 2026-11-29). nobody runs a copy of the build's
// agent in a folder of its own that nobody can reach: the checkout may not be reachable (a clone
// in root's home, mode 0700: "Permission denied").
ocslab::ProgramResult agent_as_nobody(const std::string& xdg, const std::vector<std::string>& args) {
  ocslab::testing::TempDir bin;
  REQUIRE(::chmod(bin.path().c_str(), 0755) == 0);
  const std::string copy = bin.path() + "/ocslab-agent";
  fs::copy_file(ocslab::testing::bin_path("ocslab-agent"), copy);
  fs::permissions(copy, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec | fs::perms::others_read |
                            fs::perms::others_exec);
  std::vector<std::string> argv = {"setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "env"};
  if (xdg.empty()) {
    argv.push_back("-u");
    argv.push_back("XDG_RUNTIME_DIR");
  } else {
    argv.push_back("XDG_RUNTIME_DIR=" + xdg);
  }
  argv.insert(argv.end(), {"timeout", "20", copy});
  argv.insert(argv.end(), args.begin(), args.end());
  return ocslab::run_program_status(argv);
}

ocslab::ProgramResult agent(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {"timeout", "20", ocslab::testing::bin_path("ocslab-agent")};
  argv.insert(argv.end(), args.begin(), args.end());
  return ocslab::run_program_status(argv);
}

std::string precious(const std::string& dir) {
  std::string p = dir + "/precious";
  std::ofstream(p) << "keep me\n";
  return p;
}

void own(const std::string& path, uid_t uid) { REQUIRE(::chown(path.c_str(), uid, uid) == 0); }

bool empty_dir(const std::string& path) { return fs::is_directory(path) && fs::is_empty(path); }

}  // namespace

TEST_CASE("a non-root agent's /tmp runtime folder made by another user is refused", "[agent][local-files]") {
  const std::string base = "/tmp/ocslab-agent-" + std::to_string(kNobody);
  fs::remove_all(base);  // a left-over of an earlier run: the test plants its own
  struct RemoveAtEnd {
    std::string path;
    ~RemoveAtEnd() {
      std::error_code ec;
      fs::remove_all(path, ec);
    }
  } remove_at_end{base};  // also when a REQUIRE below ends the case
  REQUIRE(::mkdir(base.c_str(), 0777) == 0);
  REQUIRE(::chmod(base.c_str(), 0777) == 0);  // root's, open to all: a trap for nobody's agent
  auto r = agent_as_nobody("", {"serve", "--stdio", "--no-daemon"});
  CHECK(r.status != 0);
  CHECK_THAT(r.err, Contains(base + " is owned by uid 0 (root), not by this user (uid 65534 (nobody))") &&
                        Contains("refusing to use it"));
  CHECK(empty_dir(base));  // no spool, lock or log made in it
  struct stat st {};
  REQUIRE(::stat(base.c_str(), &st) == 0);
  CHECK(st.st_uid == 0u);
  CHECK((st.st_mode & 07777) == 0777);  // nothing chmod'ed
  fs::remove_all(base);
  // Made by nobody itself but opened up: refused too, not chmod'ed back.
  auto mine = agent_as_nobody("", {"serve", "--stdio", "--no-daemon"});
  CHECK(mine.status == 0);
  REQUIRE(::stat(base.c_str(), &st) == 0);
  CHECK(st.st_uid == kNobody);
  CHECK((st.st_mode & 07777) == 0700);
  CHECK(fs::is_directory(base + "/spool"));
  REQUIRE(::chmod(base.c_str(), 0755) == 0);
  auto opened = agent_as_nobody("", {"serve", "--stdio", "--no-daemon"});
  CHECK(opened.status != 0);
  CHECK_THAT(opened.err, Contains(base + " has mode 0755, not 0700"));
  fs::remove_all(base);
}

// docs/guarantees.md, "Privileges": an agent as another user needs nothing for the carrier and
// heartbeat probes; only the probes that need root say so.
TEST_CASE("an agent as nobody captures carrier and heartbeat without any privilege", "[agent][local-files]") {
  auto r = agent_as_nobody(
      "", {"capture", "--probes", "carrier,heartbeat", "--if", "lo", "--interval-ms", "10", "--duration", "0.3"});
  INFO(r.err);
  REQUIRE(r.status == 0);
  size_t carrier = 0, heartbeat = 0;
  std::istringstream rows(r.out);
  for (std::string line; std::getline(rows, line);) {
    if (line.find(",carrier,lo,") != std::string::npos) ++carrier;
    if (line.find(",heartbeat,") != std::string::npos) ++heartbeat;
  }
  CHECK(carrier >= 1);
  CHECK(heartbeat >= 2);
}

TEST_CASE("a non-root agent uses $XDG_RUNTIME_DIR/ocslab-agent and refuses it as a symlink", "[agent][local-files]") {
  ocslab::testing::TempDir dir;
  own(dir.path(), kNobody);
  auto r = agent_as_nobody(dir.path(), {"serve", "--stdio", "--no-daemon"});
  CHECK(r.status == 0);
  CHECK(fs::is_directory(dir.path() + "/ocslab-agent/spool"));
  fs::remove_all(dir.path() + "/ocslab-agent");

  std::string elsewhere = dir.path() + "/elsewhere", link = dir.path() + "/ocslab-agent";
  REQUIRE(::mkdir(elsewhere.c_str(), 0700) == 0);
  own(elsewhere, kNobody);
  REQUIRE(::symlink(elsewhere.c_str(), link.c_str()) == 0);
  auto refused = agent_as_nobody(dir.path(), {"serve", "--stdio"});
  CHECK(refused.status != 0);
  CHECK_THAT(refused.err, Contains(link + " is a symlink (to " + elsewhere + "); refusing to follow it"));
  CHECK(empty_dir(elsewhere));
}

TEST_CASE("a symlinked lock, log or spool folder is refused and nothing is written through it",
          "[agent][local-files]") {
  ocslab::testing::TempDir dir;
  const std::string socket = dir.path() + "/agent.sock", spool = dir.path() + "/spool";
  const std::string target = precious(dir.path());

  REQUIRE(::symlink(target.c_str(), (socket + ".lock").c_str()) == 0);
  auto lock = agent({"serve", "--socket", socket, "--spool-dir", spool});
  CHECK(lock.status == 5);  // kExitFailed, not the 124 of timeout(1): the daemon did not serve
  CHECK_THAT(lock.err, Contains("the agent's lock file: " + socket + ".lock is a symlink (to " + target + ")"));
  CHECK_FALSE(fs::exists(socket));
  fs::remove(socket + ".lock");

  REQUIRE(::symlink(target.c_str(), (socket + ".log").c_str()) == 0);
  auto log = agent({"serve", "--stdio", "--socket", socket, "--spool-dir", spool});
  CHECK(log.status != 0);
  CHECK_THAT(log.err, Contains("the agent's log: " + socket + ".log is a symlink (to " + target + ")"));
  CHECK_FALSE(fs::exists(socket));  // no daemon was started
  fs::remove(socket + ".log");

  std::string elsewhere = dir.path() + "/elsewhere", spool_link = dir.path() + "/spool-link";
  REQUIRE(::mkdir(elsewhere.c_str(), 0700) == 0);
  REQUIRE(::symlink(elsewhere.c_str(), spool_link.c_str()) == 0);
  auto sp = agent({"serve", "--stdio", "--no-daemon", "--spool-dir", spool_link});
  CHECK(sp.status != 0);
  CHECK_THAT(sp.err, Contains(spool_link + " is a symlink (to " + elsewhere + "); refusing to follow it"));
  CHECK(empty_dir(elsewhere));

  std::string theirs = dir.path() + "/theirs";
  REQUIRE(::mkdir(theirs.c_str(), 0700) == 0);
  own(theirs, kNobody);
  auto other = agent({"serve", "--socket", theirs + "/agent.sock", "--spool-dir", spool});
  CHECK(other.status != 0);
  CHECK_THAT(other.err, Contains(theirs + " is owned by uid 65534 (nobody), not by this user (uid 0 (root))"));
  CHECK(empty_dir(theirs));

  CHECK(ocslab::read_file(target) == "keep me\n");
}

}  // namespace local_files_test
