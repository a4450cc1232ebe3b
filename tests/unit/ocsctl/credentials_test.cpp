// A switch password goes only to the switch it is for, from a file only its owner can read:
// $OCSLAB_OCS_PASSWORD bound by $OCSLAB_OCS_PASSWORD_HOST (or loopback), the credentials
// file's owner, mode and kind checked on the open descriptor. Real files, real users.
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <fstream>

#include "ocslab/ocsctl/credentials.h"
#include "ocslab/ocsctl/driver.h"
#include "ocslab/testing/sshd_fixture.h"

// This file's helpers in a namespace of its own: the unity build compiles it together with
// the other tests of its binary.
namespace credentials_test {

using namespace ocslab;
using namespace ocslab::ocs;

namespace {

// Sets (or, with nullptr, unsets) one variable for a scope and restores what was there.
class EnvVar {
 public:
  EnvVar(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value)
      ::setenv(name, value, 1);
    else
      ::unsetenv(name);
  }
  ~EnvVar() {
    if (old_)
      ::setenv(name_, old_->c_str(), 1);
    else
      ::unsetenv(name_);
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

std::string private_file(const testing::TempDir& dir, const std::string& text) {
  std::string path = dir.path() + "/credentials";
  std::ofstream(path) << text;
  ::chmod(path.c_str(), 0600);
  return path;
}

}  // namespace

TEST_CASE("credentials: $OCSLAB_OCS_PASSWORD goes only to the host it is bound to", "[credentials]") {
  testing::TempDir dir;
  const std::string none = dir.path() + "/missing";
  EnvVar pw(kPasswordEnv, "s3cret-pw");

  SECTION("alone it is for a switch on loopback; a URL naming another host is refused, naming it") {
    EnvVar host(kPasswordHostEnv, nullptr);
    CHECK(resolve_password(SwitchUrl::parse("tl1://admin@127.0.0.1:3082"), none) == "s3cret-pw");
    CHECK(resolve_password(SwitchUrl::parse("netconf://admin@[::1]:830"), none) == "s3cret-pw");
    CHECK(resolve_password(SwitchUrl::parse("tl1://admin@localhost"), none) == "s3cret-pw");
    CHECK_THROWS_WITH(resolve_password(SwitchUrl::parse("tl1://admin@sw2.lab:3082"), none),
                      Catch::Contains("switch host 'sw2.lab'") && Catch::Contains("OCSLAB_OCS_PASSWORD_HOST=sw2.lab") &&
                          Catch::Contains("$OCSLAB_OCS_PASSWORD ") && Catch::Contains("loopback") &&
                          !Catch::Contains("s3cret-pw"));
    // A name that only starts like a loopback address is not one.
    CHECK_THROWS(resolve_password(SwitchUrl::parse("tl1://admin@127.0.0.1.evil.example"), none));
    CHECK_THROWS(resolve_password(SwitchUrl::parse("tl1+ssh://admin@10.0.0.5"), none));
  }
  SECTION("bound to hosts: those get it, any other (loopback too) is refused") {
    EnvVar host(kPasswordHostEnv, "sw1, [fe80::1]:830,sw3:3083");
    CHECK(resolve_password(SwitchUrl::parse("tl1://admin@sw1:3082"), none) == "s3cret-pw");
    CHECK(resolve_password(SwitchUrl::parse("netconf://admin@[fe80::1]"), none) == "s3cret-pw");
    CHECK(resolve_password(SwitchUrl::parse("tl1://admin@sw3:3083"), none) == "s3cret-pw");
    CHECK_THROWS_WITH(
        resolve_password(SwitchUrl::parse("tl1://admin@sw3:3082"), none),
        Catch::Contains("'sw3'") && Catch::Contains("OCSLAB_OCS_PASSWORD_HOST='sw1, [fe80::1]:830,sw3:3083'"));
    CHECK_THROWS_WITH(resolve_password(SwitchUrl::parse("tl1://admin@sw2"), none),
                      Catch::Contains("switch host 'sw2'") && !Catch::Contains("s3cret-pw"));
    CHECK_THROWS_WITH(resolve_password(SwitchUrl::parse("tl1://admin@127.0.0.1"), none),
                      Catch::Contains("switch host '127.0.0.1'"));
    // SCPI has no login: nothing is handed out, nothing refused.
    CHECK_FALSE(resolve_password(SwitchUrl::parse("scpi://sw2"), none));
    // The driver factory asks the same function: the wrong switch's driver is never made.
    CHECK_THROWS_WITH(make_driver(SwitchUrl::parse("tl1://admin@sw2"), {}), Catch::Contains("switch host 'sw2'"));
  }
  SECTION("a host the variable is not for may still have its own line in the credentials file") {
    EnvVar host(kPasswordHostEnv, "sw1");
    std::string path = private_file(dir, "sw2 admin file-pw\n");
    CHECK(resolve_password(SwitchUrl::parse("tl1://admin@sw2"), path) == "file-pw");
    CHECK(resolve_password(SwitchUrl::parse("tl1://admin@sw1"), path) == "s3cret-pw");
    CHECK_THROWS_WITH(resolve_password(SwitchUrl::parse("tl1://admin@sw9"), path), Catch::Contains(path));
  }
  SECTION("a malformed binding is refused naming the variable") {
    EnvVar host(kPasswordHostEnv, "sw1:99999");
    CHECK_THROWS_WITH(resolve_password(SwitchUrl::parse("tl1://admin@sw1"), none),
                      Catch::StartsWith("$OCSLAB_OCS_PASSWORD_HOST: bad port in 'sw1:99999'"));
  }
}

TEST_CASE("credentials: loopback means 127.0.0.0/8, ::1 or localhost, nothing that looks like it", "[credentials]") {
  for (const char* h : {"127.0.0.1", "127.1.2.3", "127.255.255.255", "::1", "localhost"}) CHECK(is_loopback_host(h));
  for (const char* h : {"10.0.0.1", "127.0.0.1.example", "127.0.0", "127.0.0.256", "127..0.1", "1127.0.0.1",
                        "127.0.0.1:80", "::2", "localhost.example", ""}) {
    INFO(h);
    CHECK_FALSE(is_loopback_host(h));
  }
}

TEST_CASE("credentials file: a symlink, a FIFO or access for group or others is refused naming the file",
          "[credentials]") {
  testing::TempDir dir;
  std::string path = private_file(dir, "sw1 admin s3cret\n");
  auto url = SwitchUrl::parse("tl1://admin@sw1");
  REQUIRE(lookup_password(url, path) == "s3cret");
  std::string link = dir.path() + "/link";
  REQUIRE(::symlink(path.c_str(), link.c_str()) == 0);
  CHECK_THROWS_WITH(
      lookup_password(url, link),
      Catch::StartsWith("credentials file '" + link + "' is a symbolic link") && !Catch::Contains("s3cret"));
  for (mode_t mode : {0640, 0604, 0620, 0602, 0610}) {
    ::chmod(path.c_str(), mode);
    INFO(mode);
    CHECK_THROWS_WITH(lookup_password(url, path), Catch::StartsWith("credentials file '" + path + "'") &&
                                                      Catch::Contains("group or others") &&
                                                      Catch::Contains("chmod 600 " + path));
  }
  std::string fifo = dir.path() + "/fifo";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  CHECK_THROWS_WITH(lookup_password(url, fifo), Catch::Contains("'" + fifo + "' is not a regular file"));
}

TEST_CASE("credentials file: one owned by another user is refused naming the file and the owner", "[credentials]") {
  if (::geteuid() != 0) {
    WARN("not root: cannot give a file to another user; skipped");
    return;
  }
  struct passwd* nobody = ::getpwnam("nobody");
  REQUIRE(nobody);
  testing::TempDir dir;
  std::string path = private_file(dir, "sw1 admin s3cret\n");
  auto url = SwitchUrl::parse("tl1://admin@sw1");
  REQUIRE(lookup_password(url, path) == "s3cret");  // root's own 0600 file: accepted
  REQUIRE(::chown(path.c_str(), nobody->pw_uid, nobody->pw_gid) == 0);
  CHECK_THROWS_WITH(lookup_password(url, path), Catch::StartsWith("credentials file '" + path + "'") &&
                                                    Catch::Contains("owned by another user") &&
                                                    Catch::Contains("nobody") && !Catch::Contains("s3cret"));
}

}  // namespace credentials_test
