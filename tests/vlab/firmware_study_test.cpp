// The firmware link-up study in one run (docs/experiments.md, "The firmware link-up study") on
// the shared ring lab: a reconfig-latency spec swept over two NIC link models x three dwell
// times, the runner setting each model on the lab's emulator. From the results folder:
// firmware_study.csv has one row per point, in run order, each measured over its own
// reconfigurations (every NIC moves at every one: 8 light returns each), the link-up of the
// points that came up near their model's mean, firmware_study.png drawn, and the lab's own NIC
// model put back at the end.
//  - CI: tests/vlab/labs/firmware-study.spec.yaml, two models of the spec's own ten times faster
//    than the ConnectX-6 Dx presets, two reconfigurations per point;
//  - `make firmware-study` (the hidden case [.firmware-study-full]): experiments/specs/
//    firmware-study-vlab.yaml as shipped, the presets (about 6 s / 3 s) at 5, 10 and 20 s.
#include <fmt/format.h>
#include <catch2/catch.hpp>

#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include "lab_fixture.h"
#include "ocslab/common/file.h"
#include "ocslab/vlab/lab_timing.h"

namespace firmware_study_test {

namespace fs = std::filesystem;
using namespace ocslab;
using vlab_test::kSharedRing;
using vlab_test::Lab;
using vlab_test::ocslab_cli;
using vlab_test::read_csv_rows;
using vlab_test::RemovedAtEnd;
using vlab_test::Sharing;
using vlab_test::source_path;

struct Expected {
  std::string model;
  double dwell_s = 0;
  double up_mean_ms = 0;
  double cap_ms = 0;  // the model's max_up_ms: no link-up takes longer
};

// Runs the spec on the shared ring lab into a fresh folder and checks the study's files against
// the points it plans (models outer, dwells inner).
void check_study(const std::string& spec, const std::vector<Expected>& points, int per_point) {
  Lab lab(kSharedRing, std::chrono::seconds(180), Sharing::kShared);
  const vlab::TimingState before = vlab::lab_timing(lab.state().dir);
  const std::string out = (fs::temp_directory_path() / fmt::format("fwstudy-{}", ::getpid())).string();
  fs::remove_all(out);
  RemovedAtEnd cleanup{out};
  const auto t0 = std::chrono::steady_clock::now();
  auto r = ocslab_cli({"run", source_path(spec), "-o", out});
  std::cout << r.out << r.err
            << fmt::format("{}: {:.1f} s\n", spec,
                           std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  INFO(r.out << r.err);
  // Links that stay down until the next reconfiguration are the study's not_up, not a fault.
  REQUIRE(r.status == 0);
  CHECK(r.out.find("firmware link-up per NIC model and reconfiguration interval") != std::string::npos);

  const auto rows = read_csv_rows(out + "/firmware_study.csv");
  REQUIRE(rows.size() == points.size());
  for (size_t k = 0; k < points.size(); ++k) {
    const auto& row = rows[k];
    const auto& want = points[k];
    INFO("point " << k + 1 << ": " << want.model << ", dwell " << want.dwell_s << " s");
    CHECK(row.at("nic_model") == want.model);
    CHECK(std::stod(row.at("dwell_s")) == Approx(want.dwell_s));
    CHECK(std::stod(row.at("model_up_mean_ms")) == Approx(want.up_mean_ms));
    CHECK(std::stoi(row.at("first_iteration")) == static_cast<int>(k) * per_point + 1);
    CHECK(std::stoi(row.at("last_iteration")) == static_cast<int>(k + 1) * per_point);
    CHECK(std::stoul(row.at("reconfigurations")) == static_cast<size_t>(per_point));
    // 4 hosts x 2 NICs, every one moved by every reconfiguration
    CHECK(std::stoul(row.at("rows")) == static_cast<size_t>(8 * per_point));
    CHECK(std::stoul(row.at("up")) + std::stoul(row.at("not_up")) == std::stoul(row.at("rows")));
    // The interval the point ran at: its dwell plus the switch command (25 ms mirrors, round trips).
    const double interval = std::stod(row.at("interval_s"));
    CHECK(interval >= want.dwell_s);
    CHECK(interval < want.dwell_s + 0.5);
    if (std::stoul(row.at("up")) > 0) {
      // The model's draw (normal, sd 5 %, floor 5/6 of the mean) plus the rapid spread, capped;
      // the emulator's loop runs the timer a few ms late at most.
      CHECK(std::stod(row.at("firmware_min_ms")) >= want.up_mean_ms * 5 / 6 - 5);
      CHECK(std::stod(row.at("firmware_max_ms")) <= want.cap_ms + 100);
    }
    // A dwell longer than the model's worst link-up (its cap) leaves no link down at the next one.
    if (want.dwell_s * 1000 > want.cap_ms + 300) CHECK(row.at("not_up") == "0");
  }
  CHECK(fs::file_size(out + "/firmware_study.png") > 10000);
  // The lab's own NIC model again (the next case's reset would hide a run that left it changed).
  const vlab::TimingState after = vlab::lab_timing(lab.state().dir);
  CHECK(after.nic_model == before.nic_model);
  CHECK(after.firmware_up.to_string() == before.firmware_up.to_string());
  CHECK(after.los_ms == before.los_ms);
}

}  // namespace firmware_study_test

TEST_CASE("firmware study: two NIC models x three dwell times in one run", "[vlab][firmware-study]") {
  using firmware_study_test::Expected;
  firmware_study_test::check_study("tests/vlab/labs/firmware-study.spec.yaml",
                                   {{"fast-autoneg", 0.4, 600, 1000},
                                    {"fast-autoneg", 1, 600, 1000},
                                    {"fast-autoneg", 2, 600, 1000},
                                    {"fast-no-autoneg", 0.4, 300, 1000},
                                    {"fast-no-autoneg", 1, 300, 1000},
                                    {"fast-no-autoneg", 2, 300, 1000}},
                                   2);
}

TEST_CASE("firmware study: the ConnectX-6 Dx presets at 5, 10 and 20 s (make firmware-study)",
          "[vlab][.firmware-study-full]") {
  using firmware_study_test::Expected;
  firmware_study_test::check_study("experiments/specs/firmware-study-vlab.yaml",
                                   {{"cx6dx-autoneg", 5, 6000, 10000},
                                    {"cx6dx-autoneg", 10, 6000, 10000},
                                    {"cx6dx-autoneg", 20, 6000, 10000},
                                    {"cx6dx-no-autoneg", 5, 3000, 10000},
                                    {"cx6dx-no-autoneg", 10, 3000, 10000},
                                    {"cx6dx-no-autoneg", 20, 3000, 10000}},
                                   3);
}
