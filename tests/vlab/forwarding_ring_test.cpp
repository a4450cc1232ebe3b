// Host-based forwarding end to end over the emulated OCS: four guests wired as ring4
// (forwarding/examples/ring4.yaml: same names, MACs and addresses; each if2 a macvlan the test
// makes as a lab file's `if2: true` would, on the shared ring lab). `ocslab-agent forwarding
// apply` runs on every guest; an RDMA RC ping-pong (ib_send_lat over Soft-RoCE, rdma_cm)
// between two hosts without a direct circuit must go
// through the relay, whose flower filter counts it. Then the OCS is re-wired to another ring,
// the plan for the new circuits applied, and the traffic must take the new relay (its counter
// moves, the old relay's do not).
#include <fmt/format.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "lab_fixture.h"
#include "ocslab/ocsctl/driver.h"
#include "ocslab/ocsctl/switch_url.h"
#include "ocslab/testing/sshd_fixture.h"
#include "ocslab/testing/wait.h"

using namespace vlab_test;
using Catch::Matchers::Contains;
using nlohmann::json;

namespace {

// Packets counted by ocslab's filter for `dst` on `dev` of `host` (-1: no such filter).
long long counter(const Lab& lab, const std::string& host, const std::string& dev, const std::string& dst) {
  for (auto& e : json::parse(lab.run(host, "tc -s -j filter show dev " + dev + " ingress"))) {
    if (!e.contains("options") || e["options"]["keys"].value("dst_ip", "") != dst) continue;
    return e["options"]["actions"][0]["stats"]["packets"].get<long long>();
  }
  return -1;
}

// Every ocslab filter's packets on a host's two if2s, summed.
long long relayed(const Lab& lab, const std::string& host) {
  long long sum = 0;
  for (const char* dev : {"eth1v", "eth2v"})
    for (auto& e : json::parse(lab.run(host, std::string("tc -s -j filter show dev ") + dev + " ingress")))
      if (e.contains("options")) sum += e["options"]["actions"][0]["stats"]["packets"].get<long long>();
  return sum;
}

// An RC send/receive ping-pong of n iterations over rdma_cm from `client` (its device `cdev`)
// to `server`'s address `addr` (its device `sdev`). perftest's server serves one connection: a
// connect that fails half way (refused while the server was still opening its device, CI's
// "Unexpected CM event ... 8", RDMA_CM_EVENT_REJECTED) can leave it serving nobody until its
// timeout, so a retry starts both sides again. The client connects once the server's rdma_cm
// listener exists (`rdma resource show cm_id` shows it LISTEN), not after a fixed pause.
void rdma_ping_pong(const Lab& lab, const std::string& server, const std::string& sdev, const std::string& client,
                    const std::string& cdev, const std::string& addr, int n) {
  ocs::ExecResult srv, cli;
  std::string attempts;
  for (int attempt = 1; attempt <= 4; ++attempt) {
    srv = {};
    std::thread t([&] { srv = lab.exec(server, "timeout 60 ib_send_lat -R -d " + sdev + " -n " + std::to_string(n)); });
    bool listening = testing::poll_until(
        [&] {
          return lab.exec(server, "rdma resource show cm_id | grep -q 'state LISTEN'").exit_status == 0;
        },
        60s, 200ms);
    cli = lab.exec(client, "timeout 60 ib_send_lat -R -d " + cdev + " -n " + std::to_string(n) + " " + addr);
    if (cli.exit_status != 0) lab.exec(server, "pkill -x ib_send_lat; true");  // this attempt's server goes
    t.join();
    attempts += "attempt " + std::to_string(attempt) + ": server listening " + (listening ? "yes" : "no") +
                ", client exit " + std::to_string(cli.exit_status) + ", server exit " +
                std::to_string(srv.exit_status) + "\n";
    if (cli.exit_status == 0) break;
  }
  std::cout << attempts;
  INFO(attempts << client << " client:\n" << cli.out << cli.err << "\n" << server << " server:\n" << srv.out << srv.err);
  REQUIRE(cli.exit_status == 0);
  REQUIRE(srv.exit_status == 0);
  CHECK_THAT(cli.out, Contains("t_typical"));
}

}  // namespace

