// nccl-tests' command line end to end: two ranks of collbench-tcp (the collbench driver over TCP
// on loopback, the same code path as ocslab-collbench-verbs above the transport) run the issue's
// acceptance sweep `-b 8 -e 8M -f 2 -n 20 -w 5 -c 1 -J out.json`; rank 0's table has one row per
// size 8, 16, ..., 8M, every checked result is exact, and the JSON document parses with the same
// sizes and nonzero times and bandwidths.
#include <sys/wait.h>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "ocslab/common/file.h"
#include "ocslab/testing/shell_run.h"
#include "ocslab/testing/sshd_fixture.h"

using Catch::Matchers::Contains;
using ocslab::testing::bin_path;
using ocslab::testing::TempDir;

namespace {

using Run = ocslab::testing::ShellRun;
using ocslab::testing::shell;

std::string slurp(const std::string& path) { return ocslab::read_file_or_empty(path); }

struct Row {
  uint64_t size = 0, count = 0;
  std::string type, redop;
  int root = 0;
  double time = 0, algbw = 0, busbw = 0;
  std::string wrong;
};

// The table's data lines: every line that is not a comment.
std::vector<Row> table_rows(const std::string& out) {
  std::vector<Row> rows;
  std::istringstream in(out);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream ls(line);
    Row r;
    if (ls >> r.size >> r.count >> r.type >> r.redop >> r.root >> r.time >> r.algbw >> r.busbw >> r.wrong) {
      rows.push_back(r);
    }
  }
  return rows;
}

}  // namespace

TEST_CASE("collbench-tcp runs nccl-tests' sweep -b 8 -e 8M -f 2 -n 20 -w 5 -c 1 -J out.json on 2 ranks",
          "[workloads][sweep]") {
  TempDir dir;
  const std::string json_path = dir.path() + "/out.json";
  const std::string rv = "--nranks 2 --rendezvous 127.0.0.1:" + std::to_string(ocslab::testing::free_loopback_port());
  const std::string sweep = " -b 8 -e 8M -f 2 -n 20 -w 5 -c 1";
  const std::string bin = bin_path("collbench-tcp");
  auto t0 = std::chrono::steady_clock::now();
  // Rank 1 in the background (its output in a file), rank 0 in front; the shell's status is rank
  // 0's, rank 1's is written next to its output.
  Run r = shell("cd " + dir.path() + " && { " + bin + " --rank 1 " + rv + sweep +
                " > rank1.txt 2>&1; echo $? > rank1.rc; } & cd " + dir.path() + " && " + bin + " --rank 0 " + rv +
                sweep + " -J out.json; rc=$?; wait; exit $rc");
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  INFO("rank 0:\n" << r.out << "\nrank 1:\n" << slurp(dir.path() + "/rank1.txt"));
  std::printf("sweep 8..8M x2, 20 iterations + 5 warm-up + 1 check, 2 TCP ranks: %.1f s\n", secs);
  REQUIRE(r.rc == 0);
  CHECK(slurp(dir.path() + "/rank1.rc") == "0\n");

  CHECK_THAT(r.out,
             Contains("nThread 1 nGpus 1 minBytes 8 maxBytes 8388608 step: 2(factor) warmup iters: 5 iters: 20"));
  CHECK_THAT(r.out, Contains("validation: 1"));
  CHECK_THAT(r.out, Contains("#  Rank  0 Group  0") && Contains("#  Rank  1 Group  0"));
  CHECK_THAT(r.out, Contains("# Out of bounds values : 0 OK"));
  CHECK_THAT(r.out, Contains("# Collective test concluded: collbench-tcp"));

  std::vector<Row> rows = table_rows(r.out);
  REQUIRE(rows.size() == 21);  // 8, 16, ..., 8M
  for (size_t i = 0; i < rows.size(); ++i) {
    INFO("row " << i);
    CHECK(rows[i].size == 8ull << i);
    CHECK(rows[i].count == (8ull << i) / 4);
    CHECK(rows[i].type == "float");
    CHECK(rows[i].redop == "sum");
    CHECK(rows[i].root == -1);
    CHECK(rows[i].time > 0);
    CHECK(rows[i].wrong == "0");  // -c 1: checked, nothing wrong
  }
  // Bandwidth rounds to 0.00 GB/s at the small sizes; at 8 MiB over loopback it cannot.
  CHECK(rows.back().algbw > 0);
  CHECK(rows.back().busbw == Approx(rows.back().algbw).epsilon(0.02));  // 2 ranks: busbw = algbw x 2(n-1)/n

  nlohmann::json j = nlohmann::json::parse(slurp(json_path));  // throws (fails the case) when it does not parse
  CHECK(j["version"] == 3);
  CHECK(j["config"]["minimum_bytes"] == 8);
  CHECK(j["config"]["maximum_bytes"] == 8388608);
  CHECK(j["config"]["step_factor"] == 2);
  CHECK(j["config"]["iterations"] == 20);
  CHECK(j["config"]["warmup_iters"] == 5);
  CHECK(j["config"]["validation"] == 1);
  CHECK(j["config"]["devices"].size() == 2);
  CHECK(j["args"].size() > 10);
  REQUIRE(j["results"].size() == 21);
  for (size_t i = 0; i < 21; ++i) {
    const auto& res = j["results"][i];
    INFO("result " << i);
    CHECK(res["size"] == 8ull << i);
    CHECK(res["in_place"]["time"].get<double>() > 0);
    CHECK(res["in_place"]["alg_bw"].get<double>() > 0);
    CHECK(res["in_place"]["bus_bw"].get<double>() > 0);
    CHECK(res["in_place"]["nwrong"] == 0);
    CHECK(res["actual_iterations"] == 20);
    // The table's figure is the JSON's, rounded to two decimals.
    CHECK(res["in_place"]["time"].get<double>() == Approx(rows[i].time).margin(0.006));
  }
  CHECK(j["out_of_bounds"]["count"] == 0);
  CHECK(j["out_of_bounds"]["okay"] == true);
  CHECK(j["average_bus_bandwidth"]["bandwidth"].get<double>() > 0);
  CHECK(j["errors"].empty());
}

