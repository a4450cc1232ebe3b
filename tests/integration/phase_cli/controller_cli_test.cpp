// `ocslab controller` in-process against the OCS emulator: --check prints the plan, a bad file
// exits 2 naming file:line:col, and a real run serves two shims, rewires the switch for them
// and writes its events.
#include <catch2/catch.hpp>

#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <future>
#include <sstream>
#include <thread>

#include "ocslab/cli/ocslab_cli.h"
#include "ocslab/phase/shim.h"
#include "ocslab/testing/phase_lab.h"

using namespace phase_test;
using namespace ocslab::phase;

namespace {

int free_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a));
  socklen_t len = sizeof(a);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  ::close(fd);
  return ntohs(a.sin_port);
}

std::string write_config(const std::string& path, const Lab& lab, int port, int pp = 1, int dp = 2) {
  std::ofstream(path) << "job: cli\npp: " << pp << "\ndims: [{name: dp, size: " << dp
                      << "}]\nlisten: 127.0.0.1:" << port
                      << "\nack_timeout_ms: 5000\nrails:\n  - name: rail0\n    switch: " << lab.url()
                      << "\n    allow: 1..3,65..67\n    slots: [1-65, 2-66, 3-67]\n";
  return path;
}

// Ranks 0 and 1 of job "cli", connected once the controller listens (retried for up to 10 s);
// empty when it never did.
std::vector<std::unique_ptr<Shim>> connect_two_ranks(int port) {
  // load-safe: the ceiling of the retries until the controller listens; a hang guard.
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  std::vector<std::unique_ptr<Shim>> shims;
  while (shims.empty() && std::chrono::steady_clock::now() < deadline) {
    try {
      ShimOptions so;
      so.port = port;
      so.job = "cli";
      so.world = 2;
      so.rank = 0;
      auto s0 = std::make_unique<Shim>(so);
      so.rank = 1;
      auto s1 = std::make_unique<Shim>(so);
      shims.push_back(std::move(s0));
      shims.push_back(std::move(s1));
    } catch (const std::exception&) {
      // load-safe: the retry interval of this bounded wait.
      std::this_thread::sleep_for(std::chrono::milliseconds(50));  // retry interval of this bounded wait
    }
  }
  return shims;
}

// Both ranks send once on group "pp" (ranks 0 and 1) at the same time; their decisions, by rank.
std::vector<Decision> both_ranks_send(const std::vector<std::unique_ptr<Shim>>& shims) {
  std::vector<Decision> d(2);
  std::vector<std::thread> ranks;
  for (int r = 0; r < 2; ++r) {
    ranks.emplace_back([&, r] {
      auto& s = *shims[static_cast<size_t>(r)];
      s.add_group("pp", "pp", {0, 1});
      d[static_cast<size_t>(r)] = s.pre_communication({"pp", "send", 64, 0});
      s.post_communication({"pp", "send", 64, 0});
    });
  }
  for (auto& t : ranks) t.join();
  return d;
}

}  // namespace

TEST_CASE("ocslab controller --check prints the plan; bad files exit 2 naming the line", "[phase][cli]") {
  Lab lab;
  auto cfg = write_config("/tmp/ocslab-phase-cli-check-" + std::to_string(::getpid()) + ".yaml", lab, 0);
  std::ostringstream out, err;
  CHECK(ocslab::cli::run_ocslab({"controller", cfg, "--check"}, out, err) == ocslab::cli::kExitOk);
  CHECK_THAT(out.str(),
             Catch::Contains("job cli: pp=1 ranks=2 (0=pp, 1=dp), initial topo_id 1, 2 sub-mappings / 4 entries") &&
                 Catch::Contains("rail rail0: 3 slots") && Catch::Contains("  1-66\n  2-65\n"));
  CHECK(lab.circuits().empty());  // --check touches nothing
  std::ofstream(cfg)
      << "job: cli\npp: 1\nrails: [{name: r, switch: 'tl1://admin@127.0.0.1:1', slots: [1-65], bogus: 1}]\n";
  std::ostringstream out2, err2;
  CHECK(ocslab::cli::run_ocslab({"controller", cfg}, out2, err2) == ocslab::cli::kExitInput);
  CHECK_THAT(err2.str(), Catch::Contains(cfg + ":3:") && Catch::Contains("unknown key 'bogus'"));
  std::ostringstream out3, err3;
  CHECK(ocslab::cli::run_ocslab({"controller", cfg, "--duration", "x"}, out3, err3) == ocslab::cli::kExitInput);
  std::remove(cfg.c_str());
}

