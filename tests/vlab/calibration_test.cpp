// Calibration of the whole measurement chain: with known emulator settings (a fixed switching
// time, an ideal NIC whose firmware brings the link up a fixed time after light returns),
// `ocslab run` on the virtual lab must recover both numbers from what it measured: on every row,
// the light's return at the emulator's own record of it (its ground truth; the virtual lab's
// optical readings are that record, so this checks that the breakdown took the right edge for
// the right reconfiguration: exact when it does, 1 ms allowed for rounding), and over
// the run, light back minus command issued within 10 ms of the switching time in the median (the
// emulator's timer itself runs late on a loaded machine: in the project's CI on 2026-12-06 one
// reconfiguration's light came back 72.3 ms after the command against a 60 ms setting, and the
// switch's acknowledgement 72.6 ms after it, so the switch was late, not the measurement; the
// emulator's per-row switching is bounded separately, from below by the setting); and the
// firmware's link-up minus light back within 20 ms of the firmware delay (the emulator's timer:
// QMP delivery to the guest is on a thread per NIC since a CI run of 2026-11-29 had one row
// 24.7 ms late, behind another guest's slow QMP answer on the shared event loop; measured
// within 1.4 ms since, docs/emulator.md). The guest's carrier
// (its kernel's reading, clock offset corrected) must follow the firmware: never before it by
// more than the clock correction's uncertainty, at most 100 ms after it on any row, and its
// median over the run within 25 ms of the firmware delay. The median is the calibration (a
// wrong clock offset or a lost edge shifts every row); the per-row bound is what a TCG guest
// sharing two cores with three others adds: in the project's CI on 2026-11-29 one row's
// carrier came 48.1 ms after the firmware's link-up, where the median was 8.7 ms. A second
// setting, given to the same running lab, proves the numbers follow the settings.
#include <fmt/format.h>
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "lab_fixture.h"
#include "ocslab/common/csv_reader.h"
#include "ocslab/testing/quiet_background.h"
#include "ocslab/testing/sshd_fixture.h"

using namespace vlab_test;

