// `ocslab-agent module` on a real interface without module access: a veth pair in a fresh
// network namespace, through the real ethtool reader (netlink, then the legacy ioctl) and the
// real driver lookup.
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "ocslab/common/exit_code.h"
#include "ocslab/testing/sshd_fixture.h"

using Catch::Matchers::Contains;

TEST_CASE("ocslab-agent module: a veth in its own namespace has no module EEPROM access (exit 3, driver veth)",
          "[agent][module]") {
  const std::string ns = "ocslab-t-module-" + std::to_string(::getpid());
  ocslab::testing::run_command("ip netns add " + ns);
  struct Cleanup {
    std::string ns;
    ~Cleanup() { std::system(("ip netns del " + ns + " >/dev/null 2>&1").c_str()); }
  } cleanup{ns};
  ocslab::testing::run_command("ip -n " + ns + " link add mveth0 type veth peer name mveth1 && ip -n " + ns +
                               " link set mveth0 up && ip -n " + ns + " link set mveth1 up");
  std::string cmd =
      "ip netns exec " + ns + " " + ocslab::testing::bin_path("ocslab-agent") + " module mveth0 --json 2>&1";
  FILE* p = ::popen(cmd.c_str(), "r");
  REQUIRE(p);
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  int st = ::pclose(p);
  INFO(out);
  REQUIRE(WIFEXITED(st));
  CHECK(WEXITSTATUS(st) == ocslab::kExitRefused);
  // stderr's line and stdout's object share the pipe in either order; the object is the braces.
  REQUIRE(out.find('{') != std::string::npos);
  auto j = nlohmann::json::parse(out.substr(out.find('{'), out.rfind('}') - out.find('{') + 1));
  CHECK(j["interface"] == "mveth0");
  CHECK(j["error"] == "not_supported");
  CHECK(j["driver"] == "veth");
  CHECK_THAT(out, Contains("mveth0: module EEPROM not supported by this NIC (driver veth)"));
}