TEST_CASE("ocslab controller serves shims and rewires the switch", "[phase][cli]") {
  Lab lab;
  ::setenv("OCSLAB_OCS_PASSWORD", "root", 1);
  int port = free_port();
  // Two stages of one rank each: DP groups of one have no circuits; the PP op pairs the stages.
  auto cfg = write_config("/tmp/ocslab-phase-cli-run-" + std::to_string(::getpid()) + ".yaml", lab, port, 2, 1);
  auto events = "/tmp/ocslab-phase-cli-events-" + std::to_string(::getpid()) + ".csv";
  std::ostringstream out, err;
  int rc = -1;
  std::thread cli([&] {
    rc = ocslab::cli::run_ocslab({"controller", cfg, "--duration", "4", "--events", events}, out, err);
  });
  // Wait until the job is wired (2 circuits) and the controller listens.
  std::vector<std::unique_ptr<Shim>> shims = connect_two_ranks(port);
  REQUIRE(shims.size() == 2);
  std::vector<Decision> d = both_ranks_send(shims);  // "11" -> "00"
  shims.clear();
  cli.join();
  CHECK(rc == ocslab::cli::kExitOk);
  INFO(err.str());
  CHECK_THAT(out.str(),
             Catch::Contains(fmt::format("{{\"listen\":\"127.0.0.1:{}\",\"job\":\"cli\",\"rails\":1}}", port)));
  CHECK(d[0].reconfigured);
  CHECK(d[1].topo.at("rail0") == "00");
  auto wired = lab.circuits();
  std::sort(wired.begin(), wired.end());
  CHECK(wired == std::vector<ocslab::ocs::Circuit>{{1, 66}, {2, 65}});
  std::ifstream ev(events);
  std::string all((std::istreambuf_iterator<char>(ev)), std::istreambuf_iterator<char>());
  CHECK_THAT(all, Catch::Contains("reconfig_end") &&
                      Catch::Contains("mono_ns,t_ns,kind,rank,rail,group,seq,stages,value,detail"));
  std::remove(cfg.c_str());
  std::remove(events.c_str());
}

TEST_CASE("ocslab controller with detect: masks a port whose light is lost and moves the rank to the spare slot",
          "[phase][cli][mask]") {
  Lab lab;
  ::setenv("OCSLAB_OCS_PASSWORD", "root", 1);
  int port = free_port();
  // Ranks 0 and 1 on slots 1-65 and 2-66 (a DP ring of two: 1->66, 2->65); slot 3-67 is the spare.
  auto cfg = "/tmp/ocslab-phase-cli-detect-" + std::to_string(::getpid()) + ".yaml";
  std::ofstream(cfg) << "job: cli\npp: 1\ndims: [{name: dp, size: 2}]\nlisten: 127.0.0.1:" << port
                     << "\ndetect: {interval_ms: 10, dark_polls: 2}\nrails:\n  - name: rail0\n    switch: " << lab.url()
                     << "\n    allow: 1..3,65..67\n    slots: [1-65, 2-66, 3-67]\n";
  std::ostringstream cout_, cerr_;
  CHECK(ocslab::cli::run_ocslab({"controller", cfg, "--check"}, cout_, cerr_) == ocslab::cli::kExitOk);
  CHECK_THAT(cout_.str(), Catch::Contains("detect: every 10 ms, dark below -25 dBm for 2 readings, settle 30 ms"));

  auto events = "/tmp/ocslab-phase-cli-detect-" + std::to_string(::getpid()) + ".csv";
  std::ostringstream out, err;
  int rc = -1;
  std::thread cli([&] {
    rc = ocslab::cli::run_ocslab({"controller", cfg, "--duration", "3", "--events", events}, out, err);
  });
  // load-safe: the ceiling of a wait for the circuits (the event); a hang guard.
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (lab.circuits().size() < 2 && std::chrono::steady_clock::now() < deadline)
    // load-safe: the poll interval of the wait for the circuits.
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  REQUIRE(lab.circuits().size() == 2);
  // load-bound: assumes the controller's port watch has polled the lit circuits within 200 ms; not observable from
  // here.
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // the watch has seen the circuits lit
  std::promise<bool> closed;
  boost::asio::post(lab.io, [&] { closed.set_value(!lab.model.set_shutter({66}, true).has_value()); });
  REQUIRE(closed.get_future().get());
  cli.join();
  INFO(err.str());
  CHECK(rc == ocslab::cli::kExitOk);  // masked onto the spare: the job never fell back
  auto wired = lab.circuits();
  std::sort(wired.begin(), wired.end());
  CHECK(wired == std::vector<ocslab::ocs::Circuit>{{1, 67}, {3, 65}});
  std::ifstream ev(events);
  std::string all((std::istreambuf_iterator<char>(ev)), std::istreambuf_iterator<char>());
  CHECK_THAT(all, Catch::Contains(",port_failed,-1,rail0,") &&
                      Catch::Contains("no light leaves egress port 66 of circuit 1->66") &&
                      Catch::Contains(",masked,1,rail0,") &&
                      Catch::Contains("port 66 masked; rank 1 moved from slot 2/66 to 3/67"));
  CHECK_THAT(err.str(), Catch::Contains("problem: rail rail0: port 66 masked; rank 1 moved from slot 2/66 to 3/67"));

  // Bad detect keys name the line.
  std::ofstream(cfg) << "job: cli\npp: 1\ndims: [{name: dp, size: 2}]\ndetect: {interval_ms: 0}\nrails:\n  - name: "
                        "rail0\n    switch: "
                     << lab.url() << "\n    slots: [1-65, 2-66]\n";
  std::ostringstream out2, err2;
  CHECK(ocslab::cli::run_ocslab({"controller", cfg, "--check"}, out2, err2) == ocslab::cli::kExitInput);
  CHECK_THAT(err2.str(), Catch::Contains(cfg + ":4:") && Catch::Contains("detect.interval_ms must be 1..60000"));
  std::remove(cfg.c_str());
  std::remove(events.c_str());
}

