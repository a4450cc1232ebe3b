// The survival analysis on a timeline laid out by hand: two settings, t12 r2 (T = 16.777216 ms,
// predicted boundary 2 x T = 33.554 ms; Soft-RoCE at HZ=250: 4 jiffies = 16 ms, x 2 = 32 ms) on
// both ends of a pair, and t10 r1 (T = 4.194304 ms; Soft-RoCE 1 jiffy = 4 ms) on h1 only, through
// outages of 5, 20 and 50 ms, twice each (iterations 1..6), then a 20 ms outage the lab did not
// apply (iteration 7, ack 0). Every outage: command at C, ack at C + 1 ms, both NICs dark at
// C + 2 ms for the planned length + 0.25 ms.
//   t12 r2:  5 ms: untouched (1), survived (4);  20 ms: survived;  50 ms: errored 3 x T after the
//            light went out, re-created 7 ms after it came back. Measured: survives <= 20,
//            errors >= 50: 33.554 lies between, agrees.
//   t10 r1:  5 and 20 ms: survived (iteration 5's stall starts before the command);  50 ms:
//            errored 2 x T after the light went out (3), stalled to the end (6). Measured the same
//            boundary, but 4.194 ms is below 5 ms, more than one grid step under 20: disagrees.
#include <fmt/format.h>
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "analyze_cli_support.h"
#include "ocslab/analysis/survival.h"
#include "ocslab/common/error.h"

using namespace ocslab::analysis;
using analyze_cli_support::Dir;
using Catch::Matchers::Contains;

namespace {

constexpr int64_t kSurvMs = 1'000'000;
constexpr int64_t kSurvT0 = 1'800'000'000'000'000'000;
const std::string kSurvT12 = "rxe_eth1/eth1@h2:t12r2", kSurvT12Server = "rxe_eth1/eth1@h1:t12r2",
                  kSurvT10 = "rxe_eth1/eth1@h2:t10r1";

struct OutageRow {
  int64_t t;
  std::string host, source, subject, signal, value;
  int iteration;
};

int64_t outage_command_at(int k) { return kSurvT0 + k * 1000 * kSurvMs; }

// The timeline described at the top of the file, sorted by time as the runner writes it.
std::string survival_timeline() {
  const double planned[] = {5, 20, 50, 5, 20, 50, 20};
  std::vector<OutageRow> rows;
  auto add = [&](int64_t t, std::string host, std::string source, std::string subject, std::string signal,
                 std::string value, int k) {
    rows.push_back({t, host, source, subject, signal, value, k});
  };
  for (int k = 1; k <= 7; ++k) {
    const int64_t c = outage_command_at(k), lost = c + 2 * kSurvMs;
    const auto dark = static_cast<int64_t>(planned[k - 1] * kSurvMs) + kSurvMs / 4;
    const std::string subject = fmt::format("outage-{}ms", planned[k - 1]);
    add(c, "switch", "ocs", subject, "command", "1", k);
    add(c + kSurvMs, "switch", "ocs", subject, "ack", k == 7 ? "0" : "1", k);
    add(c + 100 * kSurvMs, "h1", "rdma", kSurvT12, "completion", "0", k);  // many in a real run
    add(c + 100 * kSurvMs, "h1", "heartbeat", "agent", "heartbeat", "1", k);
    if (k == 7) continue;
    for (std::string h : {"h1", "h2"}) {
      add(lost, h, "emulator", "eth1", "light", "0", k);
      add(lost + dark, h, "emulator", "eth1", "light", "1", k);
    }
    const int64_t back = lost + dark;
    // t12 r2 on both ends
    for (auto [host, subject] : {std::pair{"h1", kSurvT12}, std::pair{"h2", kSurvT12Server}}) {
      if (k == 1) continue;  // untouched
      add(c + 3 * kSurvMs / 2, host, "rdma", subject, "stalled", "1", k);
      if (planned[k - 1] == 50) {
        // The requester's retries run out (3 x T: IBV_WC_RETRY_EXC_ERR); the responder has no
        // timer: its queue pair is re-created with the requester's, without an error of its own.
        if (std::string(host) == "h1") add(lost + 50'331'648, host, "rdma", subject, "qp_error", "12", k);
        add(back + 7 * kSurvMs, host, "rdma", subject, "qp_recreated", "4711", k);
        add(back + 9 * kSurvMs, host, "rdma", subject, "resumed", "60", k);
      } else {
        add(back + 3 * kSurvMs, host, "rdma", subject, "resumed", "25", k);
      }
    }
    // t10 r1 on h1
    add(k == 5 ? c - 2 * kSurvMs / 5 : c + 3 * kSurvMs / 2, "h1", "rdma", kSurvT10, "stalled", "1", k);
    if (k == 3) {
      add(lost + 8'388'608, "h1", "rdma", kSurvT10, "qp_error", "12", k);  // 2 x T
      add(back + 7 * kSurvMs, "h1", "rdma", kSurvT10, "qp_recreated", "4712", k);
      add(back + 8 * kSurvMs, "h1", "rdma", kSurvT10, "resumed", "60", k);
    } else if (k != 6) {
      add(back + 3 * kSurvMs, "h1", "rdma", kSurvT10, "resumed", "25", k);
    }
    // Not a survival probe: ignored.
    add(c + 3 * kSurvMs / 2, "h1", "rdma", "rxe_eth1/eth1@h2", "stalled", "1", k);
  }
  std::stable_sort(rows.begin(), rows.end(), [](const OutageRow& a, const OutageRow& b) { return a.t < b.t; });
  std::string text = "t_ns,host,source,subject,signal,value,unit,run,iteration\n";
  for (const auto& r : rows)
    text +=
        fmt::format("{},{},{},{},{},{},,surv,{}\n", r.t, r.host, r.source, r.subject, r.signal, r.value, r.iteration);
  return text;
}

const SurvivalRow& row_of(const Survival& s, int iteration, const std::string& host, int timeout) {
  for (const auto& r : s.rows)
    if (r.iteration == iteration && r.host == host && r.timeout == timeout) return r;
  FAIL("no row for iteration " << iteration << " " << host << " t" << timeout);
  throw;
}

const SurvivalSetting& setting_of(const Survival& s, int timeout) {
  for (const auto& set : s.settings)
    if (set.timeout == timeout) return set;
  FAIL("no setting t" << timeout);
  throw;
}

}  // namespace

