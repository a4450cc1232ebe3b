// The gid probe end to end (issue 45 item 4): tests/vlab/labs/gid-change.spec.yaml on the shared
// phase lab, h1's eth1 moving from h2 to h4 and back. In one run the test removes h1's address
// 10.61.0.1 right after reconfiguration 1 was acknowledged, adds another address (which takes the
// freed GID index: the kernel uses the lowest free slot) and then 10.61.0.1 again, so it comes
// back at another index: the timeline must have the removal and the re-addition as gid rows in
// iteration 1, h1's breakdown row of reconfiguration 1 must count them, and the summary must flag
// reconfiguration 1 for h1/eth1 and nothing else. The other run changes nothing: no GID change, no
// flag, no "GID tables" line. The shared lab's reset puts h1's addresses back for the next case.
#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "lab_fixture.h"
#include "ocslab/common/file.h"
#include "ocslab/common/process.h"
#include "ocslab/testing/sshd_fixture.h"
#include "ocslab/testing/wait.h"

namespace {

using namespace vlab_test;
using Catch::Matchers::Contains;
using json = nlohmann::json;

// A line of the runner's --json-stream output (in its log) that is the event `reconfiguration`
// with i == n.
bool reconfiguration_seen(const std::string& log, int n) {
  std::istringstream in(log);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("{", 0) != 0) continue;  // a --json-stream event (keys in sorted order)
    try {
      const json e = json::parse(line);
      if (e.value("event", "") == "reconfiguration" && e.value("i", 0) == n) return true;
    } catch (const json::exception&) {
    }
  }
  return false;
}

// The spec with the lab named by absolute path, and its dwell set.
std::string spec_copy(const std::string& dir, int dwell_s) {
  std::string text = read_file_or_empty(source_path("tests/vlab/labs/gid-change.spec.yaml"));
  auto swap = [&](const std::string& from, const std::string& to) {
    const auto at = text.find(from);
    REQUIRE(at != std::string::npos);
    text.replace(at, from.size(), to);
  };
  swap("../../../experiments/labs/phase-four.yaml", source_path("experiments/labs/phase-four.yaml"));
  swap("dwell_s: 15", "dwell_s: " + std::to_string(dwell_s));
  const std::string path = dir + "/gid-change-" + std::to_string(dwell_s) + ".spec.yaml";
  std::ofstream(path) << text;
  return path;
}

// Runs the spec in the background; once reconfiguration 1 was acknowledged, runs `between` (if
// given); returns the runner's exit status. The results are in `out`.
int run_spec(const std::string& spec, const std::string& out, const std::string& log,
             const std::function<void()>& between) {
  SpawnOptions so;
  so.log_file = log;
  const pid_t runner =
      spawn_program({testing::bin_path("ocslab"), "run", spec, "-o", out, "--no-plot", "--json-stream"}, so);
  if (between) {
    testing::poll_until([&] { return reconfiguration_seen(read_file_or_empty(log), 1) || !process_alive(runner); },
                        std::chrono::seconds(300), std::chrono::milliseconds(100));
    const bool live = process_alive(runner) && !reconfiguration_seen(read_file_or_empty(log), 2);
    INFO(read_file_or_empty(log));
    if (!live) ::kill(runner, SIGKILL);
    REQUIRE(live);
    between();
    // Still inside reconfiguration 1's dwell: the changes belong to it.
    CHECK_FALSE(reconfiguration_seen(read_file_or_empty(log), 2));
  }
  int status = 0;
  REQUIRE(::waitpid(runner, &status, 0) == runner);
  std::cout << read_file_or_empty(log);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// The timeline's GID change rows (source gid, signal gid_*) of a host.
std::vector<std::map<std::string, std::string>> gid_changes_of(const std::string& out, const std::string& host) {
  std::vector<std::map<std::string, std::string>> rows;
  for (auto& r : read_csv_rows(out + "/timeline.csv"))
    if (r["source"] == "gid" && r["host"] == host && r["signal"].rfind("gid_", 0) == 0) rows.push_back(r);
  return rows;
}

}  // namespace

