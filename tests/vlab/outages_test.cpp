// Outages of exact length (the `outages` experiment type: the emulator's dark spells) on the
// shared four-host lab retimed to the ideal NIC model (the link follows the light; its plain
// virtio NICs, where the phase lab's h3 has a bond whose carrier is the bond's own), the shipped
// specs run with their lab swapped for it, checked from the results folder against what the
// emulator delivered:
//  - experiments/specs/outages-vlab.yaml: every NIC dark for 5, 20, 50, 150 and 500 ms, ten
//    times each as shipped (`make outages-vlab`, the hidden case [.outages-vlab]), three times
//    each in CI; every outage the emulator delivered to a guest (its link down and up) of 20 ms
//    or more has the carrier's down and up on that host, and a shorter one is either seen or
//    `unseen` in the breakdown ("every delivered outage reaches the guest");
//  - experiments/specs/rdma-survival-vlab.yaml as shipped: six queue-pair settings through
//    outages of 20 to 400 ms, each point's outcome recorded and the measured survival boundary
//    within one grid step of the IB timer arithmetic's (the survival matrix).
#include <fmt/format.h>
#include <catch2/catch.hpp>

#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "lab_fixture.h"
#include "ocslab/common/file.h"
#include "ocslab/testing/quiet_background.h"
#include "ocslab/vlab/lab_timing.h"

