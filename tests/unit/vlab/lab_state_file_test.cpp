// state.json holds the lab's switch password: written 0600 from creation whatever the umask,
// and read only when it is still a private regular file of this user.
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>

#include "ocslab/testing/sshd_fixture.h"
#include "ocslab/vlab/lab_state.h"

namespace lab_state_file_test {

using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;
using ocslab::vlab::LabState;

namespace {

LabState saved_lab(const std::string& dir) {
  LabState s;
  s.name = "secretlab";
  s.dir = dir;
  s.phase = "running";
  s.switch_user = "admin";
  s.switch_password = "lab-pw-42";
  // With no umask at all a file created by the default mode (0666) would be world-readable.
  mode_t old = ::umask(0);
  s.save();
  ::umask(old);
  return s;
}

mode_t mode_of(const std::string& path) {
  struct stat st {};
  REQUIRE(::lstat(path.c_str(), &st) == 0);
  return st.st_mode & 07777;
}

}  // namespace

TEST_CASE("vlab state.json is 0600 from creation, and only a private file is read back", "[vlab][credentials]") {
  ocslab::testing::TempDir tmp;
  const std::string dir = tmp.path(), path = dir + "/state.json";
  saved_lab(dir);
  CHECK(mode_of(path) == 0600);
  saved_lab(dir);  // replaced, still 0600, no temporary left behind
  CHECK(mode_of(path) == 0600);
  CHECK(std::distance(std::filesystem::directory_iterator(dir), std::filesystem::directory_iterator()) == 1);
  CHECK(LabState::load(dir).switch_password == "lab-pw-42");

  ::chmod(path.c_str(), 0644);
  CHECK_THROWS_WITH(LabState::load(dir), StartsWith("virtual-lab state file '" + path + "'") &&
                                             Contains("chmod 600 " + path) && !Contains("lab-pw-42"));
  ::chmod(path.c_str(), 0600);

  std::string moved = dir + "/elsewhere.json";
  std::filesystem::rename(path, moved);
  REQUIRE(::symlink(moved.c_str(), path.c_str()) == 0);
  CHECK_THROWS_WITH(LabState::load(dir), Contains("'" + path + "' is a symbolic link"));
  std::filesystem::remove(path);
  std::filesystem::rename(moved, path);

  if (::geteuid() == 0) {
    struct passwd* nobody = ::getpwnam("nobody");
    REQUIRE(nobody);
    REQUIRE(::chown(path.c_str(), nobody->pw_uid, nobody->pw_gid) == 0);
    CHECK_THROWS_WITH(LabState::load(dir), Contains("owned by another user") && Contains("nobody"));
  }
}

}  // namespace lab_state_file_test