TEST_CASE("collbench-tcp: -o reductions over 3 ranks check out, -c 0 reports N/A", "[workloads][sweep]") {
  TempDir dir;
  const std::string rv = "--nranks 3 --rendezvous 127.0.0.1:" + std::to_string(ocslab::testing::free_loopback_port());
  const std::string sweep = " -b 12 -e 12K -f 4 -n 3 -w 1 -c 2 -o all -a 3";
  const std::string bin = bin_path("collbench-tcp");
  Run r = shell("cd " + dir.path() + " && { for k in 1 2; do " + bin + " --rank $k " + rv + sweep +
                " > rank$k.txt 2>&1 & done; " + bin + " --rank 0 " + rv + sweep + "; rc=$?; wait; exit $rc; }");
  INFO(r.out);
  REQUIRE(r.rc == 0);
  std::vector<Row> rows = table_rows(r.out);
  REQUIRE(rows.size() == 30);  // 6 sizes x sum, prod, max, min, avg
  const char* ops[] = {"sum", "prod", "max", "min", "avg"};
  for (size_t i = 0; i < rows.size(); ++i) {
    CHECK(rows[i].redop == ops[i / 6]);
    CHECK(rows[i].wrong == "0");
  }
  CHECK_THAT(r.out, Contains("# Out of bounds values : 0 OK"));

  r = shell("cd " + dir.path() + " && { " + bin + " --rank 1 --nranks 2 " + rv.substr(rv.find("--rendezvous")) +
            " -b 64 -e 64 -c 0 --collective allgather > r1.txt 2>&1 & " + bin + " --rank 0 --nranks 2 " +
            rv.substr(rv.find("--rendezvous")) + " -b 64 -e 64 -c 0 --collective allgather; rc=$?; wait; exit $rc; }");
  INFO(r.out);
  REQUIRE(r.rc == 0);
  rows = table_rows(r.out);
  REQUIRE(rows.size() == 1);
  CHECK(rows[0].size == 64);
  CHECK(rows[0].count == 8);  // allgather's count is one rank's part, as nccl-tests prints it
  CHECK(rows[0].redop == "none");
  CHECK(rows[0].wrong == "N/A");
}
