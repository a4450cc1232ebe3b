// The agent sessions the reconfiguration experiment opens: every RDMA probe request carries the
// run's control secret, the same for the server and the client of a pair, fresh per run.
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>

#include "ocslab/common/error.h"

#include "ocslab/runner/host_session.h"
#include "ocslab/runner/target.h"
#include "ocslab/testing/sshd_fixture.h"
#include "spec_test_support.h"

using namespace ocslab;
using namespace ocslab::runner;

namespace {

// Every rdma request's secret, and how many servers and clients there were.
std::set<std::string> rdma_secrets(const std::vector<HostTarget>& targets, int& servers, int& clients) {
  std::set<std::string> secrets;
  for (const auto& t : targets)
    for (const auto& p : t.probes) {
      if (p.name != "rdma") continue;
      std::string role = p.params.at("role");
      (role == "server" ? servers : clients)++;
      secrets.insert(p.params.at("secret").get<std::string>());
    }
  return secrets;
}

}  // namespace

TEST_CASE("host targets: the RDMA probes of a run share one fresh control secret", "[runner][rdma]") {
  Target t;
  t.spec = load_experiment_spec(spec_test::source_dir() + "/experiments/specs/demo.yaml");
  REQUIRE(t.spec.rdma.pairs.size() == 4);
  int servers = 0, clients = 0;
  auto first = rdma_secrets(host_targets(t, "run-1"), servers, clients);
  CHECK(servers == 4);
  CHECK(clients == 4);
  REQUIRE(first.size() == 1);
  CHECK(first.begin()->size() == 64);
  CHECK(first.begin()->find_first_not_of("0123456789abcdef") == std::string::npos);
  auto second = rdma_secrets(host_targets(t, "run-2"), servers, clients);
  REQUIRE(second.size() == 1);
  CHECK(*second.begin() != *first.begin());
}

// A package user whose ocslab lacks the agent is told which package to install; a build tree is
// told to build it (issue 47: the message used to say "build it first" to both).
TEST_CASE("install_binary: a missing program names the package in an installed tree, the build in a build tree",
          "[runner]") {
  testing::TempDir dir;
  namespace fs = std::filesystem;
  const std::string installed = dir.path() + "/usr/bin/ocslab-agent";
  fs::create_directories(dir.path() + "/usr/bin");
  CHECK_THROWS_WITH(
      install_binary(installed, dir.path() + "/lab-bin", "ocslab-agent"),
      "cannot find ocslab-agent (" + installed + "): install the ocslab-agent package (apt-get install ocslab-agent)");
  CHECK_THROWS_WITH(
      install_binary(dir.path() + "/usr/bin/ocslab-collbench-verbs", dir.path() + "/lab-bin", "ocslab-collbench-verbs"),
      Catch::Contains("install the ocslab package"));
  fs::create_directories(dir.path() + "/build/bin");
  std::ofstream(dir.path() + "/build/CMakeCache.txt") << "# a build tree\n";
  CHECK_THROWS_WITH(install_binary(dir.path() + "/build/bin/ocslab-agent", dir.path() + "/lab-bin", "ocslab-agent"),
                    Catch::EndsWith("build it first (cmake --build " + dir.path() + "/build --target ocslab-agent)"));
  CHECK_FALSE(fs::exists(dir.path() + "/lab-bin"));
}
