// `ocslab analyze` on a results folder laid out as `ocslab run` writes it, where one NIC's link
// is held down after a reconfiguration while the other hosts resume: summary.txt, summary.json
// and what it prints localise the fault to that host and NIC at the firmware layer, with the
// switch ports from meta.json; and the way `ocslab run` ends such a run (exit 5, the last line
// naming the host, NIC and layer).
#include <catch2/catch.hpp>

#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "ocslab/analysis/breakdown.h"
#include "ocslab/analysis/localisation.h"
#include "ocslab/analysis/timeline.h"
#include "ocslab/cli/ocslab_cli.h"
#include "ocslab/common/file.h"
#include "ocslab/testing/sshd_fixture.h"

using Catch::Matchers::Contains;
using Catch::Matchers::EndsWith;

namespace {

constexpr int64_t kFaultMs = 1'000'000;
constexpr int64_t kFaultT0 = 1'800'100'000'000'000'000;

}  // namespace

TEST_CASE("ocslab analyze: a NIC link held down after a reconfiguration is localised to its host, NIC and layer",
          "[integration][analysis]") {
  ocslab::testing::TempDir tmp;
  const std::string run = "held-20261128-020000";
  const std::string dir = tmp.path() + "/" + run;
  std::filesystem::create_directories(dir);
  // rail-a: h1-h2, h3-h4; rail-b: h1-h3, h2-h4. 1: a -> b, every port moves and resumes.
  // 2: b -> a, h3's NIC firmware keeps its link down: light comes back, nothing above it does.
  std::ostringstream tl;
  tl << "t_ns,host,source,subject,signal,value,unit,run,iteration\n";
  uint32_t line = 1;
  uint32_t h3_light_back = 0, h3_link_down = 0;
  auto row = [&](int64_t t, const std::string& h, const std::string& src, const std::string& subject,
                 const std::string& sig, int v, int it) {
    tl << fmt::format("{},{},{},{},{},{},bool,{},{}\n", t, h, src, subject, sig, v, run, it);
    return ++line;
  };
  const char* hosts[] = {"h1", "h2", "h3", "h4"};
  for (const char* h : hosts) row(kFaultT0 - 1000 * kFaultMs, h, "carrier", "eth1", "carrier", 1, 0);
  for (int it = 1; it <= 2; ++it) {
    const int64_t t = kFaultT0 + (it - 1) * 10'000 * kFaultMs;
    const char* mapping = it == 1 ? "rail-b" : "rail-a";
    row(t, "switch", "ocs", mapping, "command", 1, it);
    row(t + 20 * kFaultMs, "switch", "ocs", mapping, "ack", 1, it);
    for (int k = 0; k < 4; ++k) {
      const std::string h = hosts[k];
      const bool held = it == 2 && h == "h3";
      const std::string rdma = "rxe_eth1/eth1@peer";
      row(t + 1 * kFaultMs, h, "rdma", rdma, "stalled", 1, it);
      row(t + 2 * kFaultMs, h, "emulator", "eth1", "light", 0, it);
      uint32_t down = row(t + 3 * kFaultMs, h, "emulator", "eth1", "link", 0, it);
      row(t + 4 * kFaultMs, h, "carrier", "eth1", "carrier", 0, it);
      uint32_t back = row(t + (30 + k) * kFaultMs, h, "emulator", "eth1", "light", 1, it);
      if (held) {
        h3_light_back = back;
        h3_link_down = down;
        continue;
      }
      row(t + (130 + k) * kFaultMs, h, "emulator", "eth1", "link", 1, it);
      row(t + (140 + k) * kFaultMs, h, "carrier", "eth1", "carrier", 1, it);
      row(t + (160 + k) * kFaultMs, h, "rdma", rdma, "resumed", 1, it);
    }
  }
  std::ofstream(dir + "/timeline.csv") << tl.str();
  nlohmann::json meta = {
      {"run", run},
      {"reconfigurations",
       {{{"iteration", 1}, {"mapping", "rail-b"}, {"ok", true}},
        {{"iteration", 2}, {"mapping", "rail-a"}, {"ok", true}}}},
      {"mappings",
       {{"rail-a", {{"h1", "eth1", "h2", "eth1"}, {"h3", "eth1", "h4", "eth1"}}},
        {"rail-b", {{"h1", "eth1", "h3", "eth1"}, {"h2", "eth1", "h4", "eth1"}}}}},
      {"initial_mapping", "rail-a"},
      {"switch_ports", {{"h1", "eth1", 1, 17}, {"h2", "eth1", 2, 18}, {"h3", "eth1", 3, 19}, {"h4", "eth1", 4, 20}}}};
  std::ofstream(dir + "/meta.json") << meta.dump(2);

  std::ostringstream out, err;
  int rc = ocslab::cli::run_ocslab({"analyze", dir}, out, err);
  INFO(err.str());
  REQUIRE(rc == 0);  // analyze reports; it is the run that fails (below)
  const std::string section = fmt::format(
      "fault localisation: 1 reconfiguration(s) did not complete\n"
      "reconfiguration 2 (run {0}, mapping rail-a): h3/eth1 (switch ports tx 3 rx 19) stopped at firmware; 3 of 4 "
      "port(s) resumed\n"
      "  {1}/timeline.csv:{2}  h3/eth1 light lost at +2.000 ms, back at +32.000 ms\n"
      "  {1}/timeline.csv:{3}  h3/eth1 firmware down at +3.000 ms, never up in the reconfiguration\n"
      "  3 of 3 other port(s) reached firmware up at +130.000..+133.000 ms; h3/eth1 never did\n",
      run, dir, h3_light_back, h3_link_down);
  std::cout << section;
  CHECK_THAT(out.str(), EndsWith(section));
  CHECK(ocslab::read_file_or_empty(dir + "/summary.txt") == out.str());
  CHECK_THAT(out.str(), Contains("8 host/interface rows: 7 ok, 0 failed, 0 unaffected, 1 incomplete"));

  auto summary = nlohmann::json::parse(ocslab::read_file_or_empty(dir + "/summary.json"));
  REQUIRE(summary["faults"].size() == 1);
  const auto& f = summary["faults"][0];
  CHECK(f["run"] == run);
  CHECK(f["iteration"] == 2);
  CHECK(f["mapping"] == "rail-a");
  CHECK(f["host"] == "h3");
  CHECK(f["interface"] == "eth1");
  CHECK(f["port"] == nlohmann::json({{"tx", 3}, {"rx", 19}}));
  CHECK(f["layer"] == "firmware");
  CHECK(f["common"] == false);
  CHECK(f["ports"] == 4);
  CHECK(f["resumed"] == 3);
  CHECK(f["stopped"].size() == 1);
  CHECK(f["evidence"][1]["line"] == h3_link_down);
  CHECK(summary["status"]["incomplete"] == 1);  // the keys before `faults` as they were
  CHECK(summary["intents"]["move"] == 8);

  // --json prints the same summary.json.
  std::ostringstream jout, jerr;
  REQUIRE(ocslab::cli::run_ocslab({"analyze", dir, "--json"}, jout, jerr) == 0);
  CHECK(nlohmann::json::parse(jout.str())["faults"] == summary["faults"]);

  // How `ocslab run` ends this run: exit 5 (a run with problems), the last line naming the host,
  // NIC and layer; a run already failing keeps its code.
  auto tline = ocslab::analysis::read_timeline(dir + "/timeline.csv");
  auto faults = ocslab::analysis::localise(ocslab::analysis::compute_breakdown(tline), &tline);
  std::ostringstream rerr;
  CHECK(ocslab::cli::report_faults(faults, dir, ocslab::cli::kExitOk, rerr) == ocslab::cli::kExitFailed);
  std::cout << rerr.str();
  CHECK(rerr.str() == fmt::format("ocslab run: fault: reconfiguration 2 (run {0}, mapping rail-a): h3/eth1 stopped at "
                                  "firmware; 3 of 4 port(s) resumed\n"
                                  "ocslab run: 1 reconfiguration(s) did not complete; the first, reconfiguration 2: "
                                  "h3/eth1 stopped at firmware (evidence: {1}/summary.txt)\n",
                                  run, dir));
  std::ostringstream none;
  CHECK(ocslab::cli::report_faults({}, dir, ocslab::cli::kExitOk, none) == ocslab::cli::kExitOk);
  CHECK(none.str().empty());
  CHECK(ocslab::cli::report_faults(faults, dir, ocslab::cli::kExitUnreachable, none) == ocslab::cli::kExitUnreachable);
}
