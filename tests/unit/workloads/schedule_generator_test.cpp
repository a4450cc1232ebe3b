// `ocslab schedule generate` (ocslab/workloads/schedule_generator.h; docs/workloads.md,
// "Generating a schedule"): the worked example's ops and bytes against a derivation done by hand
// here (numbers written out, not the generator's formulas), its reconfigurations per step walked
// by hand over the topo_ids, the refusals at file:line:col, and every shipped configuration
// regenerating its shipped schedule byte for byte (which the schedule parser loads).
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "ocslab/common/error.h"
#include "ocslab/workloads/schedule.h"
#include "ocslab/workloads/schedule_generator.h"

using namespace ocslab;
using namespace ocslab::workloads;
using Catch::Matchers::Contains;

namespace gen_test {

std::string src(const std::string& rel) { return std::string(OCSLAB_TEST_SOURCE_DIR) + "/" + rel; }

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The worked example of docs/workloads.md ("Generating a schedule").
const char* kWorked = R"(name: worked
ranks: 8
steps: 2
warmup: 0
model: {layers: 4, hidden: 64, heads: 4, sequence: 32, vocabulary: 256, micro_batch: 2, dtype: bf16}
parallel: {tp: 2, dp: 2, pp: 2}
pipeline: {schedule: gpipe, micro_batches: 2}
sharding: none
)";

std::string error_of(const std::string& text) {
  try {
    generate_schedule(parse_generator_config(text, "cfg.yaml"));
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "no error";
}

}  // namespace gen_test

