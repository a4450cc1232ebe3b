// The fault matrix (docs/guarantees.md): `ocslab run` on the shared four-host lab, every host
// capturing carrier 1 kHz + heartbeat 1 kHz + RDMA 100 Hz, with one fault injected per case:
//
//   runner-kill   the runner is killed (SIGKILL) mid-schedule, then `ocslab recover` finishes it
//   runner-term   the runner gets SIGTERM mid-schedule: it stops the schedule and exits 130
//   agent-kill    h2's agent daemon is killed (SIGKILL) mid-schedule
//   ssh-drop      the sshd process carrying the runner's session to h3 is killed
//   switch-drop   the runner's TL1 connection to the switch is cut (a TCP relay in between)
//   spool-full    h4's spool folder is a 256 KiB tmpfs, full within seconds
//
// Each case prints, per host, the samples the agent numbered (its own sequence numbers) against
// the rows in the results folder: 0 lost and 0 duplicated wherever the host's agent stayed up,
// and for the killed agent every sample its spool had persisted. A hidden case (it takes about
// 15 minutes): `make fault-matrix`, or build/tests/vlab_e2e "[.fault-matrix]" with the
// environment of tests/CMakeLists.txt's vlab entries. OCSLAB_FAULT_MATRIX_RECONFIGS sets the
// schedule's length (default 12 reconfigurations, 9 s apart).
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <fmt/format.h>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <thread>

#include "lab_fixture.h"
#include "ocslab/common/process.h"
#include "ocslab/ocsctl/credentials.h"
#include "ocslab/ocsctl/switch_url.h"
#include "ocslab/testing/processes.h"
#include "ocslab/testing/results_files.h"
#include "ocslab/testing/sshd_fixture.h"
#include "ocslab/testing/tcp_server.h"
#include "ocslab/testing/wait.h"

using namespace vlab_test;
using Catch::Matchers::Contains;

namespace fault_matrix_test {

namespace {

const std::vector<std::string> kHosts = {"h1", "h2", "h3", "h4"};

// A TCP relay on 127.0.0.1 to the lab's switch: drop() cuts every connection through it (the
// runner sees its switch session end mid-run, as when a switch or its network drops it).
class SwitchRelay {
 public:
  explicit SwitchRelay(int upstream_port) : server_([upstream_port](int fd) { relay(fd, upstream_port); }) {}
  int port() const { return server_.port(); }
  void drop() { server_.drop_connections(); }

