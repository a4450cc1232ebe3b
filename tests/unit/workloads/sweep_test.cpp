// nccl-tests' command line in the collbench programs: option parsing with nccl-tests' letters and
// meanings, the sizes its loop visits, the schedule the transports run for a sweep, how -a
// combines the ranks' times, and the table and JSON document rank 0 writes.
#include <catch2/catch.hpp>

#include <sstream>
#include <string>
#include <vector>

#include "ocslab/common/error.h"
#include "ocslab/workloads/collbench_main.h"
#include "ocslab/workloads/ring.h"
#include "ocslab/workloads/shim_hooks.h"
#include "ocslab/workloads/sweep.h"

namespace po = boost::program_options;
using namespace ocslab;
using namespace ocslab::workloads;
using Catch::Matchers::Contains;

namespace sweep_test {

po::variables_map parse(std::vector<std::string> args) {
  po::options_description desc;
  add_common_options(desc);
  add_phase_options(desc);
  add_sweep_options(desc);
  std::vector<const char*> argv{"prog"};
  for (const auto& a : args) argv.push_back(a.c_str());
  po::variables_map vm;
  po::store(po::parse_command_line(static_cast<int>(argv.size()), argv.data(), desc), vm);
  po::notify(vm);
  return vm;
}

std::string sched(const std::string& name) {
  return std::string(OCSLAB_TEST_SOURCE_DIR) + "/experiments/workloads/schedules/" + name;
}

}  // namespace sweep_test

using sweep_test::parse;

TEST_CASE("sweep sizes are read as nccl-tests reads them (binary K, M, G)", "[workloads][sweep]") {
  CHECK(parse_sweep_size("8") == 8);
  CHECK(parse_sweep_size("8K") == 8192);
  CHECK(parse_sweep_size("8k") == 8192);
  CHECK(parse_sweep_size("8M") == 8ull << 20);
  CHECK(parse_sweep_size("1G") == 1ull << 30);
  CHECK(parse_sweep_size("0.5M") == 512ull << 10);
  CHECK(parse_sweep_size("64KiB") == 64ull << 10);
  CHECK(parse_sweep_size("64KB") == 64ull << 10);
  CHECK(parse_sweep_size("100B") == 100);
  CHECK_THROWS_WITH(parse_sweep_size("8X"), Contains("unknown unit 'X'"));
  CHECK_THROWS_WITH(parse_sweep_size("M"), Contains("bad size 'M'"));
  CHECK_THROWS_WITH(parse_sweep_size("-1"), Contains("bad size '-1'"));
  CHECK_THROWS_WITH(parse_sweep_size("8Mx"), Contains("unknown unit 'Mx'"));
}

TEST_CASE("the size loop: x factor, + step bytes, nccl-tests' defaults", "[workloads][sweep]") {
  SweepOptions w = sweep_options(parse({"-b", "8", "-e", "8M", "-f", "2"}));
  std::vector<uint64_t> sizes = sweep_sizes(w);
  REQUIRE(sizes.size() == 21);
  for (size_t i = 0; i < sizes.size(); ++i) CHECK(sizes[i] == 8ull << i);
  CHECK(sizes.back() == 8ull << 20);

  // A factor that overshoots stops below -e, as nccl-tests' loop does.
  w = sweep_options(parse({"-b", "1K", "-e", "100K", "-f", "4"}));
  CHECK(sweep_sizes(w) == std::vector<uint64_t>{1024, 4096, 16384, 65536});

  w = sweep_options(parse({"--minbytes", "1M", "--maxbytes", "4M", "--stepbytes", "1M"}));
  CHECK(sweep_sizes(w) == std::vector<uint64_t>{1 << 20, 2 << 20, 3 << 20, 4 << 20});

  // nccl-tests' defaults: 32M once, 20 iterations, 1 warm-up, check 1, mean over ranks, sum.
  w = sweep_options(parse({}));
  CHECK(sweep_sizes(w) == std::vector<uint64_t>{32ull << 20});
  CHECK(w.iters == 20);
  CHECK(w.warmup_iters == 1);
  CHECK(w.check == 1);
  CHECK(w.average == 1);
  CHECK(w.redops == std::vector<RedOp>{RedOp::kSum});
  CHECK(w.collective == OpType::kAllReduce);
  CHECK(w.output_file.empty());

  w = sweep_options(parse({"-n", "7", "-w", "5", "-c", "0", "-a", "3", "-o", "max", "-d", "float", "-g", "1", "-J",
                           "x.json", "--collective", "allgather"}));
  CHECK(w.iters == 7);
  CHECK(w.warmup_iters == 5);
  CHECK(w.check == 0);
  CHECK(w.average == 3);
  CHECK(w.redops == std::vector<RedOp>{RedOp::kMax});
  CHECK(w.output_file == "x.json");
  CHECK(w.collective == OpType::kAllGather);
  CHECK(sweep_options(parse({"-o", "all"})).redops.size() == 5);
  CHECK(sweep_options(parse({"--iters", "3", "--warmup_iters", "0", "--check", "2", "--average", "0", "--op", "prod",
                             "--output_file", "y.json"}))
            .iters == 3);
}