TEST_CASE("Soft-RoCE rounds the ACK timeout down to whole jiffies, at least one", "[survival]") {
  // HZ=250: a jiffy is 4 ms.
  CHECK(softroce_survivable_outage_ns(12, 1) == 16 * kSurvMs);  // 16.777216 ms -> 4 jiffies
  CHECK(softroce_survivable_outage_ns(12, 2) == 32 * kSurvMs);
  CHECK(softroce_survivable_outage_ns(10, 1) == 4 * kSurvMs);  // 4.194304 ms -> 1 jiffy
  CHECK(softroce_survivable_outage_ns(2, 1) == 4 * kSurvMs);   // 16.384 us -> 0 jiffies -> at least 1
  CHECK(softroce_survivable_outage_ns(2, 3) == 12 * kSurvMs);
  CHECK(softroce_survivable_outage_ns(12, 0) == 0);  // survives no outage, as on hardware
  // HZ=1000: 1 ms jiffies; HZ=100: 10 ms; HZ=300: 3.333 ms, 16.777216 ms -> 5 jiffies.
  CHECK(softroce_survivable_outage_ns(12, 1, 1000) == 16 * kSurvMs);
  CHECK(softroce_survivable_outage_ns(10, 2, 1000) == 8 * kSurvMs);
  CHECK(softroce_survivable_outage_ns(12, 1, 100) == 10 * kSurvMs);
  CHECK(softroce_survivable_outage_ns(12, 1, 300) == 16'666'666);  // 5 jiffies = 5e9 / 300 ns, rounded down
  // Unbounded: no timer, or retry_cnt 7 (rxe_comp.c never counts it down).
  CHECK_FALSE(softroce_survivable_outage_ns(0, 3).has_value());
  CHECK_FALSE(softroce_survivable_outage_ns(14, 7).has_value());
  CHECK_THROWS_WITH(softroce_survivable_outage_ns(12, 1, 0), "hz must be in [1, 100000], got 0");
  CHECK_THROWS_WITH(softroce_survivable_outage_ns(32, 1), "timeout must be in [0, 31], got 32");
  CHECK_THROWS_WITH(softroce_survivable_outage_ns(12, 8), "retry_cnt must be in [0, 7], got 8");
}

