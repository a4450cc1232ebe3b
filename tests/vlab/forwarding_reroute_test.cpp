// Forwarding that follows the fabric (runner/forwarding_follow.h), end to end on the shared ring
// lab: `ocslab run` of tests/vlab/labs/fwdrun-ring-reroute.spec.yaml. A circuit the test darkens
// mid-run (the emulator's shutter on h1:eth1's receive port, for 3 s) has every host's routes recomputed
// on the three surviving circuits within 2 s of the switch's power monitor seeing it, and the
// verify matrix then reaches every pair the long way round; lit again, the ring's routes come
// back. A planned reconfiguration to a line that breaks that circuit loses fewer pairs during the
// change with make-before-break (the routes moved onto the kept circuits first) than without (the
// same spec with make_before_break: false, run first): both counts printed and asserted.
#include <signal.h>
#include <sys/wait.h>
#include <catch2/catch.hpp>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>

#include "lab_fixture.h"
#include "ocslab/common/file.h"
#include "ocslab/common/process.h"
#include "ocslab/testing/sshd_fixture.h"
#include "ocslab/testing/wait.h"

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using namespace ocslab;
using Catch::Matchers::Contains;
using nlohmann::json;
using vlab_test::kSharedRing;
using vlab_test::Lab;
using vlab_test::matrix_pair;
using vlab_test::ocslab_cli;
using vlab_test::Sharing;
using vlab_test::source_path;

namespace {

// The reroute spec with `from` replaced by `to` (each must occur), written to dir; the lab file
// named by its absolute path.
std::string spec_variant(const std::string& dir, const std::string& name,
                         const std::vector<std::pair<std::string, std::string>>& swaps) {
  std::string text = read_file_or_empty(source_path("tests/vlab/labs/fwdrun-ring-reroute.spec.yaml"));
  auto swap = [&](const std::string& from, const std::string& to) {
    const auto at = text.find(from);
    REQUIRE(at != std::string::npos);
    text.replace(at, from.size(), to);
  };
  swap("{vlab: fwdrun-ring.yaml}", "{vlab: " + source_path("tests/vlab/labs/fwdrun-ring.yaml") + "}");
  for (const auto& [from, to] : swaps) swap(from, to);
  const std::string path = dir + "/" + name + ".spec.yaml";
  std::ofstream(path) << text;
  return path;
}

}  // namespace