namespace {

// The middle value (the upper one of an even count) of a non-empty set of rows.
double upper_median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

std::string fmt_name(double s, double f) {
  std::ostringstream o;
  o << "calib-" << s << "-" << f;
  return o.str();
}

// The spec's RDMA pairs (timeout 12: a retransmission every 4.096 us x 2^12 = 16.8 ms) on NICs
// whose neighbours the runner pinned: after carrier, RDMA resumes at the next retransmission or
// two, not at the ARP retransmission a second later that Soft-RoCE waited for before (median
// 336 ms, p90 1075 ms without pinning on the demo's lab, 2026-11-28; docs/probes.md). Both ends
// of a circuit come up together here (fixed firmware delay), so every row is bounded. The
// pinned entries are in meta.json and gone from the guests after the run.
void check_rdma_resume(const std::vector<std::map<std::string, std::string>>& rows, const std::string& out,
                       const Lab& lab) {
  std::vector<double> rdma;
  for (const auto& r : rows) {
    INFO("iteration " << r.at("iteration") << " " << r.at("host") << ":" << r.at("interface"));
    REQUIRE(r.at("intent") == "move");
    REQUIRE_FALSE(r.at("rdma_ms").empty());
    double ms = std::stod(r.at("rdma_ms"));
    std::cout << "calib-25-1500: iteration " << r.at("iteration") << " " << r.at("host") << " rdma resumed " << ms
              << " ms after carrier\n";
    // RDMA cannot resume before the link is up. The bound is taken against the emulator's own
    // firmware link-up (exact, on this machine's clock), not the guest's carrier reading: a
    // loaded TCG guest can see its carrier tens of ms late (a CI run, 2026-11-28: kernel_ms up to
    // 38.8 ms, and one row's RDMA resume 25.5 ms before its carrier reading).
    REQUIRE_FALSE(r.at("firmware_up_ns").empty());
    const double after_link_ms =
        static_cast<double>(std::stoll(r.at("rdma_resumed_ns")) - std::stoll(r.at("firmware_up_ns"))) / 1e6;
    CHECK(after_link_ms >= -20);  // the clock correction's uncertainty (guest agent vs this machine)
    CHECK(ms <= 200);             // a second's ARP retransmission is what this excludes
    rdma.push_back(ms);
  }
  const double median = upper_median(rdma);
  std::cout << "calib-25-1500: rdma_ms median " << median << " ms over " << rdma.size() << " rows\n";
  CHECK(median <= 4 * 16.8);
  std::ifstream in(out + "/meta.json");
  nlohmann::json meta = nlohmann::json::parse(in);
  const auto& prep = meta.at("host_preparation");
  CHECK(prep.at("pin_neighbours") == true);
  CHECK(prep.at("pinned_neighbours").size() == 8);  // 4 pairs (both pairings' links), both ways
  for (const char* h : {"h1", "h2", "h3", "h4"}) {
    INFO(h);
    CHECK(lab.run(h, "ip neigh show nud permanent dev eth1").empty());
  }
}

// The emulator's record of each NIC's light returning (ground truth, this machine's clock), by
// the NIC's name in the lab (`h1-eth1`).
std::map<std::string, std::vector<int64_t>> light_returns(const std::string& ground_truth_csv) {
  std::map<std::string, std::vector<int64_t>> out;
  std::ifstream in(ground_truth_csv);
  for (std::string line; std::getline(in, line);) {
    auto f = ocslab::split_csv_line(line);  // t_ns,host,source,subject,signal,value,unit,mono_ns
    if (f.size() >= 6 && f[2] == "emulator" && f[4] == "light" && f[5] == "1") out[f[3]].push_back(std::stoll(f[0]));
  }
  return out;
}

// The first of `times` at or after `t` (-1: none).
int64_t first_at_or_after(const std::vector<int64_t>& times, int64_t t) {
  for (int64_t x : times)
    if (x >= t) return x;
  return -1;
}

// Runs the calibration spec for these settings on the shared four-host lab. The lab file's own
// timing is 25 ms and 1.5 s; other settings are given to the running lab first (Lab::retime),
// and the next case's reset puts the file's back. The RDMA resume is checked on the first spec,
// whose probes include it.
void calibrate(double switching_ms, double firmware_ms) {
  std::string name = fmt_name(switching_ms, firmware_ms);
  Lab lab(kSharedFour, 60s, Sharing::kShared);
  const bool file_timing = switching_ms == 25 && firmware_ms == 1500;
  if (!file_timing) {
    vlab::LabTiming t;
    t.switching_ms = fmt::format("{}", switching_ms);
    t.firmware_up_ms = fmt::format("{}", firmware_ms);
    vlab::TimingState now = lab.retime(t);
    CHECK(now.switching.to_string() == fmt::format("fixed {} ms", switching_ms));
    CHECK(now.firmware_up.to_string() == fmt::format("fixed {} ms", firmware_ms));
  }
  // The bounds below are the guest kernels' own lag: nothing else of ours runs meanwhile (one row
  // of 12 lagged 111 ms with CI's instrumented build behind it, 2026-11-30).
  testing::QuietBackground quiet;
  testing::TempDir dir;
  std::string out = dir.path() + "/results";
  ProgramResult r = ocslab_cli({"run", source_path("tests/vlab/labs/" + name + ".spec.yaml"), "--no-plot", "-o", out});
  std::string output = r.out + r.err;
  INFO(output);
  REQUIRE(r.status == 0);
  auto rows = read_csv_rows(out + "/breakdown.csv");
  INFO(output);
  REQUIRE(rows.size() == 3 * 4);  // 3 reconfigurations x 4 hosts
  std::vector<double> carriers, switchings;
  const auto truth = light_returns(lab.state().ground_truth());
  for (const auto& r : rows) {
    INFO("iteration " << r.at("iteration") << " " << r.at("host") << ":" << r.at("interface"));
    REQUIRE(r.at("status") == "ok");
    const double sw = std::stod(r.at("switching_ms")), firmware = std::stod(r.at("firmware_ms")),
                 carrier = std::stod(r.at("carrier_ms"));
    std::cout << name << ": iteration " << r.at("iteration") << " " << r.at("host") << ":" << r.at("interface")
              << " switching " << sw << " ms, firmware up after light " << firmware << " ms, carrier after light "
              << carrier << " ms\n";
    // The chain: the light edge the breakdown took for this row against the emulator's.
    const std::string nic = r.at("host") + "-" + r.at("interface");
    REQUIRE(truth.count(nic) == 1);
    const int64_t issued = std::stoll(r.at("issued_ns")), back = std::stoll(r.at("light_back_ns"));
    const int64_t true_back = first_at_or_after(truth.at(nic), issued);
    REQUIRE(true_back > 0);
    const double true_sw = static_cast<double>(true_back - issued) / 1e6;
    std::cout << name << ": " << nic << " the emulator's light back " << true_sw << " ms after the command, measured "
              << static_cast<double>(back - true_back) / 1e6 << " ms from it\n";
    CHECK(std::fabs(static_cast<double>(back - true_back) / 1e6) <= 1);
    // The emulator: never before its setting (the command leaves before the switch starts its
    // timer); late by what a loaded machine adds to its timer and TL1 session (12.3 ms in CI).
    CHECK(true_sw >= switching_ms - 1);
    CHECK(true_sw <= switching_ms + 50);
    switchings.push_back(sw);
    CHECK(std::fabs(firmware - firmware_ms) <= 20);
    CHECK(carrier - firmware >= -20);  // the clock correction's uncertainty (guest agent vs this machine)
    CHECK(carrier - firmware <= 100);  // the guest kernel's lag on a loaded TCG guest
    carriers.push_back(carrier);
  }
  const double sw_median = upper_median(switchings);
  std::cout << name << ": switching, median " << sw_median << " ms over " << switchings.size() << " rows\n";
  CHECK(std::fabs(sw_median - switching_ms) <= 10);
  const double median = upper_median(carriers);
  std::cout << name << ": carrier after light, median " << median << " ms over " << carriers.size() << " rows\n";
  CHECK(std::fabs(median - firmware_ms) <= 25);
  if (file_timing) check_rdma_resume(rows, out, lab);
}

}  // namespace

TEST_CASE("calibration: the breakdown recovers a 25 ms switch and a 1.5 s firmware link-up", "[vlab][calibration]") {
  calibrate(25, 1500);  // the shared four-host lab has exactly these settings
}

TEST_CASE("calibration: the breakdown follows other settings (60 ms switch and 0.8 s link-up)", "[vlab][calibration]") {
  calibrate(60, 800);  // the same lab, retimed without a reboot
}
