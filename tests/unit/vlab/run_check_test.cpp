// `ocslab run --check` refuses, offline and before touching a host or switch, every spec a run
// or `ocsctl` would refuse (a port used twice, a switch URL ocsctl does not take, a password in a
// URL, a duplicate key, a file that is not there, no password for the switch), each at its
// file:line:col with exit 2; passes every spec the repository ships; prints JSON with --json;
// and summarises a long schedule.
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "cli_run.h"
#include "ocslab/cli/ocslab_cli.h"
#include "ocslab/testing/source_dir.h"
#include "ocslab/testing/sshd_fixture.h"

namespace run_check_test {

namespace fs = std::filesystem;
using Catch::Matchers::Contains;
using vlab_unit::EnvVar;
using vlab_unit::run_cli;

// Real hosts and a switch nobody listens on: --check must not try to reach either.
const std::vector<std::string> kBase = {
    "name: chk",                                        // 1
    "lab:",                                             // 2
    "  inventory:",                                     // 3
    "    - name: h1",                                   // 4
    "      ssh: root@127.0.0.1:1",                      // 5
    "      nics:",                                      // 6
    "        - {name: eth1, tx_port: 1, rx_port: 9}",   // 7
    "        - {name: eth2, tx_port: 2, rx_port: 10}",  // 8
    "    - name: h2",                                   // 9
    "      ssh: root@127.0.0.1:1",                      // 10
    "      nics:",                                      // 11
    "        - {name: eth1, tx_port: 3, rx_port: 11}",  // 12
    "        - {name: eth2, tx_port: 4, rx_port: 12}",  // 13
    "switch:",                                          // 14
    "  url: scpi://127.0.0.1:1",                        // 15
    "mappings:",                                        // 16
    "  a: [h1:eth1 <-> h2:eth1]",                       // 17
    "  b: [h1:eth1 <-> h2:eth2]",                       // 18
    "schedule: {reconfigurations: 3}",                  // 19
};

struct Spec {
  std::string path;
  std::vector<std::string> lines;
  // "path:LINE:COL" of needle's first occurrence on line (1-based) at or after column `from`.
  std::string at(size_t line, const std::string& needle, size_t from = 0) const {
    const size_t col = lines.at(line - 1).find(needle, from);
    REQUIRE(col != std::string::npos);
    return path + ":" + std::to_string(line) + ":" + std::to_string(col + 1);
  }
};

Spec write_spec(const std::string& dir, std::vector<std::string> lines) {
  Spec s{dir + "/chk.yaml", std::move(lines)};
  std::ofstream out(s.path);
  for (const auto& l : s.lines) out << l << "\n";
  return s;
}

// The base spec with line n (1-based) replaced, or inserted before when insert.
Spec spec_with(const std::string& dir, size_t n, const std::string& text, bool insert = false) {
  auto lines = kBase;
  if (insert) {
    lines.insert(lines.begin() + static_cast<long>(n - 1), text);
  } else {
    lines.at(n - 1) = text;
  }
  return write_spec(dir, lines);
}

void refused(const Spec& s, const std::string& where, const std::string& message) {
  auto r = run_cli({"run", s.path, "--check"});
  INFO(r.out << r.err);
  CHECK(r.rc == ocslab::cli::kExitInput);
  CHECK_THAT(r.err, Contains(where + ": " + message));
  CHECK(r.out.empty());
}

TEST_CASE("run --check refuses what a run or ocsctl would, at file:line:col, exit 2", "[cli][check]") {
  ocslab::testing::TempDir dir;
  // Whatever the machine's environment: no switch password from it.
  EnvVar pw("OCSLAB_OCS_PASSWORD", nullptr), host("OCSLAB_OCS_PASSWORD_HOST", nullptr),
      creds("OCSLAB_OCS_CREDENTIALS", (dir.path() + "/no-credentials").c_str());

  SECTION("the base spec is valid") {
    auto r = run_cli({"run", write_spec(dir.path(), kBase).path, "--check"});
    INFO(r.err);
    CHECK(r.rc == 0);
    CHECK_THAT(r.out, Contains("is valid: 2 host(s), 2 mapping(s), 3 reconfiguration(s)"));
  }
  SECTION("double-booked egress: two NICs on one receive port") {
    auto s = spec_with(dir.path(), 13, "        - {name: eth2, tx_port: 4, rx_port: 11}");
    refused(s, s.at(13, "11}"), "h2:eth2 rx_port: port 11 used twice as egress (first at line 12)");
  }
  SECTION("double-booked ingress: two NICs on one transmit port") {
    auto s = spec_with(dir.path(), 8, "        - {name: eth2, tx_port: 1, rx_port: 10}");
    refused(s, s.at(8, "1, rx"), "h1:eth2 tx_port: port 1 used twice as ingress (first at line 7)");
  }
  SECTION("a switch URL ocsctl does not take: http") {
    auto s = spec_with(dir.path(), 15, "  url: http://ocs.lab");
    refused(s, s.at(15, "http"),
            "switch URL 'http://ocs.lab': unknown scheme 'http' (use tl1, tl1+ssh, netconf or scpi)");
  }
  SECTION("a password in the switch URL, never echoed") {
    auto s = spec_with(dir.path(), 15, "  url: tl1://admin:hunter2@ocs.lab");
    auto r = run_cli({"run", s.path, "--check"});
    CHECK(r.rc == ocslab::cli::kExitInput);
    CHECK_THAT(r.err, Contains(s.at(15, "tl1") + ": a URL with a password in it"));
    CHECK(r.err.find("hunter2") == std::string::npos);
    CHECK(r.out.find("hunter2") == std::string::npos);
  }
  SECTION("a password in a host's ssh login, never echoed") {
    auto s = spec_with(dir.path(), 5, "      ssh: 'root:hunter2@127.0.0.1:1'");
    auto r = run_cli({"run", s.path, "--check"});
    CHECK(r.rc == ocslab::cli::kExitInput);
    CHECK_THAT(r.err, Contains(s.at(5, "'root") + ": ssh must not carry a password"));
    CHECK(r.err.find("hunter2") == std::string::npos);
  }
  SECTION("a duplicate top-level key: the second one's position") {
    auto lines = kBase;
    lines.push_back("name: chk2");
    auto s = write_spec(dir.path(), lines);
    refused(s, s.at(20, "name"), "duplicate key 'name' (first at line 1, column 1): YAML keeps only one of them");
  }
  SECTION("a duplicate key in a nested mapping") {
    auto s = spec_with(dir.path(), 19, "schedule: {reconfigurations: 3, reconfigurations: 5}");
    refused(s, s.at(19, "reconfigurations", 20), "duplicate key 'reconfigurations' (first at line 19, column 12)");
  }
  SECTION("a duplicate key in a list's mapping (a host)") {
    auto s = spec_with(dir.path(), 10, "      ssh: root@127.0.0.1:2", true);  // h2 now has ssh twice
    refused(s, s.at(11, "ssh"), "duplicate key 'ssh' (first at line 10, column 7)");
  }
  SECTION("a missing identity file") {
    auto s = spec_with(dir.path(), 6, "      identity_file: no-such-key", true);
    refused(s, s.at(6, "no-such"), "identity_file " + dir.path() + "/no-such-key does not exist on this machine");
  }
  SECTION("a missing known_hosts file of the switch") {
    auto s = spec_with(dir.path(), 16, "  known_hosts: gone/known_hosts", true);
    refused(s, s.at(16, "gone"), "known_hosts " + dir.path() + "/gone/known_hosts does not exist on this machine");
  }
  SECTION("no password for a TL1 switch: the variables and the file named") {
    auto s = spec_with(dir.path(), 15, "  url: tl1://admin@192.0.2.7");
    refused(s, s.at(15, "tl1"),
            "no password for admin@192.0.2.7: set $OCSLAB_OCS_PASSWORD with $OCSLAB_OCS_PASSWORD_HOST=192.0.2.7 or "
            "add a line '192.0.2.7 admin PASSWORD' to the credentials file " +
                dir.path() + "/no-credentials (mode 0600)");
    // Present and bound to the switch: valid.
    EnvVar p2("OCSLAB_OCS_PASSWORD", "s3cret-value"), h2("OCSLAB_OCS_PASSWORD_HOST", "192.0.2.7");
    CHECK(run_cli({"run", s.path, "--check"}).rc == 0);
  }
  SECTION("a switch password bound to another switch: refused, never printed") {
    EnvVar p2("OCSLAB_OCS_PASSWORD", "s3cret-value"), h2("OCSLAB_OCS_PASSWORD_HOST", "192.0.2.99");
    auto s = spec_with(dir.path(), 15, "  url: tl1://admin@192.0.2.7");
    auto r = run_cli({"run", s.path, "--check"});
    CHECK(r.rc == ocslab::cli::kExitInput);
    CHECK_THAT(r.err, Contains(s.at(15, "tl1") + ": $OCSLAB_OCS_PASSWORD is not for switch host '192.0.2.7'"));
    CHECK(r.err.find("s3cret-value") == std::string::npos);
  }
}

// A shipped spec with its relative paths made absolute, so a copy can live in a scratch folder.
std::string shipped_spec_text(const std::string& file) {
  std::ifstream in(ocslab::testing::source_dir() + "/experiments/specs/" + file);
  std::stringstream ss;
  ss << in.rdbuf();
  std::string text = ss.str();
  for (size_t p = text.find("../"); p != std::string::npos; p = text.find("../", p)) {
    text.replace(p, 3, ocslab::testing::source_dir() + "/experiments/");
  }
  return text;
}

TEST_CASE("run --check refuses a duplicate key in a phase-workload spec too", "[cli][check]") {
  ocslab::testing::TempDir dir;
  const std::string path = dir.path() + "/phases.yaml";
  std::string text = shipped_spec_text("dp-pp-phases.yaml");
  std::ofstream(path) << text;
  REQUIRE(run_cli({"run", path, "--check"}).rc == 0);
  // A second `max_retries:` in phase: (YAML keeps the first: the edit would do nothing).
  const size_t after = text.find("  max_retries: 2\n");
  REQUIRE(after != std::string::npos);
  const size_t at = text.find('\n', after) + 1;
  const auto line = std::count(text.begin(), text.begin() + static_cast<long>(at), '\n') + 1;
  std::ofstream(path) << text.substr(0, at) << "  max_retries: 5\n" << text.substr(at);
  auto r = run_cli({"run", path, "--check"});
  CHECK(r.rc == ocslab::cli::kExitInput);
  CHECK_THAT(r.err, Contains(path + ":" + std::to_string(line) + ":3: duplicate key 'max_retries'"));
}

TEST_CASE("run --check passes every spec the repository ships", "[cli][check]") {
  EnvVar pw("OCSLAB_OCS_PASSWORD", nullptr), host("OCSLAB_OCS_PASSWORD_HOST", nullptr);
  std::vector<std::string> specs;
  for (const char* folder : {"/experiments/specs", "/tests/vlab/labs"}) {
    for (const auto& e : fs::directory_iterator(ocslab::testing::source_dir() + folder)) {
      const std::string name = e.path().filename().string();
      const bool spec =
          std::string(folder) == "/experiments/specs" ? e.path().extension() == ".yaml" : name.ends_with(".spec.yaml");
      if (spec) specs.push_back(e.path().string());
    }
  }
  REQUIRE(specs.size() >= 14);  // 6 in experiments/specs, 8 test specs: a lost folder fails here
  for (const auto& s : specs) {
    auto r = run_cli({"run", s, "--check"});
    INFO(s << "\n" << r.err);
    CHECK(r.rc == 0);
    CHECK_THAT(r.out, Contains("spec " + s + " is valid"));
  }
}

TEST_CASE("run --check --json prints the plan or the error as JSON", "[cli][check]") {
  ocslab::testing::TempDir dir;
  auto s = write_spec(dir.path(), kBase);
  auto r = run_cli({"run", s.path, "--check", "--json"});
  INFO(r.out << r.err);
  REQUIRE(r.rc == 0);
  auto j = nlohmann::json::parse(r.out);
  CHECK(j["valid"] == true);
  CHECK(j["type"] == "reconfig-latency");
  CHECK(j["hosts"].size() == 2);
  CHECK(j["mappings"][0]["circuits"] == nlohmann::json::array({"1-11", "3-9"}));
  CHECK(j["schedule"]["count"] == 3);
  CHECK(j["schedule"]["first"] == nlohmann::json::array({"b", "a", "b"}));
  CHECK(j["switch"]["ports"] == "1,3..4,9,11..12");  // the ports the mappings use

  auto bad = spec_with(dir.path(), 13, "        - {name: eth2, tx_port: 4, rx_port: 11}");
  r = run_cli({"run", bad.path, "--check", "--json"});
  CHECK(r.rc == ocslab::cli::kExitInput);
  auto e = nlohmann::json::parse(r.out);
  CHECK(e["exit_code"] == 2);
  CHECK(e["file"] == bad.path);
  CHECK(e["line"] == 13);
  CHECK(e["col"] == static_cast<int>(bad.lines[12].find("11}") + 1));
  CHECK(e["message"] == "h2:eth2 rx_port: port 11 used twice as egress (first at line 12)");
  CHECK(e["error"] == bad.at(13, "11}") + ": " + e["message"].get<std::string>());

  // A phase-workload spec's plan: its ranks and their slots.
  r = run_cli({"run", ocslab::testing::source_dir() + "/experiments/specs/dp-pp-phases.yaml", "--check", "--json"});
  REQUIRE(r.rc == 0);
  j = nlohmann::json::parse(r.out);
  CHECK(j["type"] == "phase-workload");
  CHECK(j["ranks"].size() == 4);
  CHECK(j["modes"] == nlohmann::json::array({"on-demand", "provisioning"}));

  // An outages spec's plan: the outages in run order, the ports darkened, the queue-pair matrix
  // with what the arithmetic predicts for each setting; the text says it per length.
  const std::string survival = ocslab::testing::source_dir() + "/experiments/specs/rdma-survival-vlab.yaml";
  r = run_cli({"run", survival, "--check", "--json"});
  REQUIRE(r.rc == 0);
  j = nlohmann::json::parse(r.out);
  CHECK(j["type"] == "outages");
  CHECK(j["outages"]["plan"].size() == 10);
  CHECK(j["outages"]["ports"] == nlohmann::json::array({1, 17}));
  CHECK(j["rdma"]["pairs"] == nlohmann::json::array({"h1:eth1->h2:eth1"}));
  REQUIRE(j["rdma"]["qp"].size() == 6);
  CHECK(j["rdma"]["qp"][0]["timeout"] == 12);
  CHECK(j["rdma"]["qp"][0]["retry_cnt"] == 2);
  CHECK(j["rdma"]["qp"][0]["survives_ms"].get<double>() == Approx(33.554432));
  r = run_cli({"run", survival, "--check"});
  REQUIRE(r.rc == 0);
  CHECK_THAT(r.out, Contains("queue pairs per pair (6, one TCP port each from 18520): t12r2 t12r4 t13r2 t13r4 t14r2 t14r4"));
  CHECK_THAT(r.out, Contains("qp t14 r4: survives outages up to 268.435 ms; predicted: 20 survives, 50 survives, "
                             "100 survives, 200 survives, 400 errors"));

  // The NCCL survival sweep for a GPU lab: validated here (no GPU, no switch reached), every
  // run counted, each setting's prediction per length, and the ranks' environment on their
  // command lines.
  const std::string nccl = ocslab::testing::source_dir() + "/experiments/specs/nccl-survival.yaml";
  r = run_cli({"run", nccl, "--check"});
  INFO(r.err);
  REQUIRE(r.rc == 0);
  CHECK_THAT(r.out, Contains("survival sweep: 48 run(s) of the job (6 environment(s) x 4 outage length(s)"));
  CHECK_THAT(r.out, Contains("x 2 repetition(s) x 1 mode(s)), in random order (seed 45)"));
  CHECK_THAT(r.out, Contains("outage: circuit-cut on switch port 19 (gpu3:ibp1s0 rx) at step 3, 500, 3000, 8000, "
                             "20000 ms"));
  CHECK_THAT(r.out, Contains("timeout 18 retry_cnt 7: survives outages up to 7516.193 ms; predicted: 500 survives, "
                             "3000 survives, 8000 errors, 20000 errors"));
  CHECK_THAT(r.out, Contains("NCCL_IB_RESILIENCY_PORT_FAILOVER: NCCL 2.29 or later"));
  CHECK_THAT(r.out, Contains("ocslab-collbench-nccl: one GPU per rank"));
  CHECK_THAT(r.out, Contains("gpu3$ env NCCL_IB_TIMEOUT=16 NCCL_IB_RETRY_CNT=7 NCCL_IB_RESILIENCY_PORT_FAILOVER=0 "
                             "ocslab-collbench-nccl --schedule"));
  CHECK_THAT(r.out, !Contains("Soft-RoCE"));  // real hosts: the hardware's arithmetic only
  r = run_cli({"run", nccl, "--check", "--json"});
  REQUIRE(r.rc == 0);
  j = nlohmann::json::parse(r.out);
  CHECK(j["sweep"]["env"]["NCCL_IB_TIMEOUT"] == nlohmann::json::array({"16", "18", "20"}));
  CHECK(j["sweep"]["outage_ms"] == nlohmann::json::array({500, 3000, 8000, 20000}));
  CHECK(j["faults"][0]["kind"] == "circuit-cut");
}

TEST_CASE("run --check summarises a long schedule in a few hundred bytes", "[cli][check]") {
  ocslab::testing::TempDir dir;
  auto s = spec_with(dir.path(), 19, "schedule: {reconfigurations: 100000}");
  auto r = run_cli({"run", s.path, "--check"});
  INFO(r.err);
  REQUIRE(r.rc == 0);
  CHECK(r.out.size() < 1000);
  CHECK_THAT(r.out, Contains("schedule: a -> b -> a -> b -> a -> b -> ... -> a -> b -> a -> b -> a (the first and "
                             "last 5 of 100000; a 50000, b 50000)\n"));
  r = run_cli({"run", s.path, "--check", "--json"});
  REQUIRE(r.rc == 0);
  CHECK(r.out.size() < 4000);
  auto j = nlohmann::json::parse(r.out);
  CHECK(j["schedule"]["count"] == 100000);
  CHECK(j["schedule"]["first"].size() == 5);
  CHECK(j["schedule"]["last"] == nlohmann::json::array({"a", "b", "a", "b", "a"}));
  CHECK(j["schedule"]["per_mapping"]["a"] == 50000);
}

TEST_CASE("run --check prints a firmware sweep's plan: every point, its model, dwell and reconfigurations",
          "[cli][check]") {
  const std::string spec = ocslab::testing::source_dir() + "/experiments/specs/firmware-study-vlab.yaml";
  auto r = run_cli({"run", spec, "--check"});
  INFO(r.out << r.err);
  REQUIRE(r.rc == 0);
  CHECK_THAT(r.out, Contains("18 reconfiguration(s), dwell 5/10/20 s\n"));
  CHECK_THAT(r.out, Contains("sweep: 2 NIC model(s) x 3 dwell time(s) = 6 point(s), 3 reconfiguration(s) each (18 in "
                             "all), about 276 s after the warm-up\n"));
  CHECK_THAT(r.out, Contains("  point 1: NIC model cx6dx-autoneg (firmware link-up mean 6000 ms), dwell 5 s, "
                             "reconfigurations 1..3\n"));
  CHECK_THAT(r.out, Contains("  point 6: NIC model cx6dx-no-autoneg (firmware link-up mean 3000 ms), dwell 20 s, "
                             "reconfigurations 16..18\n"));
  r = run_cli({"run", spec, "--check", "--json"});
  REQUIRE(r.rc == 0);
  auto j = nlohmann::json::parse(r.out);
  CHECK(j["schedule"]["count"] == 18);
  REQUIRE(j["sweep"]["points"].size() == 6);
  CHECK(j["sweep"]["points"][4] == nlohmann::json({{"nic_model", "cx6dx-no-autoneg"},
                                                   {"model_up_mean_ms", 3000.0},
                                                   {"dwell_s", 10.0},
                                                   {"first_iteration", 13},
                                                   {"last_iteration", 15}}));
  // --dwell would change nothing a sweep.dwell_s sets: refused.
  r = run_cli({"run", spec, "--check", "--dwell", "3"});
  CHECK(r.rc == ocslab::cli::kExitUsage);
  CHECK_THAT(r.err, Contains("--dwell: the spec's sweep.dwell_s gives every point's dwell"));
}

}  // namespace run_check_test
