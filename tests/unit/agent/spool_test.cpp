// The spool: what was appended comes back by seq range, batches reach the file, a clean
// finish loses nothing, a full disk (a real small tmpfs) stops the appends without losing what
// is on disk or growing memory, and a torn last line (agent killed mid-write) is not returned.
#include <unistd.h>

#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <thread>

#include "ocslab/agent/protocol.h"
#include "ocslab/agent/spool.h"
#include "ocslab/common/error.h"
#include "ocslab/testing/small_disk.h"
#include "ocslab/testing/sshd_fixture.h"

using namespace ocslab::agent;

namespace {

ocslab::Sample sample(int n) { return {1000 + n, n, "h", "heartbeat", "agent", "heartbeat", double(n), "count"}; }

std::vector<uint64_t> seqs(Spool& spool, uint64_t from, uint64_t to) {
  std::vector<uint64_t> out;
  spool.read(from, to, [&](std::string_view line) {
    auto s = parse_sample(parse_message(line));
    out.push_back(s.seq);
    CHECK(s.sample.value == double(s.seq));
  });
  return out;
}

size_t file_lines(const std::string& path) {
  std::ifstream in(path);
  size_t n = 0;
  for (std::string l; std::getline(in, l);) ++n;
  return n;
}

}  // namespace

TEST_CASE("spool returns appended samples by seq range", "[agent][spool]") {
  ocslab::testing::TempDir dir;
  Spool spool(dir.path() + "/s.jsonl", {64, std::chrono::milliseconds(50)});
  for (int i = 1; i <= 1000; ++i) spool.append(i, sample_line(i, sample(i)));
  CHECK(spool.last_seq() == 1000);
  auto all = seqs(spool, 1, 1000);
  REQUIRE(all.size() == 1000);
  for (size_t i = 0; i < all.size(); ++i) CHECK(all[i] == i + 1);
  CHECK(seqs(spool, 990, 2000) == std::vector<uint64_t>{990, 991, 992, 993, 994, 995, 996, 997, 998, 999, 1000});
  CHECK(seqs(spool, 257, 258) == std::vector<uint64_t>{257, 258});  // across an index stride
  CHECK(seqs(spool, 1001, 2000).empty());
  CHECK(seqs(spool, 5, 4).empty());
}

TEST_CASE("spool writes in batches and loses nothing on finish", "[agent][spool]") {
  ocslab::testing::TempDir dir;
  std::string path = dir.path() + "/s.jsonl";
  Spool spool(path, {10, std::chrono::milliseconds(10000)});
  for (int i = 1; i <= 25; ++i) spool.append(i, sample_line(i, sample(i)));
  CHECK(file_lines(path) == 20);  // two full batches reached the file, five wait
  spool.flush_if_due();
  CHECK(file_lines(path) == 20);  // not due yet
  spool.finish();
  CHECK(file_lines(path) == 25);
  CHECK_THROWS_AS(spool.append(26, sample_line(26, sample(26))), ocslab::Error);
  CHECK(seqs(spool, 1, 100).size() == 25);  // still readable after finish
}

TEST_CASE("spool flushes a batch once it is older than the interval", "[agent][spool]") {
  ocslab::testing::TempDir dir;
  std::string path = dir.path() + "/s.jsonl";
  Spool spool(path, {1000, std::chrono::milliseconds(20)});
  spool.append(1, sample_line(1, sample(1)));
  CHECK(file_lines(path) == 0);
  // load-safe: a lower bound: the flush interval must have passed; a late wake only lengthens it.
  std::this_thread::sleep_for(std::chrono::milliseconds(30));  // kept: the 20 ms flush interval must pass
  spool.flush_if_due();
  CHECK(file_lines(path) == 1);
}

TEST_CASE("spool refuses a gap in sequence numbers", "[agent][spool]") {
  ocslab::testing::TempDir dir;
  Spool spool(dir.path() + "/s.jsonl");
  spool.append(1, sample_line(1, sample(1)));
  CHECK_THROWS_WITH(spool.append(3, sample_line(3, sample(3))), Catch::Contains("sample 3 after 1"));
}

