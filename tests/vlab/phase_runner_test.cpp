// `ocslab run` of the shipped virtual-lab phase-workload spec (experiments/specs/
// dp-pp-phases-vlab.yaml), as a user runs it: the runner boots the four-guest lab, adds the
// LAN Soft-RoCE devices and pins the data NICs' neighbours (spec options rxe, pin_neighbours),
// runs ocslab-collbench-verbs on every guest with its embedded controller rewiring the
// emulated OCS in both phase modes, and writes the per-step table. Checked from the results
// folder: every op verified, three reconfigurations in every step, provisioning provisioned
// and waited less for the fabric (summed over the ranks) than on demand.
#include <fmt/format.h>
#include <catch2/catch.hpp>

#include <unistd.h>

#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <string>

#include "lab_fixture.h"
#include "ocslab/common/csv_reader.h"
#include "ocslab/common/process.h"
#include "ocslab/testing/sshd_fixture.h"
#include "ocslab/workloads/op_record.h"

namespace fs = std::filesystem;
using namespace ocslab;
using Catch::Matchers::Contains;
using vlab_test::kSharedPhase;
using vlab_test::Lab;
using vlab_test::ocslab_cli;
using vlab_test::read_file;
using vlab_test::Sharing;
using vlab_test::source_path;

TEST_CASE("ocslab run of the virtual-lab phase-workload spec", "[vlab][phase-runner]") {
  auto t0 = std::chrono::steady_clock::now();
  const std::string out = fs::temp_directory_path().string() + "/ocslab-phase-runner-" + std::to_string(::getpid());
  fs::remove_all(out);
  // The spec's lab is the shared phase lab (vlab_phase uses it too): it is up and reset here, and
  // the runner runs on it as it is (a lab it did not start it leaves up, lab.keep or not).
  Lab lab(kSharedPhase, std::chrono::seconds(120), Sharing::kShared);
  struct Cleanup {
    std::string dir;
    ~Cleanup() { fs::remove_all(dir); }
  } cleanup{out};
  auto r = ocslab_cli({"run", source_path("experiments/specs/dp-pp-phases-vlab.yaml"), "-o", out, "--no-plot"});
  std::cout << r.out << r.err;
  INFO(r.out << r.err);
  REQUIRE(r.status == 0);
  CHECK_THAT(r.out + r.err, Contains("Soft-RoCE device rxe_lan0 added on lan0"));
  // 4 ranks' data NICs, every pair both ways: 12 permanent entries, recorded in meta.json.
  CHECK_THAT(r.out + r.err, Contains("pinned 12 neighbour entries between 4 data NIC(s)"));
  CHECK_THAT(read_file_or_empty(out + "/meta.json"), Contains("\"problems\": []"));
  {
    nlohmann::json meta = nlohmann::json::parse(read_file_or_empty(out + "/meta.json"));
    CHECK(meta.at("host_preparation").at("rxe_added").size() == 4);
    CHECK(meta.at("host_preparation").at("pinned_neighbours").size() == 12);
  }

  // phase-steps.csv: both modes, 1 warm-up + 3 steps each; the schedule rewires the rail three
  // times per step (pipeline sends "00", stage 0's and stage 1's allreduces "10", "11").
  std::ifstream steps(out + "/phase-steps.csv");
  std::string line;
  std::getline(steps, line);
  REQUIRE(line.rfind("mode,step,warmup,rank,step_ms,compute_ms,comm_ms,wait_ms,max_wait_ms,reconfigurations", 0) == 0);
  std::map<std::string, int> per_mode;
  while (std::getline(steps, line)) {
    const auto f = split_csv_line(line);  // keeps the trailing empty relative_to_native (no native mode)
    REQUIRE(f.size() == 16);
    CHECK(f[15].empty());
    INFO(line);
    ++per_mode[f[0]];
    CHECK(f[9] == "3");
    CHECK(f[11] == "24");  // every rank's rows of the step
    CHECK(f[14] == "6");   // controller barriers: the four pipeline sends and the two DP phase boundaries
  }
  CHECK(per_mode["on-demand"] == 4);
  CHECK(per_mode["provisioning"] == 4);

  // The ranks' own rows: data verified, world ops passed through, provisioning used.
  std::map<std::string, double> wait_ms;
  for (const std::string mode : {"on-demand", "provisioning"}) {
    int provisioned = 0;
    for (int rank = 0; rank < 4; ++rank) {
      const std::string path = fmt::format("{}/{}/ops-rank{}.csv", out, mode, rank);
      auto rows = workloads::parse_op_csv(read_file_or_empty(path), path);
      REQUIRE_FALSE(rows.empty());
      for (const auto& row : rows) {
        INFO(mode << " rank " << rank << " step " << row.step << " op " << row.index);
        CHECK(row.verified);
        CHECK(row.wrong == 0);
        CHECK_FALSE(row.fallback);
        if (row.kind == "world") CHECK(row.phase == "pass");
        if (!row.warmup) {
          wait_ms[mode] += static_cast<double>(row.wait_ns) / 1e6;
          provisioned += row.provisioned ? 1 : 0;
        }
      }
    }
    if (mode == "provisioning") CHECK(provisioned > 0);
  }
  std::cout << fmt::format("fabric wait over the measured steps, summed over ranks: on-demand {:.1f} ms, "
                           "provisioning {:.1f} ms (x{:.2f}); test {:.1f} s\n",
                           wait_ms["on-demand"], wait_ms["provisioning"],
                           wait_ms["provisioning"] / wait_ms["on-demand"],
                           std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  CHECK(wait_ms["provisioning"] < wait_ms["on-demand"]);
}
