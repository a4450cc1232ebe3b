// The runner's host-based forwarding end to end (runner/lab_forwarding.h): `ocslab run` on four
// guests wired as ring4 with a `forwarding:` section applies every host's plan (if2 macvlans
// made by ocslab), writes the verify matrix (an RC ping per ordered pair through the agent's
// `forwarding ping`, hops from the relays' filter counters), reconfigures the OCS to another
// ring, re-applies and verifies again, and clears every host at the end. A runner killed with
// its forwarding applied leaves it to `ocslab recover`, which clears it.
#include <signal.h>
#include <sys/wait.h>
#include <catch2/catch.hpp>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include "ocslab/common/exit_code.h"

#include <thread>
#include "lab_fixture.h"
#include "ocslab/common/process.h"
#include "ocslab/ocsctl/ssh_session.h"
#include "ocslab/runner/target.h"
#include "ocslab/testing/sshd_fixture.h"
#include "ocslab/testing/wait.h"
#include "ocslab/vlab/lab_spec.h"
#include "ocslab/vlab/lab_state.h"

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using namespace ocslab;
using Catch::Matchers::Contains;
using nlohmann::json;
using vlab_test::kSharedRing;
using vlab_test::Lab;
using vlab_test::matrix_pair;
using vlab_test::ocslab_cli;
using vlab_test::read_file;
using vlab_test::Sharing;
using vlab_test::source_path;

namespace {

// What a guest holds of ocslab's forwarding: routes of protocol 79, permanent neighbours on the
// fabric, macvlans and clsacts, then "cleared" when the journal's last operation is a clear.
// "cleared\n" alone: nothing of ocslab's is left and the last operation was the clear.
std::string forwarding_left(const Lab& lab, const std::string& host, const std::string& state_dir) {
  auto x = lab.exec(host,
                    "ip route show proto 79; ip neigh show nud permanent | grep '^10\\.0\\.0\\.'; "
                    "ip -br link show type macvlan; tc qdisc show | grep clsact; "
                    "grep -q '\"clear\"' " +
                        state_dir + "/journal.json && echo cleared");
  return x.out;
}

}  // namespace

