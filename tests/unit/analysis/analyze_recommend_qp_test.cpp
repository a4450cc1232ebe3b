// `ocslab analyze --recommend-qp` in-process on a results folder the test writes: the outages it
// reads from the breakdown, the settings it prints for them, and its refusals.
#include <catch2/catch.hpp>

#include <fmt/format.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "analyze_cli_support.h"
#include "ocslab/cli/ocslab_cli.h"

namespace fs = std::filesystem;
using Catch::Matchers::Contains;

// Named, not anonymous: the unit tests build as one unity source with analyze_cli_test.cpp's
// helpers of the same names; the test cases are in it too, so they see these.
namespace recommend_qp_test {

using analyze_cli_support::Dir;
using analyze_cli_support::Result;
using analyze_cli_support::run_cli;

constexpr int64_t kMs = 1'000'000;

// One reconfiguration of a timeline: the command at t0, its ack, and per host the light going
// dark 1 ms after the command, the carrier 1 ms later, light back 10 ms before carrier up and
// carrier up `outage_ms` after the light went dark.
std::string reconfiguration(int iteration, int64_t t0, const std::vector<std::pair<std::string, int64_t>>& hosts) {
  std::string s = fmt::format("{},switch,ocs,m{},command,1,,demo,{}\n{},switch,ocs,m{},ack,1,,demo,{}\n", t0, iteration,
                              iteration, t0 + kMs, iteration, iteration);
  for (const auto& entry : hosts) {
    // Named copies, not a structured binding: C++20 as clang 14 reads it lets no lambda capture one.
    const std::string& host = entry.first;
    const int64_t outage_ms = entry.second;
    auto row = [&](int64_t t, const char* source, const char* signal, const char* value, const char* unit) {
      s += fmt::format("{},{},{},eth1,{},{},{},demo,{}\n", t, host, source, signal, value, unit, iteration);
    };
    int64_t dark = t0 + kMs, up = dark + outage_ms * kMs;
    row(t0 - 50 * kMs, "rx_power", "rx_power_dbm", "-3", "dBm");
    row(dark, "rx_power", "rx_power_dbm", "-35", "dBm");
    row(dark + kMs, "carrier", "carrier", "0", "bool");
    row(up - 10 * kMs, "rx_power", "rx_power_dbm", "-3", "dBm");
    row(up, "carrier", "carrier", "1", "bool");
  }
  return s;
}

TEST_CASE("ocslab analyze --recommend-qp prints the settings for the folder's p99 outage times the margin",
          "[qp][cli]") {
  Dir d;
  // Outages 3000 and 2500 ms, then 4000 and 1000 ms. p99 of {1000, 2500, 3000, 4000}: position
  // 0.99 x 3 = 2.97 -> 3000 + 0.97 x 1000 = 3970 ms.
  std::ofstream(d.path + "/timeline.csv") << "t_ns,host,source,subject,signal,value,unit,run,iteration\n"
                                          << reconfiguration(1, 10'000'000'000, {{"h1", 3000}, {"h2", 2500}})
                                          << reconfiguration(2, 20'000'000'000, {{"h1", 4000}, {"h2", 1000}});
  // x 2 = 7940 ms: timeout 18 covers 7 x 1073.742 = 7516.193 ms, too short; timeout 19
  // (T = 2147.483648 ms): 3 x T = 6442.451 < 7940 <= 4 x T = 8589.935 ms.
  Result r = run_cli({"analyze", d.path, "--recommend-qp"});
  INFO(r.out << r.err);
  REQUIRE(r.rc == 0);
  CHECK_THAT(r.out, Contains("4 outage(s): p99 3970.000 ms x margin 2 = 7940.000 ms\n"));
  CHECK_THAT(r.out, Contains("\nNCCL_IB_TIMEOUT=19 NCCL_IB_RETRY_CNT=4\n"));
  CHECK_THAT(r.out, Contains("timeout=19 retry_cnt=4 rnr_retry=7"));
  CHECK_THAT(r.out, Contains("survive up to 30064.771 ms: enough"));
  CHECK(fs::exists(d.path + "/breakdown.csv"));  // the files are still written

  // x 1.5 = 5955 ms: timeout 18: 5 x T = 5368.709 < 5955 <= 6 x T = 6442.451 ms.
  r = run_cli({"analyze", d.path, "--recommend-qp", "--qp-margin=1.5"});
  REQUIRE(r.rc == 0);
  CHECK_THAT(r.out, Contains("\nNCCL_IB_TIMEOUT=18 NCCL_IB_RETRY_CNT=6\n"));
}

TEST_CASE("ocslab analyze --recommend-qp refuses a bad margin, --json and a folder without outages", "[qp][cli]") {
  Dir d;
  Result r = run_cli({"analyze", d.path, "--recommend-qp", "--qp-margin", "0.9"});
  CHECK(r.rc == 2);  // a bad value is bad input (docs/exit-codes.md)
  CHECK_THAT(r.err, Contains("--qp-margin needs a factor of at least 1, got '0.9'"));
  r = run_cli({"analyze", d.path, "--recommend-qp", "--json"});
  CHECK(r.rc == 1);
  CHECK_THAT(r.out + r.err, Contains("--recommend-qp prints text lines: leave out --json"));

  // Only a port coming up from dark: no outage to size anything for.
  std::ofstream(d.path + "/timeline.csv") << "t_ns,host,source,subject,signal,value,unit,run,iteration\n"
                                          << "1000000000,switch,ocs,m1,command,1,,demo,1\n"
                                          << "1002000000,switch,ocs,m1,ack,1,,demo,1\n";
  r = run_cli({"analyze", d.path, "--recommend-qp"});
  CHECK(r.rc != 0);
  CHECK_THAT(r.err, Contains("--recommend-qp: no `ok` row of"));
}

}  // namespace recommend_qp_test
