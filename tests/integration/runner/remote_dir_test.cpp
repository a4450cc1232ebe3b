// The phase workload's remote folder through a real sshd on loopback (this machine is the "host"):
// made by mktemp -d, its files fetched and verified before it is removed; a symlinked folder
// refused with nothing read or removed through it; a local disk too small for a fetched file
// (a 64 KiB tmpfs mounted by the test) reported naming the file, and the remote copy kept; the
// runner's write_text on that disk fails naming the file; a compromised host (sshd's
// ForceCommand answering the listing itself) that names "../" files or files not asked for is
// refused naming the host and the name, and nothing is written anywhere.
#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "ocslab/common/error.h"
#include "ocslab/common/file.h"
#include "ocslab/ocsctl/ssh_session.h"
#include "ocslab/runner/remote_dir.h"
#include "ocslab/runner/run_context.h"
#include "ocslab/testing/agent_lab.h"
#include "ocslab/testing/small_disk.h"
#include "ocslab/testing/sshd_fixture.h"

// This file's helpers in a namespace of its own: the unity build compiles it together with
// the other tests of its binary.
namespace remote_dir_test {

using namespace ocslab;
using Catch::Matchers::Contains;
namespace fs = std::filesystem;

namespace {

struct Host {
  testing::SshdFixture sshd{testing::SshdOptions{}};
  ocs::SshSession session{testing::agent_ssh_options(sshd)};
};

void write(const std::string& path, const std::string& text) {
  std::ofstream(path) << text;
  REQUIRE(read_file(path) == text);
}

}  // namespace

TEST_CASE("the ranks' folder comes from mktemp -d and goes once its files were verified", "[runner][remote-dir]") {
  Host host;
  const std::string prefix = runner::remote_dir_prefix("run 1/x", "on-demand");
  CHECK(prefix == "/tmp/ocslab-phase-run_1_x-on-demand");
  std::string dir = runner::make_remote_dir(host.session, prefix, "schedule.yaml", "ranks: 2\n");
  std::string other = runner::make_remote_dir(host.session, prefix, "schedule.yaml", "ranks: 2\n");
  CHECK(dir != other);  // a new name each time, not a predictable one
  REQUIRE(dir.rfind(prefix + ".", 0) == 0);
  struct stat st {};
  REQUIRE(::lstat(dir.c_str(), &st) == 0);
  CHECK(S_ISDIR(st.st_mode));
  CHECK((st.st_mode & 07777) == 0700);
  CHECK(read_file(dir + "/schedule.yaml") == "ranks: 2\n");

  const std::string ops(3000, 'o');
  write(dir + "/ops-rank0.csv", ops);
  write(dir + "/timeline-rank0.csv", "t\n1\n");
  testing::TempDir local;
  auto got = runner::fetch_verified(host.session, dir, {"ops-rank0.csv", "timeline-rank0.csv", "shim-rank0.csv"},
                                    local.path());
  CHECK(got.verified());
  CHECK(got.fetched == std::vector<std::string>{"ops-rank0.csv", "timeline-rank0.csv"});
  CHECK(read_file(local.path() + "/ops-rank0.csv") == ops);
  CHECK(read_file(local.path() + "/timeline-rank0.csv") == "t\n1\n");
  CHECK_FALSE(fs::exists(local.path() + "/shim-rank0.csv"));  // not written by the rank: not made up
  runner::remove_remote_dir(host.session, dir);
  runner::remove_remote_dir(host.session, other);
  CHECK_FALSE(fs::exists(dir));
  CHECK_FALSE(fs::exists(other));
}

TEST_CASE("a symlinked or foreign remote folder is refused: nothing read or removed through it",
          "[runner][remote-dir]") {
  Host host;
  testing::TempDir dir;
  const std::string target = dir.path() + "/real", link = dir.path() + "/ocslab-phase-x.AAAAAAAAAA";
  REQUIRE(::mkdir(target.c_str(), 0700) == 0);
  write(target + "/ops-rank0.csv", "keep me\n");
  REQUIRE(::symlink(target.c_str(), link.c_str()) == 0);
  CHECK_THROWS_WITH(runner::check_remote_dir(host.session, link),
                    Contains(link + " is a symlink; refusing to use it"));
  testing::TempDir local;
  CHECK_THROWS_WITH(runner::fetch_verified(host.session, link, {"ops-rank0.csv"}, local.path()),
                    Contains(link + " is a symlink; refusing to use it"));
  CHECK(fs::is_empty(local.path()));
  CHECK_THROWS_WITH(runner::remove_remote_dir(host.session, link), Contains(link + " is a symlink"));
  CHECK(fs::is_symlink(link));
  CHECK(read_file(target + "/ops-rank0.csv") == "keep me\n");

  const std::string theirs = dir.path() + "/theirs";
  REQUIRE(::mkdir(theirs.c_str(), 0700) == 0);
  REQUIRE(::chown(theirs.c_str(), 65534, 65534) == 0);
  CHECK_THROWS_WITH(runner::remove_remote_dir(host.session, theirs),
                    Contains(theirs + " is not owned by the SSH user; refusing to use it"));
  CHECK(fs::is_directory(theirs));
}

TEST_CASE("a fetched file the local disk cannot hold is reported by name and the remote copy kept",
          "[runner][remote-dir]") {
  Host host;
  const std::string prefix = runner::remote_dir_prefix("full", "disk");
  std::string dir = runner::make_remote_dir(host.session, prefix, "schedule.yaml", "x\n");
  const std::string big(200 * 1024, 'b');
  write(dir + "/ops-rank0.csv", big);
  write(dir + "/timeline-rank0.csv", "t\n");
  testing::SmallDisk disk("64k");
  auto got = runner::fetch_verified(host.session, dir, {"ops-rank0.csv", "timeline-rank0.csv"}, disk.path());
  CHECK_FALSE(got.verified());
  REQUIRE(got.problems.size() == 1u);
  CHECK_THAT(got.problems[0], Contains(dir + "/ops-rank0.csv not copied: cannot write " + disk.path() +
                                       "/ops-rank0.csv: No space left on device"));
  CHECK_FALSE(fs::exists(disk.path() + "/ops-rank0.csv"));  // no truncated copy left behind
  CHECK(got.fetched == std::vector<std::string>{"timeline-rank0.csv"});
  CHECK(read_file(dir + "/ops-rank0.csv") == big);  // the caller keeps the folder: the only copy
  runner::remove_remote_dir(host.session, dir);
}

TEST_CASE("a host answering ../ names or names not asked for is refused: nothing written", "[runner][remote-dir]") {
  testing::TempDir tmp;
  const std::string answer = tmp.path() + "/answer", script = tmp.path() + "/host.sh";
  // The host's shell is the attacker's: the listing (the command with printf in it) answers what
  // the test put in `answer`; anything else (cat, check) runs as asked.
  write(script, "case \"$SSH_ORIGINAL_COMMAND\" in *printf*) cat " + answer +
                    ";; *) exec sh -c \"$SSH_ORIGINAL_COMMAND\";; esac\n");
  REQUIRE(::chmod(script.c_str(), 0755) == 0);
  testing::SshdFixture sshd{testing::SshdOptions{.force_command = "sh " + script, .netconf_subsystem = {}}};
  ocs::SshSession session{testing::agent_ssh_options(sshd)};
  const std::string prefix = runner::remote_dir_prefix("hostile", "names");
  std::string dir = runner::make_remote_dir(session, prefix, "schedule.yaml", "x\n");
  write(dir + "/ops-rank0.csv", "12345");
  REQUIRE(::mkdir((tmp.path() + "/results").c_str(), 0700) == 0);
  const std::string local = tmp.path() + "/results/run";
  REQUIRE(::mkdir(local.c_str(), 0700) == 0);
  for (const std::string& name : {std::string("../escape.csv"), std::string("../../escape.csv"), std::string(".."),
                                  std::string("sub/ops-rank0.csv"), std::string("ops\x1b[2Jrank0.csv")}) {
    INFO(name);
    write(answer, name + " 5\n");
    std::string shown = name == "ops\x1b[2Jrank0.csv" ? "ops\\x1b[2Jrank0.csv" : name;
    CHECK_THROWS_WITH(runner::fetch_verified(session, dir, {"ops-rank0.csv"}, local),
                      Contains(session.describe()) && Contains("names '" + shown + "', not a plain file name") &&
                          Contains("refusing to copy from it"));
  }
  write(answer, "timeline-rank0.csv 5\n");
  CHECK_THROWS_WITH(
      runner::fetch_verified(session, dir, {"ops-rank0.csv"}, local),
      Contains(session.describe()) && Contains("names 'timeline-rank0.csv', not one of the files asked for"));
  CHECK(fs::is_empty(local));
  CHECK_FALSE(fs::exists(tmp.path() + "/results/escape.csv"));
  CHECK_FALSE(fs::exists(tmp.path() + "/escape.csv"));
  write(answer, "ops-rank0.csv 5\n");  // the same host answering honestly: copied as before
  auto got = runner::fetch_verified(session, dir, {"ops-rank0.csv"}, local);
  CHECK(got.verified());
  CHECK(read_file(local + "/ops-rank0.csv") == "12345");
  runner::remove_remote_dir(session, dir);
}

TEST_CASE("the runner's result files on a full disk fail naming the file", "[runner][remote-dir]") {
  testing::SmallDisk disk("64k");
  CHECK_THROWS_WITH(runner::write_text(disk.path() + "/meta.json", std::string(100 * 1024, 'b')),
                    Contains("cannot write " + disk.path() + "/meta.json"));
}

}  // namespace remote_dir_test
