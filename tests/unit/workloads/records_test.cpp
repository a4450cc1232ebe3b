#include <catch2/catch.hpp>

#include <sstream>

#include "ocslab/common/error.h"
#include "ocslab/workloads/op_record.h"

using namespace ocslab;
using namespace ocslab::workloads;
using Catch::Matchers::Contains;

namespace {

OpRecord rec(int rank, int step, int index, int64_t duration_ns, int64_t wait_ns = 0) {
  OpRecord r;
  r.rank = rank;
  r.host = "h" + std::to_string(rank % 2 + 1);
  r.step = step;
  r.warmup = step == 0;
  r.index = index;
  r.seq = static_cast<uint64_t>(step * 2 + index);
  r.group = index == 0 ? "dp-s0" : "pp0";
  r.kind = index == 0 ? "dp" : "pp";
  r.type = index == 0 ? OpType::kAllReduce : OpType::kSendRecv;
  r.group_size = 2;
  r.bytes = 1'000'000;
  r.start_ns = 1'700'000'000'000'000'000 + step * 1'000'000'000LL;
  r.end_ns = r.start_ns + duration_ns + 7;  // wall clock may differ from the monotonic span
  r.duration_ns = duration_ns;
  r.wait_ns = wait_ns;
  r.wait_start_ns = r.start_ns - wait_ns;
  r.verified = true;
  return r;
}

}  // namespace