TEST_CASE("a survival probe's subject ends in :t<timeout>r<retry_cnt>", "[survival]") {
  auto s = parse_survival_subject("rxe_eth1/eth1@h2:t12r2");
  REQUIRE(s);
  CHECK(s->device == "rxe_eth1");
  CHECK(s->interface == "eth1");
  CHECK(s->peer == "h2");
  CHECK(s->timeout == 12);
  CHECK(s->retry_cnt == 2);
  CHECK_FALSE(parse_survival_subject("rxe_eth1/eth1@h2"));
  CHECK_FALSE(parse_survival_subject("rxe_eth1/eth1@h2:t12"));
  CHECK_FALSE(parse_survival_subject("rxe_eth1/eth1@h2:t12r2x"));
  CHECK_FALSE(parse_survival_subject("rxe_eth1/eth1@h2:tr2"));
  CHECK_THROWS_WITH(parse_survival_subject("rxe0/eth1@h2:t40r2"), Contains("timeout must be in [0, 31]"));
  CHECK_THROWS_WITH(parse_survival_subject("rxe0/eth1@h2:t12r8"), Contains("retry_cnt in [0, 7]"));
}

TEST_CASE("each outage x probe gets its outcome and its times from the NIC's light", "[survival]") {
  Survival s = parse_survival(survival_timeline(), "timeline.csv");
  CHECK(s.probes == 3);
  CHECK(s.outages == 7);
  CHECK(s.not_applied == 1);
  CHECK(s.grid == std::vector<double>{5, 20, 50});
  REQUIRE(s.rows.size() == 21);  // 7 outages x 3 probes

  const SurvivalRow& untouched = row_of(s, 1, "h1", 12);
  CHECK(untouched.outcome == Outcome::kUntouched);
  CHECK(untouched.outage_ms == 5);
  CHECK(untouched.dark_ms == Approx(5.25));
  CHECK(untouched.predicted_survive);
  CHECK_FALSE(untouched.resume_after_light_ms);

  const SurvivalRow& survived = row_of(s, 4, "h2", 12);
  CHECK(survived.outcome == Outcome::kSurvived);
  CHECK(survived.peer == "h1");
  CHECK(survived.resume_after_light_ms == Approx(3.0));
  CHECK_FALSE(survived.error_after_ms);

  const SurvivalRow& errored = row_of(s, 6, "h1", 12);
  CHECK(errored.outcome == Outcome::kErrored);
  CHECK_FALSE(errored.predicted_survive);
  CHECK_FALSE(errored.softroce_survive);
  CHECK(*errored.error_after_ms == Approx(50.331648));
  CHECK(*errored.recreated_after_light_ms == Approx(7.0));
  CHECK_FALSE(errored.resume_after_light_ms);

  // t10 r1: survives 5 ms where both bounds say error; its stall in iteration 5 began before the
  // command (the last good completion), and still belongs to that outage.
  const SurvivalRow& early = row_of(s, 5, "h1", 10);
  CHECK(early.outcome == Outcome::kSurvived);
  CHECK(early.resume_after_light_ms == Approx(3.0));
  CHECK_FALSE(row_of(s, 1, "h1", 10).predicted_survive);
  CHECK(row_of(s, 1, "h1", 10).outcome == Outcome::kSurvived);
  const SurvivalRow& error10 = row_of(s, 3, "h1", 10);
  CHECK(error10.outcome == Outcome::kErrored);
  CHECK(*error10.error_after_ms == Approx(8.388608));
  CHECK(*error10.recreated_after_light_ms == Approx(7.0));
  CHECK(row_of(s, 6, "h1", 10).outcome == Outcome::kStalled);
  CHECK(row_of(s, 7, "h1", 10).outcome == Outcome::kNotApplied);
  CHECK_FALSE(row_of(s, 7, "h1", 10).dark_ms);
}

