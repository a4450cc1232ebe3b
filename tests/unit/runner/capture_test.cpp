// The run's capture on disk (runner/capture_store.h) and the bounded-memory merge into
// timeline.csv (merge_capture, runner.h): what a crash, a kill -9 or a full disk leaves.
#include <signal.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <thread>

#include "ocslab/common/durable_file.h"
#include "ocslab/common/error.h"
#include "ocslab/common/file.h"
#include "ocslab/runner/capture_store.h"
#include "ocslab/runner/run_context.h"
#include "ocslab/runner/merge.h"
#include "ocslab/runner/runner.h"
#include "ocslab/testing/sshd_fixture.h"
#include "ocslab/testing/wait.h"

using namespace ocslab;
using namespace ocslab::runner;
namespace fs = std::filesystem;

namespace {

size_t lines_of(const std::string& path) {
  std::string text = read_file(path);
  return static_cast<size_t>(std::count(text.begin(), text.end(), '\n'));
}

Sample sample(int64_t t, const std::string& host, const std::string& subject, double v) {
  return Sample{t, t + 7, host, "carrier", subject, "carrier", v, "bool"};
}

}  // namespace

TEST_CASE("merge_capture: bounded runs merge to exactly what a stable sort of everything gives", "[runner][capture]") {
  testing::TempDir dir;
  std::mt19937_64 rng(7);
  // Three streams, each roughly in time order with local disorder (an outage sample stamped
  // before samples that reached the spool ahead of it), ties across and within streams, a
  // subject that needs CSV quoting, and a per-stream fix (a clock offset) on one of them.
  std::vector<std::vector<Sample>> streams(3);
  for (size_t k = 0; k < streams.size(); ++k) {
    int64_t t = 1'000'000;
    for (int i = 0; i < 500; ++i) {
      t += static_cast<int64_t>(rng() % 4) * 1000;  // 0: a tie with the previous row
      int64_t jitter = (rng() % 10 == 0) ? -static_cast<int64_t>(rng() % 20'000) : 0;
      streams[k].push_back(sample(t + jitter, "h" + std::to_string(k), i % 50 ? "eth1" : "rxe0/eth1,\"q\"", i));
    }
  }
  std::vector<CaptureInput> inputs;
  std::vector<Sample> all;
  for (size_t k = 0; k < streams.size(); ++k) {
    std::string path = dir.path() + "/s" + std::to_string(k) + ".csv";
    DurableFile f = DurableFile::create(path);
    f.append(csv_row(capture_columns()));
    for (size_t i = 0; i < streams[k].size(); ++i) f.append(capture_row(streams[k][i], i + 1));
    f.close();
    std::function<void(Sample&)> fix;
    if (k == 1) fix = [](Sample& s) { s.t_ns -= 2500; };
    inputs.push_back({path, fix});
    for (auto s : streams[k]) {
      if (fix) fix(s);
      all.push_back(s);
    }
  }
  std::stable_sort(all.begin(), all.end(), [](const Sample& a, const Sample& b) { return a.t_ns < b.t_ns; });
  auto iteration = [](int64_t t) { return static_cast<int>(t / 1'000'000); };
  write_timeline(dir.path() + "/expected.csv", all, "r1", iteration);

  for (size_t chunk : {size_t{5}, size_t{7}, size_t{64}, size_t{1} << 18}) {  // 5: 300 runs, a pass of 256 first
    INFO("chunk_rows " << chunk);
    uint64_t rows = merge_capture(inputs, dir.path() + "/timeline.csv", "r1", iteration, dir.path() + "/work", chunk);
    CHECK(rows == 1500);
    CHECK(read_file(dir.path() + "/timeline.csv") == read_file(dir.path() + "/expected.csv"));
    CHECK_FALSE(fs::exists(dir.path() + "/work"));  // the sorted runs are removed
  }
}

TEST_CASE("merge_capture: a last line cut short by a crash is skipped, a bad number names file and line",
          "[runner][capture]") {
  testing::TempDir dir;
  std::string path = dir.path() + "/h1.csv";
  {
    std::ofstream out(path);
    out << csv_row(capture_columns()) << capture_row(sample(5, "h1", "eth1", 1), 1)
        << capture_row(sample(3, "h1", "eth1", 0), 2) << "9,h1,carrier,eth1";  // the writer died here
  }
  auto it = [](int64_t) { return 0; };
  CHECK(merge_capture({{path, {}}}, dir.path() + "/t.csv", "r", it, dir.path() + "/w") == 2);
  std::string t = read_file(dir.path() + "/t.csv");
  CHECK(t.find("3,h1,carrier,eth1,carrier,0,bool,r,0\n5,h1,") != std::string::npos);
  {
    std::ofstream out(path, std::ios::app);
    out << ",carrier,1,bool,x,3\n";  // completes the row with a bad mono_ns
  }
  CHECK_THROWS_WITH(merge_capture({{path, {}}}, dir.path() + "/t.csv", "r", it, dir.path() + "/w"),
                    Catch::Contains(path + ":4: bad number"));
  CHECK(read_file(dir.path() + "/t.csv") == t);  // the failed merge left the earlier file whole
}

TEST_CASE("capture store: rows from many threads, one file per stream, synced without close", "[runner][capture]") {
  testing::TempDir dir;
  CaptureStore store(dir.path() + "/capture", std::chrono::milliseconds(50));
  std::vector<std::thread> threads;
  for (int k = 0; k < 4; ++k) {
    threads.emplace_back([&, k] {
      for (int i = 1; i <= 2000; ++i) store.append("host.h" + std::to_string(k % 2), sample(i, "h", "eth1", 1), i);
    });
  }
  for (auto& t : threads) t.join();
  store.append("runner.control", sample(1, "switch", "rail-a", 1));
  store.sync();
  // A folder that holds a capture already is never taken over (an empty one is: a mount point).
  CHECK_THROWS_WITH(CaptureStore(dir.path() + "/capture"), Catch::Contains("cannot create the capture folder"));
  auto st = store.streams();
  REQUIRE(st.size() == 3);
  CHECK(st[2].name == "runner.control");
  CHECK(fs::path(st[2].path).filename() == "runner.control.csv");
  for (int k = 0; k < 2; ++k) {
    CHECK(st[k].rows == 4000);
    CHECK(st[k].last_seq == 2000);
    CHECK(lines_of(st[k].path) == 4001);  // on disk before close: header + rows
  }
  store.close();
  store.append("host.h0", sample(1, "h", "eth1", 1), 1);  // late: ignored, no throw
  CHECK(lines_of(st[0].path) == 4001);
}

TEST_CASE("capture store: the folder is fsynced after each new file, not after every row", "[runner][capture]") {
  // A power loss keeps a synced file's rows only if its name in capture/ was synced too. The
  // fsync itself cannot be observed without a power cut; the store counts the folder fsyncs
  // that succeeded (CaptureStore::dir_syncs), and this checks when they happen.
  testing::TempDir dir;
  CaptureStore store(dir.path() + "/capture", std::chrono::hours(1));  // only the explicit syncs
  store.sync();
  CHECK(store.dir_syncs() == 0u);  // no file yet
  store.append("host.h1", sample(1, "h", "eth1", 1), 1);
  store.sync();
  CHECK(store.dir_syncs() == 1u);
  store.append("host.h1", sample(2, "h", "eth1", 1), 2);
  store.sync();
  CHECK(store.dir_syncs() == 1u);  // rows only: no new name
  store.append("host.h2", sample(1, "h", "eth1", 1), 1);
  store.append("host.h3", sample(1, "h", "eth1", 1), 1);
  store.sync();
  CHECK(store.dir_syncs() == 2u);  // one fsync covers both names
  store.append("runner.control", sample(1, "switch", "rail-a", 1));
  store.close();  // a file created after the last sync: close syncs the folder too
  CHECK(store.dir_syncs() == 3u);
}

TEST_CASE("capture store: kill -9 of the writer loses nothing older than the sync interval", "[runner][capture]") {
  testing::TempDir dir;
  const std::string cap = dir.path() + "/capture";
  pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    CaptureStore store(cap, std::chrono::milliseconds(100));
    for (int i = 1; i <= 5000; ++i) store.append("host.h1", sample(i, "h1", "eth1", 1), i);
    // The periodic sync (100 ms) has written every row: kill then, not after a guessed 400 ms,
    // which a loaded machine can pass before the sync thread ran. 60 s is a hang guard.
    testing::poll_until([&] { return lines_of(cap + "/host.h1.csv") == 5001; }, std::chrono::seconds(60));
    ::kill(::getpid(), SIGKILL);  // no destructor, no close
    ::_exit(99);
  }
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  REQUIRE(WIFSIGNALED(status));
  CHECK(WTERMSIG(status) == SIGKILL);
  CHECK(lines_of(cap + "/host.h1.csv") == 5001);
  // and the files merge as they are
  CHECK(merge_capture(
            {{cap + "/host.h1.csv", {}}}, dir.path() + "/timeline.csv", "r", [](int64_t) { return 0; },
            dir.path() + "/w") == 5000);
}

