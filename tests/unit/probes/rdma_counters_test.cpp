// The RDMA port counter reader against fake sysfs trees in a temporary folder: what it lists,
// the deltas it hands back, and how it reports counters it cannot read.
#include "ocslab/probes/rdma_counters.h"

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>

#include "ocslab/testing/sshd_fixture.h"

using namespace ocslab::probes;
using Catch::Matchers::Contains;
namespace fs = std::filesystem;

namespace {

void put(const fs::path& p, const std::string& text) {
  fs::create_directories(p.parent_path());
  std::ofstream(p) << text;
}

// The port folder of a fake device, like /sys/class/infiniband/rxe_eth1/ports/1.
std::string fake_port(const ocslab::testing::TempDir& tmp) {
  return RdmaCounters::port_dir("rxe_eth1", 1, tmp.path() + "/class/infiniband");
}

const RdmaCounters::Change* find(const RdmaCounters::Reading& r, const std::string& name) {
  for (const auto& c : r.changes) {
    if (c.name == name) return &c;
  }
  return nullptr;
}

}  // namespace

TEST_CASE("the counter reader lists both folders, without lifespan, and reads baselines then changes only",
          "[rdma_counters]") {
  ocslab::testing::TempDir tmp;
  std::string port = fake_port(tmp);
  CHECK_THAT(port, Contains("/class/infiniband/rxe_eth1/ports/1"));
  put(port + "/hw_counters/sent_pkts", "100\n");
  put(port + "/hw_counters/completer_retry_err", "0\n");
  put(port + "/hw_counters/lifespan", "10\n");
  put(port + "/counters/port_xmit_data", "4000000000\n");
  fs::create_directories(port + "/hw_counters/subdir");  // not a counter
  put(port + "/state", "4: ACTIVE\n");                   // outside both folders

  RdmaCounters c(port);
  CHECK_FALSE(c.empty());
  CHECK(c.errors().empty());
  CHECK(c.names() == std::vector<std::string>{"hw.completer_retry_err", "hw.sent_pkts", "pma.port_xmit_data"});

  auto first = c.read();
  CHECK(first.errors.empty());
  REQUIRE(first.changes.size() == 3);
  for (const auto& ch : first.changes) {
    CHECK(ch.first);
    CHECK(ch.delta == 0);
  }
  CHECK(find(first, "hw.sent_pkts")->value == 100);
  CHECK(find(first, "pma.port_xmit_data")->value == 4000000000ULL);

  CHECK(c.read().changes.empty());  // nothing moved

  put(port + "/hw_counters/sent_pkts", "130\n");
  put(port + "/hw_counters/completer_retry_err", "2\n");
  auto r = c.read();
  REQUIRE(r.changes.size() == 2);
  CHECK(find(r, "hw.sent_pkts")->delta == 30);
  CHECK(find(r, "hw.sent_pkts")->value == 130);
  CHECK_FALSE(find(r, "hw.sent_pkts")->first);
  CHECK(find(r, "hw.completer_retry_err")->delta == 2);

  // A counter reset (driver reload, `rdma statistic` reset) shows as a negative change.
  put(port + "/hw_counters/sent_pkts", "5\n");
  r = c.read();
  REQUIRE(r.changes.size() == 1);
  CHECK(r.changes[0].delta == -125);
}

TEST_CASE("a port without counter folders has no counters and reads nothing", "[rdma_counters]") {
  ocslab::testing::TempDir tmp;
  std::string port = fake_port(tmp);
  fs::create_directories(port);
  RdmaCounters c(port);
  CHECK(c.empty());
  CHECK(c.errors().empty());
  auto r = c.read();
  CHECK(r.changes.empty());
  CHECK(r.errors.empty());
  RdmaCounters none(tmp.path() + "/no/such/device/ports/1");
  CHECK(none.empty());
}

TEST_CASE("garbage in a counter file is an error naming the file, once, and the counter comes back",
          "[rdma_counters]") {
  ocslab::testing::TempDir tmp;
  std::string port = fake_port(tmp);
  put(port + "/hw_counters/rcvd_pkts", "7\n");
  put(port + "/hw_counters/rcvd_seq_err", "N/A\n");
  RdmaCounters c(port);
  auto r = c.read();
  REQUIRE(r.errors.size() == 1);
  CHECK_THAT(r.errors[0], Contains(port + "/hw_counters/rcvd_seq_err") && Contains("'N/A\\n' is not a counter value"));
  REQUIRE(r.changes.size() == 1);  // the good one still reads
  CHECK(r.changes[0].name == "hw.rcvd_pkts");

  CHECK(c.read().errors.empty());  // reported once

  for (const char* bad : {"-1\n", "12abc\n", "", "99999999999999999999999\n", "1 2\n"}) {
    INFO("content '" << bad << "'");
    put(port + "/hw_counters/rcvd_pkts", bad);
    auto b = c.read();
    REQUIRE(b.errors.size() == 1);
    CHECK_THAT(b.errors[0], Contains("hw_counters/rcvd_pkts: '"));
    put(port + "/hw_counters/rcvd_pkts", "7\n");
    CHECK(c.read().errors.empty());  // good again: no change, no error
  }

  // Once the bad one reads correctly it starts as a baseline, not as a jump from 0.
  put(port + "/hw_counters/rcvd_seq_err", "3\n");
  r = c.read();
  REQUIRE(r.changes.size() == 1);
  CHECK(r.changes[0].name == "hw.rcvd_seq_err");
  CHECK(r.changes[0].first);
  CHECK(r.changes[0].delta == 0);
  put(port + "/hw_counters/rcvd_seq_err", "5\n");
  r = c.read();
  REQUIRE(r.changes.size() == 1);
  CHECK(r.changes[0].delta == 2);
}

TEST_CASE("a counter whose read fails (as sysfs after the device went away) is reported once, not fatal",
          "[rdma_counters]") {
  ocslab::testing::TempDir tmp;
  std::string port = fake_port(tmp);
  put(port + "/hw_counters/sent_pkts", "1\n");
  // A regular file that opens but whose pread at offset 0 fails (EIO: nothing mapped at
  // address 0), as a sysfs attribute of an unregistered device fails with ENODEV.
  fs::create_symlink("/proc/self/mem", port + "/hw_counters/gone");
  RdmaCounters c(port);
  REQUIRE(c.names() == std::vector<std::string>{"hw.gone", "hw.sent_pkts"});
  auto r = c.read();
  REQUIRE(r.errors.size() == 1);
  CHECK_THAT(r.errors[0], Contains(port + "/hw_counters/gone: ") && Contains("error"));
  REQUIRE(r.changes.size() == 1);
  CHECK(r.changes[0].name == "hw.sent_pkts");
  put(port + "/hw_counters/sent_pkts", "4\n");
  r = c.read();
  CHECK(r.errors.empty());  // still failing, but already reported
  REQUIRE(r.changes.size() == 1);
  CHECK(r.changes[0].delta == 3);
}
