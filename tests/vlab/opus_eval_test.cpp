// The Opus evaluation in one command (experiments/specs/opus-eval-vlab.yaml) on the shared phase
// lab: native, on-demand and provisioning at four emulated switching times with every host's
// probes and the switch's power monitors. A hidden case (`make opus-eval`, about 10 minutes):
// checked from the results folder, the breakdown has rows for exactly the reconfigurations the
// emulator itself recorded, every figure exists, and the sweep follows N_reconfig x T_switch.
#include <fmt/format.h>
#include <catch2/catch.hpp>

#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>

#include "lab_fixture.h"
#include "ocslab/common/csv_reader.h"
#include "ocslab/common/file.h"
#include "ocslab/testing/results_files.h"

namespace fs = std::filesystem;
using namespace ocslab;
using vlab_test::kSharedPhase;
using vlab_test::Lab;
using vlab_test::ocslab_cli;
using vlab_test::Sharing;
using vlab_test::source_path;

namespace opus_eval_test {

// rows of a CSV file as column -> field maps
std::vector<std::map<std::string, std::string>> csv_rows(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::map<std::string, std::string>> out;
  std::string line;
  if (!std::getline(in, line)) return out;
  auto header = split_csv_line(line);
  while (std::getline(in, line)) {
    auto f = split_csv_line(line);
    std::map<std::string, std::string> r;
    for (size_t i = 0; i < header.size() && i < f.size(); ++i) r[header[i]] = f[i];
    out.push_back(r);
  }
  return out;
}

TEST_CASE("the Opus evaluation on the four-guest lab", "[.opus-eval]") {
  auto t0 = std::chrono::steady_clock::now();
  const std::string out = fs::temp_directory_path().string() + "/ocslab-opus-eval-" + std::to_string(::getpid());
  fs::remove_all(out);
  Lab lab(kSharedPhase, std::chrono::seconds(120), Sharing::kShared);
  const int64_t since_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                               std::chrono::system_clock::now().time_since_epoch())
                               .count();
  auto r = ocslab_cli({"run", source_path("experiments/specs/opus-eval-vlab.yaml"), "-o", out});
  const double minutes = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / 60;
  std::cout << r.out << r.err;
  INFO(r.out << r.err);
  REQUIRE(r.status == 0);
  std::cout << fmt::format("opus-eval: {:.1f} min, results in {}\n", minutes, out);
  CHECK(minutes < 15);

  for (const char* f : {"sweep.csv", "sweep.png", "windows.csv", "windows.png", "phase.png", "timeline.png",
                        "breakdown.csv", "summary.txt", "phase-steps.csv", "timeline.csv"}) {
    INFO(f);
    CHECK(fs::file_size(out + "/" + f) > 0);
  }
  // Every reconfiguration the controller made has its breakdown rows (one per host x NIC), and
  // their count is the emulator's own: the ENT-PATCH commands it acknowledged during the run.
  auto meta = nlohmann::json::parse(std::ifstream(out + "/meta.json"));
  const int reconfigs = meta["reconfigurations"].get<int>();
  std::set<std::string> iterations;
  for (const auto& row : csv_rows(out + "/breakdown.csv")) iterations.insert(row.at("iteration"));
  const int emulator = lab.switch_acks_since(since_ns);
  std::cout << fmt::format("opus-eval: {} reconfigurations by the controller, {} breakdown iterations, the emulator "
                           "acknowledged {} ENT-PATCH commands\n",
                           reconfigs, iterations.size(), emulator);
  CHECK(static_cast<int>(iterations.size()) == reconfigs);
  CHECK(reconfigs > 0);
  // Besides the controller's, a run's placement makes circuits when the previous run left the
  // switch on another topology: one ENT-PATCH each.
  int placements = 0;
  for (const auto& m : meta["modes"]) placements += m["placement_circuits_added"].get<int>() > 0 ? 1 : 0;
  CHECK(emulator == reconfigs + placements);

  // The sweep: on-demand's slope of step time over switching time is about N_reconfig.
  std::map<double, double> on_demand;
  double n_reconfig = 0;
  for (const auto& p : csv_rows(out + "/sweep.csv")) {
    if (p.at("mode") != "on-demand") continue;
    on_demand[std::stod(p.at("switching_ms"))] = std::stod(p.at("step_ms"));
    n_reconfig = std::stod(p.at("reconfigs_per_step"));
  }
  REQUIRE(on_demand.size() == 4u);
  double mx = 0, my = 0;
  for (auto [x, y] : on_demand) mx += x / 4, my += y / 4;
  double sxy = 0, sxx = 0;
  for (auto [x, y] : on_demand) sxy += (x - mx) * (y - my), sxx += (x - mx) * (x - mx);
  std::cout << fmt::format("opus-eval: on-demand slope {:.2f} ms per ms of switching, {:.2f} reconfigurations per step\n",
                           sxy / sxx, n_reconfig);
  CHECK(sxy / sxx == Approx(n_reconfig).epsilon(0.20));
  std::cout << read_file_or_empty(out + "/summary.txt");
}

}  // namespace opus_eval_test