TEST_CASE("a torn last line is not returned", "[agent][spool]") {
  ocslab::testing::TempDir dir;
  std::string path = dir.path() + "/s.jsonl";
  Spool spool(path, {1, std::chrono::milliseconds(50)});
  for (int i = 1; i <= 3; ++i) spool.append(i, sample_line(i, sample(i)));
  {
    std::ofstream out(path, std::ios::app);
    out << R"({"type":"sample","seq":4,"t_ns":1)";  // what a killed writer leaves
  }
  CHECK(seqs(spool, 1, 10) == std::vector<uint64_t>{1, 2, 3});
}

TEST_CASE("spool names the path it cannot create", "[agent][spool]") {
  CHECK_THROWS_WITH(Spool("/nonexistent-dir/x/s.jsonl"), Catch::Contains("/nonexistent-dir/x/s.jsonl"));
}

TEST_CASE("spool refuses a symlink or a file already at its name and writes nothing through it", "[agent][spool]") {
  ocslab::testing::TempDir dir;
  std::string target = dir.path() + "/precious", link = dir.path() + "/capture-1.jsonl";
  std::ofstream(target) << "keep me\n";
  REQUIRE(::symlink(target.c_str(), link.c_str()) == 0);
  CHECK_THROWS_WITH(Spool(link), Catch::Contains("spool: " + link + " is a symlink (to " + target + ")") &&
                                     Catch::Contains("refusing to follow it"));
  std::string dangling = dir.path() + "/capture-2.jsonl", where = dir.path() + "/made-through-link";
  REQUIRE(::symlink(where.c_str(), dangling.c_str()) == 0);
  CHECK_THROWS_WITH(Spool(dangling), Catch::Contains("is a symlink"));
  CHECK_FALSE(std::filesystem::exists(where));
  std::string existing = dir.path() + "/capture-3.jsonl";
  std::ofstream(existing) << "an earlier capture\n";
  CHECK_THROWS_WITH(Spool(existing), Catch::Contains(existing + " already exists; refusing to overwrite it"));
  std::ifstream a(target), b(existing);
  std::string la, lb;
  std::getline(a, la);
  std::getline(b, lb);
  CHECK(la == "keep me");
  CHECK(lb == "an earlier capture");
}

TEST_CASE("on a full disk the spool stops appending, keeps memory bounded and serves what is on disk",
          "[agent][spool]") {
  ocslab::testing::SmallDisk disk("64k");
  const std::string path = disk.path() + "/capture-full.jsonl";
  Spool spool(path, {16, std::chrono::milliseconds(50)});
  uint64_t seq = 0;
  // About 150 bytes a line: 64 KiB are full after some 450; go well past it.
  while (spool.error().empty() && seq < 10000) {
    ++seq;
    REQUIRE_NOTHROW(spool.append(seq, sample_line(seq, sample(static_cast<int>(seq)))));
  }
  REQUIRE(seq < 10000);
  CHECK_THAT(spool.error(), Catch::Contains("write spool " + path) && Catch::Contains("No space left on device"));
  const uint64_t stored = spool.stored_seq();
  CHECK(stored > 100);
  CHECK(stored < seq);
  // 200,000 more samples: none throws, none is buffered.
  for (int i = 0; i < 200000; ++i) {
    ++seq;
    spool.append(seq, sample_line(seq, sample(static_cast<int>(seq))));
    if (i % 1000 == 0) REQUIRE(spool.pending_bytes() == 0);
  }
  CHECK(spool.last_seq() == seq);
  CHECK(spool.dropped() == seq - stored);
  CHECK(spool.stored_seq() == stored);
  // Everything that reached the disk before the failure comes back, in order, each once;
  // reading does not throw for the failure.
  std::vector<uint64_t> all;
  REQUIRE_NOTHROW(all = seqs(spool, 1, seq));
  REQUIRE(all.size() == stored);
  for (size_t i = 0; i < all.size(); ++i) CHECK(all[i] == i + 1);
  CHECK(seqs(spool, stored - 2, seq) == std::vector<uint64_t>{stored - 2, stored - 1, stored});
  spool.flush_if_due();
  REQUIRE_NOTHROW(spool.flush());
  REQUIRE_NOTHROW(spool.finish());
  CHECK(seqs(spool, 1, seq).size() == stored);
}
