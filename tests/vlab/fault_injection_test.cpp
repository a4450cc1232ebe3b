// Fault injection and localisation in the virtual lab (issue 23): a NIC's link held down by the
// lab's emulated firmware before a reconfiguration (`faults:` in the spec). Its light comes back,
// its link never does: the breakdown has that one port `incomplete` and every other row `ok`, the
// summary localises the fault to the host and NIC at the firmware layer with the other ports
// resumed, the run exits 5 naming it, and the hold is gone from the lab afterwards.
#include <catch2/catch.hpp>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "lab_fixture.h"
#include "ocslab/common/exit_code.h"
#include "ocslab/testing/sshd_fixture.h"

using namespace vlab_test;
using Catch::Matchers::Contains;
using json = nlohmann::json;

TEST_CASE("a NIC held down after a reconfiguration: localised to that host and NIC at the firmware layer",
          "[vlab][fault-injection]") {
  Lab lab(kSharedFour, 60s, Sharing::kShared);
  testing::TempDir dir;
  const std::string out = dir.path() + "/results";
  ProgramResult r = ocslab_cli({"run", source_path("tests/vlab/labs/held-down.spec.yaml"), "--no-plot", "-o", out});
  const std::string output = r.out + r.err;
  std::cout << output;
  INFO(output);
  CHECK(r.status == kExitFailed);  // 5: the run finished, a reconfiguration did not complete
  CHECK_THAT(output, Contains("injected nic-held-down on h3:eth1 before reconfiguration 2"));
  CHECK_THAT(output, Contains("fault: ") && Contains("h3/eth1") && Contains("stopped at firmware"));

  // The breakdown: reconfiguration 1 complete everywhere; in 2, h3/eth1 is the one incomplete row.
  auto rows = read_csv_rows(out + "/breakdown.csv");
  REQUIRE(rows.size() == 2 * 4);
  for (const auto& row : rows) {
    INFO("iteration " << row.at("iteration") << " " << row.at("host") << ":" << row.at("interface"));
    if (row.at("iteration") == "2" && row.at("host") == "h3") {
      CHECK(row.at("status") == "incomplete");
      CHECK(row.at("carrier_ms").empty());
    } else {
      CHECK(row.at("status") == "ok");
      CHECK_FALSE(row.at("carrier_ms").empty());
    }
  }

  // The localisation, as summary.json has it.
  json summary = json::parse(std::ifstream(out + "/summary.json"));
  REQUIRE(summary.at("faults").size() == 1);
  const json& f = summary.at("faults")[0];
  CHECK(f.at("iteration") == 2);
  CHECK(f.at("host") == "h3");
  CHECK(f.at("interface") == "eth1");
  CHECK(f.at("layer") == "firmware");
  CHECK(f.at("common") == false);
  CHECK(f.at("ports") == 4);
  CHECK(f.at("resumed") == 3);
  CHECK(f.at("port") == json{{"tx", 3}, {"rx", 19}});  // the lab file's ports for h3:eth1
  std::string summary_text = read_file_or_empty(out + "/summary.txt");
  CHECK_THAT(summary_text, Contains("h3/eth1 (switch ports tx 3 rx 19) stopped at firmware; 3 of 4 port(s) resumed"));

  // What was injected is on record, and the lab has no hold left.
  json meta = json::parse(std::ifstream(out + "/meta.json"));
  REQUIRE(meta.at("faults").size() == 1);
  CHECK(meta.at("faults")[0].at("host") == "h3");
  CHECK(meta.at("faults")[0].at("nic") == "eth1");
  CHECK(meta.at("faults")[0].at("before_iteration") == 2);
  ProgramResult timing = ocslab_cli({"vlab", "timing", lab.state().name, "--json"});
  INFO(timing.out << timing.err);
  REQUIRE(timing.status == 0);
  json t = json::parse(timing.out);
  CHECK(t.at("timing").at("held_down").empty());
  // Released, h3's link comes back after the firmware delay (1.5 s) like any other.
  auto carrier = [&] { return lab.run("h3", "cat /sys/class/net/eth1/carrier"); };
  for (int i = 0; i < 20 && carrier() != "1\n"; ++i) std::this_thread::sleep_for(500ms);
  CHECK(carrier() == "1\n");
}
