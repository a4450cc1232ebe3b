// Circuits removed on purpose, made from dark, and a fault in the virtual lab (issue 23,
// tests/vlab/labs/held-down.spec.yaml): ports whose circuit a mapping removes are
// `disconnected`, ports that gain one from dark are `ok` with their link-up latency measured
// from the command; then a NIC's link held down by the lab's emulated firmware before a
// reconfiguration (`faults:`): its light comes back, its link never does. That port is the only
// `incomplete` row, the summary localises the fault to its host and NIC at the firmware layer
// with the other ports resumed, the run exits 5 naming it, and no hold is left in the lab.
// Then a switch port that fails (tests/vlab/labs/port-dark.spec.yaml): localised to the NIC
// behind it at the light layer.
#include <catch2/catch.hpp>
#include <cmath>
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

namespace {

// held-down.spec.yaml on the shared lab, and what it must show.
void check_held_down_run(Lab& lab) {
  testing::TempDir dir;
  const std::string out = dir.path() + "/results";
  ProgramResult r = ocslab_cli({"run", source_path("tests/vlab/labs/held-down.spec.yaml"), "--no-plot", "-o", out});
  const std::string output = r.out + r.err;
  std::cout << output;
  INFO(output);
  CHECK(r.status == kExitFailed);  // 5: the run finished, a reconfiguration did not complete
  CHECK_THAT(output, Contains("injected nic-held-down on h3:eth1 before reconfiguration 3"));
  CHECK_THAT(output, Contains("fault: ") && Contains("h3/eth1") && Contains("stopped at firmware"));

  // The breakdown, with each port's intent from the mappings (meta.json).
  auto rows = read_csv_rows(out + "/breakdown.csv");
  REQUIRE(rows.size() == 3 * 4);
  for (const auto& row : rows) {
    const std::string& it = row.at("iteration");
    const std::string& h = row.at("host");
    const bool pair34 = h == "h3" || h == "h4";
    INFO("iteration " << it << " " << h << ":" << row.at("interface") << " intent " << row.at("intent") << " status "
                      << row.at("status"));
    if (it == "1" && pair34) {
      // Removed on purpose: disconnected, never incomplete; its down edges are recorded.
      CHECK(row.at("intent") == "dark");
      CHECK(row.at("status") == "disconnected");
      CHECK_FALSE(row.at("carrier_down_ns").empty());
    } else if (it == "1") {
      CHECK(row.at("intent") == "stay");  // h1-h2 is in both mappings
      CHECK(row.at("status") == "unaffected");
    } else if (it == "2" && pair34) {
      // Up from dark: ok, its link-up latency measured from the command, layer by layer.
      CHECK(row.at("intent") == "up");
      CHECK(row.at("status") == "ok");
      for (const char* c : {"switching_ms", "firmware_ms", "carrier_ms", "total_ms"}) {
        INFO(c);
        REQUIRE_FALSE(row.at(c).empty());
      }
      // Measured from this command, not from an earlier one: the lab's 25 ms and 1.5 s, never
      // less, late by at most what a loaded machine adds to the emulator's timers (how close to
      // the settings is vlab_calibration's to assert, on a quiet machine; in the project's CI of
      // 2026-12-06 the emulator's switch was 12.3 ms late under load).
      const double sw = std::stod(row.at("switching_ms")), fw = std::stod(row.at("firmware_ms"));
      CHECK(sw >= 25 - 1);  // command -> light back
      CHECK(sw <= 25 + 50);
      CHECK(fw >= 1500 - 20);  // light -> firmware link up (the clock correction's uncertainty)
      CHECK(fw <= 1500 + 100);
      CHECK(row.at("dark_ms").empty());                                 // it was dark before
    } else if (it == "3" && h == "h3") {
      // Held down: the one port that was to come back and did not.
      CHECK(row.at("intent") == "move");
      CHECK(row.at("status") == "incomplete");
      CHECK(row.at("carrier_ms").empty());
    } else {
      CHECK(row.at("intent") == "move");
      CHECK(row.at("status") == "ok");
      CHECK_FALSE(row.at("carrier_ms").empty());
    }
  }

  // The localisation, as summary.json has it.
  json summary = json::parse(std::ifstream(out + "/summary.json"));
  REQUIRE(summary.at("faults").size() == 1);
  const json& f = summary.at("faults")[0];
  CHECK(f.at("iteration") == 3);
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
  CHECK(meta.at("faults")[0].at("before_iteration") == 3);
  ProgramResult timing = ocslab_cli({"vlab", "timing", lab.state().name, "--json"});
  INFO(timing.out << timing.err);
  REQUIRE(timing.status == 0);
  json t = json::parse(timing.out);
  CHECK(t.at("timing").at("held_down").empty());
  // Released, h3's link comes back after the firmware delay (1.5 s) like any other.
  auto carrier = [&] { return lab.run("h3", "cat /sys/class/net/eth1/carrier"); };
  // load-safe: polls the guest's carrier (the event); 10 s are a hang guard.
  for (int i = 0; i < 20 && carrier() != "1\n"; ++i) std::this_thread::sleep_for(500ms);
  CHECK(carrier() == "1\n");
}

// port-dark.spec.yaml on the same lab, after held-down's run (which leaves it as it found it).
void check_port_dark_run(Lab& lab) {
  testing::TempDir dir;
  const std::string out = dir.path() + "/results";
  ProgramResult r = ocslab_cli({"run", source_path("tests/vlab/labs/port-dark.spec.yaml"), "--no-plot", "-o", out});
  const std::string output = r.out + r.err;
  std::cout << output;
  INFO(output);
  CHECK(r.status == kExitFailed);
  CHECK_THAT(output, Contains("injected port-dark on switch port 19 (h3:eth1 rx) before reconfiguration 2"));
  CHECK_THAT(output, Contains("injected switch-unreachable for 1500 ms before reconfiguration 1"));
  CHECK_THAT(output, Contains("fault: ") && Contains("h3/eth1") && Contains("stopped at light"));

  auto rows = read_csv_rows(out + "/breakdown.csv");
  REQUIRE(rows.size() == 2 * 4);
  for (const auto& row : rows) {
    INFO("iteration " << row.at("iteration") << " " << row.at("host") << " status " << row.at("status"));
    CHECK(row.at("intent") == "move");
    if (row.at("iteration") == "2" && row.at("host") == "h3") {
      // Its light went with the port, before the command, and never came back.
      CHECK(row.at("status") == "incomplete");
      CHECK_FALSE(row.at("light_lost_ns").empty());
      CHECK(row.at("light_back_ns").empty());
      CHECK(row.at("firmware_up_ns").empty());
    } else {
      CHECK(row.at("status") == "ok");  // iteration 1 every port; iteration 2 the other three
      CHECK_FALSE(row.at("carrier_ms").empty());
    }
  }

  json summary = json::parse(std::ifstream(out + "/summary.json"));
  REQUIRE(summary.at("faults").size() == 1);
  const json& f = summary.at("faults")[0];
  CHECK(f.at("iteration") == 2);
  CHECK(f.at("host") == "h3");
  CHECK(f.at("interface") == "eth1");
  CHECK(f.at("layer") == "light");
  CHECK(f.at("ports") == 4);
  CHECK(f.at("resumed") == 3);

  // On record: meta.json, the runner's row and the emulator's shutter in the timeline.
  json meta = json::parse(std::ifstream(out + "/meta.json"));
  REQUIRE(meta.at("faults").size() == 2);
  const json& spell = meta.at("faults")[0];
  CHECK(spell.at("kind") == "switch-unreachable");
  CHECK(spell.at("error") == "");
  const json& dark = meta.at("faults")[1];
  CHECK(dark.at("kind") == "port-dark");
  CHECK(dark.at("port") == 19);
  CHECK(dark.at("host") == "h3");
  CHECK(dark.at("error") == "");
  // The unreachable switch: reconfiguration 1's command went out once the spell was over.
  REQUIRE(meta.at("reconfigurations").size() == 2);
  const double waited_ms = static_cast<double>(meta.at("reconfigurations")[0].at("issued_ns").get<int64_t>() -
                                               spell.at("asked_ns").get<int64_t>()) /
                           1e6;
  CHECK(waited_ms >= 1500);
  CHECK(waited_ms < 4000);
  bool fault_row = false, shutter_row = false, spell_start = false, spell_end = false;
  for (const auto& row : read_csv_rows(out + "/timeline.csv")) {
    if (row.at("subject") == "control" && row.at("signal") == "unreachable" && row.at("source") == "switch") {
      spell_start = spell_start || row.at("value") == "1";  // the emulator's ground truth
      spell_end = spell_end || row.at("value") == "0";
    }
    if (row.at("subject") != "port 19") continue;
    fault_row = fault_row || (row.at("source") == "fault" && row.at("signal") == "dark" && row.at("value") == "1");
    shutter_row = shutter_row || (row.at("signal") == "shutter_closed" && row.at("value") == "1");
  }
  CHECK(fault_row);
  CHECK(shutter_row);
  CHECK(spell_start);
  CHECK(spell_end);

  // The lab's ports are lit again, and h3's link comes back.
  ProgramResult timing = ocslab_cli({"vlab", "timing", lab.state().name, "--json"});
  INFO(timing.out << timing.err);
  REQUIRE(timing.status == 0);
  CHECK(json::parse(timing.out).at("timing").at("dark_ports").empty());
  auto carrier = [&] { return lab.run("h3", "cat /sys/class/net/eth1/carrier"); };
  // load-safe: polls the guest's carrier (the event); 10 s are a hang guard.
  for (int i = 0; i < 20 && carrier() != "1\n"; ++i) std::this_thread::sleep_for(500ms);
  CHECK(carrier() == "1\n");
}

}  // namespace

// One case, two runs on one lab: each run puts the lab's holds and dark ports back as it found
// them (asserted), so the second needs no reset of the guests between them (about 30 s saved).
TEST_CASE("faults injected in the virtual lab: a NIC held down (firmware), a switch unreachable, a port dark (light)",
          "[vlab][fault-injection]") {
  Lab lab(kSharedFour, 60s, Sharing::kShared);
  check_held_down_run(lab);
  check_port_dark_run(lab);
}