TEST_CASE("ocslab controller reads its token file only when private, before touching a switch",
          "[phase][cli][security]") {
  Lab lab;
  ::setenv("OCSLAB_OCS_PASSWORD", "root", 1);
  const std::string base = "/tmp/ocslab-phase-cli-token-" + std::to_string(::getpid());
  auto cfg = write_config(base + ".yaml", lab, 0);
  std::ofstream(cfg, std::ios::app) << "token_file: " << base << ".token\n";
  std::ofstream(base + ".token") << "0123456789abcdef0123456789abcdef\n";
  ::chmod((base + ".token").c_str(), 0644);
  std::ostringstream out, err;
  CHECK(ocslab::cli::run_ocslab({"controller", cfg, "--duration", "0.1"}, out, err) != ocslab::cli::kExitOk);
  CHECK_THAT(err.str(), Catch::Contains(base + ".token") && Catch::Contains("chmod 600"));
  CHECK(lab.circuits().empty());  // refused before the job was placed
  std::ostringstream out2, err2;
  CHECK(ocslab::cli::run_ocslab({"controller", cfg, "--check"}, out2, err2) == ocslab::cli::kExitOk);
  CHECK_THAT(out2.str(), Catch::Contains("(token from " + base + ".token)"));
  std::remove(cfg.c_str());
  std::remove((base + ".token").c_str());
}

TEST_CASE(
    "ocslab controller under safe-window: --check shows the policy, a bad table is refused before the switch, "
    "a short window is declined and reported",
    "[phase][cli][policy]") {
  Lab lab;
  ::setenv("OCSLAB_OCS_PASSWORD", "root", 1);
  const std::string base = "/tmp/ocslab-phase-cli-policy-" + std::to_string(::getpid());
  int port = free_port();
  // Two stages of one rank each, wired "11"; the PP op (op 0 of the step) has 200 us before it.
  auto cfg = write_config(base + ".yaml", lab, port, 2, 1);
  std::ofstream(cfg, std::ios::app) << "policy: safe-window\nphase_table: " << base << ".csv\nswitch_time_ms: 5\n";
  std::ofstream(base + ".csv") << "index,group,type,bytes,idle_us\n0,pp,send,64,oops\n";
  std::ostringstream out, err;
  CHECK(ocslab::cli::run_ocslab({"controller", cfg, "--duration", "0.1"}, out, err) == ocslab::cli::kExitInput);
  CHECK_THAT(err.str(), Catch::Contains(base + ".csv:2:14: idle_us must be a non-negative integer, got 'oops'"));
  CHECK(lab.circuits().empty());  // refused before any switch was touched
  std::ofstream(base + ".csv") << "index,group,type,bytes,idle_us\n0,pp,send,64,200\n";
  std::ostringstream cout_, cerr_;
  REQUIRE(ocslab::cli::run_ocslab({"controller", cfg, "--check"}, cout_, cerr_) == ocslab::cli::kExitOk);
  CHECK_THAT(cout_.str(), Catch::Contains("policy safe-window (switch time 5 ms, 1 ops in " + base + ".csv)"));

  std::ostringstream rout, rerr;
  int rc = -1;
  std::thread cli([&] { rc = ocslab::cli::run_ocslab({"controller", cfg, "--duration", "3"}, rout, rerr); });
  std::vector<std::unique_ptr<Shim>> shims = connect_two_ranks(port);
  REQUIRE(shims.size() == 2);
  std::vector<Decision> d = both_ranks_send(shims);  // wants "00": declined
  shims.clear();
  cli.join();
  INFO(rerr.str());
  CHECK(rc == ocslab::cli::kExitOk);
  for (const auto& x : d) {
    CHECK_FALSE(x.reconfigured);
    CHECK(x.fallback);  // this op ran over the circuits as they were
    CHECK(x.topo.at("rail0") == "11");
  }
  CHECK_THAT(rerr.str(), Catch::Contains("ocslab controller: policy safe-window declined 1 reconfigurations"));
  // The switch kept the initial "11" (each stage's lone rank has no DP peer: no circuits).
  CHECK(lab.circuits().empty());
  std::remove(cfg.c_str());
  std::remove((base + ".csv").c_str());
}