TEST_CASE("the matrix: counts per length, measured and predicted boundaries, agrees", "[survival]") {
  Survival s = parse_survival(survival_timeline(), "timeline.csv");
  REQUIRE(s.settings.size() == 2);
  const SurvivalSetting& t12 = setting_of(s, 12);
  REQUIRE(t12.points.size() == 3);
  // Counted per queue pair: h1 -> h2 and h2 -> h1 are its two ends, errored when either errored
  // (the responder h2 survived in its own rows at 50 ms: its pair was re-created).
  CHECK(std::tie(t12.points[0].survived, t12.points[0].untouched) == std::tuple{size_t{1}, size_t{1}});
  CHECK(t12.points[1].survived == 2);
  CHECK(std::tie(t12.points[2].errored, t12.points[2].survived) == std::tuple{size_t{2}, size_t{0}});
  CHECK(row_of(s, 6, "h2", 12).outcome == Outcome::kSurvived);
  CHECK(t12.longest_survived_ms == 20);
  CHECK(t12.shortest_errored_ms == 50);
  CHECK(*t12.predicted_ms == Approx(33.554432));
  CHECK(*t12.softroce_ms == Approx(32.0));
  CHECK(t12.verdict == Verdict::kAgrees);
  CHECK(t12.softroce_verdict == Verdict::kAgrees);

  const SurvivalSetting& t10 = setting_of(s, 10);
  CHECK(t10.points[0].survived == 2);
  CHECK(t10.points[1].survived == 2);  // the not-applied 20 ms outage is left out
  CHECK(std::tie(t10.points[2].errored, t10.points[2].stalled) == std::tuple{size_t{1}, size_t{1}});
  CHECK(t10.longest_survived_ms == 20);
  CHECK(t10.shortest_errored_ms == 50);
  CHECK(t10.verdict == Verdict::kDisagrees);
  CHECK(t10.softroce_verdict == Verdict::kDisagrees);

  const std::string summary = survival_summary(s);
  CHECK(summary ==
        "survival     7 outage(s) of 5, 20, 50 ms; 2 setting(s), 3 probe(s), 21 row(s); 1 outage(s) not applied "
        "(ack 0), left out\n"
        "t10 r1: survives <= 20 ms, errors >= 50 ms; predicted 4.194 ms (Soft-RoCE 4.000 ms at HZ=250): disagrees; "
        "1 row(s) stalled to the end\n"
        "t12 r2: survives <= 20 ms, errors >= 50 ms; predicted 33.554 ms (Soft-RoCE 32.000 ms at HZ=250): agrees\n"
        "disagreements: t10 r1 (Soft-RoCE bound: t10 r1)\n");
}

TEST_CASE("a prediction agrees within one grid step of the measured interval", "[survival]") {
  const std::vector<double> grid{5, 20, 50, 100};
  CHECK(judge_boundary(grid, 20, 50, 33.5) == Verdict::kAgrees);
  CHECK(judge_boundary(grid, 20, 50, 5) == Verdict::kAgrees);    // one step under 20
  CHECK(judge_boundary(grid, 20, 50, 100) == Verdict::kAgrees);  // one step over 50
  CHECK(judge_boundary(grid, 20, 50, 4.9) == Verdict::kDisagrees);
  CHECK(judge_boundary(grid, 20, 50, 100.1) == Verdict::kDisagrees);
  CHECK(judge_boundary(grid, 100, std::nullopt, 60) == Verdict::kAgrees);  // no errors: at least 50
  CHECK(judge_boundary(grid, 100, std::nullopt, 40) == Verdict::kDisagrees);
  CHECK(judge_boundary(grid, std::nullopt, 5, 19) == Verdict::kAgrees);  // errors everywhere
  CHECK(judge_boundary(grid, std::nullopt, 5, 21) == Verdict::kDisagrees);
  CHECK(judge_boundary(grid, 100, std::nullopt, std::nullopt) == Verdict::kAgrees);  // unbounded, no errors
  CHECK(judge_boundary(grid, 20, 100, std::nullopt) == Verdict::kDisagrees);
  CHECK(judge_boundary(grid, 50, 20, 30) == Verdict::kNotMonotone);
  CHECK(judge_boundary(grid, std::nullopt, std::nullopt, 30) == Verdict::kUndetermined);
}

