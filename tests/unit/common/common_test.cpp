#include <linux/rtnetlink.h>
#include <net/if.h>
#include <signal.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

#include "ocslab/common/clock.h"
#include "ocslab/common/config.h"
#include "ocslab/common/csv_reader.h"
#include "ocslab/common/csv_writer.h"
#include "ocslab/common/jsonl_writer.h"
#include "ocslab/common/log.h"
#include "ocslab/common/netlink_socket.h"
#include "ocslab/common/process.h"
#include "ocslab/common/sample.h"

using namespace ocslab;

TEST_CASE("csv writer quotes only fields that need it") {
  std::ostringstream out;
  CsvWriter w(out);
  w.header({"a", "b", "c"});
  w.row({"plain", "with,comma", "say \"hi\"\nnext"});
  CHECK(out.str() == "a,b,c\nplain,\"with,comma\",\"say \"\"hi\"\"\nnext\"\n");
  CHECK_THROWS_WITH(w.row({"only one"}), Catch::Contains("1 fields, header has 3"));
}

TEST_CASE("csv writer on a full disk throws naming the file, on the row that spills and on flush", "[csv]") {
  // /dev/full answers every write(2) with ENOSPC: the disk-full case without filling a disk.
  {
    CsvWriter w("/dev/full");
    w.header({"t_ns", "value"});  // fits in the stream's buffer: nothing written yet
    CHECK_THROWS_WITH(w.flush(), Catch::Contains("'/dev/full'") && Catch::Contains(std::strerror(ENOSPC)));
  }
  {
    CsvWriter w("/dev/full");
    w.header({"t_ns", "value"});
    CHECK_THROWS_WITH(w.close(), Catch::Contains("'/dev/full'"));
  }
  {
    // Rows past the buffer: the one that makes it spill fails, long before the end.
    CsvWriter w("/dev/full");
    w.header({"t_ns", "value"});
    int written = 0;
    try {
      for (; written < 1'000'000; ++written) w.row({std::to_string(1'700'000'000'000'000'000LL + written), "1.0"});
    } catch (const Error& e) {
      CHECK_THAT(e.what(), Catch::Contains("'/dev/full'"));
    }
    CHECK(written < 10'000);
  }
  // A stream that failed (a closed pipe on stdout) is named as standard output.
  std::ostringstream out;
  CsvWriter w(out);
  w.header({"a"});
  out.setstate(std::ios::badbit);
  CHECK_THROWS_WITH(w.row({"x"}), Catch::Contains("standard output"));
  CHECK_THROWS_WITH(w.flush(), Catch::Contains("standard output"));
  // A good file closes without complaint and keeps every row.
  std::string path = "/tmp/ocslab-csv-writer-" + std::to_string(::getpid()) + ".csv";
  {
    CsvWriter ok(path);
    ok.header({"a"});
    ok.row({"1"});
    ok.close();
  }
  std::ifstream in(path);
  std::string text((std::istreambuf_iterator<char>(in)), {});
  CHECK(text == "a\n1\n");
  std::remove(path.c_str());
}

TEST_CASE("csv line splitter reads back what the writer quotes") {
  using V = std::vector<std::string>;
  CHECK(split_csv_line("a,b,c") == V{"a", "b", "c"});
  CHECK(split_csv_line("") == V{""});
  CHECK(split_csv_line("a,,") == V{"a", "", ""});  // empty last fields are kept (the unit column)
  CHECK(split_csv_line("plain,\"with,comma\",\"say \"\"hi\"\"\"") == V{"plain", "with,comma", "say \"hi\""});
  CHECK(split_csv_line("a,b\r") == V{"a", "b"});        // a CRLF file
  CHECK(split_csv_line("\"a\r\",b") == V{"a\r", "b"});  // but kept inside quotes
  CHECK(split_csv_line("1,\"open") == V{"1", "open"});  // a row still being written
  // Every field the writer escapes (no line breaks: callers split lines first) comes back.
  V fields = {"", "x", ",", "\"", "\"\"", "a,\"b\",c", " spaced "};
  std::string line;
  for (size_t i = 0; i < fields.size(); ++i) line += (i ? "," : "") + CsvWriter::escape(fields[i]);
  CHECK(split_csv_line(line) == fields);
}

TEST_CASE("json lines writer writes one object per line") {
  std::ostringstream out;
  JsonLinesWriter w(out);
  w.write({{"port", 5}, {"dbm", -3.5}});
  w.write({{"ok", true}});
  CHECK(out.str() == "{\"dbm\":-3.5,\"port\":5}\n{\"ok\":true}\n");
}

TEST_CASE("json lines writer on a full disk throws naming the file", "[jsonl]") {
  JsonLinesWriter w(std::string("/dev/full"));
  CHECK_THROWS_WITH(w.write({{"ok", true}}), Catch::Contains("'/dev/full'") && Catch::Contains(std::strerror(ENOSPC)));
  std::ostringstream out;
  JsonLinesWriter s(out);
  out.setstate(std::ios::badbit);
  CHECK_THROWS_WITH(s.write({{"ok", true}}), Catch::Contains("standard output"));
}

TEST_CASE("yaml errors carry file, line and column") {
  CHECK_THROWS_WITH(load_yaml_string("a: [1, 2\n", "lab.yaml"),
                    Catch::StartsWith("lab.yaml:") && Catch::Contains("YAML syntax error"));
  auto doc = load_yaml_string("hosts:\n  h1:\n    cpus: many\n", "lab.yaml");
  auto cpus = doc.root["hosts"]["h1"]["cpus"];
  CHECK_THROWS_WITH(as_int(doc, cpus), Catch::StartsWith("lab.yaml:3:11: expected an integer, got 'many'"));
  CHECK_THROWS_WITH(require(doc, doc.root["hosts"]["h1"], "memory"),
                    Catch::StartsWith("lab.yaml:3:5: missing key 'memory'"));
  CHECK_THROWS_WITH(load_yaml_file("/nonexistent/x.yaml"), Catch::Contains("/nonexistent/x.yaml: cannot open file"));
}

TEST_CASE("logging can be initialised more than once in a process") {
  init_logging("info");
  init_logging("debug");
  CHECK(spdlog::default_logger()->level() == spdlog::level::debug);
  CHECK_THROWS_WITH(init_logging("loud"), Catch::Contains("unknown log level 'loud'"));
}

TEST_CASE("timestamps advance on both clocks") {
  Timestamp a = now();
  Timestamp b = now();
  CHECK(b.monotonic_ns >= a.monotonic_ns);
  CHECK(a.realtime_ns > 1'600'000'000'000'000'000LL);
  CHECK(elapsed_ms(a, b) >= 0.0);
}

TEST_CASE("a paired clock's stamps agree with reading both clocks") {
  PairedClock clock(std::chrono::milliseconds(5));
  for (int i = 0; i < 200; ++i) {
    Timestamp before = now();
    Timestamp t = clock.now();
    Timestamp after = now();
    // One monotonic read: the same clock as now()'s, between the two direct reads.
    CHECK(t.monotonic_ns >= before.monotonic_ns);
    CHECK(t.monotonic_ns <= after.monotonic_ns);
    // The derived wall time is within the reads' own cost (a loaded machine may preempt one
    // read pair: allow 5 ms, still far below any clock step this would hide).
    CHECK(t.realtime_ns >= before.realtime_ns - 5'000'000);
    CHECK(t.realtime_ns <= after.realtime_ns + 5'000'000);
    CHECK(t.realtime_ns - t.monotonic_ns == clock.offset_ns());
  }
}

TEST_CASE("a paired clock measures its offset again after the refresh interval") {
  PairedClock clock(std::chrono::milliseconds(1));
  clock.now();
  CHECK(clock.calibrations() == 1);
  // load-safe: a lower bound: the 1 ms calibration period must have passed; a late wake only lengthens it.
  std::this_thread::sleep_for(std::chrono::milliseconds(2));  // kept: the 1 ms calibration period must pass
  clock.now();
  CHECK(clock.calibrations() == 2);
  // Within the interval the offset is reused: one clock read per stamp.
  PairedClock slow(std::chrono::hours(1));
  for (int i = 0; i < 100; ++i) slow.now();
  CHECK(slow.calibrations() == 1);
  slow.invalidate();
  slow.now();
  CHECK(slow.calibrations() == 2);
}

TEST_CASE("sample rows follow the tidy column order") {
  Sample s{1700000000000000000, 5, "h1", "carrier", "eth1", "carrier", 1, "bool"};
  CHECK(sample_csv_columns().size() == sample_csv_fields(s).size());
  CHECK(sample_csv_fields(s)[0] == "1700000000000000000");
  CHECK(sample_csv_fields(s)[1] == "h1");
  CHECK(sample_csv_fields(s)[5] == "1");
}

TEST_CASE("netlink socket dumps links from the real kernel") {
  NetlinkSocket nl(NETLINK_ROUTE);
  char buf[MNL_SOCKET_BUFFER_SIZE];
  auto* nlh = mnl_nlmsg_put_header(buf);
  nlh->nlmsg_type = RTM_GETLINK;
  nlh->nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
  auto* ifm = static_cast<ifinfomsg*>(mnl_nlmsg_put_extra_header(nlh, sizeof(ifinfomsg)));
  ifm->ifi_family = AF_UNSPEC;
  bool saw_loopback = false;
  nl.request(nlh, [&](const nlmsghdr* m) {
    auto* info = static_cast<const ifinfomsg*>(mnl_nlmsg_get_payload(m));
    if (info->ifi_flags & IFF_LOOPBACK) saw_loopback = true;
  });
  CHECK(saw_loopback);
}

TEST_CASE("netlink errors carry the kernel's reason") {
  NetlinkSocket nl(NETLINK_ROUTE);
  char buf[MNL_SOCKET_BUFFER_SIZE];
  auto* nlh = mnl_nlmsg_put_header(buf);
  nlh->nlmsg_type = RTM_GETLINK;
  nlh->nlmsg_flags = NLM_F_REQUEST;
  auto* ifm = static_cast<ifinfomsg*>(mnl_nlmsg_put_extra_header(nlh, sizeof(ifinfomsg)));
  ifm->ifi_family = AF_UNSPEC;
  ifm->ifi_index = 999999;  // no such interface
  CHECK_THROWS_WITH(nl.request(nlh, [](const nlmsghdr*) {}), Catch::Contains("refused by the kernel"));
}

TEST_CASE("run_program_status reports the exit code and both outputs instead of throwing") {
  auto r = run_program_status({"sh", "-c", "echo out; echo err >&2; exit 3"});
  CHECK(r.status == 3);
  CHECK(r.signal == 0);
  CHECK(r.out == "out\n");
  CHECK(r.err == "err\n");
  CHECK(run_program_status({"/nonexistent/program"}).status == 127);
  auto killed = run_program_status({"sh", "-c", "kill -TERM $$"});
  CHECK(killed.signal == SIGTERM);
  CHECK(killed.status == 128 + SIGTERM);
  CHECK_THROWS_WITH(run_program({"sh", "-c", "exit 4"}), Catch::Contains("exited with status 4"));
  CHECK(run_program({"sh", "-c", "printf ok"}) == "ok");
}