TEST_CASE("bad sweep options are refused naming the option", "[workloads][sweep]") {
  CHECK_THROWS_WITH(sweep_options(parse({"-b", "8M", "-e", "8"})), Contains("-e/--maxbytes 8 is below -b/--minbytes"));
  CHECK_THROWS_WITH(sweep_options(parse({"-b", "lots"})), Contains("-b/--minbytes: bad size 'lots'"));
  CHECK_THROWS_WITH(sweep_options(parse({"-f", "1.5"})), Contains("-f/--stepfactor '1.5'"));
  CHECK_THROWS_WITH(sweep_options(parse({"-f", "0"})), Contains("-f/--stepfactor '0'"));
  CHECK_THROWS_WITH(sweep_options(parse({"-b", "1", "-e", "2", "-i", "0"})), Contains("never reaches"));
  CHECK_THROWS_WITH(sweep_options(parse({"-n", "0"})), Contains("-n/--iters 0: must be at least 1"));
  CHECK_THROWS_WITH(sweep_options(parse({"-w", "-1"})), Contains("-w/--warmup_iters -1"));
  CHECK_THROWS_WITH(sweep_options(parse({"-c", "-1"})), Contains("-c/--check -1"));
  CHECK_THROWS_WITH(sweep_options(parse({"-a", "4"})), Contains("-a/--average 4: want 0 (rank 0)"));
  CHECK_THROWS_WITH(sweep_options(parse({"-o", "mulsum"})), Contains("-o/--op: unknown reduction op 'mulsum'"));
  CHECK_THROWS_WITH(sweep_options(parse({"-d", "half"})), Contains("-d/--datatype 'half'") && Contains("float32 only"));
  CHECK_THROWS_WITH(sweep_options(parse({"--collective", "gather"})), Contains("--collective 'gather'"));
  CHECK_THROWS_WITH(sweep_options(parse({"-g", "0"})), Contains("-g/--ngpus 0"));
}

TEST_CASE("-n and -o are nccl-tests' now; world size and output folder are long options", "[workloads][sweep]") {
  CHECK(parse({"-n", "5"})["iters"].as<int>() == 5);
  CHECK(parse({"-o", "min"})["op"].as<std::string>() == "min");
  CHECK(parse({"--nranks", "4"})["nranks"].as<int>() == 4);
  CHECK(parse({"--output", "dir"})["output"].as<std::string>() == "dir");
}

TEST_CASE("read_job: without --schedule the sweep, with it the schedule; neither takes the other's options",
          "[workloads][sweep]") {
  // A lone process is rank 0 of 1, as nccl-tests without MPI.
  Job job = read_job(parse({"-b", "8", "-e", "64", "-f", "2"}));
  REQUIRE(job.sweep);
  CHECK(job.options.rank == 0);
  CHECK(job.options.nranks == 1);
  CHECK(job.schedule.ranks == 1);
  CHECK(job.schedule.step.size() == 4);
  CHECK(job.schedule.steps == 20);
  CHECK(job.schedule.warmup == 1);

  job = read_job(parse({"--ranks", "h1,h2,h3", "--rank", "2", "-b", "64", "-e", "64", "--collective", "allgather"}));
  CHECK(job.options.nranks == 3);
  CHECK(job.options.rendezvous == "h1:18600");
  CHECK(job.schedule.groups.at(0).ranks == std::vector<int>{0, 1, 2});

  CHECK_THROWS_WITH(read_job(parse({"--nranks", "2", "--rendezvous", "h:1"})), Contains("missing --rank"));
  CHECK_THROWS_WITH(read_job(parse({"--output", "d"})), Contains("--output applies to a schedule"));
  CHECK_THROWS_WITH(read_job(parse({"--controller", "h:1", "--job", "j"})),
                    Contains("--controller applies to a schedule"));
  CHECK_THROWS_WITH(read_job(parse({"--steps", "3"})), Contains("--steps applies to a schedule"));
  CHECK_THROWS_WITH(
      read_job(parse({"-s", sweep_test::sched("dp-pp-4.yaml"), "--rank", "0", "--rendezvous", "h:1", "-n", "4"})),
      Contains("-n/--iters belongs to the size sweep"));
  CHECK_THROWS_WITH(read_job(parse({"-s", sweep_test::sched("dp-pp-4.yaml"), "--rendezvous", "h:1"})),
                    Contains("missing --rank"));
  Job sj = read_job(parse({"-s", sweep_test::sched("dp-pp-4.yaml"), "--rank", "1", "--rendezvous", "h:1"}));
  CHECK_FALSE(sj.sweep);
  CHECK(sj.options.nranks == 4);
}