TEST_CASE("survival.csv and survival_matrix.csv, written next to the timeline", "[survival]") {
  Dir dir;
  { std::ofstream(dir.path + "/timeline.csv") << survival_timeline(); }
  auto summary = write_survival(dir.path);
  REQUIRE(summary);
  CHECK_THAT(*summary, Contains("disagreements: t10 r1"));
  auto read = [&](const std::string& name) {
    std::ifstream f(dir.path + "/" + name);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
  };
  std::string csv = read("survival.csv");
  CHECK_THAT(csv, Contains("run,iteration,outage_ms,dark_ms,host,interface,peer,timeout,retry_cnt,predicted,"
                           "predicted_softroce,outcome,error_after_ms,resume_after_light_ms,"
                           "recreated_after_light_ms\n"));
  CHECK_THAT(csv, Contains("surv,3,50,50.250,h1,eth1,h2,12,2,error,error,errored,50.332,,7.000\n"));
  CHECK_THAT(csv, Contains("surv,1,5,5.250,h1,eth1,h2,10,1,error,error,survived,,3.000,\n"));
  CHECK_THAT(csv, Contains("surv,7,20,,h1,eth1,h2,10,1,error,error,not_applied,,,\n"));
  std::string matrix = read("survival_matrix.csv");
  CHECK_THAT(matrix, Contains("timeout,retry_cnt,outage_ms,survived,errored,stalled,untouched,"
                              "predicted_boundary_ms,softroce_boundary_ms\n"
                              "10,1,5,2,0,0,0,4.194,4.000\n10,1,20,2,0,0,0,4.194,4.000\n"
                              "10,1,50,0,1,1,0,4.194,4.000\n12,2,5,1,0,0,1,33.554,32.000\n"));

  // `ocslab analyze FOLDER` prints the survival lines after the summary.
  auto r = analyze_cli_support::run_cli({"analyze", dir.path});
  CHECK(r.rc == 0);
  CHECK_THAT(r.out, Contains("t12 r2: survives <= 20 ms, errors >= 50 ms; predicted 33.554 ms"));
}

TEST_CASE("a timeline without survival probes writes no survival files", "[survival]") {
  Dir dir;
  {
    std::ofstream(dir.path + "/timeline.csv") << "t_ns,host,source,subject,signal,value,unit,run,iteration\n"
                                                 "1,switch,ocs,map-1,command,1,,r,1\n"
                                                 "2,h1,rdma,rxe_eth1/eth1@h2,stalled,1,bool,r,1\n";
  }
  CHECK_FALSE(write_survival(dir.path));
  CHECK_FALSE(std::filesystem::exists(dir.path + "/survival.csv"));
  CHECK_FALSE(std::filesystem::exists(dir.path + "/survival_matrix.csv"));
  auto r = analyze_cli_support::run_cli({"analyze", dir.path});
  CHECK(r.rc == 0);
  CHECK_THAT(r.out, !Contains("survival"));
}

TEST_CASE("malformed survival rows are named by file:line", "[survival]") {
  const std::string head = "t_ns,host,source,subject,signal,value,unit,run,iteration\n";
  auto fails = [](const std::string& text) {
    try {
      parse_survival(text, "x.csv");
    } catch (const ocslab::ConfigError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  CHECK(fails("") == "x.csv:1: empty file, no header");
  CHECK(fails("t_ns,host,source,subject,signal\n") ==
        "x.csv:1: missing column 'value' (header: t_ns,host,source,subject,signal)");
  CHECK(fails(head + "1,switch,ocs,outage-5ms,command,1,,r,1\n2,switch,ocs,outage-xms,command,1,,r,2\n") ==
        "x.csv:3: outage subject 'outage-xms' is not outage-<positive length>ms");
  CHECK(fails(head + "1,switch,ocs,outage-0ms,command,1,,r,1\n") ==
        "x.csv:2: outage subject 'outage-0ms' is not outage-<positive length>ms");
  CHECK(fails(head + "1,switch,ocs,outage-5ms,command,1,,r,1\n2,switch,ocs,outage-5ms,command,1,,r,1\n") ==
        "x.csv:3: a second outage in iteration 1 (the first at line 2)");
  CHECK(fails(head + "1,h1,rdma,rxe0/eth1@h2:t12r2,stalled,1\n") == "x.csv:2: 6 field(s), the header has 9");
  CHECK(fails(head + "abc,h1,rdma,rxe0/eth1@h2:t12r2,stalled,1,,r,1\n") == "x.csv:2: bad number 'abc' in column t_ns");
  CHECK_THAT(fails(head + "1,h1,rdma,rxe0/eth1@h2:t40r2,stalled,1,,r,1\n"),
             Contains("x.csv:2: survival probe 'rxe0/eth1@h2:t40r2': timeout must be in [0, 31]"));
  CHECK(fails(head + "1,h1,emulator,eth1,light,x,,r,1\n") == "x.csv:2: bad number 'x' in column value");
  // Rows of other probes are not read, malformed or not.
  CHECK(fails(head + "1,h1,carrier,eth1,carrier\n") == "no error");
}