TEST_CASE("capture store: a full disk stops one stream, keeps what it wrote, reports once", "[runner][capture]") {
  testing::TempDir dir;
  const std::string mnt = dir.path() + "/small";
  fs::create_directories(mnt);
  if (::mount("tmpfs", mnt.c_str(), "tmpfs", 0, "size=128k") != 0) {
    FAIL("cannot mount a 128 KiB tmpfs at " << mnt << " (the test runs as root)");
  }
  struct Unmount {
    std::string m;
    ~Unmount() { ::umount2(m.c_str(), MNT_DETACH); }
  } unmount{mnt};
  {
    CaptureStore store(mnt + "/capture", std::chrono::milliseconds(20));
    for (int i = 1; i <= 20000; ++i) store.append("host.h1", sample(i, "h1", "eth1", 1), i);
    store.close();
    auto st = store.streams();
    REQUIRE(st.size() == 1);
    CHECK_THAT(st[0].error, Catch::Contains("No space left on device"));
    CHECK_THAT(st[0].error, Catch::Contains("host.h1.csv"));
    CHECK(st[0].rows + st[0].dropped == 20000);
    CHECK(st[0].dropped > 0);
    // What reached the disk is whole rows up to the failed write, and it merges.
    uint64_t merged = merge_capture(
        {{st[0].path, {}}}, dir.path() + "/timeline.csv", "r", [](int64_t) { return 0; }, dir.path() + "/w");
    CHECK(merged > 1000);
    CHECK(merged <= st[0].rows);
  }
}

