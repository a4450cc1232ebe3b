// `ocslab-agent forwarding fabric --from-switch` against the project's OCS emulator on
// loopback (`ocsctl emulate`, a real process): the circuits `ocsctl apply` makes are read back
// over TL1 (password from a 0600 credentials file) and NETCONF (SSH, known_hosts, password from
// the environment) and give the same fabric as the mapping file; a one-way circuit on the
// switch is refused naming it, and nothing is written.
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <csignal>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "ocslab/common/file.h"
#include "ocslab/common/process.h"
#include "ocslab/forwarding/routes.h"
#include "ocslab/forwarding/rule_plan.h"
#include "ocslab/forwarding/wiring.h"
#include "ocslab/ocsctl/credentials.h"
#include "ocslab/testing/source_dir.h"
#include "ocslab/testing/sshd_fixture.h"
#include "ocslab/testing/wait.h"

using namespace ocslab;
using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;

namespace {

std::string example(const std::string& name) { return ocslab::testing::source_dir() + "/forwarding/examples/" + name; }

std::string plan_json(const forwarding::Fabric& f) {
  return to_json(forwarding::make_plan(f, forwarding::compute_routes(f))).dump();
}

// `ocsctl emulate` on loopback ports of its own choosing, stopped with SIGINT.
class Emulator {
 public:
  explicit Emulator(const std::string& dir) {
    std::string ready = dir + "/ready.json";
    SpawnOptions o;
    o.log_file = dir + "/emulate.log";
    pid_ = spawn_program({testing::bin_path("ocsctl"), "emulate", "--size", "16x16", "--switching-ms", "1", "--listen",
                          "0", "--netconf", "0", "--ready-file", ready},
                         o);
    const bool up = testing::poll_until([&] { return ::access(ready.c_str(), R_OK) == 0; }, std::chrono::seconds(60));
    INFO(ocslab::read_file_or_empty(o.log_file));
    REQUIRE(up);
    auto j = nlohmann::json::parse(ocslab::read_file_or_empty(ready));
    tl1 = "tl1://admin@127.0.0.1:" + std::to_string(j["tl1"].get<int>());
    netconf = "netconf://admin@127.0.0.1:" + std::to_string(j["netconf"].get<int>());
    known_hosts = dir + "/known_hosts";
    std::ofstream(known_hosts) << j["known_hosts"]["netconf"].get<std::string>() << "\n";
  }
  ~Emulator() {
    ::kill(pid_, SIGINT);
    int status = 0;
    ::waitpid(pid_, &status, 0);
  }
  std::string tl1, netconf, known_hosts;

 private:
  pid_t pid_ = -1;
};

// Sets the switch password in the environment for one scope (the child processes inherit it).
struct PasswordEnv {
  PasswordEnv() { ::setenv(ocs::kPasswordEnv, "root", 1); }
  ~PasswordEnv() { ::unsetenv(ocs::kPasswordEnv); }
};

ProgramResult agent(std::vector<std::string> args) {
  args.insert(args.begin(), {testing::bin_path("ocslab-agent"), "forwarding", "fabric"});
  return run_program_status(args);
}

void ocsctl(const std::string& url, std::vector<std::string> args) {
  PasswordEnv pw;
  args.insert(args.begin(), {testing::bin_path("ocsctl"), "-s", url});
  auto r = run_program_status(args);
  INFO(r.out << r.err);
  REQUIRE(r.status == 0);
}

}  // namespace

