// `ocslab analyze` in-process: the files it writes, what it prints, its errors and exit codes.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "analyze_cli_support.h"
#include "ocslab/cli/ocslab_cli.h"
#include "ocslab/common/file.h"

namespace fs = std::filesystem;
using Catch::Matchers::Contains;

namespace {

using analyze_cli_support::Dir;
using analyze_cli_support::Result;
using analyze_cli_support::run_cli;

const char* kTimeline =
    "t_ns,host,source,subject,signal,value,unit,run,iteration\n"
    "1000000000,switch,ocs,m1,command,1,,demo,1\n"
    "1002000000,switch,ocs,m1,ack,1,,demo,1\n"
    "1003000000,h1,carrier,eth1,carrier,0,bool,demo,1\n"
    "1050000000,h1,carrier,eth1,carrier,1,bool,demo,1\n";

}  // namespace

TEST_CASE("ocslab analyze FOLDER writes breakdown.csv, summary.txt and summary.json and prints the summary") {
  Dir d;
  std::ofstream(d.path + "/timeline.csv") << kTimeline;
  Result r = run_cli({"analyze", d.path});
  INFO(r.err);
  REQUIRE(r.rc == 0);
  CHECK(r.out == ocslab::read_file_or_empty(d.path + "/summary.txt"));
  CHECK_THAT(r.out, Contains("1 host/interface rows: 1 ok, 0 failed"));
  CHECK_THAT(r.out, Contains("total_ms           1       50.000       50.000       50.000       50.000       50.000"));
  std::string csv = ocslab::read_file_or_empty(d.path + "/breakdown.csv");
  CHECK_THAT(csv, Contains("\ndemo,1,m1,h1,eth1,ok,1000000000,1002000000,,,,,1003000000,1050000000,,,,,2.000000,,,,,,,,"
                           "50.000000\n"));
  auto j = nlohmann::json::parse(ocslab::read_file_or_empty(d.path + "/summary.json"));
  CHECK(j["durations_ms"]["control_ms"]["median"] == 2.0);
  CHECK(j["iterations_from"] == "iteration column");

  // --json prints the JSON; -o puts the files elsewhere (created).
  Result rj = run_cli({"analyze", d.path + "/timeline.csv", "--json", "-o", d.path + "/out/sub"});
  REQUIRE(rj.rc == 0);
  CHECK(nlohmann::json::parse(rj.out)["rows"] == 1);
  CHECK(fs::exists(d.path + "/out/sub/breakdown.csv"));
  CHECK(fs::exists(d.path + "/out/sub/summary.txt"));
}

TEST_CASE("ocslab analyze FILE writes next to the file; --dark-dbm is read") {
  Dir d;
  std::ofstream(d.path + "/cap.csv") << "t_ns,host,source,subject,signal,value,unit\n"
                                        "1000000000,h1,rx_power,eth1,rx_power_dbm,-3,dBm\n"
                                        "3000000000,h1,rx_power,eth1,rx_power_dbm,-35,dBm\n"
                                        "3100000000,h1,rx_power,eth1,rx_power_dbm,-3,dBm\n";
  Result r = run_cli({"analyze", d.path + "/cap.csv"});
  REQUIRE(r.rc == 0);
  CHECK_THAT(r.out, Contains("1 ok"));
  CHECK_THAT(ocslab::read_file_or_empty(d.path + "/breakdown.csv"),
             Contains(",1,,h1,eth1,ok,,,3000000000,3100000000,,,,,,,,,,,100.000000,"));
  Result r2 = run_cli({"analyze", d.path + "/cap.csv", "--dark-dbm=-40"});
  REQUIRE(r2.rc == 0);
  CHECK_THAT(r2.out, Contains("reconfigs    0"));
}

TEST_CASE("ocslab analyze: help, bad options (exit 1) and bad input (exit 2)") {
  Result h = run_cli({"analyze", "--help"});
  CHECK(h.rc == 0);
  CHECK_THAT(h.out, Contains("Usage: ocslab analyze FOLDER|TIMELINE.csv"));
  CHECK_THAT(run_cli({"--help"}).out, Contains("analyze"));

  Result none = run_cli({"analyze"});
  CHECK(none.rc == 1);
  CHECK_THAT(none.err, Contains("usage: ocslab analyze"));
  Result bad = run_cli({"analyze", "x", "--frobnicate"});
  CHECK(bad.rc == 1);
  CHECK_THAT(bad.err, Contains("unknown option '--frobnicate'"));
  Result dbm = run_cli({"analyze", "x", "--dark-dbm", "loud"});
  CHECK(dbm.rc == 2);  // a bad value is bad input (docs/exit-codes.md)
  CHECK_THAT(dbm.err, Contains("--dark-dbm needs a number of dBm, got 'loud'"));
  CHECK(run_cli({"analyze", "x", "-o"}).rc == 1);

  Dir d;
  Result missing = run_cli({"analyze", d.path});
  CHECK(missing.rc == 2);
  CHECK_THAT(missing.err, Contains(d.path + "/timeline.csv: cannot open"));
  std::ofstream(d.path + "/timeline.csv") << "t_ns,host,source,subject,signal,value,unit\n"
                                             "1,h1,carrier,eth1,carrier,1,bool\n"
                                             "2,h1,carrier,eth1,carrier,x,bool\n";
  Result malformed = run_cli({"analyze", d.path});
  CHECK(malformed.rc == 2);
  CHECK_THAT(malformed.err, Contains(d.path + "/timeline.csv:3: bad number 'x' in column value"));
  CHECK_FALSE(fs::exists(d.path + "/breakdown.csv"));
}