TEST_CASE("write_file_atomic: a failure leaves the old file whole and no temporary file", "[runner][capture]") {
  testing::TempDir dir;
  const std::string path = dir.path() + "/meta.json";
  write_text(path, "{\"old\": true}\n");
  CHECK_THROWS_WITH(write_file_atomic(path,
                                      [](DurableFile& f) {
                                        f.append("{\"new\": ");
                                        throw Error("disk gone");
                                      }),
                    "disk gone");
  CHECK(read_file(path) == "{\"old\": true}\n");
  CHECK(std::distance(fs::directory_iterator(dir.path()), fs::directory_iterator()) == 1);
  write_text(path, "{\"new\": true}\n");
  CHECK(read_file(path) == "{\"new\": true}\n");
  // Never through a symlink it did not create.
  fs::create_symlink(dir.path() + "/elsewhere", dir.path() + "/link.csv");
  CHECK_THROWS_WITH(DurableFile::create(dir.path() + "/link.csv"), Catch::Contains("cannot create"));
  CHECK_FALSE(fs::exists(dir.path() + "/elsewhere"));
}

TEST_CASE("capture store: resume after a crash cuts the half-written last line and appends after it",
          "[runner][capture]") {
  testing::TempDir dir;
  const std::string cap = dir.path() + "/capture";
  {
    CaptureStore store(cap);
    for (int i = 1; i <= 10; ++i) store.append("host.h1", sample(i, "h1", "eth1", 1), i);
    store.append("runner.control", sample(3, "switch", "a", 1));
    store.close();
  }
  { std::ofstream(cap + "/host.h1.csv", std::ios::app) << "11,h1,carr"; }  // the writer died here
  auto store = CaptureStore::resume(cap);
  auto st = store->streams();
  REQUIRE(st.size() == 2);
  CHECK(st[0].name == "host.h1");
  CHECK(st[0].rows == 10);
  CHECK(st[0].last_seq == 10);
  CHECK(st[1].name == "runner.control");
  store->append("host.h1", sample(11, "h1", "eth1", 0), 11);
  store->close();
  CHECK(merge_capture(
            {{cap + "/host.h1.csv", {}}}, dir.path() + "/t.csv", "r", [](int64_t) { return 0; }, dir.path() + "/w") ==
        11);
  CHECK(lines_of(cap + "/host.h1.csv") == 12);
  CHECK_THROWS_WITH(CaptureStore::resume(dir.path() + "/none"), Catch::Contains("no capture folder"));
}