TEST_CASE("schedule generate: the worked example's ops and bytes equal the hand derivation", "[schedule-generator]") {
  GeneratedSchedule g = generate_schedule(parse_generator_config(gen_test::kWorked, "worked.yaml"));
  const Schedule& s = g.schedule;
  REQUIRE(s.ranks == 8);

  // By hand: ranks stage-major, inside a stage local = tp + 2 x dp (tp fastest).
  // activation of one micro-batch: b 2 x S 32 x h 64 x 2 B = 8192 B;
  // TP allreduce per micro-batch and direction: 2 allreduces x 2 layers/stage x 2 x 32 x 64 x 2 B
  //   = 32768 B;
  // gradients of a stage: (2 layers x 12 x 64^2 = 98304, + embedding (stage 0) or output layer
  //   (stage 1) 256 x 64 = 16384) / tp 2 = 57344 params x 2 B = 114688 B.
  // GPipe, two micro-batches, forward 1 unit, backward 2: s0 F0, s0 F1, s1 F0, s1 F1, s1 B1,
  // s0 B1, s1 B0, s0 B0 (s0's B1 and s1's B0 both start at 5: the lower stage first).
  using Row = std::tuple<std::string, std::string, uint64_t, int, int>;
  auto tp0 = [](std::vector<Row>& v) {
    v.push_back({"tp-s0-dp0", "allreduce", 32768, -1, -1});
    v.push_back({"tp-s0-dp1", "allreduce", 32768, -1, -1});
  };
  auto tp1 = [](std::vector<Row>& v) {
    v.push_back({"tp-s1-dp0", "allreduce", 32768, -1, -1});
    v.push_back({"tp-s1-dp1", "allreduce", 32768, -1, -1});
  };
  auto fwd = [](std::vector<Row>& v) {
    v.push_back({"pp-tp0-dp0", "sendrecv", 8192, 0, 4});
    v.push_back({"pp-tp1-dp0", "sendrecv", 8192, 1, 5});
    v.push_back({"pp-tp0-dp1", "sendrecv", 8192, 2, 6});
    v.push_back({"pp-tp1-dp1", "sendrecv", 8192, 3, 7});
  };
  auto bwd = [](std::vector<Row>& v) {
    v.push_back({"pp-tp0-dp0", "sendrecv", 8192, 4, 0});
    v.push_back({"pp-tp1-dp0", "sendrecv", 8192, 5, 1});
    v.push_back({"pp-tp0-dp1", "sendrecv", 8192, 6, 2});
    v.push_back({"pp-tp1-dp1", "sendrecv", 8192, 7, 3});
  };
  std::vector<Row> want;
  tp0(want), fwd(want);  // s0 F0
  tp0(want), fwd(want);  // s0 F1
  tp1(want);             // s1 F0
  tp1(want);             // s1 F1
  tp1(want), bwd(want);  // s1 B1
  tp0(want);             // s0 B1
  tp1(want), bwd(want);  // s1 B0
  tp0(want);             // s0 B0
  want.push_back({"dp-s0-tp0", "allreduce", 114688, -1, -1});
  want.push_back({"dp-s0-tp1", "allreduce", 114688, -1, -1});
  want.push_back({"dp-s1-tp0", "allreduce", 114688, -1, -1});
  want.push_back({"dp-s1-tp1", "allreduce", 114688, -1, -1});

  std::vector<Row> got;
  for (const auto& op : s.step) {
    const Group& gr = s.group_of(op);
    bool send = op.type == OpType::kSendRecv;
    got.push_back({gr.name, std::string(op_name(op.type)), op.bytes, send ? op.src : -1, send ? op.dst : -1});
  }
  CHECK(got == want);

  // The groups by hand.
  auto ranks_of = [&](const std::string& name) {
    for (const auto& gr : s.groups)
      if (gr.name == name) return gr.ranks;
    return std::vector<int>{};
  };
  CHECK(ranks_of("tp-s1-dp1") == std::vector<int>{6, 7});
  CHECK(ranks_of("dp-s0-tp1") == std::vector<int>{1, 3});
  CHECK(ranks_of("pp-tp1-dp0") == std::vector<int>{1, 5});
  CHECK(s.groups.size() == 12);

  // The controller job and the walk over the topo_ids by hand (digits: 0 = pp, 1 = tp, 2 = dp;
  // start "11"): step 1 tp-s0 keeps 11; sends 00; tp-s0 10; sends 00; tp-s1 01; sends 00; tp-s0 10;
  // tp-s1 11; sends 00; tp-s0 10; dp-s0 20; dp-s1 22 = 11 changes. Step 2 starts on "22", so its
  // first tp-s0 (12) changes too: 12.
  CHECK(g.layout.pp == 2);
  REQUIRE(g.layout.dims.size() == 2);
  CHECK(g.layout.dims[0].name == "tp");
  CHECK(g.layout.dims[1].name == "dp");
  CHECK(g.initial.str() == "11");
  CHECK(g.reconfigurations == std::vector<int>{11, 12});
  CHECK_THAT(g.yaml, Contains("# reconfigurations per step on demand (warm-up included): 11 12"));
  CHECK_THAT(g.yaml, Contains("# controller job (phase:): pp: 2, dims: [{name: tp, size: 2}, {name: dp, size: 2}], "
                              "initial: \"11\""));
  CHECK_THAT(g.summary, Contains("36 op(s) per step"));

  // The file as written loads with the schedule parser and gives the same schedule.
  Schedule back = parse_schedule(g.yaml, "worked-out.yaml");
  CHECK(back.digest() == s.digest());
  CHECK(back.step.size() == 36);
}