TEST_CASE("the sweep's schedule: one world group, sizes rounded to whole floats per rank", "[workloads][sweep]") {
  SweepOptions w = sweep_options(parse({"-b", "8", "-e", "64", "-f", "2", "-n", "20", "-w", "5"}));
  Schedule s = sweep_schedule(w, 2);
  REQUIRE(s.groups.size() == 1);
  CHECK(s.groups[0].name == "world");
  CHECK(s.groups[0].kind == "world");
  CHECK(s.steps == 20);
  CHECK(s.warmup == 5);
  REQUIRE(s.step.size() == 4);
  for (size_t i = 0; i < 4; ++i) {
    CHECK(s.step[i].bytes == 8ull << i);
    CHECK(s.step[i].type == OpType::kAllReduce);
    CHECK(s.step[i].redop == RedOp::kSum);
  }
  // allgather over 3 ranks: multiples of 12 bytes (one float per rank), as nccl-tests' counts.
  w = sweep_options(parse({"-b", "16", "-e", "64", "-f", "2", "--collective", "allgather"}));
  s = sweep_schedule(w, 3);
  CHECK(s.step.at(0).bytes == 12);
  CHECK(s.step.at(1).bytes == 24);
  CHECK(s.step.at(2).bytes == 60);
  CHECK_THROWS_WITH(sweep_schedule(sweep_options(parse({"-b", "8", "-e", "8", "--collective", "reducescatter"})), 4),
                    Contains("size 8 holds no float per rank") && Contains("16 bytes"));
  CHECK_THROWS_WITH(sweep_schedule(sweep_options(parse({"--collective", "sendrecv"})), 3),
                    Contains("sendrecv runs between 2 ranks"));
  // -o all: every op over every size; a different op is a different digest (ranks must agree).
  w = sweep_options(parse({"-b", "8", "-e", "16", "-f", "2", "-o", "all"}));
  s = sweep_schedule(w, 2);
  CHECK(s.step.size() == 10);
  CHECK(s.step[2].redop == RedOp::kProd);
  Schedule sum = sweep_schedule(sweep_options(parse({"-b", "8", "-e", "16", "-f", "2"})), 2);
  Schedule max = sweep_schedule(sweep_options(parse({"-b", "8", "-e", "16", "-f", "2", "-o", "max"})), 2);
  CHECK(sum.digest() != max.digest());
}

TEST_CASE("-a combines the ranks' times: rank 0, mean, min, max; wrong counts add up", "[workloads][sweep]") {
  SweepOptions w = sweep_options(parse({"-b", "1M", "-e", "2M", "-f", "2"}));
  Schedule s = sweep_schedule(w, 2);
  SweepRankResult r0{{100.0, 200.0}, {0, 1}}, r1{{300.0, 100.0}, {2, 0}};
  // Through the wire format, as rank 0 gets them.
  std::vector<SweepRankResult> all{decode_sweep_result(encode_sweep_result(r0)),
                                   decode_sweep_result(encode_sweep_result(r1))};
  auto time_of = [&](int a) {
    SweepOptions v = w;
    v.average = a;
    return combine_sweep(s, v, all).at(0).time_us;
  };
  CHECK(time_of(0) == Approx(100.0));
  CHECK(time_of(1) == Approx(200.0));
  CHECK(time_of(2) == Approx(100.0));
  CHECK(time_of(3) == Approx(300.0));
  std::vector<SweepRow> rows = combine_sweep(s, w, all);
  REQUIRE(rows.size() == 2);
  CHECK(rows[0].wrong == 2);
  CHECK(rows[1].wrong == 1);
  CHECK(rows[0].count == (1u << 20) / 4);
  // algbw = size / time; busbw = algbw x 2(n-1)/n for allreduce (= algbw at n = 2).
  CHECK(rows[0].algbw == Approx(1048576.0 / 200e-6 / 1e9));
  CHECK(rows[0].busbw == Approx(rows[0].algbw));
  CHECK(sweep_avg_busbw(rows) == Approx((rows[0].busbw + rows[1].busbw) / 2));
}

