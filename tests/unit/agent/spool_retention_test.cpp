// Spool retention on a real folder: by age, then oldest first over the byte cap, never the
// kept (running) capture's spool, and never anything the agent did not name itself (a symlink
// with a spool's name, another file, a folder).
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include "ocslab/agent/spool_retention.h"
#include "ocslab/common/error.h"
#include "ocslab/testing/sshd_fixture.h"

using namespace ocslab::agent;
namespace fs = std::filesystem;

namespace {

constexpr std::time_t kNow = 1'800'000'000;
constexpr std::time_t kDay = 86400;

void make(const std::string& path, size_t bytes, std::time_t mtime) {
  std::ofstream(path) << std::string(bytes, 'x');
  timespec t[2] = {{mtime, 0}, {mtime, 0}};
  REQUIRE(::utimensat(AT_FDCWD, path.c_str(), t, 0) == 0);
}

}  // namespace

TEST_CASE("retention deletes old spools, then the oldest over the cap, never the kept one nor a foreign file",
          "[agent][spool][retention]") {
  ocslab::testing::TempDir dir;
  const std::string d = dir.path();
  make(d + "/capture-a.jsonl", 50, kNow - 10 * kDay);  // too old
  make(d + "/capture-b.run1.jsonl", 100, kNow - 2 * kDay);
  make(d + "/capture-c.jsonl", 300, kNow - 1 * kDay);
  make(d + "/capture-running.jsonl", 400, kNow - 30 * kDay);  // kept: the running capture's
  make(d + "/notes.txt", 10, kNow - 30 * kDay);
  make(d + "/capture-x.jsonl.bak", 10, kNow - 30 * kDay);
  fs::create_directory(d + "/capture-dir.jsonl");
  make(d + "/target", 10, kNow - 30 * kDay);
  REQUIRE(::symlink((d + "/target").c_str(), (d + "/capture-link.jsonl").c_str()) == 0);
  timespec old[2] = {{kNow - 30 * kDay, 0}, {kNow - 30 * kDay, 0}};
  REQUIRE(::utimensat(AT_FDCWD, (d + "/capture-link.jsonl").c_str(), old, AT_SYMLINK_NOFOLLOW) == 0);

  auto listed = list_spool_files(d);
  REQUIRE(listed.size() == 4);  // a, b, c, running: oldest first
  CHECK(listed[0].path == d + "/capture-running.jsonl");
  CHECK(listed[1].path == d + "/capture-a.jsonl");

  RetentionOptions o;
  o.max_age = std::chrono::hours(24 * 7);
  o.max_bytes = 750;  // running 400 + c 300 fit; b has to go too
  auto r = enforce_retention(d, o, d + "/capture-running.jsonl", kNow);
  CHECK(r.errors.empty());
  CHECK(r.deleted == 2);
  CHECK(r.freed_bytes == 150);
  CHECK_FALSE(fs::exists(d + "/capture-a.jsonl"));
  CHECK_FALSE(fs::exists(d + "/capture-b.run1.jsonl"));
  CHECK(fs::exists(d + "/capture-c.jsonl"));
  CHECK(fs::exists(d + "/capture-running.jsonl"));
  for (const char* kept : {"/notes.txt", "/capture-x.jsonl.bak", "/capture-dir.jsonl", "/target"}) {
    CHECK(fs::exists(d + kept));
  }
  CHECK(fs::is_symlink(d + "/capture-link.jsonl"));

  // Over the cap with only the kept one left besides c: c goes, the kept one stays however big.
  o.max_bytes = 10;
  r = enforce_retention(d, o, d + "/capture-running.jsonl", kNow);
  CHECK(r.deleted == 1);
  CHECK(fs::exists(d + "/capture-running.jsonl"));
}

TEST_CASE("delete_spool_file removes the capture's own file only", "[agent][spool][retention]") {
  ocslab::testing::TempDir dir;
  const std::string d = dir.path();
  make(d + "/capture-1.jsonl", 123, kNow);
  CHECK(delete_spool_file(d, "1") == 123);
  CHECK_FALSE(fs::exists(d + "/capture-1.jsonl"));
  CHECK(delete_spool_file(d, "1") == -1);  // already gone: nothing to do
  make(d + "/precious", 5, kNow);
  REQUIRE(::symlink((d + "/precious").c_str(), (d + "/capture-2.jsonl").c_str()) == 0);
  CHECK_THROWS_WITH(delete_spool_file(d, "2"), "spool " + d + "/capture-2.jsonl is a symlink; not deleting it");
  CHECK(fs::exists(d + "/precious"));
  fs::create_directory(d + "/capture-3.jsonl");
  CHECK_THROWS_WITH(delete_spool_file(d, "3"), Catch::Contains("is not a regular file"));
  CHECK(spool_file_name("20261126T120000-42-1.run") == "capture-20261126T120000-42-1.run.jsonl");
  CHECK(is_spool_file_name("capture-20261126T120000-42-1.run.jsonl"));
  CHECK_FALSE(is_spool_file_name("capture-.jsonl"));
  CHECK_FALSE(is_spool_file_name("capture-..jsonl"));
  CHECK_FALSE(is_spool_file_name("capture-a b.jsonl"));
}

TEST_CASE("spool limits parse with their units and name a bad value", "[agent][spool][retention]") {
  CHECK(parse_age("90", "--spool-max-age") == std::chrono::seconds(90));
  CHECK(parse_age("30m", "--spool-max-age") == std::chrono::minutes(30));
  CHECK(parse_age("36h", "--spool-max-age") == std::chrono::hours(36));
  CHECK(parse_age("7d", "--spool-max-age") == std::chrono::hours(24 * 7));
  CHECK_THROWS_WITH(parse_age("7 d", "--spool-max-age"),
                    "--spool-max-age '7 d' is not a number with an optional unit (smhd)");
  CHECK_THROWS_WITH(parse_age("-1d", "--spool-max-age"), Catch::Contains("is not a number"));
  CHECK_THROWS_WITH(parse_age("0s", "--spool-max-age"), "--spool-max-age '0s' must be more than 0");
  CHECK_THROWS_WITH(parse_age("99999999999d", "--spool-max-age"), Catch::Contains("is too large"));
  CHECK(parse_size("4096", "--spool-max-bytes") == 4096);
  CHECK(parse_size("512M", "--spool-max-bytes") == 512ULL << 20);
  CHECK(parse_size("4G", "--spool-max-bytes") == 4ULL << 30);
  CHECK(parse_size("1T", "--spool-max-bytes") == 1ULL << 40);
  CHECK_THROWS_WITH(parse_size("4GB", "--spool-max-bytes"), Catch::Contains("'4GB' is not a number"));
  CHECK_THROWS_WITH(parse_size("99999999999T", "--spool-max-bytes"), Catch::Contains("is too large"));
}