TEST_CASE("ocslab analyze FOLDER with meta.json's mappings: a port coming up is measured, a removed one disconnected") {
  Dir d;
  // Mapping A (h1-h2) at setup, then B (h1-h3): h1 moves, h2 goes dark, h3 comes up.
  std::ofstream(d.path + "/timeline.csv") << "t_ns,host,source,subject,signal,value,unit,run,iteration\n"
                                             "500000000,h3,carrier,eth1,carrier,0,bool,demo,0\n"
                                             "1000000000,switch,ocs,B,command,1,,demo,1\n"
                                             "1002000000,switch,ocs,B,ack,1,,demo,1\n"
                                             "1003000000,h1,carrier,eth1,carrier,0,bool,demo,1\n"
                                             "1003000000,h2,carrier,eth1,carrier,0,bool,demo,1\n"
                                             "1050000000,h1,carrier,eth1,carrier,1,bool,demo,1\n"
                                             "1070000000,h3,carrier,eth1,carrier,1,bool,demo,1\n";
  std::ofstream(d.path + "/meta.json") << R"({"run": "demo",
    "reconfigurations": [{"iteration": 1, "mapping": "B", "ok": true}],
    "mappings": {"A": [["h1", "eth1", "h2", "eth1"]], "B": [["h1", "eth1", "h3", "eth1"]]},
    "initial_mapping": "A"})";
  Result r = run_cli({"analyze", d.path});
  INFO(r.err);
  REQUIRE(r.rc == 0);
  CHECK_THAT(r.out, Contains("3 host/interface rows: 2 ok, 0 failed, 0 unaffected, 0 incomplete, 1 disconnected"));
  CHECK_THAT(r.out, Contains("intents      from " + d.path + "/meta.json: 1 move, 1 up, 1 dark, 0 stay, 0 unknown"));
  std::string csv = ocslab::read_file_or_empty(d.path + "/breakdown.csv");
  CHECK_THAT(csv, Contains(",total_ms,intent\n"));
  CHECK_THAT(csv, Contains("\ndemo,1,B,h1,eth1,ok,1000000000,1002000000,,,,,1003000000,1050000000,,,,,2.000000,,,,,,,,"
                           "50.000000,move\n"));
  CHECK_THAT(
      csv, Contains("\ndemo,1,B,h2,eth1,disconnected,1000000000,1002000000,,,,,1003000000,,,,,,2.000000,,,,,,,,,dark\n"));
  CHECK_THAT(csv, Contains("\ndemo,1,B,h3,eth1,ok,1000000000,1002000000,,,,,,1070000000,,,,,2.000000,,,,,,,,"
                           "70.000000,up\n"));
  auto j = nlohmann::json::parse(ocslab::read_file_or_empty(d.path + "/summary.json"));
  CHECK(j["status"]["disconnected"] == 1);
  CHECK(j["intents"]["up"] == 1);
  CHECK(j["durations_ms"]["total_ms"]["count"] == 2);

  // --no-intents: judged by the edges alone, as before (h2 incomplete, h3 unaffected).
  Result n = run_cli({"analyze", d.path, "--no-intents"});
  REQUIRE(n.rc == 0);
  CHECK_THAT(n.out, Contains("3 host/interface rows: 1 ok, 0 failed, 1 unaffected, 1 incomplete, 0 disconnected"));
  CHECK_THAT(ocslab::read_file_or_empty(d.path + "/breakdown.csv"), !Contains("intent"));

  // A meta.json without mappings (an older run) gives no intents; a malformed one exits 2.
  std::ofstream(d.path + "/meta.json", std::ios::trunc) << R"({"run": "demo"})";
  CHECK_THAT(run_cli({"analyze", d.path}).out, Contains("1 unaffected, 1 incomplete, 0 disconnected"));
  std::ofstream(d.path + "/meta.json", std::ios::trunc)
      << R"({"mappings": {"A": [["h1", "eth1"]]}, "initial_mapping": "A"})";
  Result bad = run_cli({"analyze", d.path});
  CHECK(bad.rc == 2);
  CHECK_THAT(bad.err, Contains("meta.json: mapping 'A': a link is not [host, nic, host, nic]"));
  std::ofstream(d.path + "/meta.json", std::ios::trunc) << "{not json";
  CHECK(run_cli({"analyze", d.path}).rc == 2);
  CHECK(run_cli({"analyze", d.path, "--no-intents"}).rc == 0);
}