TEST_CASE("the table and the JSON document look like nccl-tests'", "[workloads][sweep]") {
  SweepOptions w = sweep_options(parse({"-b", "8", "-e", "32", "-f", "2", "-n", "20", "-w", "5", "-c", "1"}));
  Schedule s = sweep_schedule(w, 2);
  SweepReport rep;
  rep.program = "ocslab-collbench-verbs";
  rep.backend = "verbs";
  rep.nranks = 2;
  rep.devices = {decode_sweep_device(encode_sweep_device({0, 42, "h1", "rxe_eth1 (eth1)"})),
                 decode_sweep_device(encode_sweep_device({1, 43, "h2", "rxe_eth1 (eth1)"}))};
  rep.args = {"ocslab-collbench-verbs", "-b", "8"};
  rep.start_time = "2026-11-26 12:00:00";
  rep.end_time = "2026-11-26 12:00:01";
  rep.rows = combine_sweep(s, w, {{{10.0, 20.0, 40.0}, {0, 0, 0}}, {{10.0, 20.0, 40.0}, {0, 0, 0}}});
  std::ostringstream out;
  print_sweep_table(out, w, rep);
  std::string t = out.str();
  INFO(t);
  CHECK_THAT(t,
             Contains("minBytes 8 maxBytes 32 step: 2(factor) warmup iters: 5 iters: 20 agg iters: 1 validation: 1"));
  CHECK_THAT(t, Contains("#  Rank  1 Group  0 Pid     43 on         h2 device  0 [rxe_eth1 (eth1)]"));
  CHECK_THAT(t, Contains("#       size         count      type   redop    root     time   algbw   busbw  #wrong"));
  CHECK_THAT(t, Contains("           8             2     float     sum      -1    10.00    0.00    0.00       0\n"));
  CHECK_THAT(t, Contains("          32             8     float     sum      -1    40.00    0.00    0.00       0\n"));
  CHECK_THAT(t, Contains("# Out of bounds values : 0 OK"));
  CHECK_THAT(t, Contains("# Collective test concluded: ocslab-collbench-verbs"));

  nlohmann::ordered_json j = sweep_json(w, rep);
  CHECK(j.begin().key() == "version");  // nccl-tests' key order
  CHECK(j.back().is_string());          // end_time last
  CHECK(j["version"] == 3);
  CHECK(j["args"].size() == 3);
  CHECK(j["config"]["minimum_bytes"] == 8);
  CHECK(j["config"]["maximum_bytes"] == 32);
  CHECK(j["config"]["step_factor"] == 2);
  CHECK(j["config"]["iterations"] == 20);
  CHECK(j["config"]["warmup_iters"] == 5);
  CHECK(j["config"]["validation"] == 1);
  CHECK(j["config"]["devices"].size() == 2);
  CHECK(j["config"]["devices"][1]["hostname"] == "h2");
  REQUIRE(j["results"].size() == 3);
  CHECK(j["results"][2]["size"] == 32);
  CHECK(j["results"][2]["count"] == 8);
  CHECK(j["results"][2]["redop"] == "sum");
  CHECK(j["results"][2]["out_of_place"].is_null());
  CHECK(j["results"][2]["in_place"]["time"] == Approx(40.0));
  CHECK(j["results"][2]["in_place"]["nwrong"] == 0);
  CHECK(j["out_of_bounds"]["okay"] == true);

  // -c 0: nothing checked, N/A in the table and null in the JSON, as nccl-tests.
  w.check = 0;
  rep.rows = combine_sweep(s, w, {{{10.0, 20.0, 40.0}, {0, 0, 0}}});
  std::ostringstream out0;
  print_sweep_table(out0, w, rep);
  CHECK_THAT(out0.str(), Contains("    N/A\n"));
  CHECK(sweep_json(w, rep)["results"][0]["in_place"]["nwrong"].is_null());

  // Figures wider than their column lose decimals, then go scientific, and stay aligned.
  rep.rows = combine_sweep(s, w, {{{15102.8, 123456.0, 1.5e9}, {0, 0, 0}}});
  std::ostringstream wide;
  print_sweep_table(wide, w, rep);
  CHECK_THAT(wide.str(),
             Contains("     -1  15102.8  ") && Contains("     -1   123456  ") && Contains("     -1  1.5e+09  "));
}

