// ensure_own_dir, open_no_follow and write_file_atomic on real folders, files, symlinks, a FIFO
// and a full tmpfs (the tests run as root, so "another user" is nobody, made owner with chown).
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include "ocslab/common/error.h"
#include "ocslab/common/file.h"
#include "ocslab/common/durable_file.h"
#include "ocslab/common/safe_fs.h"
#include "ocslab/testing/small_disk.h"
#include "ocslab/testing/sshd_fixture.h"

// This file's helpers in a namespace of its own: the unity build compiles it together with
// the other tests of its binary.
namespace safe_fs_test {

using namespace ocslab;
using Catch::Matchers::Contains;
namespace fs = std::filesystem;

namespace {

constexpr uid_t kNobody = 65534;

unsigned mode_of(const std::string& path) {
  struct stat st {};
  REQUIRE(::lstat(path.c_str(), &st) == 0);
  return st.st_mode & 07777;
}

uid_t owner_of(const std::string& path) {
  struct stat st {};
  REQUIRE(::lstat(path.c_str(), &st) == 0);
  return st.st_uid;
}

void write(const std::string& path, const std::string& text) {
  std::ofstream(path) << text;
  REQUIRE(read_file(path) == text);
}

}  // namespace

TEST_CASE("ensure_own_dir makes a missing folder 0700 and accepts it again", "[common][safe_fs]") {
  testing::TempDir dir;
  std::string p = dir.path() + "/a/b/run";
  ensure_own_dir(p, DirPolicy::kPrivate);
  CHECK(fs::is_directory(p));
  CHECK(mode_of(p) == 0700);
  CHECK_NOTHROW(ensure_own_dir(p, DirPolicy::kPrivate));
  CHECK_NOTHROW(ensure_own_dir(p, DirPolicy::kOwned));
}

TEST_CASE("ensure_own_dir refuses another user's folder and leaves it as it was", "[common][safe_fs]") {
  testing::TempDir dir;
  std::string p = dir.path() + "/theirs";
  REQUIRE(::mkdir(p.c_str(), 0700) == 0);
  REQUIRE(::chown(p.c_str(), kNobody, kNobody) == 0);
  CHECK_THROWS_WITH(ensure_own_dir(p, DirPolicy::kPrivate),
                    Contains(p + " is owned by uid 65534") && Contains("refusing to use it"));
  CHECK_THROWS_WITH(ensure_own_dir(p, DirPolicy::kOwned), Contains("is owned by uid 65534"));
  CHECK(owner_of(p) == kNobody);  // not chown'ed back
  CHECK(mode_of(p) == 0700);
}

TEST_CASE("ensure_own_dir refuses a symlink, even to this user's own folder", "[common][safe_fs]") {
  testing::TempDir dir;
  std::string target = dir.path() + "/real", link = dir.path() + "/run";
  REQUIRE(::mkdir(target.c_str(), 0700) == 0);
  REQUIRE(::symlink(target.c_str(), link.c_str()) == 0);
  CHECK_THROWS_WITH(ensure_own_dir(link, DirPolicy::kPrivate),
                    Contains(link + " is a symlink (to " + target + "); refusing to follow it"));
  CHECK_THROWS_WITH(ensure_own_dir(link, DirPolicy::kOwned), Contains("is a symlink"));
  CHECK(fs::is_symlink(link));
}

TEST_CASE("ensure_own_dir checks the mode without changing it", "[common][safe_fs]") {
  testing::TempDir dir;
  std::string p = dir.path() + "/d";
  REQUIRE(::mkdir(p.c_str(), 0700) == 0);
  REQUIRE(::chmod(p.c_str(), 0755) == 0);
  CHECK_THROWS_WITH(ensure_own_dir(p, DirPolicy::kPrivate), Contains(p + " has mode 0755, not 0700"));
  CHECK_NOTHROW(ensure_own_dir(p, DirPolicy::kOwned));  // /run/NAME made by systemd is 0755
  REQUIRE(::chmod(p.c_str(), 0775) == 0);
  CHECK_THROWS_WITH(ensure_own_dir(p, DirPolicy::kOwned), Contains(p + " has mode 0775: others may write into it"));
  CHECK(mode_of(p) == 0775);
  std::string file = dir.path() + "/f";
  write(file, "x");
  CHECK_THROWS_WITH(ensure_own_dir(file, DirPolicy::kOwned), Contains(file + " is not a folder"));
}

TEST_CASE("open_no_follow refuses a symlink and writes nothing through it", "[common][safe_fs]") {
  testing::TempDir dir;
  std::string target = dir.path() + "/precious", link = dir.path() + "/agent.log";
  write(target, "keep me\n");
  REQUIRE(::symlink(target.c_str(), link.c_str()) == 0);
  for (int flags : {O_WRONLY | O_CREAT | O_APPEND, O_RDWR | O_CREAT, O_WRONLY | O_CREAT | O_EXCL, O_RDONLY}) {
    CHECK_THROWS_WITH(open_no_follow(link, flags, 0600, "the log"),
                      Contains("the log: " + link + " is a symlink (to " + target + "); refusing to follow it"));
  }
  CHECK(read_file(target) == "keep me\n");
  // A dangling symlink: O_CREAT alone would create its target.
  std::string dangling = dir.path() + "/lock", where = dir.path() + "/made-through-link";
  REQUIRE(::symlink(where.c_str(), dangling.c_str()) == 0);
  CHECK_THROWS_WITH(open_no_follow(dangling, O_RDWR | O_CREAT, 0600, "the lock"), Contains("is a symlink"));
  CHECK_FALSE(fs::exists(where));
}

TEST_CASE("open_no_follow: O_EXCL wants a new file; only regular files; a FIFO does not block",
          "[common][safe_fs]") {
  testing::TempDir dir;
  std::string p = dir.path() + "/spool.jsonl";
  int fd = open_no_follow(p, O_WRONLY | O_CREAT | O_EXCL | O_APPEND, 0600, "spool");
  REQUIRE(fd >= 0);
  CHECK(::write(fd, "1\n", 2) == 2);
  CHECK((::fcntl(fd, F_GETFD) & FD_CLOEXEC) != 0);
  CHECK((::fcntl(fd, F_GETFL) & O_NONBLOCK) == 0);
  ::close(fd);
  CHECK(mode_of(p) == 0600);
  CHECK_THROWS_WITH(open_no_follow(p, O_WRONLY | O_CREAT | O_EXCL, 0600, "spool"),
                    Contains("spool: " + p + " already exists; refusing to overwrite it"));
  CHECK(read_file(p) == "1\n");
  std::string fifo = dir.path() + "/fifo";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  CHECK_THROWS_WITH(open_no_follow(fifo, O_RDONLY, 0, "spool"), Contains(fifo + " is not a regular file"));
  CHECK_THROWS_WITH(open_no_follow(dir.path() + "/missing/x", O_RDONLY, 0, "spool"),
                    Contains("cannot open spool " + dir.path() + "/missing/x"));
}

TEST_CASE("write_file_atomic on a full disk fails naming the file and leaves no truncated copy",
          "[common][safe_fs]") {
  testing::SmallDisk disk("64k");
  const std::string p = disk.path() + "/ops-rank0.csv";
  CHECK_THROWS_WITH(write_file_atomic(p, [](DurableFile& f) { f.append(std::string(100 * 1024, 'b')); }),
                    Contains("cannot write " + p + ": No space left on device"));
  CHECK_FALSE(fs::exists(p));
  write_file_atomic(p, [](DurableFile& f) { f.append("fits\n"); });
  CHECK(read_file(p) == "fits\n");
}

}  // namespace safe_fs_test