TEST_CASE("schedule generate: sharding, MoE, CP and DLRM bytes by hand", "[schedule-generator]") {
  auto gen = [](const std::string& tail) {
    return generate_schedule(parse_generator_config(std::string(R"(name: t
ranks: 4
steps: 1
warmup: 0
)") + tail,
                                                    "t.yaml"))
        .schedule;
  };
  SECTION("zero1: reducescatter then allgather of the stage's gradients") {
    // pp 1: embedding and output layer both on the one stage: 2 x 12 x 64^2 + 2 x 256 x 64 = 131072
    // params x 2 B = 262144 B.
    Schedule s =
        gen("model: {layers: 2, hidden: 64, heads: 4, sequence: 32, vocabulary: 256}\n"
            "parallel: {dp: 4}\nsharding: zero1\n");
    REQUIRE(s.step.size() == 2);
    CHECK(s.step[0].type == OpType::kReduceScatter);
    CHECK(s.step[0].bytes == 262144);
    CHECK(s.step[1].type == OpType::kAllGather);
    CHECK(s.step[1].bytes == 262144);
  }
  SECTION("MoE: expert alltoall per micro-batch each way; experts / ep in the gradients") {
    // alltoall: 2 x 2 layers x b 1 x S 32 x top_k 2 x h 64 x 2 B = 32768 B.
    // params: 2 x (4 x 4096 + 4 experts / ep 2 x 8 x 4096) + 2 x 256 x 64 = 2 x 81920 + 32768 = 196608
    // x 2 B = 393216 B over dp 2.
    Schedule s =
        gen("model: {layers: 2, hidden: 64, heads: 4, sequence: 32, vocabulary: 256}\n"
            "parallel: {ep: 2, dp: 2}\nmoe: {experts: 4, top_k: 2}\n");
    REQUIRE(s.step.size() == 6);
    for (int i : {0, 1, 2, 3}) {
      CHECK(s.step[static_cast<size_t>(i)].type == OpType::kAllToAll);
      CHECK(s.step[static_cast<size_t>(i)].bytes == 32768);
    }
    CHECK(s.step[4].type == OpType::kAllReduce);
    CHECK(s.step[4].bytes == 393216);
  }
  SECTION("CP: K and V gathered forward, scattered backward") {
    // 2 x 2 layers x b 1 x S 32 x h 64 x 2 B = 16384 B.
    Schedule s =
        gen("model: {layers: 2, hidden: 64, heads: 4, sequence: 32, vocabulary: 256}\n"
            "parallel: {cp: 2, dp: 2}\n");
    REQUIRE(s.step.size() == 6);
    CHECK(s.step[0].type == OpType::kAllGather);
    CHECK(s.step[0].bytes == 16384);
    CHECK(s.step[2].type == OpType::kReduceScatter);
    CHECK(s.step[2].bytes == 16384);
  }
  SECTION("DLRM: pooled embeddings by alltoall out and back, the dense MLP by allreduce") {
    // 8 x 8 tables x 16 x 4 B = 4096 B; 1000 x 4 B = 4000 B.
    Schedule s =
        gen("model: {kind: dlrm, batch: 8, tables: 8, embedding_dim: 16, dense_params: 1000, dtype: fp32}\n"
            "parallel: {dp: 4}\n");
    REQUIRE(s.step.size() == 3);
    CHECK(s.step[0].type == OpType::kAllToAll);
    CHECK(s.step[0].bytes == 4096);
    CHECK(s.step[1].bytes == 4096);
    CHECK(s.step[2].type == OpType::kAllReduce);
    CHECK(s.step[2].bytes == 4000);
  }
  SECTION("scale_down divides, then rounds up to whole floats x the group") {
    // 4096 / 3 = 1365.3 -> 1366 -> the next multiple of 16 (alltoall over 4 ranks): 1376.
    Schedule s =
        gen("model: {kind: dlrm, batch: 8, tables: 8, embedding_dim: 16, dense_params: 1000, dtype: fp32}\n"
            "parallel: {dp: 4}\nscale_down: 3\n");
    CHECK(s.step[0].bytes == 1376);
    CHECK(s.step[2].bytes == 1336);  // 4000 / 3 -> 1334 -> 1336
  }
}