TEST_CASE("the size sweep runs alltoall and broadcast as alltoall_perf and broadcast_perf do", "[workloads][sweep]") {
  // alltoall over 4 ranks: sizes rounded to 4 blocks of whole floats, nccl-tests' counts.
  SweepOptions w = sweep_options(parse({"-b", "100", "-e", "1K", "-f", "4", "--collective", "alltoall"}));
  CHECK(w.collective == OpType::kAllToAll);
  Schedule s = sweep_schedule(w, 4);
  REQUIRE(s.step.size() == 2);
  CHECK(s.step[0].type == OpType::kAllToAll);
  CHECK(s.step[0].bytes == 96);  // 100 rounded down to 4 x 6 floats
  CHECK(s.step[1].bytes == 400);
  CHECK_THROWS_WITH(sweep_schedule(sweep_options(parse({"-b", "8", "-e", "8", "--collective", "alltoall"})), 4),
                    Contains("size 8 holds no float per rank") && Contains("16 bytes"));
  // broadcast: --root (nccl-tests' -r; -r is --rank here), default 0, checked against the world.
  w = sweep_options(parse({"-b", "64", "-e", "64", "--collective", "broadcast"}));
  CHECK(sweep_schedule(w, 4).step.at(0).root == 0);
  w = sweep_options(parse({"-b", "64", "-e", "64", "--collective", "broadcast", "--root", "3"}));
  s = sweep_schedule(w, 4);
  CHECK(s.step.at(0).type == OpType::kBroadcast);
  CHECK(s.step.at(0).root == 3);
  CHECK(s.step.at(0).bytes == 64);
  CHECK(sweep_schedule(sweep_options(parse({"--collective", "broadcast", "--root", "2"})), 4).digest() !=
        sweep_schedule(sweep_options(parse({"--collective", "broadcast", "--root", "3"})), 4).digest());
  CHECK_THROWS_WITH(sweep_schedule(w, 3), Contains("--root 3: this job has ranks 0..2"));
  CHECK_THROWS_WITH(sweep_options(parse({"--root", "1"})), Contains("--root is for --collective broadcast"));
  CHECK_THROWS_WITH(sweep_options(parse({"--collective", "broadcast", "--root", "-1"})),
                    Contains("--root -1: a rank is 0 or more"));
  CHECK_THROWS_WITH(sweep_options(parse({"--collective", "alltoallv"})),
                    Contains("--collective alltoallv: its per-pair sizes are a matrix"));
  CHECK_THROWS_WITH(sweep_options(parse({"--collective", "gather"})),
                    Contains("want allreduce, allgather, reducescatter, sendrecv, alltoall or broadcast"));
  CHECK(sweep_options_given(parse({"--root", "1"})) == std::vector<std::string>{"--root"});

  // The table: root printed for broadcast, alltoall's count is one block, busbw nccl-tests'.
  SweepReport rep;
  rep.program = "p";
  rep.backend = "b";
  rep.nranks = 4;
  s = sweep_schedule(sweep_options(parse({"-b", "4K", "-e", "4K", "--collective", "alltoall"})), 4);
  std::vector<SweepRankResult> per(4, SweepRankResult{{1000.0}, {0}});
  w = sweep_options(parse({"-b", "4K", "-e", "4K", "--collective", "alltoall"}));
  rep.rows = combine_sweep(s, w, per);
  REQUIRE(rep.rows.size() == 1);
  CHECK(rep.rows[0].count == 256);
  CHECK(rep.rows[0].root == -1);
  CHECK(rep.rows[0].algbw == Approx(4096 / 1e9 / 1e-3));
  CHECK(rep.rows[0].busbw == Approx(rep.rows[0].algbw * 0.75));
  w = sweep_options(parse({"-b", "4K", "-e", "4K", "--collective", "broadcast", "--root", "2"}));
  s = sweep_schedule(w, 4);
  rep.rows = combine_sweep(s, w, per);
  CHECK(rep.rows[0].count == 1024);
  CHECK(rep.rows[0].root == 2);
  CHECK(rep.rows[0].busbw == Approx(rep.rows[0].algbw));
  std::ostringstream out;
  print_sweep_table(out, w, rep);
  CHECK_THAT(out.str(), Contains("# p (b): broadcast, 4 rank(s)") && Contains("float    none       2"));
  CHECK(sweep_json(w, rep)["results"][0]["root"] == "     2");
}