TEST_CASE(
    "phase lab: an address re-added at another GID index between mappings is a timeline row and a flag; none without",
    "[vlab][gid-change]") {
  Lab lab(kSharedPhase, std::chrono::seconds(120), Sharing::kShared);
  const std::string dir = fs::temp_directory_path().string() + "/ocslab-gid-change-" + std::to_string(::getpid());
  RemovedAtEnd cleanup{dir};
  fs::create_directories(dir);
  // Soft-RoCE keeps one GID per address of eth1: h1's 10.61.0.1 (0a3d:0001) is in its table.
  lab.run("h1", "grep -q ffff:0a3d:0001 /sys/class/infiniband/*/ports/1/gids/*");

  SECTION("the address removed and re-added at another index: a row per change and a flag on reconfiguration 1") {
    const std::string out = dir + "/moved";
    // h1's addresses as the lab had them, however the section ends: with 10.61.0.101 the
    // primary, 10.61.0.1 is its secondary, and the shared lab's reset (which deletes the extra
    // address, and its secondaries with it, but adds nothing back) would have to reboot the lab.
    struct Restore {
      const Lab& lab;
      ~Restore() {
        lab.exec("h1", "ip addr del 10.61.0.101/24 dev eth1; ip addr replace 10.61.0.1/24 dev eth1");
      }
    } restore{lab};
    const int rc = run_spec(spec_copy(dir, 10), out, dir + "/moved.log", [&] {
      // 10.61.0.101 takes the slot 10.61.0.1 freed (the lowest free one), so 10.61.0.1 comes back
      // at another index. One command, no pauses: the checks hold however the probe's 100 ms polls
      // group the three changes (a merged poll shows the freed slot as gid_changed).
      lab.run("h1",
              "ip addr del 10.61.0.1/24 dev eth1 && ip addr add 10.61.0.101/24 dev eth1 && "
              "ip addr add 10.61.0.1/24 dev eth1");
    });
    CHECK(rc == 0);
    // Where the address was at start (the probe's `gid` rows), and where it came back.
    std::string held_at, added_at;
    for (auto& r : read_csv_rows(out + "/timeline.csv"))
      if (r["source"] == "gid" && r["host"] == "h1" && r["signal"] == "gid" && r["unit"] == "roce_v2 ::ffff:10.61.0.1")
        held_at = r["value"];
    REQUIRE_FALSE(held_at.empty());
    bool left = false;
    auto rows = gid_changes_of(out, "h1");
    for (auto& r : rows) {
      INFO(r["t_ns"] << " " << r["signal"] << " " << r["value"] << " " << r["unit"] << " it " << r["iteration"]);
      CHECK(r["iteration"] == "1");
      left = left || (r["value"] == held_at && (r["signal"] == "gid_removed" || r["signal"] == "gid_changed"));
      if (r["signal"] != "gid_removed" && r["unit"] == "roce_v2 ::ffff:10.61.0.1") added_at = r["value"];
    }
    CHECK(left);
    REQUIRE_FALSE(added_at.empty());
    CHECK(held_at != added_at);
    CHECK(gid_changes_of(out, "h2").empty());

    for (auto& r : read_csv_rows(out + "/breakdown.csv")) {
      INFO(r["host"] << " " << r["iteration"]);
      const bool moved = r["host"] == "h1" && r["iteration"] == "1";
      if (moved) CHECK(std::stoi(r["gid_changes"]) >= 2);  // 10.61.0.1 out of its index, and back at another
      if (!moved) CHECK(r["gid_changes"] == "0");
    }
    const std::string summary = read_file_or_empty(out + "/summary.txt");
    INFO(summary);
    CHECK_THAT(summary, Contains("GID tables: 1 reconfiguration(s) left a GID index without the address it held"));
    CHECK_THAT(summary, Contains("reconfiguration 1 (run "));
    CHECK_THAT(summary, Contains("h1/eth1 GID index " + held_at + " of "));
    CHECK_THAT(summary, Contains("no longer holds roce_v2 ::ffff:10.61.0.1"));
    CHECK_THAT(summary, Contains("the address is at index " + added_at));
    const json s = json::parse(read_file_or_empty(out + "/summary.json"));
    REQUIRE(s["gid"]["flags"].size() == 1);
    CHECK(s["gid"]["flags"][0]["iteration"] == 1);
    CHECK(s["gid"]["flags"][0]["host"] == "h1");
    CHECK(s["gid"]["flags"][0]["moved_to"] == std::stoi(added_at));
  }

  SECTION("nothing changed: no GID row, no flag") {
    const std::string out = dir + "/steady";
    CHECK(run_spec(spec_copy(dir, 3), out, dir + "/steady.log", nullptr) == 0);
    for (const char* h : {"h1", "h2", "h4"}) CHECK(gid_changes_of(out, h).empty());
    for (auto& r : read_csv_rows(out + "/breakdown.csv")) CHECK(r["gid_changes"] == "0");
    const std::string summary = read_file_or_empty(out + "/summary.txt");
    INFO(summary);
    CHECK_THAT(summary, !Contains("GID"));
    const json s = json::parse(read_file_or_empty(out + "/summary.json"));
    CHECK(s["gid"]["flags"].empty());
  }
}