TEST_CASE("forwarding follows the fabric: reroute around a dark circuit, make-before-break",
          "[vlab][forwarding-reroute]") {
  const auto t0 = std::chrono::steady_clock::now();
  Lab shared(kSharedRing, 180s, Sharing::kShared);
  const std::string lab = shared.state().name;
  const std::string work = (fs::temp_directory_path() / ("fwdrun-reroute-" + std::to_string(::getpid()))).string();
  fs::remove_all(work);
  fs::create_directories(work);

  // 1. Break first (make_before_break: false), no dark circuit: the matrix during the change to
  //    the line, with ring-a's routes still installed, loses the pairs whose path (either way)
  //    crosses h4:eth2 <-> h1:eth1.
  const std::string bbm = spec_variant(work, "break-first",
                                       {{"make_before_break: true", "make_before_break: false"},
                                        {"reroute_on_dark: true", "reroute_on_dark: false"},
                                        {"warmup_s: 8", "warmup_s: 0.5"}});
  auto a = ocslab_cli({"run", bbm, "-o", work + "/break-first", "--no-plot"});
  std::cout << a.out << a.err;
  REQUIRE(a.status == 0);
  const json meta_a = json::parse(read_file_or_empty(work + "/break-first/meta.json"));
  REQUIRE(meta_a["forwarding"]["changes"].size() == 1);
  const json change_a = meta_a["forwarding"]["changes"][0];
  const double run_a_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  // 2. The spec as shipped, its runner in the background: once it captures (run.json), the test
  //    darkens h1:eth1's receive port (17) for 3 s, a dark spell the emulator ends by itself. The
  //    runner reroutes at once and takes the matrix (longer than the spell: the rerouted paths are
  //    what the relays' counters show, whether or not the circuit is back), then restores the
  //    ring's routes, before the change at the latest.
  const std::string spec = spec_variant(work, "follow", {});
  const std::string out = work + "/follow";
  SpawnOptions so;
  so.log_file = work + "/follow.log";
  const pid_t runner = spawn_program({testing::bin_path("ocslab"), "run", spec, "-o", out, "--no-plot"}, so);
  testing::poll_until([&] { return fs::exists(out + "/run.json") || !process_alive(runner); }, 300s, 100ms);
  INFO(read_file_or_empty(so.log_file));
  if (!process_alive(runner)) ::kill(runner, SIGKILL);
  REQUIRE(fs::exists(out + "/run.json"));
  auto dark = ocslab_cli({"vlab", "timing", lab, "--dark-port", "17", "--dark-for", "3000"});
  INFO(dark.out << dark.err);
  REQUIRE(dark.status == 0);
  const std::string reroute_matrix = out + "/forwarding-verify-0-ring-a.reroute-1.json";
  testing::poll_until([&] { return !process_alive(runner); }, 300s, 200ms);
  int status = 0;
  REQUIRE(::waitpid(runner, &status, 0) == runner);
  const std::string log = read_file_or_empty(so.log_file);
  std::cout << log;
  REQUIRE(WIFEXITED(status));
  REQUIRE(WEXITSTATUS(status) == 0);

  const json meta = json::parse(read_file_or_empty(out + "/meta.json"));
  const json& fwd = meta["forwarding"];
  // The reroute: the dark circuit left out, every host's routes applied within 2 s of the power
  // monitor's reading, and the matrix then reaches all 12 pairs over the three survivors.
  REQUIRE(fwd["reroutes"].size() >= 2);
  const json& r1 = fwd["reroutes"][0];
  CHECK(r1["ok"] == true);
  CHECK(r1["dark_circuits"] == json::array({"h4:eth2 <-> h1:eth1"}));
  CHECK(r1["circuits"] == 3);
  CHECK(r1["unrouted_pairs"] == 0);
  const double reroute_ms = r1["detected_to_applied_ms"].get<double>();
  CHECK(reroute_ms > 0);
  CHECK(reroute_ms < 2000);
  const json m = json::parse(read_file_or_empty(reroute_matrix));
  std::cout << read_file_or_empty(out + "/forwarding-verify-0-ring-a.reroute-1.txt");
  CHECK(m["all_reachable"] == true);
  CHECK(m["hops_as_planned"] == true);
  CHECK(r1["matrix_reachable"] == 12);
  // h4 -> h1 was one hop over the dark circuit; now three, through h3 and h2, to h1's eth2.
  CHECK(matrix_pair(m, "h4", "h1")["hops"] == 3);
  CHECK(matrix_pair(m, "h4", "h1")["relays"] == json::array({"h3", "h2"}));
  CHECK(matrix_pair(m, "h4", "h1")["dst_ip"] == "10.0.0.11/32");
  // Lit again: the ring's routes back, before the planned change.
  const json& r2 = fwd["reroutes"][1];
  // Lit again when the spell ended, seen once the matrix was taken.
  std::cout << "forwarding reroute test: the routes restored "
            << (r2["applied_ns"].get<int64_t>() - r1["detected_ns"].get<int64_t>()) / 1e6
            << " ms after the dark circuit was seen\n";
  CHECK(r2["ok"] == true);
  CHECK(r2["dark_circuits"].empty());
  CHECK(r2["circuits"] == 4);

  // The planned change ring-a -> line with make-before-break, from the whole ring: the bridge
  // went on before the switch's command, and the matrix during the change lost fewer pairs.
  REQUIRE(fwd["changes"].size() == 1);
  const json& change = fwd["changes"][0];
  CHECK(change["kept"] == 3);
  CHECK(change["broken"] == 1);
  CHECK(change["bridge"]["ok"] == true);
  CHECK(change["bridge"]["applied_ns"].get<int64_t>() > r2["applied_ns"].get<int64_t>());
  CHECK(change_a["kept"] == 3);
  CHECK(change_a["broken"] == 1);
  CHECK_FALSE(change_a.contains("bridge"));
  const int lost_with = change["pairs_lost"].get<int>(), lost_without = change_a["pairs_lost"].get<int>();
  std::cout << "forwarding reroute test: dark circuit h4:eth2 <-> h1:eth1: routes applied " << reroute_ms
            << " ms after the power monitor's reading, " << r1["matrix_reachable"] << " of 12 pairs reachable; "
            << "pairs lost during ring-a -> line: " << lost_without << " of 12 breaking first (predicted "
            << change_a["predicted_lost"] << "), " << lost_with << " of 12 with make-before-break (predicted "
            << change["predicted_lost"] << ")\n";
  CHECK(lost_without == change_a["predicted_lost"].get<int>());
  CHECK(lost_with == change["predicted_lost"].get<int>());
  CHECK(lost_without == 4);
  CHECK(lost_with == 0);
  CHECK(lost_with < lost_without);
  CHECK_THAT(log, Contains("pairs lost reachability during the change (make-before-break on"));
  CHECK_THAT(a.err + a.out, Contains("pairs lost reachability during the change (make-before-break off"));

  // The records are timeline rows too.
  const std::string timeline = read_file_or_empty(out + "/timeline.csv");
  CHECK_THAT(timeline, Contains("lab,forwarding,ring-a,reroute_ms"));
  CHECK_THAT(timeline, Contains("lab,forwarding,line,bridge_ms"));
  CHECK_THAT(timeline, Contains("lab,forwarding,line,pairs_lost"));
  // Cleared at the end, as every forwarding run.
  for (const char* h : {"h1", "h2", "h3", "h4"}) CHECK(shared.run(h, "ip route show proto 79").empty());
  fs::remove_all(work);
  std::cout << "forwarding reroute test: break-first run " << run_a_s << " s, whole test "
            << std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() << " s\n";
}
