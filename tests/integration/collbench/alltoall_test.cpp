// AllToAll, AllToAllV and Broadcast end to end on the loopback backend: four ranks of
// collbench-tcp (the collbench driver over TCP, the same step loop, checks and table as
// ocslab-collbench-verbs above the transport) run moe-4.yaml with every result verified, and
// nccl-tests' sweeps `--collective alltoall` and `--collective broadcast --root 2` (alltoall_perf,
// broadcast_perf) with every checked result exact and nccl-tests' busbw factors in the table.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <sstream>
#include <string>
#include <vector>

#include "ocslab/common/csv_reader.h"
#include "ocslab/common/file.h"
#include "ocslab/testing/shell_run.h"
#include "ocslab/testing/source_dir.h"
#include "ocslab/testing/sshd_fixture.h"
#include "ocslab/workloads/op_record.h"
#include "ocslab/workloads/schedule.h"
#include "ocslab/testing/results_files.h"

using Catch::Matchers::Contains;
using ocslab::testing::bin_path;
using ocslab::testing::TempDir;

// Named, not anonymous: the unity build puts this file in one unit with its neighbours.
namespace alltoall_it {

using Run = ocslab::testing::ShellRun;
using ocslab::testing::shell;

// Four ranks of collbench-tcp with `args`: ranks 1..3 in the background (their output and exit
// status in files), rank 0 in front; returns rank 0's run.
Run four_ranks(const TempDir& dir, const std::string& args) {
  const std::string rv = "--nranks 4 --rendezvous 127.0.0.1:" + std::to_string(ocslab::testing::free_loopback_port());
  const std::string bin = bin_path("collbench-tcp");
  return shell("cd " + dir.path() + " && { for k in 1 2 3; do { " + bin + " --rank $k " + rv + " " + args +
               " > rank$k.txt 2>&1; echo $? > rank$k.rc; } & done; " + bin + " --rank 0 " + rv + " " + args +
               "; rc=$?; wait; exit $rc; }");
}

using ocslab::testing::ops_bandwidths;

struct SweepRow {
  uint64_t size = 0, count = 0;
  std::string type, redop;
  int root = 0;
  double time = 0, algbw = 0, busbw = 0;
  std::string wrong;
};

std::vector<SweepRow> sweep_rows(const std::string& out) {
  std::vector<SweepRow> rows;
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream ls(line);
    SweepRow r;
    if (ls >> r.size >> r.count >> r.type >> r.redop >> r.root >> r.time >> r.algbw >> r.busbw >> r.wrong) {
      rows.push_back(r);
    }
  }
  return rows;
}


TEST_CASE("collbench-tcp: moe-4's alltoall, alltoallv and broadcast on 4 ranks, every result verified",
          "[workloads][alltoall]") {
  TempDir dir;
  const std::string sched = ocslab::testing::source_dir() + "/experiments/workloads/schedules/moe-4.yaml";
  auto s = ocslab::workloads::load_schedule(sched);
  Run r = four_ranks(dir, "-s " + sched + " --output " + dir.path() + "/out");
  INFO("rank 0:\n" << r.out << "\nrank 1:\n" << ocslab::read_file_or_empty(dir.path() + "/rank1.txt"));
  REQUIRE(r.rc == 0);
  for (int k = 1; k <= 3; ++k) {
    CHECK(ocslab::read_file_or_empty(dir.path() + "/rank" + std::to_string(k) + ".rc") == "0\n");
  }
  CHECK_THAT(r.out, Contains("# Out of bounds values : 0 OK"));
  // One table row per op: the collective's name, nccl-tests' size and busbw = algbw x factor.
  for (const char* name : {"broadcast", "alltoall", "alltoallv"}) CHECK_THAT(r.out, Contains(name));
  for (int rank = 0; rank < 4; ++rank) {
    const std::string text = ocslab::read_file_or_empty(dir.path() + "/out/ops-rank" + std::to_string(rank) + ".csv");
    auto rows = ocslab::workloads::parse_op_csv(text, "ops.csv");
    REQUIRE(rows.size() == 4 * 3);  // 4 ops, 1 warm-up + 2 measured steps
    // nccl-tests' factors on 4 ranks: alltoall and alltoallv (n-1)/n, broadcast 1.
    for (const auto& bw : ops_bandwidths(text)) {
      INFO(bw.op << " algbw " << bw.algbw << " busbw " << bw.busbw);
      CHECK(bw.busbw == Approx(bw.algbw * (bw.op == "broadcast" ? 1.0 : 0.75)).margin(2e-6));
    }
    for (const auto& row : rows) {
      INFO("rank " << rank << " step " << row.step << " op " << row.index);
      const auto& op = s.step.at(static_cast<size_t>(row.index));
      CHECK(row.type == op.type);
      CHECK(row.bytes == op.bytes);
      CHECK(row.verified);
      CHECK(row.wrong == 0);
    }
  }
}

TEST_CASE("collbench-tcp: nccl-tests' alltoall and broadcast sweeps on 4 ranks check out", "[workloads][alltoall]") {
  TempDir dir;
  Run r = four_ranks(dir, "-b 64 -e 64K -f 32 -n 3 -w 1 -c 2 --collective alltoall -J a2a.json");
  INFO(r.out);
  REQUIRE(r.rc == 0);
  CHECK_THAT(r.out, Contains("# collbench-tcp (tcp): alltoall, 4 rank(s)"));
  CHECK_THAT(r.out, Contains("# Out of bounds values : 0 OK"));
  auto rows = sweep_rows(r.out);
  REQUIRE(rows.size() == 3);  // 64, 2K, 64K
  for (const auto& row : rows) {
    CHECK(row.count == row.size / 4 / 4);  // one block, as nccl-tests prints alltoall's count
    CHECK(row.redop == "none");
    CHECK(row.root == -1);
    CHECK(row.wrong == "0");
  }
  // The JSON's unrounded figures: busbw = algbw x (n-1)/n.
  nlohmann::json j = nlohmann::json::parse(ocslab::read_file_or_empty(dir.path() + "/a2a.json"));
  REQUIRE(j["results"].size() == 3);
  for (const auto& res : j["results"]) {
    CHECK(res["in_place"]["alg_bw"].get<double>() > 0);
    CHECK(res["in_place"]["bus_bw"].get<double>() == Approx(res["in_place"]["alg_bw"].get<double>() * 0.75));
    CHECK(res["root"] == "    -1");
  }

  r = four_ranks(dir, "-b 4K -e 64K -f 16 -n 3 -w 1 -c 2 --collective broadcast --root 2 -J bc.json");
  INFO(r.out);
  REQUIRE(r.rc == 0);
  CHECK_THAT(r.out, Contains("# Out of bounds values : 0 OK"));
  rows = sweep_rows(r.out);
  REQUIRE(rows.size() == 2);
  for (const auto& row : rows) {
    CHECK(row.count == row.size / 4);
    CHECK(row.root == 2);
    CHECK(row.wrong == "0");
  }
  j = nlohmann::json::parse(ocslab::read_file_or_empty(dir.path() + "/bc.json"));
  REQUIRE(j["results"].size() == 2);
  for (const auto& res : j["results"]) {
    CHECK(res["in_place"]["bus_bw"].get<double>() == Approx(res["in_place"]["alg_bw"].get<double>()));
    CHECK(res["root"] == "     2");
  }
}

}  // namespace alltoall_it