TEST_CASE("forwarding fabric --from-switch: the emulator's circuits give the mapping's fabric",
          "[forwarding][fabric]") {
  ::unsetenv(ocs::kPasswordEnv);
  testing::TempDir dir;
  Emulator emu(dir.path());
  const std::string wiring = example("vlab-ring4.wiring.yaml");
  const std::string out = dir.path() + "/fabric.yaml";
  std::string creds = dir.path() + "/credentials";
  std::ofstream(creds) << "# test switch\n127.0.0.1 admin root\n";
  ::chmod(creds.c_str(), 0600);

  // Ring A, plus a circuit of another lab on ports the wiring does not name.
  ocsctl(emu.tl1, {"apply", example("ring4-a.mapping.yaml")});
  ocsctl(emu.tl1, {"connect", "12-30"});

  SECTION("TL1, password from a credentials file: ring4.yaml's fabric; the foreign circuit is ignored") {
    auto r = agent({"--wiring", wiring, "--from-switch", emu.tl1, "--credentials", creds, "-o", out});
    INFO(r.out << r.err);
    REQUIRE(r.status == 0);
    CHECK(r.out == "wrote " + out + ": 4 hosts, 8 ports, 4 circuits\n");
    CHECK(r.err == "note: 1 circuit(s) between ports the wiring does not name ignored: 12-30\n");
    CHECK_THAT(ocslab::read_file_or_empty(out),
               StartsWith("# Derived by ocslab-agent forwarding fabric from the wiring " + wiring +
                          "\n# and the circuits of switch " + emu.tl1 + ".\nhosts:\n"));
    forwarding::Fabric derived = forwarding::load_fabric_file(out);
    CHECK(plan_json(derived) == plan_json(forwarding::load_fabric_file(example("ring4.yaml"))));
    // The same fabric as from the mapping file, except the comment naming the source.
    auto m = agent({"--wiring", wiring, "--mapping", example("ring4-a.mapping.yaml")});
    REQUIRE(m.status == 0);
    CHECK(ocslab::read_file_or_empty(out).substr(ocslab::read_file_or_empty(out).find("hosts:")) ==
          m.out.substr(m.out.find("hosts:")));
    // --allow: the foreign circuit is not read at all; a wired port outside it is refused.
    auto a = agent({"--wiring", wiring, "--from-switch", emu.tl1, "--credentials", creds, "--allow", "1..8,17..24"});
    INFO(a.err);
    CHECK(a.status == 0);
    CHECK(a.err == "note: 1 circuit(s) with an end outside --allow not read: 12-30\n");
    auto narrow =
        agent({"--wiring", wiring, "--from-switch", emu.tl1, "--credentials", creds, "--allow", "1..7,17..24"});
    CHECK(narrow.status == 2);
    CHECK_THAT(narrow.err, Contains("vlab-ring4.wiring.yaml:47:5: h4:p1 tx 8 is outside the allow-list (1..7,17..24)"));
  }

  SECTION("NETCONF over SSH after re-wiring to ring B: the new ring") {
    ocsctl(emu.tl1, {"apply", "--replace", example("ring4-b.mapping.yaml")});
    PasswordEnv pw;
    auto r = agent({"--wiring", wiring, "--from-switch", emu.netconf, "--known-hosts", emu.known_hosts});
    INFO(r.out << r.err);
    REQUIRE(r.status == 0);
    auto m = agent({"--wiring", wiring, "--mapping", example("ring4-b.mapping.yaml")});
    REQUIRE(m.status == 0);
    CHECK(r.out.substr(r.out.find("hosts:")) == m.out.substr(m.out.find("hosts:")));
    CHECK_THAT(r.out, Contains("  - \"h1:p1 <-> h3:p0\"\n  - \"h2:p0 <-> h3:p1\"\n"));
  }

  SECTION("a one-way circuit on the switch is refused naming it; the earlier file stays") {
    std::ofstream(out) << "earlier fabric\n";
    ocsctl(emu.tl1, {"disconnect", "3"});  // h2:p0 -> h1:p1 gone; h1:p1 -> h2:p0 (2-19) stays
    auto r = agent({"--wiring", wiring, "--from-switch", emu.tl1, "--credentials", creds, "-o", out});
    CHECK(r.status == 2);
    CHECK(r.err == "ocslab-agent forwarding fabric: switch " + emu.tl1 +
                       ": circuit 2-19 carries h1:p1 -> h2:p0, but h2:p0's tx (ingress 3) is in no circuit: "
                       "forwarding needs both directions (add circuit 3-18)\n");
    CHECK(ocslab::read_file_or_empty(out) == "earlier fabric\n");
    CHECK_FALSE(std::ifstream(out + ".tmp").good());
  }

  SECTION("a wiring that does not fit the switch's 16x16 layout is refused naming the cable") {
    std::string bad = ocslab::read_file_or_empty(wiring);
    bad.replace(bad.find("tx: 8, rx: 24"), 13, "tx: 8, rx: 40");
    std::ofstream(dir.path() + "/bad.wiring.yaml") << bad;
    PasswordEnv pw;
    auto r = agent({"--wiring", dir.path() + "/bad.wiring.yaml", "--from-switch", emu.tl1});
    CHECK(r.status == 2);
    CHECK(r.err == "ocslab-agent forwarding fabric: " + dir.path() +
                       "/bad.wiring.yaml:47:5: h4:p1 rx 40 is not an "
                       "egress port (switch " +
                       emu.tl1 + " is 16x16: ingress 1..16, egress 17..32)\n");
  }

  SECTION("credentials as ocsctl: a group-readable file and a switch nobody answers at are refused") {
    ::chmod(creds.c_str(), 0644);
    auto r = agent({"--wiring", wiring, "--from-switch", emu.tl1, "--credentials", creds});
    CHECK(r.status == 2);
    CHECK_THAT(r.err, Contains(creds));
    PasswordEnv pw;
    auto gone =
        agent({"--wiring", wiring, "--from-switch",
               "tl1://admin@127.0.0.1:" + std::to_string(testing::free_loopback_port()), "--timeout-ms", "1000"});
    CHECK(gone.status == 4);
    CHECK(gone.out.empty());
  }
}