TEST_CASE("forwarding over the OCS: RDMA through a relay on ring4, then re-wired to another ring",
          "[vlab][forwarding-ring]") {
  auto t0 = std::chrono::steady_clock::now();
  Lab lab(kSharedRing, 180s, Sharing::kShared);  // shared with vlab_forwarding_runner
  const auto& s = lab.state();
  // Each port's if2: a private-mode macvlan with ring4's if2 MAC (02:00:00:00:0H:1P), made as the
  // lab makes them for `if2: true` (the shared lab has none: the runner test makes its own).
  for (int h = 1; h <= 4; ++h) {
    std::string cmd;
    for (int p = 0; p < 2; ++p) {
      std::string nic = "eth" + std::to_string(p + 1);
      cmd += fmt::format(
          "{}ip link add link {} name {}v address 02:00:00:00:0{}:1{} type macvlan mode private && "
          "ip link set {}v up",
          cmd.empty() ? "" : " && ", nic, nic, h, p, nic);
    }
    lab.run("h" + std::to_string(h), cmd);
  }
  // Guests mount their own /tmp: the agent and the fabrics go into the lab's folder.
  std::string dir = s.dir + "/fwd-" + std::to_string(::getpid());
  fs::create_directories(dir);
  fs::copy_file(testing::bin_path("ocslab-agent"), dir + "/ocslab-agent");
  std::string a = read_file_or_empty(source_path("forwarding/examples/ring4.yaml"));
  std::ofstream(dir + "/ring-a.yaml") << a;
  // Ring B: h1 - h3 - h2 - h4 - h1. h1 and h2 are opposite now; h3 relays between them.
  std::string b = a.substr(0, a.find("circuits:")) +
                  "circuits:\n  - \"h1:p1 <-> h3:p0\"\n  - \"h3:p1 <-> h2:p0\"\n  - \"h2:p1 <-> h4:p0\"\n"
                  "  - \"h4:p1 <-> h1:p0\"\n";
  std::ofstream(dir + "/ring-b.yaml") << b;
  const std::vector<std::string> hosts = {"h1", "h2", "h3", "h4"};
  auto apply_all = [&](const std::string& fabric) {
    for (const auto& h : hosts) {
      std::string out = lab.run(h, dir + "/ocslab-agent forwarding apply --fabric " + dir + "/" + fabric + " --host " +
                                       h + " --state-dir /var/lib/fwdint-ring");
      INFO(h << ": " << out);
      CHECK_THAT(out, Contains("apply: host " + h));
    }
  };

  // Ring A (the lab's links): h1 -> 10.0.0.30 (h3:p0) goes h1:p1 -> h2:p0, relayed by h2's
  // filter on eth1v, out of h2:p1 to h3:p0.
  apply_all("ring-a.yaml");
  long long h2_before = counter(lab, "h2", "eth1v", "10.0.0.30");
  REQUIRE(h2_before >= 0);
  lab.run("h1", "ping -c 3 -W 5 10.0.0.30");
  rdma_ping_pong(lab, "h3", "rxe_eth1", "h1", "rxe_eth2", "10.0.0.30", 200);
  long long h2_after = counter(lab, "h2", "eth1v", "10.0.0.30");
  std::cout << "ring A: h2's filter for 10.0.0.30 counted " << h2_after - h2_before << " packets\n";
  CHECK(h2_after - h2_before >= 200);
  // verify on the relay: in sync, and its counter for 10.0.0.30 as JSON.
  auto v = json::parse(lab.run("h2", dir + "/ocslab-agent forwarding verify --json --fabric " + dir +
                                         "/ring-a.yaml --host h2 --state-dir /var/lib/fwdint-ring"));
  CHECK(v["in_sync"] == true);
  long long verified = -1;
  for (const auto& f : v["filters"])
    if (f["dev"] == "eth1v" && f["dst"] == "10.0.0.30/32") verified = f["packets"].get<long long>();
  CHECK(verified >= h2_after);

  // Re-wire the OCS to ring B. Unchanged: h4:eth2 <-> h1:eth1 (8 -> 17, 1 -> 24).
  ocs::DriverOptions o;
  o.password = s.switch_password;
  auto driver = ocs::make_driver(ocs::SwitchUrl::parse(s.switch_url()), o);
  driver->disconnect({2, 3, 4, 5, 6, 7});
  driver->connect({{2, 21}, {5, 18}, {6, 19}, {3, 22}, {4, 23}, {7, 20}});
  apply_all("ring-b.yaml");
  for (const auto& h : hosts)  // links come back up after the re-wiring
    // sleep 0.2: the poll interval of this bounded (20 s) wait for carrier
    lab.run(h,
            "for i in $(seq 100); do [ $(cat /sys/class/net/eth1/carrier) = 1 ] && "
            "[ $(cat /sys/class/net/eth2/carrier) = 1 ] && exit 0; sleep 0.2; done; exit 1");

  // h1 -> 10.0.0.20 (h2:p0) now goes h1:p1 -> h3:p0, relayed by h3's eth1v filter, out of
  // h3:p1 to h2:p0; h2's replies go back through h3 too. h2 relays nothing any more.
  long long h3_before = counter(lab, "h3", "eth1v", "10.0.0.20");
  REQUIRE(h3_before >= 0);
  long long h2_total_before = relayed(lab, "h2");
  lab.run("h1", "ping -c 3 -W 5 10.0.0.20");
  rdma_ping_pong(lab, "h2", "rxe_eth1", "h1", "rxe_eth2", "10.0.0.20", 200);
  long long h3_after = counter(lab, "h3", "eth1v", "10.0.0.20");
  std::cout << "ring B: h3's filter for 10.0.0.20 counted " << h3_after - h3_before << " packets, h2's filters "
            << relayed(lab, "h2") - h2_total_before << "\n";
  CHECK(h3_after - h3_before >= 200);
  CHECK(relayed(lab, "h2") == h2_total_before);

  for (const auto& h : hosts)
    lab.run(h, dir + "/ocslab-agent forwarding clear --host " + h + " --state-dir /var/lib/fwdint-ring");
  fs::remove_all(dir);
  std::cout << "forwarding ring test: " << std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count()
            << " s\n";
}