TEST_CASE("the runner applies forwarding per mapping, verifies the matrix, re-applies and clears",
          "[vlab][forwarding-runner]") {
  auto t0 = std::chrono::steady_clock::now();
  std::string spec = source_path("tests/vlab/labs/fwdrun-ring.spec.yaml");
  // The shared ring lab, reset: the spec names its file, so the runner uses it as it is (lab.keep
  // defaults to true) and the next case gets it back reset.
  Lab shared(kSharedRing, 180s, Sharing::kShared);
  std::string out = (fs::temp_directory_path() / ("fwdrun-" + std::to_string(::getpid()))).string();
  fs::remove_all(out);
  auto r = ocslab_cli({"run", spec, "-o", out, "--no-plot"});
  std::cout << r.out << r.err;
  REQUIRE(r.status == 0);
  double run_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  // Ring A (the lab's links): every pair reachable; h1 <-> h3 and h2 <-> h4 opposite, two hops
  // through the planned relay, whose filter counted the ping.
  REQUIRE(fs::exists(out + "/forwarding-verify-0-ring-a.csv"));
  std::cout << read_file_or_empty(out + "/forwarding-verify-0-ring-a.txt")
            << read_file_or_empty(out + "/forwarding-verify-1-ring-b.txt");
  json a = json::parse(read_file_or_empty(out + "/forwarding-verify-0-ring-a.json"));
  CHECK(a["pairs"].size() == 12);
  CHECK(a["all_reachable"] == true);
  CHECK(a["hops_as_planned"] == true);
  for (const auto& [h, ok] : a["in_sync"].items()) CHECK(ok == true);
  CHECK(matrix_pair(a, "h1", "h3")["hops"] == 2);
  CHECK(matrix_pair(a, "h1", "h3")["relays"] == json::array({"h2"}));
  // h1's two addresses are both two hops from h3: the lowest port name (eth1, 10.0.0.10) wins,
  // entered over its own circuit from h4.
  CHECK(matrix_pair(a, "h3", "h1")["dst_ip"] == "10.0.0.10/32");
  CHECK(matrix_pair(a, "h3", "h1")["relays"] == json::array({"h4"}));
  CHECK(matrix_pair(a, "h1", "h2")["hops"] == 1);
  CHECK(matrix_pair(a, "h2", "h4")["hops"] == 2);

  // Ring B after the reconfiguration (h1 - h3 - h2 - h4 - h1): h1 <-> h2 are opposite now and
  // go through h3; h1 <-> h3 are direct.
  json b = json::parse(read_file_or_empty(out + "/forwarding-verify-1-ring-b.json"));
  CHECK(b["all_reachable"] == true);
  CHECK(b["hops_as_planned"] == true);
  CHECK(matrix_pair(b, "h1", "h2")["hops"] == 2);
  CHECK(matrix_pair(b, "h1", "h2")["relays"] == json::array({"h3"}));
  CHECK(matrix_pair(b, "h1", "h3")["hops"] == 1);
  CHECK(matrix_pair(b, "h3", "h4")["hops"] == 2);

  // The apply times are timeline rows: one per host and mapping.
  std::string timeline = read_file_or_empty(out + "/timeline.csv");
  for (const char* h : {"h1", "h2", "h3", "h4"}) {
    CHECK_THAT(timeline, Contains(std::string(h) + ",forwarding,ring-a,apply_ms"));
    CHECK_THAT(timeline, Contains(std::string(h) + ",forwarding,ring-b,apply_ms"));
  }

  // clear at the end: no ocslab route, permanent neighbour, macvlan or clsact is left.
  auto no_state = [&] {
    for (const char* h : {"h1", "h2", "h3", "h4"}) {
      INFO(h);
      // Nothing of ocslab's is left; the last operation in the journal is the clear.
      CHECK(forwarding_left(shared, h, "/var/lib/fwdrun-ring") == "cleared\n");
    }
  };
  no_state();
  const vlab::LabState& lab = shared.state();
  auto guest = [&](const std::string& h, const std::string& cmd) { return shared.exec(h, cmd, 60s); };

  // By hand (`ocslab forwarding`), transactional across the lab: an interface named like h3's
  // if2 that is not ocslab's makes h3 refuse; the hosts that applied are rolled back.
  REQUIRE(guest("h3", "ip link add eth1v type dummy").exit_status == 0);
  auto f = ocslab_cli({"forwarding", "apply", spec, "--mapping", "ring-a"});
  std::cout << f.out << f.err;
  CHECK(f.status == ocslab::kExitFailed);  // 5: failed, the others restored (common/exit_code.h)
  CHECK_THAT(f.err, Contains("failed on:\n  h3: ") && Contains("eth1v exists and is not ocslab's") &&
                        Contains("the other hosts were rolled back"));
  for (const char* h : {"h1", "h2", "h4"}) CHECK(guest(h, "ip route show proto 79").out.empty());
  REQUIRE(guest("h3", "ip link del eth1v").exit_status == 0);
  // Then apply, verify and clear ring B by hand.
  f = ocslab_cli({"forwarding", "apply", spec, "--mapping", "ring-b"});
  INFO(f.out << f.err);
  REQUIRE(f.status == 0);
  f = ocslab_cli({"forwarding", "verify", spec, "--mapping", "ring-b", "-o", out + "/by-hand"});
  std::cout << f.out << f.err;
  CHECK(f.status == 0);
  CHECK_THAT(f.out,
             Contains("12 of 12 pairs reachable, 12 over the planned path; hosts out of sync with the plan: none"));
  CHECK(fs::exists(out + "/by-hand/forwarding-verify-0-ring-b.csv"));

  // every_nic on ring B: RDMA from h1's eth1, the NIC its routes to these addresses do not
  // leave. To h2's eth1 (10.0.0.20, routed out of h1's eth2 via h3): out of eth1 to h4, whose
  // tree comes back through h1; h2's reply leaves its eth1 to h3, whose tree goes through h2
  // and h4. To h4's eth1 (10.0.0.41, routed via h3 and h2): h1's eth1 reaches h4 at its eth2,
  // and h4 sends it out of eth1 to h2, which hands it straight back (the owner's bounce).
  f = ocslab_cli(
      {"forwarding", "apply", source_path("tests/vlab/labs/fwdrun-ring-every-nic.spec.yaml"), "--mapping", "ring-b"});
  INFO(f.out << f.err);
  REQUIRE(f.status == 0);
  // The agent where the guests see it, installed the way `ocslab run` gives it to them (the lab's
  // bin folder, runner::install_binary): the build's own path is not theirs when the checkout is
  // under /tmp, which each guest replaces with its own (exit 127, 2026-12).
  const std::string agent = runner::install_binary(testing::bin_path("ocslab-agent"), lab.dir + "/bin", "ocslab-agent");
  for (const char* h : {"h1", "h2", "h4"})
    REQUIRE(guest(h, "umask 077; echo 0123456789abcdef0123456789abcdef > /tmp/every-nic.secret").exit_status == 0);
  int port = 19480;
  for (const auto& target : {std::pair<std::string, std::string>{"h2", "eth1"}, {"h4", "eth1"}}) {
    const std::string dst = target.first, dst_if = target.second;  // copies: a lambda captures them
    std::string listen = lab.host(dst).lan_ip.substr(0, lab.host(dst).lan_ip.find('/')) + ":" + std::to_string(++port);
    ocs::ExecResult srv;
    std::thread t([&] {
      srv = guest(dst, agent + " forwarding ping --if " + dst_if + " --listen " + listen +
                           " --secret-file /tmp/every-nic.secret --count 5 --timeout-s 40");
    });
    auto cli = guest("h1", agent + " forwarding ping --if eth1 --connect " + listen +
                               " --secret-file /tmp/every-nic.secret --count 5 --timeout-s 35");
    t.join();
    std::cout << "every_nic: h1 eth1 -> " << dst << " " << dst_if << ": " << cli.out;
    INFO(dst << ": " << cli.out << cli.err << "\nserver: " << srv.out << srv.err);
    CHECK(cli.exit_status == 0);
    CHECK(srv.exit_status == 0);
    CHECK_THAT(cli.out, Contains("\"ok\":5"));
  }
  f = ocslab_cli({"forwarding", "clear", spec});
  CHECK(f.status == 0);
  no_state();
  fs::remove_all(out);
  std::cout << "forwarding runner test: run " << run_s << " s, whole test "
            << std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() << " s\n";
}

