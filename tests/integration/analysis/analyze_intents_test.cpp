// `ocslab analyze` on a results folder laid out as `ocslab run` writes it (timeline.csv and a
// meta.json with the spec's mappings, the initial mapping and each reconfiguration's mapping
// and outcome) where the mappings add and remove circuits: every row gets the intent its
// mappings give it and the status and timings that go with it.
#include <catch2/catch.hpp>

#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "ocslab/cli/ocslab_cli.h"
#include "ocslab/common/file.h"
#include "ocslab/testing/sshd_fixture.h"

using Catch::Matchers::Contains;

namespace {

constexpr int64_t kIntMs = 1'000'000;
constexpr int64_t kIntT0 = 1'800'000'000'000'000'000;

// breakdown.csv as maps keyed by column, the key "iteration/host".
std::map<std::string, std::map<std::string, std::string>> read_breakdown(const std::string& path) {
  std::istringstream in(ocslab::read_file_or_empty(path));
  std::string line;
  std::getline(in, line);
  auto split = [](const std::string& l) {
    std::vector<std::string> f;
    size_t at = 0;
    for (size_t c; (c = l.find(',', at)) != std::string::npos; at = c + 1) f.push_back(l.substr(at, c - at));
    f.push_back(l.substr(at));
    return f;
  };
  auto header = split(line);
  std::map<std::string, std::map<std::string, std::string>> rows;
  while (std::getline(in, line)) {
    auto f = split(line);
    REQUIRE(f.size() == header.size());
    std::map<std::string, std::string> r;
    for (size_t i = 0; i < f.size(); ++i) r[header[i]] = f[i];
    rows[r["iteration"] + "/" + r["host"]] = r;
  }
  return rows;
}

}  // namespace

