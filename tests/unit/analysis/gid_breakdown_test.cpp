// The gid probe's rows in the breakdown and the summary: the gid_changes / neigh_changes
// columns, and the flag for a reconfiguration after which a GID index no longer holds the
// address it held (an address removed and re-added at another index between mappings), on
// hand-made runner timelines.
#include <catch2/catch.hpp>

#include <fmt/format.h>
#include <sstream>
#include <string>

#include "ocslab/analysis/breakdown.h"
#include "ocslab/analysis/summary.h"
#include "ocslab/analysis/timeline.h"

using namespace ocslab::analysis;

// Named, so that the helpers do not meet the other tests' in the unity build.
namespace gid_breakdown_test {

namespace {

constexpr int64_t kMs = 1'000'000;
constexpr int64_t kS = 1'000'000'000;
constexpr int64_t kT0 = 1'763'800'000'000'000'000;

struct GidTimeline {
  std::string text = "t_ns,host,source,subject,signal,value,unit,run,iteration\n";
  void row(int64_t t, const std::string& host, const std::string& source, const std::string& subject,
           const std::string& signal, const std::string& value, int iteration, const std::string& unit = "bool") {
    text += fmt::format("{},{},{},{},{},{},{},r1,{}\n", t, host, source, subject, signal, value, unit, iteration);
  }
  // The gid probe's table at start on h1/eth1 and h2/eth1, and two reconfigurations whose
  // carriers go down and up.
  GidTimeline() {
    for (const char* h : {"h1", "h2"}) {
      row(kT0 - 5 * kS, h, "carrier", "eth1", "carrier", "1", 0);
      row(kT0 - 5 * kS, h, "gid", fmt::format("rxe_eth1/1/eth1"), "gid", "0", 0, "roce_v2 fe80::5054:ff:fe12:3401");
      row(kT0 - 5 * kS, h, "gid", "rxe_eth1/1/eth1", "gid", "1", 0,
          std::string("roce_v2 ::ffff:10.10.0.") + (h[1] == '1' ? "1" : "2"));
      row(kT0 - 5 * kS, h, "gid", "eth1@10.10.0.9", "neigh", "128", 0, "PERMANENT 52:54:00:12:34:09");
    }
    for (int it = 1; it <= 2; ++it) {
      const int64_t t = kT0 + (it - 1) * 10 * kS;
      row(t, "switch", "ocs", fmt::format("map-{}", it), "command", "1", it);
      row(t + 5 * kMs, "switch", "ocs", fmt::format("map-{}", it), "ack", "1", it);
      for (const char* h : {"h1", "h2"}) {
        row(t + 10 * kMs, h, "carrier", "eth1", "carrier", "0", it);
        row(t + 200 * kMs, h, "carrier", "eth1", "carrier", "1", it);
      }
    }
  }
};

Breakdown analyze(const std::string& text) { return compute_breakdown(parse_timeline(text, "t.csv")); }

const BreakdownRow& row_of(const Breakdown& b, int iteration, const std::string& host) {
  for (const auto& r : b.rows)
    if (r.iteration == iteration && r.host == host) return r;
  FAIL("no row " << iteration << " " << host);
  return b.rows.front();
}

}  // namespace

TEST_CASE("gid: no GID change across the reconfigurations, no flag", "[gid]") {
  GidTimeline tl;
  // Neighbour churn alone is counted and never flagged.
  tl.row(kT0 + 50 * kMs, "h1", "gid", "eth1@10.10.0.2", "neigh_removed", "2", 1, "REACHABLE 52:54:00:12:34:02");
  Breakdown b = analyze(tl.text);
  CHECK(b.has_gid);
  REQUIRE(b.rows.size() == 4);
  for (const auto& r : b.rows) {
    CHECK(r.status == Status::kOk);
    CHECK(r.gid_changes == 0);
    CHECK(r.gid_lost.empty());
  }
  CHECK(row_of(b, 1, "h1").neigh_changes == 1);
  CHECK(gid_text(b).empty());
  auto j = gid_json(b);
  CHECK(j["gid_changes"] == 0);
  CHECK(j["neigh_changes"] == 1);
  CHECK(j["flags"].empty());
  SummaryContext c;
  c.timeline = "t.csv";
  CHECK(summary_text(b, summarize(b), c).find("GID") == std::string::npos);

  std::ostringstream csv;
  write_breakdown_csv(b, csv);
  std::string header = csv.str().substr(0, csv.str().find('\n'));
  CHECK(header.size() > std::string(",gid_changes,neigh_changes").size());
  CHECK(header.substr(header.size() - std::string(",gid_changes,neigh_changes").size()) ==
        ",gid_changes,neigh_changes");
  CHECK(csv.str().find("\nr1,1,map-1,h1,eth1,ok,") != std::string::npos);
}

TEST_CASE("gid: an address removed and re-added at another index between mappings is flagged", "[gid]") {
  GidTimeline tl;
  // On h1, after reconfiguration 1 and before 2: ::ffff:10.10.0.1 leaves index 1 and comes back
  // at index 2 (the kernel's lowest free slot at that moment).
  const int64_t t = kT0 + 3 * kS;
  tl.row(t, "h1", "gid", "rxe_eth1/1/eth1", "gid_removed", "1", 1, "roce_v2 ::ffff:10.10.0.1");
  tl.row(t + 100 * kMs, "h1", "gid", "rxe_eth1/1/eth1", "gid_added", "2", 1, "roce_v2 ::ffff:10.10.0.1");
  Breakdown b = analyze(tl.text);
  const BreakdownRow& r = row_of(b, 1, "h1");
  CHECK(r.gid_changes == 2);
  REQUIRE(r.gid_lost.size() == 1);
  CHECK(r.gid_lost[0].table == "rxe_eth1/1");
  CHECK(r.gid_lost[0].index == 1);
  CHECK(r.gid_lost[0].held == "roce_v2 ::ffff:10.10.0.1");
  CHECK(r.gid_lost[0].now.empty());
  CHECK(r.gid_lost[0].moved_to == 2);
  CHECK(r.status == Status::kOk);  // the layers came back: the GID is a finding of its own
  // The other host and the next reconfiguration (which starts from the moved table) are clean.
  CHECK(row_of(b, 1, "h2").gid_lost.empty());
  CHECK(row_of(b, 2, "h1").gid_lost.empty());
  CHECK(row_of(b, 2, "h1").gid_changes == 0);

  const std::string text = gid_text(b);
  CHECK(text ==
        "GID tables: 1 reconfiguration(s) left a GID index without the address it held (2 GID change(s), 0 "
        "neighbour change(s))\n"
        "reconfiguration 1 (run r1, mapping map-1): h1/eth1 GID index 1 of rxe_eth1/1 no longer holds roce_v2 "
        "::ffff:10.10.0.1 (now empty; the address is at index 2): a queue pair created with it sends from a GID that "
        "is gone\n");
  SummaryContext c;
  c.timeline = "t.csv";
  CHECK(summary_text(b, summarize(b), c).find(text) != std::string::npos);
  auto j = summary_json(b, summarize(b), c);
  REQUIRE(j["gid"]["flags"].size() == 1);
  CHECK(j["gid"]["flags"][0]["iteration"] == 1);
  CHECK(j["gid"]["flags"][0]["index"] == 1);
  CHECK(j["gid"]["flags"][0]["moved_to"] == 2);

  std::ostringstream csv;
  write_breakdown_csv(b, csv);
  CHECK(csv.str().find("\nr1,1,map-1,h1,eth1,ok,") != std::string::npos);
  // The row's last two fields: 2 GID changes, 0 neighbour changes.
  auto line_at = csv.str().find("\nr1,1,map-1,h1,eth1,");
  auto line = csv.str().substr(line_at + 1, csv.str().find('\n', line_at + 1) - line_at - 1);
  CHECK(line.substr(line.size() - 4) == ",2,0");
}

TEST_CASE("gid: the same address back at the same index, or a link-local change, is no flag", "[gid]") {
  GidTimeline tl;
  const int64_t t = kT0 + 3 * kS;
  tl.row(t, "h1", "gid", "rxe_eth1/1/eth1", "gid_removed", "1", 1, "roce_v2 ::ffff:10.10.0.1");
  tl.row(t + 100 * kMs, "h1", "gid", "rxe_eth1/1/eth1", "gid_added", "1", 1, "roce_v2 ::ffff:10.10.0.1");
  tl.row(t, "h2", "gid", "rxe_eth1/1/eth1", "gid_changed", "0", 1, "roce_v2 fe80::5054:ff:fe12:3499");
  Breakdown b = analyze(tl.text);
  CHECK(row_of(b, 1, "h1").gid_changes == 2);
  CHECK(row_of(b, 1, "h2").gid_changes == 1);
  for (const auto& r : b.rows) CHECK(r.gid_lost.empty());
  CHECK(gid_text(b) ==
        "GID tables: 3 GID change(s), 0 neighbour change(s); every GID index kept the address it held\n");
}

TEST_CASE("gid: an address replaced by another at its index is flagged with what the index holds now", "[gid]") {
  GidTimeline tl;
  tl.row(kT0 + 10 * kS + 50 * kMs, "h2", "gid", "rxe_eth1/1/eth1", "gid_changed", "1", 2, "roce_v2 ::ffff:10.10.0.22");
  Breakdown b = analyze(tl.text);
  const BreakdownRow& r = row_of(b, 2, "h2");
  REQUIRE(r.gid_lost.size() == 1);
  CHECK(r.gid_lost[0].now == "roce_v2 ::ffff:10.10.0.22");
  CHECK_FALSE(r.gid_lost[0].moved_to);
  CHECK(
      gid_text(b).find("reconfiguration 2 (run r1, mapping map-2): h2/eth1 GID index 1 of rxe_eth1/1 no longer "
                       "holds roce_v2 ::ffff:10.10.0.2 (now roce_v2 ::ffff:10.10.0.22; the address is in no index)") !=
      std::string::npos);
}

TEST_CASE("gid: a timeline without gid rows keeps its breakdown columns", "[gid]") {
  std::string text = "t_ns,host,source,subject,signal,value,unit\n";
  text += fmt::format("{},h1,carrier,eth1,carrier,1,bool\n", kT0);
  Breakdown b = analyze(text);
  CHECK_FALSE(b.has_gid);
  std::ostringstream csv;
  write_breakdown_csv(b, csv);
  CHECK(csv.str().find("gid_changes") == std::string::npos);
  CHECK(summary_json(b, summarize(b), {}).contains("gid") == false);
}

}  // namespace gid_breakdown_test