TEST_CASE("ops CSV rows carry nccl-tests bandwidths and read back exactly", "[workloads]") {
  OpRecord r = rec(3, 2, 0, 1'000'123, 250'000);
  auto f = op_csv_fields(r);
  REQUIRE(f.size() == op_csv_columns().size());
  CHECK(f[13] == "1000.123");                   // time_us
  CHECK(std::stod(f[14]) == Approx(0.999877));  // algbw: 1e6 B / 1.000123 ms
  CHECK(std::stod(f[15]) == Approx(0.999877));  // busbw: allreduce of 2 ranks, factor 1
  CHECK(f[16] == "250.000");                    // reconfig_wait_us
  CHECK(f[20] == "none");                       // phase: no shim
  OpRecord shimmed = rec(1, 1, 1, 999);
  shimmed.phase = "reconfigured";
  shimmed.reconfigured = true;
  shimmed.provisioned = true;
  shimmed.topo = "rail0=10;rail1=10";
  std::string text = encode_records({r, shimmed});
  auto back = decode_records(text);
  REQUIRE(back.size() == 2);
  CHECK(back[0].duration_ns == 1'000'123);
  CHECK(back[0].wait_ns == 250'000);
  CHECK(back[0].start_ns == r.start_ns);
  CHECK(back[0].host == "h2");
  CHECK(back[1].type == OpType::kSendRecv);
  CHECK(back[1].duration_ns == 999);
  CHECK(back[0].phase == "none");
  CHECK(back[1].phase == "reconfigured");
  CHECK(back[1].reconfigured);
  CHECK(back[1].provisioned);
  CHECK_FALSE(back[1].fallback);
  CHECK(back[1].topo == "rail0=10;rail1=10");
  CHECK_THROWS_WITH(parse_op_csv("rank,host\n1,h\n", "x.csv"), Contains("x.csv:1: not an ops CSV header"));
  std::string bad = text.substr(0, text.find('\n') + 1) + "1,h1,2\n";
  CHECK_THROWS_WITH(parse_op_csv(bad, "x.csv"),
                    Contains("x.csv:2: 3 fields, the header has " + std::to_string(op_csv_columns().size())));
  // time_us with a second sign, or too large for int64 nanoseconds: refused, naming the value.
  auto with_time_us = [&](const std::string& value) {
    auto fields = op_csv_fields(r);
    fields[13] = value;
    std::string line;
    for (const auto& x : fields) line += (line.empty() ? "" : ",") + x;
    return text.substr(0, text.find('\n') + 1) + line + "\n";
  };
  CHECK(parse_op_csv(with_time_us("-1.500"), "x.csv").at(0).duration_ns == -1500);
  CHECK(parse_op_csv(with_time_us("9223372036854775.807"), "x.csv").at(0).duration_ns == INT64_MAX);
  CHECK_THROWS_WITH(parse_op_csv(with_time_us("--1.500"), "x.csv"), Contains("x.csv:2: column time_us: bad number"));
  CHECK_THROWS_WITH(parse_op_csv(with_time_us("1.-50"), "x.csv"), Contains("x.csv:2: column time_us: bad number"));
  CHECK_THROWS_WITH(parse_op_csv(with_time_us("9223372036854775.808"), "x.csv"),
                    Contains("x.csv:2: column time_us: '9223372036854775.808' is out of range"));
}

TEST_CASE("timeline samples of an op are tidy Samples the runner can merge", "[workloads]") {
  auto s = op_samples(rec(3, 2, 0, 2'000'000, 500'000));
  REQUIRE(s.size() == 4);
  CHECK(s[0].signal == "reconfig_wait");
  CHECK(s[0].value == Approx(0.5));
  CHECK(s[0].unit == "ms");
  CHECK(s[1].signal == "op_start");
  CHECK(s[1].value == 1'000'000);
  CHECK(s[2].signal == "op_end");
  CHECK(s[2].value == Approx(2.0));
  CHECK(s[3].signal == "busbw");
  CHECK(s[3].value == Approx(0.5));
  for (const auto& x : s) {
    CHECK(x.source == "collbench");
    CHECK(x.subject == "r3/dp-s0/allreduce#0");
    CHECK(x.host == "h2");
  }
  CHECK(op_samples(rec(0, 1, 1, 10)).size() == 3);  // no wait, no reconfig_wait sample
}

TEST_CASE("the table takes the slowest rank per step, averages measured steps, counts wrong data", "[workloads]") {
  std::vector<OpRecord> all;
  for (int rank = 0; rank < 2; ++rank) {
    all.push_back(rec(rank, 0, 0, 50'000'000));  // warm-up: left out of the times
    all.push_back(rec(rank, 1, 0, rank == 0 ? 1'000'000 : 2'000'000, rank == 0 ? 100'000 : 300'000));
    all.push_back(rec(rank, 2, 0, rank == 0 ? 4'000'000 : 3'000'000));
  }
  all[1].wrong = 2;
  auto rows = summarize(all);
  REQUIRE(rows.size() == 1);
  CHECK(rows[0].steps == 2);
  CHECK(rows[0].time_us == Approx(3000.0));  // mean of 2 ms and 4 ms
  CHECK(rows[0].wait_us == Approx(150.0));   // mean of max(0.1, 0.3) ms and 0
  CHECK(rows[0].algbw == Approx(1e6 / 3e-3 / 1e9));
  CHECK(rows[0].busbw == Approx(rows[0].algbw));
  CHECK(rows[0].wrong == 2);
  Schedule s;
  s.name = "t";
  s.origin = "t.yaml";
  s.ranks = 2;
  s.steps = 2;
  s.warmup = 1;
  std::stringstream out;
  print_table(out, s, "verbs", rows, all);
  INFO(out.str());
  CHECK_THAT(out.str(), Contains("# ocslab-collbench-verbs: schedule 't' (t.yaml), 2 rank(s)"));
  CHECK_THAT(out.str(), Contains("allreduce"));
  CHECK_THAT(out.str(), Contains("3000.0"));
  CHECK_THAT(out.str(), Contains("# Out of bounds values : 2 FAILED"));
  CHECK_THAT(out.str(), Contains("# Avg step time        : 3.150 ms"));  // (max(1.1, 2.3) + max(4, 3)) / 2
}

TEST_CASE("the barrier column is the last one; files written before it still read", "[workloads]") {
  REQUIRE(op_csv_columns().back() == "barrier");
  OpRecord asked = rec(0, 1, 0, 1'000);
  asked.phase = "reconfigured";
  asked.barrier = true;
  OpRecord granted = rec(0, 1, 1, 1'000);
  granted.phase = "ready";
  auto f = op_csv_fields(asked);
  CHECK(f.back() == "1");
  CHECK(op_csv_fields(granted).back() == "0");
  auto back = parse_op_csv(encode_records({asked, granted}), "new.csv");
  REQUIRE(back.size() == 2);
  CHECK(back[0].barrier);
  CHECK_FALSE(back[1].barrier);
  // An older file: every row and the header without the barrier column.
  auto join = [](std::vector<std::string> v) {
    v.pop_back();
    std::string line;
    for (const auto& x : v) line += (line.empty() ? "" : ",") + x;
    return line + "\n";
  };
  std::string old = join(op_csv_columns()) + join(op_csv_fields(asked));
  auto rows = parse_op_csv(old, "old.csv");
  REQUIRE(rows.size() == 1);
  CHECK(rows[0].phase == "reconfigured");
  CHECK(rows[0].duration_ns == 1'000);
  CHECK_FALSE(rows[0].barrier);  // unknown in an older file: read as no round trip
  // A barrier cell that is neither 0 nor 1 is refused, naming the column.
  auto cells = op_csv_fields(asked);
  cells.back() = "yes";
  cells.push_back("x");  // join drops the last cell
  CHECK_THROWS_WITH(parse_op_csv(encode_records({}) + join(cells), "bad.csv"),
                    Contains("bad.csv:2: column barrier: want 0 or 1, got 'yes'"));
}