TEST_CASE("schedule generate: bad configurations are refused at file:line:col", "[schedule-generator]") {
  const std::string head =
      "name: t\nranks: 8\nmodel: {layers: 6, hidden: 64, heads: 4, sequence: 32, vocabulary: 256}\n";
  // sizes whose product is not the world
  CHECK_THAT(gen_test::error_of(head + "parallel: {dp: 2, pp: 2}\n"),
             Contains("cfg.yaml:4:11: tp 1 x dp 2 x pp 2 x cp 1 x ep 1 = 4 ranks, but ranks is 8 (line 2)"));
  // a PP size that does not divide the layers
  CHECK_THAT(gen_test::error_of(head + "parallel: {dp: 2, pp: 4}\n"),
             Contains("cfg.yaml:4:23: pp 4 does not divide the model's 6 layers"));
  // an unknown pipeline schedule
  CHECK_THAT(
      gen_test::error_of(head + "parallel: {dp: 4, pp: 2}\npipeline: {schedule: interleaved, micro_batches: 4}\n"),
      Contains("cfg.yaml:5:22: unknown pipeline schedule 'interleaved' (known: gpipe, 1f1b)"));
  CHECK_THAT(gen_test::error_of(head + "parallel: {dp: 8}\nsharding: zero4\n"),
             Contains("cfg.yaml:5:11: unknown sharding 'zero4'"));
  CHECK_THAT(gen_test::error_of(head + "parallel: {dp: 4, ep: 2}\n"),
             Contains("cfg.yaml:4:23: ep > 1 needs a moe section"));
  CHECK_THAT(gen_test::error_of(head + "parallel: {dp: 2, cp: 4}\nmodel2: 1\n"),
             Contains("cfg.yaml:5:1: unknown key 'model2'"));
  CHECK_THAT(gen_test::error_of(head + "parallel: {tp: 8}\n"),
             Contains("cfg.yaml:4:16: tp 8 must divide hidden 64, heads 4"));
  CHECK_THAT(
      gen_test::error_of("name: t\nranks: 2\nmodel: {layers: 2, hidden: 64, heads: 4, sequence: 32, vocabulary: 256, "
                         "dtype: int4}\nparallel: {dp: 2}\n"),
      Contains("cfg.yaml:3:"));
  CHECK_THAT(
      gen_test::error_of("name: t\nranks: 2\nmodel: {layers: 2, hidden: 64, heads: 4, sequence: 32, vocabulary: 256, "
                         "dtype: int4}\nparallel: {dp: 2}\n"),
      Contains("unknown dtype 'int4'"));
}

TEST_CASE("schedule generate: every shipped configuration regenerates its shipped schedule", "[schedule-generator]") {
  namespace fs = std::filesystem;
  int n = 0;
  for (const auto& e : fs::directory_iterator(gen_test::src("experiments/workloads/configs"))) {
    if (e.path().extension() != ".yaml") continue;
    INFO(e.path());
    GeneratedSchedule g = generate_schedule(load_generator_config(e.path().string()));
    const std::string shipped = gen_test::src("experiments/workloads/schedules/" + e.path().filename().string());
    CHECK(gen_test::slurp(shipped) == g.yaml);
    Schedule s = load_schedule(shipped);
    CHECK(s.digest() == g.schedule.digest());
    ++n;
  }
  CHECK(n == 8);
  // Config 1 on 4 ranks rewires as dp-pp-4-phase (pipeline "00", then each stage's DP "10", "11");
  // Config 3 is pipeline only: wired "0000" at placement, never changed.
  auto c1 =
      generate_schedule(load_generator_config(gen_test::src("experiments/workloads/configs/opus-config1-4.yaml")));
  CHECK(c1.reconfigurations == std::vector<int>{3, 3, 3});
  CHECK(c1.initial.str() == "11");
  auto c3 =
      generate_schedule(load_generator_config(gen_test::src("experiments/workloads/configs/opus-config3-4.yaml")));
  CHECK(c3.reconfigurations == std::vector<int>{0, 0, 0});
  CHECK(c3.initial.str() == "0000");
  CHECK(c3.layout.dims.empty());
}