TEST_CASE("ocslab analyze: circuits created and removed by the mappings are measured, not mislabelled",
          "[integration][analysis]") {
  ocslab::testing::TempDir tmp;
  const std::string dir = tmp.path() + "/partial-20261126-235000";
  std::filesystem::create_directories(dir);
  // full: h1-h2, h3-h4 (set up first). half: h1-h3 only.
  //   1 full -> half: h1, h3 move; h2, h4 go dark
  //   2 half -> full: h1, h3 move; h2, h4 come up (h4's carrier does not)
  //   3 full -> half: refused by the switch
  //   4 full again: the state before it is not known (3 failed): judged by edges alone
  std::ostringstream tl;
  tl << "t_ns,host,source,subject,signal,value,unit,run,iteration\n";
  auto row = [&](int64_t t, const std::string& h, const std::string& src, const std::string& sig, int v, int it) {
    tl << fmt::format("{},{},{},{},{},{},bool,partial-20261126-235000,{}\n", t, h, src,
                      h == "switch" ? (it % 2 ? "half" : "full") : "eth1", sig, v, it);
  };
  for (const char* h : {"h1", "h2", "h3", "h4"}) {
    row(kIntT0 - 1000 * kIntMs, h, "emulator", "light", 1, 0);
    row(kIntT0 - 1000 * kIntMs, h, "carrier", "carrier", 1, 0);
  }
  for (int it = 1; it <= 4; ++it) {
    const int64_t t = kIntT0 + (it - 1) * 10'000 * kIntMs;
    row(t, "switch", "ocs", "command", 1, it);
    row(t + 20 * kIntMs, "switch", "ocs", "ack", it == 3 ? 0 : 1, it);
    if (it == 3) continue;
    for (const char* h : {"h1", "h3"}) {  // moves
      row(t + 5 * kIntMs, h, "emulator", "light", 0, it);
      row(t + 6 * kIntMs, h, "carrier", "carrier", 0, it);
      row(t + 40 * kIntMs, h, "emulator", "light", 1, it);
      row(t + 140 * kIntMs, h, "carrier", "carrier", 1, it);
    }
    if (it == 1 || it == 4) {
      for (const char* h : {"h2", "h4"}) {  // dark
        row(t + 5 * kIntMs, h, "emulator", "light", 0, it);
        row(t + 6 * kIntMs, h, "carrier", "carrier", 0, it);
      }
    } else {
      row(t + 45 * kIntMs, "h2", "emulator", "light", 1, it);  // up from dark
      row(t + 160 * kIntMs, "h2", "carrier", "carrier", 1, it);
      row(t + 45 * kIntMs, "h4", "emulator", "light", 1, it);  // light only
    }
  }
  std::ofstream(dir + "/timeline.csv") << tl.str();
  nlohmann::json meta = {{"run", "partial-20261126-235000"},
                         {"reconfigurations",
                          {{{"iteration", 1}, {"mapping", "half"}, {"ok", true}},
                           {{"iteration", 2}, {"mapping", "full"}, {"ok", true}},
                           {{"iteration", 3}, {"mapping", "half"}, {"ok", false}},
                           {{"iteration", 4}, {"mapping", "full"}, {"ok", true}}}},
                         {"mappings",
                          {{"full", {{"h1", "eth1", "h2", "eth1"}, {"h3", "eth1", "h4", "eth1"}}},
                           {"half", {{"h1", "eth1", "h3", "eth1"}}}}},
                         {"initial_mapping", "full"}};
  std::ofstream(dir + "/meta.json") << meta.dump(2);

  std::ostringstream out, err;
  int rc = ocslab::cli::run_ocslab({"analyze", dir}, out, err);
  INFO(err.str());
  REQUIRE(rc == 0);
  CHECK_THAT(out.str(), Contains("reconfigs    4"));
  CHECK_THAT(out.str(), Contains("16 host/interface rows: 7 ok, 4 failed, 0 unaffected, 3 incomplete, 2 disconnected"));
  CHECK_THAT(out.str(), Contains("6 move, 2 up, 4 dark, 0 stay, 4 unknown"));

  auto rows = read_breakdown(dir + "/breakdown.csv");
  REQUIRE(rows.size() == 16);
  // 1: the removed circuits are disconnected, with when their light went.
  CHECK(rows["1/h1"]["status"] == "ok");
  CHECK(rows["1/h1"]["intent"] == "move");
  CHECK(rows["1/h2"]["status"] == "disconnected");
  CHECK(rows["1/h2"]["intent"] == "dark");
  CHECK(rows["1/h2"]["light_lost_ns"] == std::to_string(kIntT0 + 5 * kIntMs));
  CHECK(rows["1/h4"]["status"] == "disconnected");
  // 2: h2 came up: its link-up latency from the command; h4's carrier never came: incomplete.
  CHECK(rows["2/h2"]["intent"] == "up");
  CHECK(rows["2/h2"]["status"] == "ok");
  CHECK(rows["2/h2"]["switching_ms"] == "45.000000");
  CHECK(rows["2/h2"]["carrier_ms"] == "115.000000");
  CHECK(rows["2/h2"]["total_ms"] == "160.000000");
  CHECK(rows["2/h2"]["light_lost_ns"].empty());
  CHECK(rows["2/h4"]["intent"] == "up");
  CHECK(rows["2/h4"]["status"] == "incomplete");
  CHECK(rows["2/h4"]["switching_ms"] == "45.000000");
  CHECK(rows["2/h4"]["carrier_up_ns"].empty());
  CHECK(rows["2/h3"]["status"] == "ok");
  // 3: refused: failed whatever the intent.
  for (const char* h : {"h1", "h2", "h3", "h4"}) CHECK(rows[std::string("3/") + h]["status"] == "failed");
  CHECK(rows["3/h2"]["intent"] == "dark");
  // 4: after a refused reconfiguration the switch's state is unknown: edges alone, as before.
  CHECK(rows["4/h1"]["intent"] == "unknown");
  CHECK(rows["4/h1"]["status"] == "ok");
  CHECK(rows["4/h2"]["intent"] == "unknown");
  CHECK(rows["4/h2"]["status"] == "incomplete");

  auto summary = nlohmann::json::parse(ocslab::read_file_or_empty(dir + "/summary.json"));
  CHECK(summary["status"]["disconnected"] == 2);
  CHECK(summary["intents"]["from"] == dir + "/meta.json");
  CHECK(summary["durations_ms"]["total_ms"]["count"] == 7);  // 6 moves and h2 coming up

  // ocslab plot over the same folder: the CDF takes the ok rows (moves and the port that came
  // up) and says which statuses it leaves out; --describe counts statuses and intents.
  std::ostringstream pout, perr;
  int prc = ocslab::cli::run_ocslab({"plot", dir, "--describe"}, pout, perr);
  INFO(perr.str());
  REQUIRE(prc == 0);
  auto d = nlohmann::json::parse(pout.str());
  CHECK(d["cdf"]["statuses"] == nlohmann::json({{"ok", 7}, {"failed", 4}, {"incomplete", 3}, {"disconnected", 2}}));
  CHECK(d["cdf"]["intents"] == nlohmann::json({{"move", 6}, {"up", 2}, {"dark", 4}, {"unknown", 4}}));
  CHECK(d["cdf"]["note"] ==
        "7 ok rows (1 of them newly connected); not plotted: 4 failed, 3 incomplete, 2 disconnected");
}
