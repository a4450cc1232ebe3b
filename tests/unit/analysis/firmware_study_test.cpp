// The firmware study's analysis (analysis/firmware_study.h): per sweep point of meta.json's
// firmware_sweep, the breakdown rows of its own iterations only, the firmware link-up over the
// rows that came up, the rows whose link stayed down, the interval between its commands, the
// Opus figure of each preset; firmware_study.csv's columns and a malformed section refused. Read
// from the timeline: a link still down at the command that comes up is counted as up.
#include <fmt/format.h>
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "ocslab/analysis/firmware_study.h"
#include "ocslab/common/error.h"

namespace firmware_study_test {

using namespace ocslab::analysis;
using Catch::Matchers::Contains;

namespace {

constexpr int64_t kMs = 1'000'000;

// Timeline rows of one port in iteration i, its command issued at issued_ms: light lost 1 ms
// after, back 30 ms after; the link down at 2 ms when it was up (link_was_up) and up `up_ms`
// after the light (none: stayed down).
std::string port_rows(int i, int64_t issued_ms, std::optional<int64_t> up_ms, const std::string& host,
                      bool link_was_up = true) {
  auto row = [&](int64_t t_ms, const char* signal, int v) {
    return fmt::format("{},{},emulator,eth1,{},{},bool,r,{}\n", (issued_ms + t_ms) * kMs, host, signal, v, i);
  };
  std::string out = row(1, "light", 0);
  if (link_was_up) out += row(2, "link", 0);
  out += row(30, "light", 1);
  if (up_ms) out += row(30 + *up_ms, "link", 1);
  return out;
}

std::string command(int i, int64_t issued_ms) {
  return fmt::format("{},switch,ocs,pairs-b,command,1,,r,{}\n", issued_ms * kMs, i);
}

Timeline timeline(const std::string& rows) {
  return parse_timeline("t_ns,host,source,subject,signal,value,unit,run,iteration\n" + rows, "timeline.csv");
}

}  // namespace

TEST_CASE("firmware study: each point's rows, link-up stats, links that stayed down, its interval",
          "[analysis][firmware-study]") {
  // point 1 (iterations 1-3, dwell 10 s): h2's link never comes up in iteration 1, and comes up
  // in 2 although it was still down at the command (no down edge there); point 2 (4-5, the
  // last two): h2's link in 5 comes up after 10.5 s, later than the point's interval after the
  // command (no next command ends the iteration, the next point's waits do): not up in time.
  std::string rows = command(1, 0) + port_rows(1, 0, 6000, "h1") + port_rows(1, 0, std::nullopt, "h2") +
                     command(2, 10040) + port_rows(2, 10040, 6200, "h1") + port_rows(2, 10040, 7000, "h2", false) +
                     command(3, 20080) + port_rows(3, 20080, 5800, "h1") + port_rows(3, 20080, 6100, "h2") +
                     command(4, 30000) + port_rows(4, 30000, 3000, "h1") + command(5, 40050) +
                     port_rows(5, 40050, 3100, "h1") + port_rows(5, 40050, 10500, "h2");
  // A port whose light never went out (its circuit stayed) counts nowhere.
  rows += "20081000000,h3,emulator,eth1,link,1,bool,r,3\n";
  const Timeline tl = timeline(rows);
  std::vector<FirmwarePoint> points = {{"cx6dx-autoneg", 10, 1, 3, 6000}, {"fast", 10, 4, 5, std::nullopt}};
  auto st = firmware_study(tl, points);
  REQUIRE(st.size() == 2);
  CHECK(st[0].reconfigurations == 3);
  CHECK(st[0].rows == 6);
  CHECK(st[0].up == 5);
  CHECK(st[0].not_up == 1);
  CHECK(*st[0].min_ms == Approx(5800));
  CHECK(*st[0].median_ms == Approx(6100));
  CHECK(*st[0].max_ms == Approx(7000));
  CHECK(*st[0].mean_ms == Approx((6000 + 6200 + 7000 + 5800 + 6100) / 5.0));
  CHECK(*st[0].interval_s == Approx(10.04));
  CHECK(*st[0].opus_ms == 6000);
  CHECK(st[1].reconfigurations == 2);
  CHECK(st[1].rows == 3);
  CHECK(st[1].up == 2);
  CHECK(st[1].not_up == 1);
  CHECK(*st[1].max_ms == Approx(3100));
  CHECK(*st[1].interval_s == Approx(10.05));
  CHECK(!st[1].opus_ms);
  CHECK(!st[1].point.model_up_mean_ms);

  std::ostringstream csv;
  write_firmware_study_csv(st, csv);
  std::istringstream in(csv.str());
  std::string header, first;
  std::getline(in, header);
  std::getline(in, first);
  CHECK(header ==
        "nic_model,dwell_s,interval_s,model_up_mean_ms,opus_ms,first_iteration,last_iteration,reconfigurations,rows,up,"
        "not_up,firmware_min_ms,firmware_median_ms,firmware_p90_ms,firmware_max_ms,firmware_mean_ms");
  CHECK_THAT(first, Contains("cx6dx-autoneg,10,10.040,6000,6000,1,3,3,6,5,1,5800.000,6100.000,"));
  const std::string text = firmware_study_text(st);
  CHECK_THAT(text, Contains("Opus (ConnectX-6 Dx): about 6 s with auto-negotiation, 3 s without, up to about 10 s"));
  // A point whose links never came up: no link-up figures, every row not_up.
  st = firmware_study(timeline(command(1, 0) + port_rows(1, 0, std::nullopt, "h1") + command(2, 400) +
                               port_rows(2, 400, std::nullopt, "h1", false)),
                      {{"fast", 0.4, 1, 2, 600}});
  CHECK(st[0].rows == 2);
  CHECK(st[0].not_up == 2);
  CHECK(!st[0].median_ms);
  CHECK(firmware_study_text(st).find("Opus") == std::string::npos);  // no preset: no reference
}

TEST_CASE("firmware study: meta.json's firmware_sweep, or none", "[analysis][firmware-study]") {
  using nlohmann::json;
  CHECK(firmware_points_from_meta(json::object(), "meta.json").empty());
  json meta = {{"firmware_sweep",
                {{"points",
                  {{{"nic_model", "cx6dx-autoneg"},
                    {"dwell_s", 5},
                    {"first_iteration", 1},
                    {"last_iteration", 3},
                    {"model_up_mean_ms", 6000.0}},
                   {{"nic_model", "lab"}, {"dwell_s", 2.5}, {"first_iteration", 4}, {"last_iteration", 6}}}}}}};
  auto p = firmware_points_from_meta(meta, "meta.json");
  REQUIRE(p.size() == 2);
  CHECK(p[0].model_up_mean_ms == 6000.0);
  CHECK(p[1].dwell_s == 2.5);
  CHECK(!p[1].model_up_mean_ms);
  meta["firmware_sweep"]["points"][1]["last_iteration"] = 2;
  CHECK_THROWS_WITH(firmware_points_from_meta(meta, "meta.json"), Contains("meta.json: firmware_sweep: point lab"));
  meta["firmware_sweep"]["points"][1].erase("dwell_s");
  CHECK_THROWS_AS(firmware_points_from_meta(meta, "meta.json"), ocslab::ConfigError);
  CHECK_THROWS_AS(firmware_points_from_meta(json{{"firmware_sweep", 1}}, "meta.json"), ocslab::ConfigError);
  CHECK(opus_reference_ms("cx6dx-no-autoneg") == 3000.0);
  CHECK(!opus_reference_ms("ideal"));
}

}  // namespace firmware_study_test