TEST_CASE("kill -9 of a forwarding run: ocslab recover clears every host's forwarding", "[vlab][forwarding-runner]") {
  Lab shared(kSharedRing, 180s, Sharing::kShared);
  const std::string work = (fs::temp_directory_path() / ("fwdrun-kill-" + std::to_string(::getpid()))).string();
  fs::remove_all(work);
  fs::create_directories(work);
  // The runner's spec with a long dwell and no verify matrix: the kill lands once the first
  // mapping's forwarding is on every host and the probes capture (run.json written), long
  // before the schedule would end.
  std::string text = read_file_or_empty(source_path("tests/vlab/labs/fwdrun-ring.spec.yaml"));
  auto swap = [&](const std::string& from, const std::string& to) {
    const auto at = text.find(from);
    REQUIRE(at != std::string::npos);
    text.replace(at, from.size(), to);
  };
  swap("{vlab: fwdrun-ring.yaml}", "{vlab: " + source_path("tests/vlab/labs/fwdrun-ring.yaml") + "}");
  swap("verify: every", "verify: false");
  swap("dwell_s: 1,", "dwell_s: 300,");
  const std::string spec = work + "/fwdrun-kill.spec.yaml";
  std::ofstream(spec) << text;
  const std::string out = work + "/results";
  SpawnOptions so;
  so.log_file = work + "/run.log";
  const pid_t runner = spawn_program({testing::bin_path("ocslab"), "run", spec, "-o", out, "--no-plot"}, so);
  // run.json, or the runner ended before it (a refused spec: its log says why).
  testing::poll_until([&] { return fs::exists(out + "/run.json") || !process_alive(runner); }, 300s, 200ms);
  const bool started = fs::exists(out + "/run.json") && process_alive(runner);
  INFO(read_file_or_empty(so.log_file));
  if (!started) ::kill(runner, SIGKILL);
  REQUIRE(started);
  ::kill(runner, SIGKILL);
  int status = 0;
  REQUIRE(::waitpid(runner, &status, 0) == runner);
  REQUIRE(WIFSIGNALED(status));

  // The kill left every host's forwarding applied: its routes, and a journal whose last
  // operation is the apply.
  for (const char* h : {"h1", "h2", "h3", "h4"}) {
    const std::string left = forwarding_left(shared, h, "/var/lib/fwdrun-ring");
    INFO(h << ":\n" << left);
    CHECK_FALSE(shared.run(h, "ip route show proto 79").empty());
    CHECK_THAT(left, !Contains("cleared"));
  }

  auto r = ocslab_cli({"recover", out, "--no-plot"});
  std::cout << r.out << r.err;
  CHECK(r.status == ocslab::kExitFailed);  // the switch commands after the kill are missing
  CHECK_THAT(r.err, Contains("switch commands after"));
  CHECK_THAT(r.err, Contains("forwarding: the run's routes, neighbours and relay filters cleared on 4 of 4 host(s)"));
  const json meta = json::parse(read_file_or_empty(out + "/meta.json"));
  CHECK(meta["recovered"]["forwarding_cleared"] == json::array({"h1", "h2", "h3", "h4"}));
  CHECK_THAT(meta["problems"].dump(), !Contains("forwarding clear"));
  for (const char* h : {"h1", "h2", "h3", "h4"}) {
    INFO(h);
    CHECK(forwarding_left(shared, h, "/var/lib/fwdrun-ring") == "cleared\n");
  }
  fs::remove_all(work);
}