 private:
  static void relay(int fd, int upstream_port) {
    int up = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(upstream_port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(up, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
      ::close(up);
      return;
    }
    char buf[16384];
    for (;;) {
      pollfd p[2] = {{fd, POLLIN, 0}, {up, POLLIN, 0}};
      if (::poll(p, 2, 500) < 0) break;
      bool done = false;
      for (int i = 0; i < 2 && !done; ++i) {
        if (p[i].revents & (POLLNVAL | POLLERR)) done = true;
        if (!(p[i].revents & (POLLIN | POLLHUP))) continue;
        ssize_t n = ::recv(p[i].fd, buf, sizeof(buf), 0);
        if (n <= 0 || !ocslab::testing::write_all(i == 0 ? up : fd, std::string(buf, static_cast<size_t>(n))))
          done = true;
      }
      if (done) break;
    }
    ::close(up);
  }
  ocslab::testing::TcpServer server_;
};

std::string spec_text(const std::string& lab_file, const std::string& switch_url, int reconfigs) {
  std::string s = fmt::format(
      "name: fault-matrix\n"
      "lab: {{vlab: '{}', keep: true}}\n",
      lab_file);
  if (!switch_url.empty()) s += fmt::format("switch: {{url: '{}'}}\n", switch_url);
  s += fmt::format(
      "mappings:\n"
      "  rail-a: [h1:eth1 <-> h2:eth1, h3:eth1 <-> h4:eth1]\n"
      "  rail-b: [h1:eth1 <-> h3:eth1, h2:eth1 <-> h4:eth1]\n"
      "schedule: {{reconfigurations: {}, dwell_s: 9, warmup_s: 2, order: alternate}}\n"
      "probes:\n"
      "  carrier: {{interval_ms: 1}}\n"
      "  heartbeat: {{interval_ms: 1}}\n"
      "  rdma: {{pairs: mappings, interval_ms: 10, timeout: 12, retry_cnt: 7}}\n",
      reconfigs);
  return s;
}

struct Tally {
  uint64_t expected = 0, rows = 0, lost = 0, duplicated = 0;
};

// Expected 1..expected, each once; rows past `expected` (a killed agent's live samples that its
// spool had not persisted yet) are neither lost nor duplicated.
Tally tally(const std::vector<uint64_t>& seqs, uint64_t expected) {
  Tally t;
  t.expected = expected;
  t.rows = seqs.size();
  std::vector<int> seen(expected + 1, 0);
  for (uint64_t s : seqs) {
    if (s >= 1 && s <= expected) ++seen[s];
  }
  for (uint64_t s = 1; s <= expected; ++s) {
    if (seen[s] == 0) ++t.lost;
    if (seen[s] > 1) t.duplicated += static_cast<uint64_t>(seen[s] - 1);
  }
  std::set<uint64_t> extra;
  for (uint64_t s : seqs) {
    if (s > expected && !extra.insert(s).second) ++t.duplicated;
  }
  return t;
}

// The pid of the agent daemon (not a --stdio bridge) in a guest, 0 when none.
long daemon_pid(const Lab& lab, const std::string& host) {
  auto r = lab.exec(host, "ps -eo pid,args | awk '/ocslab-agent[^ ]* serve/ && !/--stdio/ && !/awk/ {print $1; exit}'");
  return std::atol(r.out.c_str());
}

// Kills the sshd process that carries the runner's bridge session on `host` (the bridge's
// nearest ancestor named sshd): the runner's SSH connection ends as if the network cut it.
std::string kill_bridge_sshd(const Lab& lab, const std::string& host) {
  auto r = lab.exec(
      host,
      "b=$(ps -eo pid,args | awk '/serve --stdio/ && !/awk/ {print $1; exit}'); [ -n \"$b\" ] || exit 3; "
      "p=$b; while [ \"$p\" -gt 1 ]; do p=$(awk '{print $4}' /proc/$p/stat); "
      "case \"$(cat /proc/$p/cmdline | tr '\\0' ' ')\" in sshd*) kill -9 $p; echo \"bridge $b, sshd $p killed\"; "
      "exit 0;; esac; done; exit 4");
  REQUIRE(r.exit_status == 0);
  return r.out;
}

}  // namespace

TEST_CASE("fault matrix: runner, agent, SSH, switch and spool faults under full-rate capture", "[.fault-matrix]") {
  const char* env_n = std::getenv("OCSLAB_FAULT_MATRIX_RECONFIGS");
  const int reconfigs = env_n ? std::atoi(env_n) : 12;
  std::string fault;
  SECTION("runner-kill") { fault = "runner-kill"; }
  SECTION("runner-term") { fault = "runner-term"; }
  SECTION("agent-kill") { fault = "agent-kill"; }
  SECTION("ssh-drop") { fault = "ssh-drop"; }
  SECTION("switch-drop") { fault = "switch-drop"; }
  SECTION("spool-full") { fault = "spool-full"; }
  REQUIRE_FALSE(fault.empty());

  Lab lab(kSharedFour, 120s, Sharing::kShared);
  const auto& st = lab.state();
  const std::string work = fs::temp_directory_path().string() + "/ocslab-fault-matrix-" + std::to_string(::getpid());
  fs::create_directories(work);
  const std::string out = work + "/" + fault;
  fs::remove_all(out);

  std::unique_ptr<SwitchRelay> relay;
  std::string url;
  if (fault == "switch-drop") {
    relay = std::make_unique<SwitchRelay>(ocs::SwitchUrl::parse(st.switch_url()).port);
    url = "tl1://admin@127.0.0.1:" + std::to_string(relay->port());
    ::setenv(ocs::kPasswordEnv, st.switch_password.c_str(), 1);  // a loopback switch: allowed
  }
  struct Unmount {
    const Lab* lab = nullptr;
    ~Unmount() {
      if (lab) lab->exec("h4", "umount /var/spool/ocslab-agent; rm -rf /var/spool/ocslab-agent/*");
    }
  } unmount;
  if (fault == "spool-full") {
    lab.run("h4",
            "mkdir -p /var/spool/ocslab-agent && mount -t tmpfs -o size=256k,mode=0700 tmpfs /var/spool/ocslab-agent");
    unmount.lab = &lab;
  }
  const std::string spec = work + "/" + fault + ".yaml";
  std::ofstream(spec) << spec_text(source_path(kSharedFour), url, reconfigs);

  SpawnOptions so;
  so.log_file = work + "/" + fault + ".log";
  auto t0 = std::chrono::steady_clock::now();
  pid_t runner = spawn_program({testing::bin_path("ocslab"), "run", spec, "-o", out, "--no-plot"}, so);
  const std::string control = out + "/capture/runner.control.csv";
  // The fault lands after the third switch command: capture running on every host, mid-schedule.
  bool mid_run = testing::poll_until(
      [&] { return fs::exists(out + "/run.json") && testing::count_rows(control, ",command,") >= 3; },
      std::chrono::seconds(300), std::chrono::milliseconds(200));
  INFO(read_file_or_empty(so.log_file));
  REQUIRE(mid_run);
  uint64_t agent_kill_spooled = 0;
  if (fault == "runner-kill") {
    // Network exposure during a run: nothing but sshd listens on every address.
    for (const auto& h : kHosts) {
      std::string ss = lab.run(h, "ss -ltnp");
      std::cout << h << "$ ss -ltnp\n" << ss;
      std::istringstream lines(ss);
      for (std::string line; std::getline(lines, line);) {
        std::istringstream fields(line);
        std::string state, recv_q, send_q, local;
        fields >> state >> recv_q >> send_q >> local;  // the local address is the fourth column
        if (state != "LISTEN") continue;
        bool wildcard = local.rfind("0.0.0.0:", 0) == 0 || local.rfind("*:", 0) == 0 || local.rfind("[::]:", 0) == 0;
        INFO(h << ": " << line);
        if (wildcard) CHECK_THAT(line, Contains("\"sshd\""));
      }
    }
  }
  if (fault == "runner-kill") {
    ::kill(runner, SIGKILL);
  } else if (fault == "runner-term") {
    ::kill(runner, SIGTERM);
    std::cout << "runner: SIGTERM\n";
  } else if (fault == "agent-kill") {
    long pid = daemon_pid(lab, "h2");
    REQUIRE(pid > 0);
    lab.run("h2", "kill -9 " + std::to_string(pid));
    std::cout << "h2: agent daemon " << pid << " killed\n";
  } else if (fault == "ssh-drop") {
    std::cout << "h3: " << kill_bridge_sshd(lab, "h3");
  } else if (fault == "switch-drop") {
    relay->drop();
    std::cout << "switch: the runner's TL1 connection cut\n";
  } else {
    std::cout << "h4: " << lab.run("h4", "df -k /var/spool/ocslab-agent | tail -1");
  }
  int status = 0;
  ::waitpid(runner, &status, 0);
  if (fault == "runner-kill") {
    REQUIRE(WIFSIGNALED(status));
    // load-safe: a gap in which the agents go on capturing; a longer one only means more to recover.
    std::this_thread::sleep_for(std::chrono::seconds(5));  // the agents go on capturing meanwhile
    auto r = ocslab_cli({"recover", out, "--no-plot"});
    std::cout << r.out << r.err;
    CHECK_THAT(r.err, Contains("switch commands after"));  // the gap in control events is recorded
  } else {
    REQUIRE(WIFEXITED(status));
    std::cout << fault << ": ocslab run exited " << WEXITSTATUS(status) << "\n";
    if (fault == "runner-term") {
      CHECK(WEXITSTATUS(status) == 130);  // interrupted, everything captured written
      auto meta = nlohmann::json::parse(std::ifstream(out + "/meta.json"));
      CHECK(meta["interrupted"] == true);
      CHECK(fs::exists(out + "/timeline.csv"));
    }
  }
  if (fault == "agent-kill") {
    // What the dead agent's spool had persisted: its last whole line's seq.
    auto r = lab.exec("h2",
                      "f=$(ls -t /var/spool/ocslab-agent/*.jsonl | head -1); tail -c 4096 \"$f\" | "
                      "grep -o '^{\"type\":\"sample\",\"seq\":[0-9]*' | tail -1 | grep -o '[0-9]*$'");
    agent_kill_spooled = std::strtoull(r.out.c_str(), nullptr, 10);
    REQUIRE(agent_kill_spooled > 0);
  }
  if (fault == "spool-full") {
    std::cout << "h4 spool: " << lab.run("h4", "df -k /var/spool/ocslab-agent | tail -1");
  }

  auto meta = nlohmann::json::parse(std::ifstream(out + "/meta.json"));
  std::cout << fmt::format("== {} ({} reconfigurations, {:.0f} s) ==\n", fault, reconfigs,
                           std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  for (size_t k = 0; k < kHosts.size(); ++k) {
    const auto& h = meta["hosts"][k];
    INFO(h.dump());
    REQUIRE(h["name"] == kHosts[k]);
    auto seqs = testing::capture_seqs(out + "/capture/host." + kHosts[k] + ".csv");
    const bool killed = fault == "agent-kill" && kHosts[k] == "h2";
    const uint64_t expected = killed ? agent_kill_spooled : h["last_seq"].get<uint64_t>();
    Tally t = tally(seqs, expected);
    std::cout << fmt::format("{} {}: expected {} (agent's {}), recovered {} rows, lost {}, duplicated {}{}\n", fault,
                             kHosts[k], t.expected, killed ? "spool up to the kill" : "last seq", t.rows, t.lost,
                             t.duplicated, killed ? fmt::format(" (host lost: {})", h["lost"].dump()) : "");
    CHECK(expected > 0);
    CHECK(t.lost == 0);
    CHECK(t.duplicated == 0);
    if (!killed) {
      CHECK(h["lost"] == false);
      CHECK(t.rows == expected);
    }
  }
  ::unsetenv(ocs::kPasswordEnv);
  fs::remove_all(work);  // the case's spec, log and results: what a failure above leaves to read
}

}  // namespace fault_matrix_test