namespace outages_test {

namespace fs = std::filesystem;
using namespace ocslab;
using Catch::Matchers::Contains;
using vlab_test::kSharedFour;
using vlab_test::Lab;
using vlab_test::ocslab_cli;
using vlab_test::read_csv_rows;
using vlab_test::RemovedAtEnd;
using vlab_test::Sharing;
using vlab_test::source_path;

// The shared four-host lab on the ideal NIC model for this case (the next case's reset puts the
// lab file's timing back).
std::unique_ptr<Lab> ideal_four() {
  auto lab = std::make_unique<Lab>(kSharedFour, std::chrono::seconds(180), Sharing::kShared);
  vlab::LabTiming t;
  t.nic_model = "ideal";
  lab->retime(t);
  return lab;
}

// Runs a shipped spec, its lab swapped for the shared four-host lab (the same host and NIC
// names and ports 1-4 / 17-20), into `out`; REQUIREs exit 0; returns what it printed.
std::string run_spec(const std::string& spec, const std::string& out, int repetitions = 0) {
  std::string text = read_file_or_empty(source_path(spec));
  if (repetitions > 0) {  // fewer repetitions of every length: CI's shortened run
    const std::string rep = "  repetitions: 10\n";
    const auto at = text.find(rep);
    REQUIRE(at != std::string::npos);
    text.replace(at, rep.size(), fmt::format("  repetitions: {}\n", repetitions));
  }
  const std::string from = "vlab: ../labs/phase-four.yaml";
  const auto at = text.find(from);
  REQUIRE(at != std::string::npos);
  text.replace(at, from.size(), "vlab: " + source_path(kSharedFour));
  fs::create_directories(out);
  const std::string path = out + ".yaml";
  std::ofstream(path) << text;
  RemovedAtEnd spec_file{path};
  const auto t0 = std::chrono::steady_clock::now();
  auto r = ocslab_cli({"run", path, "-o", out});
  std::cout << r.out << r.err << fmt::format("{}: {:.1f} s\n", spec,
                                             std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  INFO(r.out << r.err);
  REQUIRE(r.status == 0);
  return r.out + r.err;
}

double ms_of(const std::string& mapping) {  // "outage-150ms" -> 150
  REQUIRE(mapping.starts_with("outage-"));
  REQUIRE(mapping.ends_with("ms"));
  return std::stod(mapping.substr(7, mapping.size() - 9));
}

// outages-vlab.yaml with `repetitions` outages of each length (0: the spec's ten), checked.
void check_outages(int repetitions) {
  auto lab = ideal_four();
  // A 20 ms outage must reach a guest's carrier polled every 10 ms: CI's build behind the tests
  // would slow the TCG guests by about 60 % (quiet_background.h).
  testing::QuietBackground quiet;
  RemovedAtEnd out{fs::temp_directory_path().string() + "/ocslab-outages-" + std::to_string(::getpid())};
  fs::remove_all(out.dir);
  run_spec("experiments/specs/outages-vlab.yaml", out.dir, repetitions);
  const int each = repetitions > 0 ? repetitions : 10;

  const std::set<std::string> hosts = {"h1", "h2", "h3", "h4"};
  // Every row is a darkened eth1: the lab has no other NIC.
  std::map<std::pair<std::string, double>, int> delivered;  // (host, length) -> outages the emulator delivered
  std::map<double, int> unseen;
  int rows = 0;
  for (const auto& row : read_csv_rows(out.dir + "/breakdown.csv")) {
    REQUIRE(row.at("interface") == "eth1");
    REQUIRE(hosts.count(row.at("host")) == 1);
    ++rows;
    const double ms = ms_of(row.at("mapping"));
    const std::string& status = row.at("status");
    INFO(row.at("host") << " iteration " << row.at("iteration") << " " << ms << " ms: " << status);
    // The emulator's delivery to the guest: its link down and back (ideal NIC: the link follows
    // the light), and the light dark for the spell's exact length (its own timer).
    REQUIRE_FALSE(row.at("firmware_down_ns").empty());
    REQUIRE_FALSE(row.at("firmware_up_ns").empty());
    ++delivered[{row.at("host"), ms}];
    const double dark = std::stod(row.at("dark_ms"));
    CHECK(dark >= ms - 0.5);
    CHECK(dark < ms + 10);
    const bool announced = !row.at("carrier_down_ns").empty() && !row.at("carrier_up_ns").empty();
    const bool polled = !row.at("carrier_bit_down_ns").empty() && !row.at("carrier_bit_up_ns").empty();
    if (ms >= 20) {
      CHECK(status == "ok");
      CHECK((announced || polled));
    } else if (status == "unseen") {
      ++unseen[ms];
      CHECK_FALSE(announced);
      CHECK(row.at("carrier_bit_down_ns").empty());
    } else {
      CHECK(status == "ok");
      CHECK((announced || polled || !row.at("carrier_down_ns").empty() || !row.at("carrier_bit_down_ns").empty()));
    }
  }
  // `each` of each length on every host, each one delivered and accounted for.
  CHECK(rows == 4 * 5 * each);
  for (const auto& h : hosts) {
    for (double ms : {5.0, 20.0, 50.0, 150.0, 500.0}) {
      INFO(h << " " << ms << " ms");
      CHECK(delivered[{h, ms}] == each);
    }
  }
  std::cout << fmt::format("outages: {} rows; unseen 5 ms outages: {}\n", rows, unseen[5]);
  const std::string summary = read_file_or_empty(out.dir + "/summary.txt");
  if (unseen[5] > 0) CHECK_THAT(summary, Contains(fmt::format("{} unseen (dark, no carrier transition)", unseen[5])));
}

TEST_CASE("every outage the emulator delivers of 20 ms or more reaches each guest's carrier; shorter ones are seen or unseen",
          "[vlab][outages]") {
  check_outages(3);  // CI: three of each length (about 20 s of outages); `make outages-vlab` runs ten
}

TEST_CASE("outages-vlab.yaml whole: ten outages of each length on every host, each seen or unseen", "[.outages-vlab]") {
  check_outages(0);
}

TEST_CASE("six queue-pair settings through outages of 20 to 400 ms: every outcome recorded, each boundary the arithmetic's",
          "[vlab][outages]") {
  auto lab = ideal_four();
  // The boundaries are tens of ms of a guest kernel's timers: nothing behind the tests meanwhile.
  testing::QuietBackground quiet;
  RemovedAtEnd out{fs::temp_directory_path().string() + "/ocslab-survival-" + std::to_string(::getpid())};
  fs::remove_all(out.dir);
  const std::string printed = run_spec("experiments/specs/rdma-survival-vlab.yaml", out.dir);

  // Every (outage, setting) of the client's queue pairs has an outcome.
  std::map<std::string, int> outcomes;
  std::set<std::pair<std::string, std::string>> points;  // (iteration, setting)
  for (const auto& row : read_csv_rows(out.dir + "/survival.csv")) {
    if (row.at("host") != "h1") continue;
    const std::string setting = "t" + row.at("timeout") + " r" + row.at("retry_cnt");
    INFO("iteration " << row.at("iteration") << " " << setting << " " << row.at("outage_ms") << " ms: " << row.at("outcome"));
    CHECK(points.insert({row.at("iteration"), setting}).second);
    const std::string& o = row.at("outcome");
    CHECK((o == "survived" || o == "errored" || o == "untouched" || o == "stalled"));
    ++outcomes[o];
    if (o == "errored") CHECK_FALSE(row.at("error_after_ms").empty());
    if (o == "survived") CHECK_FALSE(row.at("resume_after_light_ms").empty());
  }
  CHECK(points.size() == 10 * 6);
  CHECK(outcomes["errored"] > 0);
  CHECK(outcomes["survived"] + outcomes["untouched"] > 0);
  std::cout << fmt::format("survival: {} survived, {} errored, {} untouched, {} stalled\n", outcomes["survived"],
                           outcomes["errored"], outcomes["untouched"], outcomes["stalled"]);

  // Each setting's boundary is the arithmetic's (retry_cnt x 4.096 us x 2^timeout) within a grid
  // step, outage by outage: at every length below the grid length just under the predicted
  // boundary every queue pair survived, at every length above the one just over it every pair
  // errored. The two lengths around the boundary may go either way on Soft-RoCE (its local-drop
  // resend and the guest's link-up latency, docs/experiments.md): the summary's verdict there
  // is printed, and `not monotone` only when both did.
  const auto matrix = read_csv_rows(out.dir + "/survival_matrix.csv");
  CHECK(matrix.size() == 6 * 5);
  const std::vector<double> grid = {20, 50, 100, 200, 400};
  int agreeing = 0;
  for (const auto& row : matrix) {
    const double ms = std::stod(row.at("outage_ms")), boundary = std::stod(row.at("predicted_boundary_ms"));
    double below = 0, above = 1e18;  // the grid lengths just under and just over the boundary
    for (double g : grid) {
      if (g <= boundary) below = g;
      if (g > boundary && above > 1e17) above = g;
    }
    INFO("t" << row.at("timeout") << " r" << row.at("retry_cnt") << " at " << ms << " ms (boundary " << boundary
             << " ms): survived " << row.at("survived") << ", errored " << row.at("errored") << ", stalled "
             << row.at("stalled") << ", untouched " << row.at("untouched"));
    const int survived = std::stoi(row.at("survived")) + std::stoi(row.at("untouched"));
    const int failed = std::stoi(row.at("errored")) + std::stoi(row.at("stalled"));
    CHECK(survived + failed == 2);  // both repetitions of every point, counted once per queue pair
    if (ms < below) CHECK(failed == 0);
    if (ms > above) CHECK(survived == 0);
  }
  for (const char* setting : {"t12 r2", "t12 r4", "t13 r2", "t13 r4", "t14 r2", "t14 r4"}) {
    const auto at = printed.find(std::string(setting) + ": ");
    INFO(setting);
    REQUIRE(at != std::string::npos);
    const std::string line = printed.substr(at, printed.find('\n', at) - at);
    if (line.find("): agrees") != std::string::npos) ++agreeing;
  }
  std::cout << fmt::format("survival: {} of 6 settings agree with the arithmetic in the summary\n", agreeing);
}

}  // namespace outages_test
