// The bounded line reader and the shared-secret helpers the network surfaces use.
#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "ocslab/common/error.h"
#include "ocslab/common/frame_limits.h"
#include "ocslab/common/secret.h"

using namespace ocslab;
using Catch::Matchers::Contains;

TEST_CASE("LineAssembler returns whole lines and refuses one past the limit", "[common][frame_limits]") {
  LineAssembler a(8);
  CHECK(a.feed("abc"));
  CHECK(a.partial());
  CHECK_FALSE(a.next_line());
  CHECK(a.feed("de\r\nfgh\n12"));
  CHECK(a.next_line() == std::optional<std::string>("abcde"));
  CHECK(a.next_line() == std::optional<std::string>("fgh"));
  CHECK_FALSE(a.next_line());
  CHECK(a.partial());
  CHECK(a.feed("345678"));  // "12345678": exactly the limit, still waiting for its '\n'
  CHECK_FALSE(a.feed("9"));  // one past
  CHECK(a.overflow());
  CHECK_FALSE(a.feed("\n"));
  CHECK_FALSE(a.next_line());

  LineAssembler b(4);
  CHECK_FALSE(b.feed("ok\ntoolong\n"));  // a complete line over the limit is refused too
}

TEST_CASE("LineAssembler keeps working over many lines split across feeds", "[common][frame_limits]") {
  LineAssembler a(16);
  for (int i = 0; i < 100000; ++i) {
    REQUIRE(a.feed("01234"));
    REQUIRE(a.feed("56789\nab"));
    REQUIRE(a.next_line() == std::optional<std::string>("0123456789"));
    REQUIRE(a.partial());
    REQUIRE(a.feed("\n"));
    REQUIRE(a.next_line() == std::optional<std::string>("ab"));
    REQUIRE_FALSE(a.partial());
  }
}

TEST_CASE("secrets: random, private files only, constant-time comparison", "[common][secret]") {
  auto a = random_token(), b = random_token();
  CHECK(a.size() == 64);
  CHECK(a != b);
  CHECK(a.find_first_not_of("0123456789abcdef") == std::string::npos);
  CHECK(constant_time_equal(a, a));
  CHECK_FALSE(constant_time_equal(a, b));
  CHECK_FALSE(constant_time_equal(a, a.substr(1)));

  auto dir = std::filesystem::temp_directory_path() / ("ocslab-secret-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  auto path = (dir / "token").string();
  write_secret_file(path, a);
  struct stat st {};
  REQUIRE(::stat(path.c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0600);
  CHECK(read_secret_file(path, "test token") == a);
  CHECK_THROWS_WITH(write_secret_file(path, b), Contains(path));  // never over an existing file

  ::chmod(path.c_str(), 0640);
  CHECK_THROWS_WITH(read_secret_file(path, "test token"), Contains("mode 0640") && Contains("chmod 600"));
  ::chmod(path.c_str(), 0600);
  auto link = (dir / "link").string();
  std::filesystem::create_symlink(path, link);
  CHECK_THROWS_WITH(read_secret_file(link, "test token"), Contains("symbolic link"));
  auto empty = (dir / "empty").string();
  write_secret_file(empty, "");
  CHECK_THROWS_WITH(read_secret_file(empty, "test token"), Contains("empty"));
  CHECK_THROWS_WITH(read_secret_file(dir.string(), "test token"), Contains("not a regular file"));
  if (::geteuid() != 0) {
    CHECK_THROWS_WITH(read_secret_file("/etc/passwd", "test token"), Contains("owned by uid 0"));
  }
  std::filesystem::remove_all(dir);
}
