// `ocslab analyze` on a real `ocslab-agent capture`: a veth pair in a namespace of the test's
// own, the peer end taken down and up twice while the agent's carrier probe watches the other
// end; the analysis must find two reconfigurations with carrier down and back up, and their
// carrier-down durations must match the script's. Needs root (network namespaces).
#include <catch2/catch.hpp>

#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <future>
#include <iostream>
#include <sstream>
#include <thread>

#include "ocslab/analysis/breakdown.h"
#include "ocslab/analysis/timeline.h"
#include "ocslab/cli/ocslab_cli.h"
#include "ocslab/common/clock.h"
#include "ocslab/common/process.h"
#include "ocslab/testing/sshd_fixture.h"

using namespace std::chrono_literals;
using Catch::Matchers::Contains;

namespace {

// `ip netns add ocslab-t-analyze-<pid>`, deleted on destruction, also when the test fails.
class Netns {
 public:
  Netns() : name_("ocslab-t-analyze-" + std::to_string(::getpid())) {
    ocslab::testing::run_command("ip netns add " + name_);
  }
  ~Netns() { std::system(("ip netns del " + name_ + " >/dev/null 2>&1").c_str()); }
  Netns(const Netns&) = delete;
  Netns& operator=(const Netns&) = delete;
  const std::string& name() const { return name_; }
  void ip(const std::string& args) const { ocslab::testing::run_command("ip -n " + name_ + " " + args); }

 private:
  std::string name_;
};

}  // namespace

TEST_CASE("ocslab analyze finds the two carrier outages of a real ocslab-agent capture", "[integration]") {
  Netns ns;
  ns.ip("link add ana0 type veth peer name anb0");
  ns.ip("link set dev ana0 up");
  ns.ip("link set dev anb0 up");
  ocslab::testing::TempDir dir;
  const std::string csv = dir.path() + "/t.csv";

  // The capture runs for 9 s in the namespace. Its file is written through a buffer, so the
  // script cannot wait for the first sample: it gives the agent 2 s to start (checked below),
  // which also lets linkwatch's one-second window pass, so the first loss is reported at once.
  const int64_t launched = ocslab::realtime_ns();
  auto capture = std::async(std::launch::async, [&] {
    return ocslab::run_program({"ip", "netns", "exec", ns.name(), ocslab::testing::bin_path("ocslab-agent"), "capture",
                                "--probes", "carrier", "--if", "ana0", "--duration", "9", "--host", "h1", "-o", csv});
  });
  // load-bound: the capture's start cannot be observed from outside; 2 s are assumed enough for it to be running.
  std::this_thread::sleep_for(2000ms);  // kept: see above, the start cannot be observed
  const std::vector<std::chrono::milliseconds> dark = {1000ms, 600ms};
  std::vector<int64_t> down_at;
  for (auto d : dark) {
    down_at.push_back(ocslab::realtime_ns());
    ns.ip("link set dev anb0 down");
    // load-safe: the dark time the analysis measures is taken from the stamps around it, so a late wake lengthens what
    // is measured, not the error.
    std::this_thread::sleep_for(d);  // kept: the dark time is what the analysis must measure
    ns.ip("link set dev anb0 up");
    // load-safe: a lower bound: past linkwatch's 1 s window; a late wake only lengthens it.
    std::this_thread::sleep_for(1500ms);  // kept: light between losses, past linkwatch's 1 s window
  }
  capture.get();
  std::cout << "capture:\n"
            <<
      [&] {
        std::ifstream f(csv);
        std::stringstream s;
        s << f.rdbuf();
        return s.str();
      }() << "\n";

  std::ostringstream out, err;
  int rc = ocslab::cli::run_ocslab({"analyze", csv}, out, err);
  std::cout << "ocslab analyze " << csv << ":\n" << out.str() << err.str();
  REQUIRE(rc == 0);
  CHECK_THAT(out.str(), Contains("reconfigs    2"));
  CHECK_THAT(out.str(), Contains("2 host/interface rows: 2 ok, 0 failed, 0 unaffected, 0 incomplete"));
  CHECK_THAT(out.str(), Contains("cut by       layer edges"));
  CHECK(std::filesystem::exists(dir.path() + "/breakdown.csv"));
  CHECK(std::filesystem::exists(dir.path() + "/summary.json"));

  // The same numbers through the library, against the script's clock.
  auto tl = ocslab::analysis::read_timeline(csv);
  REQUIRE(!tl.events.empty());
  INFO("the agent's first sample came " << (tl.events[0].t_ns - launched) / 1e6 << " ms after it was launched");
  REQUIRE(tl.events[0].t_ns < down_at[0]);  // else it started too late for the script
  auto b = ocslab::analysis::compute_breakdown(tl);
  REQUIRE(b.rows.size() == 2);
  for (size_t i = 0; i < 2; ++i) {
    const auto& r = b.rows[i];
    INFO("reconfiguration " << i + 1);
    CHECK(r.iteration == static_cast<int>(i + 1));
    CHECK(r.host == "h1");
    CHECK(r.interface == "ana0");
    REQUIRE(r.edges[ocslab::analysis::kCarrierDown]);
    REQUIRE(r.edges[ocslab::analysis::kCarrierUp]);
    int64_t down = *r.edges[ocslab::analysis::kCarrierDown];
    int64_t up = *r.edges[ocslab::analysis::kCarrierUp];
    double down_ms = static_cast<double>(up - down) / 1e6;
    double after_script_ms = static_cast<double>(down - down_at[i]) / 1e6;
    std::cout << "reconfiguration " << i + 1 << ": carrier down " << after_script_ms
              << " ms after `ip link set down` began, down for " << down_ms << " ms (script: " << dark[i].count()
              << " ms)\n";
    // `ip` itself takes a few ms to start; the kernel reports a veth's loss promptly.
    CHECK(after_script_ms >= 0);
    CHECK(after_script_ms < 300);
    CHECK(down_ms > static_cast<double>(dark[i].count()) - 50);
    CHECK(down_ms < static_cast<double>(dark[i].count()) + 400);
    CHECK_FALSE(r.edges[ocslab::analysis::kIssued]);
    CHECK(r.status == ocslab::analysis::Status::kOk);
  }
}
