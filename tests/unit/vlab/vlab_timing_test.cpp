// `ocslab vlab timing` and the supervisor's side of it, without QEMU: option checking and the
// lab lookup in-process; timing.yaml applied to a real emulator by reload_lab_timing; and the
// whole round trip (timing.yaml, SIGHUP, state.json) against a forked stand-in supervisor
// that runs a real emulator and answers SIGHUP the way lab_supervise does.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cli_run.h"
#include "ocslab/cli/ocslab_cli.h"
#include "ocslab/common/clock.h"
#include "ocslab/common/file.h"
#include "ocslab/emulator/emulator.h"
#include "ocslab/runner/fault_injection.h"
#include "ocslab/testing/source_dir.h"
#include "ocslab/testing/sshd_fixture.h"
#include "ocslab/vlab/lab_state.h"
#include "ocslab/vlab/lab_timing.h"

// This file's helpers in a namespace of its own: the unity build compiles it together with
// the other tests of its binary.
namespace vlab_timing_test {

namespace fs = std::filesystem;
using Catch::Matchers::Contains;
using Catch::Matchers::EndsWith;
using namespace ocslab;
using namespace ocslab::vlab;

namespace {

using Result = vlab_unit::CliResult;
using vlab_unit::run_cli;

emu::EmulatorConfig small_switch() {
  return emu::parse_emulator_config(load_yaml_string("switch: {size: 4x4, switching_ms: 25}\n", "lab.yaml"));
}

// A pid that belonged to a process and no longer does.
pid_t gone_pid() {
  pid_t p = ::fork();
  if (p == 0) ::_exit(0);
  ::waitpid(p, nullptr, 0);
  return p;
}

// Two hosts with one data NIC each, as the emulator names them (HOST-NIC); attached to TAPs
// that are only made if the emulator starts, which the hold tests do not need.
emu::EmulatorConfig two_nic_switch() {
  return emu::parse_emulator_config(
      load_yaml_string("switch: {size: 4x4, switching_ms: 25}\nnic_model: cx6dx-no-autoneg\nnics:\n"
                       "  - {name: h1-eth1, tx_port: 1, rx_port: 5, tap: {name: t1}}\n"
                       "  - {name: h2-eth1, tx_port: 2, rx_port: 6, tap: {name: t2}}\n",
                       "lab.yaml"));
}

std::vector<HostState> two_hosts() {
  std::vector<HostState> hosts(2);
  for (int i = 0; i < 2; ++i) {
    hosts[static_cast<size_t>(i)].name = "h" + std::to_string(i + 1);
    NicState n;
    n.name = "eth1";
    hosts[static_cast<size_t>(i)].nics.push_back(n);
  }
  return hosts;
}

// The runner's view of two_hosts(): h1:eth1 on switch ports 1 -> 5, h2:eth1 on 2 -> 6
// (two_nic_switch), with these faults.
runner::ExperimentSpec two_host_spec(std::vector<runner::FaultSpec> faults) {
  runner::ExperimentSpec spec;
  for (const auto& h : two_hosts()) {
    runner::HostEntry e;
    e.name = h.name;
    e.nics.push_back(runner::NicEntry{"eth1", h.name == "h1" ? 1 : 2, h.name == "h1" ? 5 : 6});
    spec.hosts.push_back(e);
  }
  spec.faults = std::move(faults);
  return spec;
}

runner::FaultSpec port_dark(ocs::Port port, size_t host, int before) {
  runner::FaultSpec f;
  f.kind = runner::kPortDark;
  f.port = port;
  f.host = host;
  f.nic = "eth1";
  f.before_iteration = before;
  return f;
}

runner::FaultSpec nic_held(size_t host, int before) {
  runner::FaultSpec f;
  f.host = host;
  f.nic = "eth1";
  f.before_iteration = before;
  return f;
}

struct Cache {
  testing::TempDir dir;
  const std::string& path = dir.path();
  LabState add_lab(const std::string& name, pid_t supervisor, std::vector<HostState> hosts = {}) const {
    LabState s;
    s.name = name;
    s.dir = labs_dir(path) + "/" + name;
    s.phase = "running";
    s.supervisor_pid = supervisor;
    s.hosts = std::move(hosts);
    s.timing = initial_timing(small_switch());
    fs::create_directories(s.dir);
    s.save();
    return s;
  }
};

void write_file(const std::string& path, const std::string& text) { std::ofstream(path, std::ios::trunc) << text; }

// Stands in for lab_supervise once the lab runs: a real emulator, state.json, and SIGHUP
// answered by reload_lab_timing + save, until SIGTERM. Signals the parent through a pipe once
// it is ready, so nothing waits on a clock. An emulator with TAP NICs is not started (that
// needs CAP_NET_ADMIN); it takes its timing all the same.
class FakeSupervisor {
 public:
  explicit FakeSupervisor(const std::string& dir, emu::EmulatorConfig config = small_switch()) {
    sigset_t set, old;
    sigemptyset(&set);
    sigaddset(&set, SIGHUP);
    sigaddset(&set, SIGTERM);
    ::pthread_sigmask(SIG_BLOCK, &set, &old);  // inherited blocked: no early SIGHUP is lost
    int fds[2];
    REQUIRE(::pipe(fds) == 0);
    pid_ = ::fork();
    if (pid_ == 0) {
      ::close(fds[0]);
      ::_exit(serve(dir, std::move(config), set, fds[1]));
    }
    ::pthread_sigmask(SIG_SETMASK, &old, nullptr);
    ::close(fds[1]);
    char ready = 0;
    REQUIRE(::read(fds[0], &ready, 1) == 1);
    ::close(fds[0]);
  }
  ~FakeSupervisor() {
    ::kill(pid_, SIGTERM);
    ::waitpid(pid_, nullptr, 0);
  }
  pid_t pid() const { return pid_; }

 private:
  static int serve(const std::string& dir, emu::EmulatorConfig config, const sigset_t& set, int ready_fd) {
    try {
      LabState s = LabState::load(dir);
      const bool start = config.nics.empty();
      emu::Emulator emulator(std::move(config));
      if (start) emulator.start();
      s.supervisor_pid = ::getpid();
      s.timing = initial_timing(emulator.config());
      s.save();
      (void)!::write(ready_fd, "r", 1);
      for (;;) {
        int sig = ::sigwaitinfo(&set, nullptr);
        if (sig == SIGTERM) break;
        if (sig != SIGHUP) continue;
        reload_lab_timing(s, emulator);
        s.save();
      }
      emulator.stop();
      return 0;
    } catch (...) {
      return 1;
    }
  }
  pid_t pid_ = -1;
};

}  // namespace

TEST_CASE("vlab timing: a bad value is refused naming the option and the value", "[vlab][timing]") {
  Cache c;
  c.add_lab("timfix", ::getpid());
  auto bad = [&](const std::string& option, const std::string& value) {
    return run_cli({"vlab", "timing", "timfix", "--cache", c.path, option, value});
  };
  Result r = bad("--switching-ms", "-5");
  CHECK(r.rc == ocslab::cli::kExitInput);
  CHECK_THAT(r.err, Contains("--switching-ms '-5': a delay cannot be negative"));
  r = bad("--preset", "warp-drive");
  CHECK(r.rc == ocslab::cli::kExitInput);
  CHECK_THAT(r.err, Contains("--preset 'warp-drive': unknown switch preset 'warp-drive' (known: polatis-6000"));
  r = bad("--firmware-up-ms", "{uniform: [5, 1]}");
  CHECK_THAT(r.err, Contains("--firmware-up-ms '{uniform: [5, 1]}': uniform: HI is below LO"));
  r = bad("--los-ms", "soon");
  CHECK_THAT(r.err, Contains("--los-ms 'soon': expected a number of milliseconds, got 'soon'"));
  r = bad("--nic-model", "fast");
  CHECK_THAT(r.err, Contains("--nic-model 'fast': unknown NIC link preset 'fast'"));
  // Nothing reached the lab: no timing file, the timing as it was.
  CHECK_FALSE(fs::exists(c.path + "/labs/timfix/timing.yaml"));
  CHECK(LabState::load(c.path + "/labs/timfix").timing.generation == 0);
  // The timing options belong to `timing` only.
  r = run_cli({"vlab", "status", "--cache", c.path, "--switching-ms", "5"});
  CHECK(r.rc == ocslab::cli::kExitUsage);
  CHECK_THAT(r.err, Contains("--switching-ms only applies to `ocslab vlab timing`"));
}

TEST_CASE("vlab timing: a lab that is not running is named", "[vlab][timing]") {
  Cache c;
  Result r = run_cli({"vlab", "timing", "ghost", "--cache", c.path, "--switching-ms", "5"});
  CHECK(r.rc == ocslab::cli::kExitFailed);
  CHECK_THAT(r.err, Contains("no virtual lab named 'ghost'"));
  c.add_lab("deadlab", gone_pid());
  r = run_cli({"vlab", "timing", "deadlab", "--cache", c.path, "--switching-ms", "5"});
  CHECK(r.rc == ocslab::cli::kExitFailed);
  CHECK_THAT(r.err, Contains("lab deadlab is not running (dead: the supervisor (pid"));
  r = run_cli({"vlab", "timing", "deadlab", "--cache", c.path});
  CHECK_THAT(r.err, Contains("lab deadlab is not running"));
}

TEST_CASE("vlab timing --help explains the command with an example", "[vlab][timing]") {
  Result r = run_cli({"vlab", "timing", "--help"});
  CHECK(r.rc == 0);
  CHECK_THAT(r.out, Contains("Usage: ocslab vlab timing NAME [--preset P] [--switching-ms V]") &&
                        Contains("ocslab vlab timing rail4 --switching-ms 5"));
}

TEST_CASE("timing_yaml writes the lab file's syntax, and only what was asked", "[vlab][timing]") {
  LabTiming t;
  t.switching_ms = "{uniform: [10, 20]}";
  t.firmware_up_ms = "40";
  auto u = emu::parse_timing_update(load_yaml_string(timing_yaml(t), "timing.yaml"));
  REQUIRE(u.switching);
  CHECK(u.switching->to_string() == "uniform 10..20 ms");
  CHECK(u.switch_preset == "custom");
  REQUIRE(u.nic_link);
  CHECK(u.nic_preset == "custom");
  CHECK(u.nic_link->firmware_up.to_string() == "fixed 40 ms");
  // A value is one YAML node: text that would add keys of its own is refused.
  LabTiming sneaky;
  sneaky.switching_ms = "5\nnic_model: ideal";
  CHECK_THROWS_AS(timing_yaml(sneaky), ConfigError);
}

TEST_CASE("timing_yaml with nic_link: a whole NIC model in the lab file's syntax, checked by its parser",
          "[vlab][timing]") {
  LabTiming t;
  t.nic_link = "{preset: cx6dx-autoneg, firmware_up_ms: {normal: {mean: 600, sd: 30, floor: 500}}, max_up_ms: 1000}";
  auto u = emu::parse_timing_update(load_yaml_string(timing_yaml(t), "timing.yaml"));
  REQUIRE(u.nic_link);
  CHECK(u.nic_preset == "cx6dx-autoneg");
  CHECK(u.nic_link->firmware_up.to_string() == "normal 600 sd 30 floor 500 ms");
  CHECK(u.nic_link->max_up_ms == 1000);
  CHECK(u.nic_link->rapid_window_ms == 5000);  // the preset's, kept
  t.nic_link = "cx6dx-no-autoneg";
  u = emu::parse_timing_update(load_yaml_string(timing_yaml(t), "timing.yaml"));
  CHECK(u.nic_preset == "cx6dx-no-autoneg");
  t.nic_link = "{firmware_up_ms: -3}";
  CHECK_THROWS_WITH(timing_yaml(t), Contains("nic_link '{firmware_up_ms: -3}':"));
  t.nic_link = "{preset: cx9}";
  CHECK_THROWS_WITH(timing_yaml(t), Contains("unknown NIC link preset 'cx9'"));
  t.nic_link = "ideal";
  t.los_ms = "1";
  CHECK_THROWS_WITH(timing_yaml(t), Contains("nic_link replaces --nic-model, --los-ms and --firmware-up-ms"));
}

TEST_CASE("reload_lab_timing applies timing.yaml; a bad or symlinked file changes nothing", "[vlab][timing]") {
  testing::TempDir dir;
  LabState s;
  s.name = "reload";
  s.dir = dir.path();
  emu::Emulator emulator(small_switch());
  emulator.start();
  s.timing = initial_timing(emulator.config());
  REQUIRE(s.timing.switching.to_string() == "fixed 25 ms");

  write_file(s.timing_file(), "switch: {preset: mems-3d}\n");
  reload_lab_timing(s, emulator);
  CHECK(s.timing.generation == 1);
  CHECK(s.timing.error.empty());
  CHECK(s.timing.switch_preset == "mems-3d");
  CHECK(emulator.config().sw.switching.to_string() == s.timing.switching.to_string());
  const std::string applied = s.timing.switching.to_string();

  write_file(s.timing_file(), "switch:\n  switching_ms: -1\n");
  reload_lab_timing(s, emulator);
  CHECK(s.timing.generation == 2);
  CHECK_THAT(s.timing.error, Contains(s.timing_file() + ":2:17: a delay cannot be negative"));
  CHECK(emulator.config().sw.switching.to_string() == applied);

  write_file(dir.path() + "/elsewhere.yaml", "switch: {switching_ms: 3}\n");
  fs::remove(s.timing_file());
  fs::create_symlink(dir.path() + "/elsewhere.yaml", s.timing_file());
  reload_lab_timing(s, emulator);
  CHECK(s.timing.generation == 3);
  CHECK_THAT(s.timing.error, Contains("is a symbolic link; refused"));
  CHECK(emulator.config().sw.switching.to_string() == applied);
  CHECK(s.timing.switching.to_string() == applied);
  emulator.stop();
}

TEST_CASE("vlab timing changes a running supervisor's emulator over SIGHUP and state.json", "[vlab][timing]") {
  Cache c;
  LabState lab = c.add_lab("live", gone_pid());
  FakeSupervisor sup(lab.dir);

  Result r = run_cli({"vlab", "timing", "live", "--cache", c.path, "--switching-ms", "{normal: {mean: 30, sd: 2}}",
                      "--nic-model", "cx6dx-no-autoneg", "--json"});
  REQUIRE(r.rc == 0);
  auto j = nlohmann::json::parse(r.out);
  CHECK(j["lab"] == "live");
  CHECK(j["timing_generation"] == 1);
  CHECK(j["timing_error"] == "");
  CHECK(j["timing"]["switching"]["kind"] == "normal");
  CHECK(j["timing"]["switching"]["mean_ms"] == 30.0);
  CHECK(j["timing"]["nic_model"] == "cx6dx-no-autoneg");
  CHECK(j["timing"]["firmware_up"]["mean_ms"] == 3000.0);
  CHECK((fs::status(lab.timing_file()).permissions() & fs::perms::all) == fs::perms(0600));

  LabTiming rotor;
  rotor.switch_preset = "rotor";
  TimingState t = set_lab_timing(lab.dir, rotor, std::chrono::seconds(10));
  CHECK(t.generation == 2);
  CHECK(t.switch_preset == "rotor");
  CHECK(t.nic_model == "cx6dx-no-autoneg");  // what was not asked for stays

  r = run_cli({"vlab", "timing", "live", "--cache", c.path});
  CHECK(r.rc == 0);
  CHECK_THAT(r.out, Contains("lab live timing (generation 2): switch rotor (fixed 0.01 ms), NICs cx6dx-no-autoneg"));
  r = run_cli({"vlab", "status", "live", "--cache", c.path});
  CHECK_THAT(r.out, Contains("  timing: switch rotor (fixed 0.01 ms)"));
}

TEST_CASE("vlab timing --link-gbps caps a running lab's circuits, 0 lifts it; a bad rate is named",
          "[vlab][timing][link-rate]") {
  Cache c;
  LabState lab = c.add_lab("rated", gone_pid());
  FakeSupervisor sup(lab.dir);
  Result r = run_cli({"vlab", "timing", "rated", "--cache", c.path, "--link-gbps", "2.5", "--json"});
  REQUIRE(r.rc == 0);
  auto j = nlohmann::json::parse(r.out);
  CHECK(j["timing"]["link_gbps"] == 2.5);
  CHECK_THAT(j["timing"]["summary"].get<std::string>(), Contains("; circuits capped at 2.5 Gbit/s"));
  CHECK_THAT(read_file(lab.timing_file()), Contains("link_gbps: 2.5"));
  CHECK(LabState::load(lab.dir).timing.link_gbps == 2.5);

  LabTiming open;
  open.link_gbps = "0";
  CHECK(set_lab_timing(lab.dir, open, std::chrono::seconds(10)).link_gbps == 0);

  r = run_cli({"vlab", "timing", "rated", "--cache", c.path, "--link-gbps", "-3"});
  CHECK(r.rc == ocslab::cli::kExitInput);
  CHECK_THAT(r.err, Contains("--link-gbps '-3': link_gbps: expected a link rate in Gbit/s, 0.001..1000 (0: no cap)"));
  CHECK(LabState::load(lab.dir).timing.generation == 2);  // the bad rate never reached the lab
  r = run_cli({"vlab", "status", "--cache", c.path, "--link-gbps", "1"});
  CHECK(r.rc == ocslab::cli::kExitUsage);
}

TEST_CASE("timing_yaml with the lab: hold_down in the emulator's names, an unknown NIC named", "[vlab][timing]") {
  LabState lab;
  lab.name = "holds";
  lab.hosts = two_hosts();
  LabTiming t;
  t.hold_down = std::vector<std::string>{"h2:eth1"};
  std::string text = timing_yaml(t, lab);
  CHECK_THAT(text, Contains("hold_down: [h2-eth1]"));
  auto u = emu::parse_timing_update(load_yaml_string(text, "timing.yaml"), two_nic_switch());
  CHECK(*u.hold_down == std::vector<std::string>{"h2-eth1"});
  t.hold_down->clear();  // releases all: an empty list, not an absent key
  CHECK_THAT(timing_yaml(t, lab), Contains("hold_down: []"));
  t.hold_down = std::vector<std::string>{"h2:eth1", "h3:eth1"};
  CHECK_THROWS_WITH(timing_yaml(t, lab),
                    Contains("hold_down: lab holds has no data NIC 'h3:eth1' (NICs: h1:eth1, h2:eth1)"));
  CHECK(emulator_nic_name(lab, "h1:eth1") == "h1-eth1");
  CHECK_FALSE(LabTiming{}.hold_down);
  CHECK_FALSE(t.empty());
}

TEST_CASE("reload_lab_timing holds NICs down and records them as HOST:NIC; an unknown one is refused",
          "[vlab][timing]") {
  testing::TempDir dir;
  LabState s;
  s.name = "reload";
  s.dir = dir.path();
  s.hosts = two_hosts();
  emu::Emulator emulator(two_nic_switch());
  s.timing = initial_timing(emulator.config());
  CHECK(s.timing.held_down.empty());

  write_file(s.timing_file(), "hold_down: [h2-eth1]\n");
  reload_lab_timing(s, emulator);
  CHECK(s.timing.error.empty());
  CHECK(s.timing.held_down == std::vector<std::string>{"h2:eth1"});
  CHECK_THAT(s.timing.summary(), Contains("; held down: h2:eth1"));

  write_file(s.timing_file(), "switch: {switching_ms: 7}\nhold_down:\n  - h2-eth1\n  - h7-eth1\n");
  reload_lab_timing(s, emulator);
  CHECK(s.timing.generation == 2);
  CHECK_THAT(s.timing.error,
             Contains(s.timing_file() + ":4:5: hold_down: unknown NIC 'h7-eth1' (NICs: h1-eth1, h2-eth1)"));
  CHECK(s.timing.held_down == std::vector<std::string>{"h2:eth1"});  // nothing changed
  CHECK(s.timing.switching.to_string() == "fixed 25 ms");

  // The held set survives state.json.
  LabState back = LabState::from_json(s.to_json(), "state.json");
  CHECK(back.timing.held_down == std::vector<std::string>{"h2:eth1"});
}

TEST_CASE("vlab timing --hold-down / --release / --release-all change the held set of a running lab",
          "[vlab][timing]") {
  Cache c;
  LabState lab = c.add_lab("faulty", gone_pid(), two_hosts());
  FakeSupervisor sup(lab.dir, two_nic_switch());
  auto timing = [&](std::vector<std::string> words) {
    std::vector<std::string> args = {"vlab", "timing", "faulty", "--cache", c.path};
    args.insert(args.end(), words.begin(), words.end());
    return run_cli(args);
  };
  Result r = timing({"--hold-down", "h2:eth1", "--json"});
  REQUIRE(r.rc == 0);
  auto j = nlohmann::json::parse(r.out);
  CHECK(j["timing"]["held_down"] == nlohmann::json::array({"h2:eth1"}));
  CHECK(j["timing_generation"] == 1);
  CHECK_THAT(read_file(lab.timing_file()), Contains("hold_down: [h2-eth1]"));

  r = timing({"--hold-down=h1:eth1", "--hold-down", "h2:eth1"});  // added to those held, once each
  REQUIRE(r.rc == 0);
  CHECK_THAT(r.out, Contains("lab faulty timing (generation 2): ") && Contains("; held down: h2:eth1, h1:eth1"));
  r = timing({"--release", "h2:eth1"});
  REQUIRE(r.rc == 0);
  CHECK_THAT(r.out, Contains("; held down: h1:eth1"));
  r = run_cli({"vlab", "status", "faulty", "--cache", c.path});
  CHECK_THAT(r.out, Contains("  timing: ") && Contains("; held down: h1:eth1"));

  // A NIC the lab does not have is refused naming the option, before anything is written.
  r = timing({"--hold-down", "h3:eth1"});
  CHECK(r.rc == ocslab::cli::kExitInput);
  CHECK_THAT(r.err, Contains("--hold-down 'h3:eth1': lab faulty has no data NIC 'h3:eth1' (NICs: h1:eth1, h2:eth1)"));
  CHECK(LabState::load(lab.dir).timing.generation == 3);

  r = timing({"--release-all", "--json"});
  REQUIRE(r.rc == 0);
  j = nlohmann::json::parse(r.out);
  CHECK(j["timing"]["held_down"].empty());
  CHECK_THAT(j["timing"]["summary"].get<std::string>(), !Contains("held down"));

  r = run_cli({"vlab", "status", "--cache", c.path, "--hold-down", "h1:eth1"});
  CHECK(r.rc == ocslab::cli::kExitUsage);
  CHECK_THAT(r.err, Contains("--hold-down only applies to `ocslab vlab timing`"));
}

TEST_CASE("vlab timing --dark-port / --light-port / --release-all change the lab's dark ports", "[vlab][timing]") {
  Cache c;
  LabState lab = c.add_lab("dark", gone_pid(), two_hosts());
  FakeSupervisor sup(lab.dir, two_nic_switch());
  auto timing = [&](std::vector<std::string> words) {
    std::vector<std::string> args = {"vlab", "timing", "dark", "--cache", c.path};
    args.insert(args.end(), words.begin(), words.end());
    return run_cli(args);
  };
  Result r = timing({"--dark-port", "6", "--json"});
  REQUIRE(r.rc == 0);
  auto j = nlohmann::json::parse(r.out);
  CHECK(j["timing"]["dark_ports"] == nlohmann::json::array({6}));
  CHECK_THAT(read_file(lab.timing_file()), Contains("dark_ports: [6]"));
  CHECK_FALSE(read_file(lab.timing_file()).find("hold_down") != std::string::npos);  // holds untouched

  r = timing({"--dark-port", "1", "--dark-port=6", "--hold-down", "h2:eth1"});  // added, once each
  REQUIRE(r.rc == 0);
  CHECK_THAT(r.out, Contains("; held down: h2:eth1; dark ports: 6, 1"));
  r = timing({"--light-port", "6"});
  REQUIRE(r.rc == 0);
  CHECK_THAT(r.out, EndsWith("; dark ports: 1\n"));
  // The state survives state.json, and `vlab status` shows it.
  CHECK(LabState::load(lab.dir).timing.dark_ports == std::vector<int>{1});
  CHECK_THAT(run_cli({"vlab", "status", "dark", "--cache", c.path}).out, Contains("; dark ports: 1"));

  // Not a port number: named before anything is written; a port the switch lacks: the
  // supervisor's refusal, and nothing changes.
  const uint64_t gen = LabState::load(lab.dir).timing.generation;
  r = timing({"--dark-port", "x1"});
  CHECK(r.rc == ocslab::cli::kExitInput);
  CHECK_THAT(r.err, Contains("--dark-port 'x1': expected a switch port number (1 or more)"));
  CHECK(LabState::load(lab.dir).timing.generation == gen);
  r = timing({"--dark-port", "9"});
  CHECK(r.rc != 0);
  CHECK_THAT(r.err, Contains("dark_ports: the switch has no port 9 (ports 1..8)"));
  CHECK(LabState::load(lab.dir).timing.dark_ports == std::vector<int>{1});

  r = timing({"--release-all", "--json"});  // lights every dark port and releases every hold
  REQUIRE(r.rc == 0);
  j = nlohmann::json::parse(r.out);
  CHECK(j["timing"]["dark_ports"].empty());
  CHECK(j["timing"]["held_down"].empty());
  r = run_cli({"vlab", "status", "--cache", c.path, "--dark-port", "1"});
  CHECK(r.rc == ocslab::cli::kExitUsage);
  CHECK_THAT(r.err, Contains("--dark-port only applies to `ocslab vlab timing`"));
}

TEST_CASE("the runner's fault injector holds a NIC before its reconfiguration and leaves the lab as found",
          "[vlab][timing]") {
  Cache c;
  LabState lab = c.add_lab("inject", gone_pid(), two_hosts());
  FakeSupervisor sup(lab.dir, two_nic_switch());
  REQUIRE(run_cli({"vlab", "timing", "inject", "--cache", c.path, "--hold-down", "h1:eth1"}).rc == 0);  // held before

  runner::ExperimentSpec spec;
  for (const auto& h : two_hosts()) {
    runner::HostEntry e;
    e.name = h.name;
    e.nics.push_back(runner::NicEntry{"eth1", 0, 0});
    spec.hosts.push_back(e);
  }
  runner::FaultSpec f;
  f.host = 1;
  f.nic = "eth1";
  f.before_iteration = 2;
  spec.faults.push_back(f);
  std::vector<Sample> rows;
  std::vector<std::string> logs;
  {
    runner::FaultInjector faults(
        spec, lab.dir, [&](const Sample& s) { rows.push_back(s); }, [&](const std::string& m) { logs.push_back(m); });
    CHECK(faults.before_reconfiguration(1).empty());
    CHECK(rows.empty());
    CHECK(LabState::load(lab.dir).timing.held_down == std::vector<std::string>{"h1:eth1"});

    const int64_t before = realtime_ns();
    CHECK(faults.before_reconfiguration(2).empty());
    CHECK(LabState::load(lab.dir).timing.held_down == std::vector<std::string>{"h1:eth1", "h2:eth1"});
    REQUIRE(rows.size() == 1);
    CHECK(rows[0].host == "h2");
    CHECK(rows[0].source == "fault");
    CHECK(rows[0].subject == "eth1");
    CHECK(rows[0].signal == "held_down");
    CHECK(rows[0].value == 1);
    CHECK(rows[0].t_ns >= before);
    CHECK(faults.record()[0]["held_ns"] == rows[0].t_ns);
    CHECK(faults.record()[0]["released_ns"] == 0);

    CHECK(faults.release().empty());
    CHECK(LabState::load(lab.dir).timing.held_down == std::vector<std::string>{"h1:eth1"});  // as found
    REQUIRE(rows.size() == 2);
    CHECK(rows[1].value == 0);
    auto rec = faults.record();
    CHECK(rec[0]["kind"] == "nic-held-down");
    CHECK(rec[0]["host"] == "h2");
    CHECK(rec[0]["nic"] == "eth1");
    CHECK(rec[0]["before_iteration"] == 2);
    CHECK(rec[0]["released_ns"] == rows[1].t_ns);
    CHECK(rec[0]["error"] == "");
    CHECK(faults.release().empty());  // once
  }
  CHECK(rows.size() == 2);  // the destructor found nothing left to release
  CHECK(LabState::load(lab.dir).timing.generation == 3);

  // A lab that stopped answering: the hold is a problem of the run, not an exception.
  runner::ExperimentSpec gone = spec;
  runner::FaultInjector dead(
      gone, c.path + "/labs/nosuch", [&](const Sample& s) { rows.push_back(s); },
      [&](const std::string& m) { logs.push_back(m); });
  auto problems = dead.before_reconfiguration(2);
  REQUIRE(problems.size() == 1);
  CHECK_THAT(problems[0], Contains("fault nic-held-down on h2:eth1 before reconfiguration 2 not injected"));
  CHECK(dead.record()[0]["held_ns"] == 0);
  CHECK(dead.record()[0]["error"] != "");
}

TEST_CASE("the runner's fault injector darkens a port beside the lab's own and puts both sets back as found",
          "[vlab][timing]") {
  Cache c;
  LabState lab = c.add_lab("darken", gone_pid(), two_hosts());
  FakeSupervisor sup(lab.dir, two_nic_switch());
  REQUIRE(run_cli({"vlab", "timing", "darken", "--cache", c.path, "--dark-port", "1", "--hold-down", "h1:eth1"}).rc ==
          0);  // the lab's own, before the run

  runner::ExperimentSpec spec = two_host_spec({port_dark(6, 1, 1), nic_held(1, 2)});
  std::vector<Sample> rows;
  std::vector<std::string> logs;
  runner::FaultInjector faults(
      spec, lab.dir, [&](const Sample& s) { rows.push_back(s); }, [&](const std::string& m) { logs.push_back(m); });
  CHECK(faults.before_reconfiguration(1).empty());
  CHECK(LabState::load(lab.dir).timing.dark_ports == std::vector<int>{1, 6});
  CHECK(LabState::load(lab.dir).timing.held_down == std::vector<std::string>{"h1:eth1"});
  REQUIRE(rows.size() == 1);
  CHECK(rows[0].host == "switch");
  CHECK(rows[0].subject == "port 6");
  CHECK(rows[0].signal == "dark");
  CHECK_THAT(logs.back(), Contains("injected port-dark on switch port 6 (h2:eth1 rx) before reconfiguration 1 (no "
                                   "light passes the port until the run ends)"));
  // The next fault keeps the port dark while it holds the NIC.
  CHECK(faults.before_reconfiguration(2).empty());
  CHECK(LabState::load(lab.dir).timing.dark_ports == std::vector<int>{1, 6});
  CHECK(LabState::load(lab.dir).timing.held_down == std::vector<std::string>{"h1:eth1", "h2:eth1"});

  CHECK(faults.release().empty());
  CHECK(LabState::load(lab.dir).timing.dark_ports == std::vector<int>{1});  // as found
  CHECK(LabState::load(lab.dir).timing.held_down == std::vector<std::string>{"h1:eth1"});
  REQUIRE(rows.size() == 4);
  CHECK(rows[2].subject == "port 6");
  CHECK(rows[2].value == 0);
  auto rec = faults.record();
  CHECK(rec[0]["kind"] == "port-dark");
  CHECK(rec[0]["for_ms"] == 0);
  CHECK(rec[0]["port"] == 6);
  CHECK(rec[0]["host"] == "h2");
  CHECK(rec[1]["port"] == 0);
}

TEST_CASE("the runner's fault injector asks the lab for an unreachable spell and leaves holds and dark ports alone",
          "[vlab][timing]") {
  Cache c;
  LabState lab = c.add_lab("spell", gone_pid(), two_hosts());
  FakeSupervisor sup(lab.dir, two_nic_switch());
  REQUIRE(run_cli({"vlab", "timing", "spell", "--cache", c.path, "--dark-port", "1"}).rc == 0);
  runner::FaultSpec f;
  f.kind = runner::kSwitchUnreachable;
  f.for_ms = 250;
  f.before_iteration = 1;
  runner::ExperimentSpec spec = two_host_spec({f});
  testing::TempDir results;
  std::vector<Sample> rows;
  std::vector<std::string> logs;
  runner::FaultInjector faults(
      spec, lab.dir, [&](const Sample& s) { rows.push_back(s); }, [&](const std::string& m) { logs.push_back(m); },
      results.path() + "/" + runner::kFaultJournal);
  CHECK(faults.before_reconfiguration(1).empty());
  CHECK_THAT(read_file(lab.timing_file()), Contains("unreachable_ms: 250") && !Contains("dark_ports"));
  CHECK(LabState::load(lab.dir).timing.dark_ports == std::vector<int>{1});  // untouched
  CHECK_THAT(logs.back(), Contains("injected switch-unreachable for 250 ms before reconfiguration 1"));
  auto rec = faults.record();
  CHECK(rec[0]["host"] == "");
  CHECK(rec[0]["for_ms"] == 250);
  CHECK(rec[0]["released_ns"].get<int64_t>() == rec[0]["held_ns"].get<int64_t>() + 250'000'000);
  // Nothing for `ocslab recover` to undo: the spell ends by itself.
  std::vector<std::string> problems;
  const uint64_t gen = LabState::load(lab.dir).timing.generation;
  CHECK(runner::FaultInjector::release_journal(results.path() + "/" + runner::kFaultJournal, problems,
                                               [](const std::string&) {})
            .size() == 1);
  CHECK(LabState::load(lab.dir).timing.generation == gen);
  CHECK(faults.release().empty());
  REQUIRE(rows.size() == 2);
  CHECK(rows[1].value == 0);
  CHECK(rows[1].t_ns == rec[0]["released_ns"].get<int64_t>());  // when it ended, not when the run did
}

TEST_CASE("the fault journal: a runner that dies with faults in force leaves them for `ocslab recover` to undo",
          "[vlab][timing]") {
  Cache c;
  LabState lab = c.add_lab("journal", gone_pid(), two_hosts());
  FakeSupervisor sup(lab.dir, two_nic_switch());
  REQUIRE(run_cli({"vlab", "timing", "journal", "--cache", c.path, "--dark-port", "1"}).rc == 0);  // the lab's own
  runner::ExperimentSpec spec = two_host_spec({port_dark(6, 1, 1), nic_held(0, 2)});
  testing::TempDir results;
  const std::string journal = results.path() + "/" + runner::kFaultJournal;
  std::vector<std::string> logs;
  auto log = [&](const std::string& m) { logs.push_back(m); };
  // The "runner" injects the first fault in a child process that then dies without unwinding
  // (no destructor releases anything), as a killed runner does.
  const pid_t runner_pid = ::fork();
  REQUIRE(runner_pid >= 0);
  if (runner_pid == 0) {
    runner::FaultInjector faults(spec, lab.dir, [](const Sample&) {}, [](const std::string&) {}, journal);
    ::_exit(faults.before_reconfiguration(1).empty() ? 0 : 1);
  }
  int status = 0;
  REQUIRE(::waitpid(runner_pid, &status, 0) == runner_pid);
  REQUIRE(WIFEXITED(status));
  REQUIRE(WEXITSTATUS(status) == 0);
  CHECK(LabState::load(lab.dir).timing.dark_ports == std::vector<int>{1, 6});
  auto j = nlohmann::json::parse(read_file(journal));
  CHECK(j["found_dark_ports"] == nlohmann::json::array({1}));
  CHECK(j["faults"][0]["held_ns"] != 0);
  CHECK(j["faults"][1]["held_ns"] == 0);  // not yet due

  std::vector<std::string> problems;
  auto rec = runner::FaultInjector::release_journal(journal, problems, log);
  CHECK(problems.empty());
  CHECK(LabState::load(lab.dir).timing.dark_ports == std::vector<int>{1});  // as the run found it
  CHECK(LabState::load(lab.dir).timing.held_down.empty());
  REQUIRE(rec.size() == 2);
  CHECK(rec[0]["released_ns"] != 0);
  CHECK(rec[0]["released_by"] == "ocslab recover");
  CHECK(rec[1]["released_ns"] == 0);  // never injected: nothing to release
  CHECK_THAT(logs.back(), Contains("faults released by `ocslab recover`"));
  // A second recovery finds nothing pending and changes nothing.
  const uint64_t gen = LabState::load(lab.dir).timing.generation;
  CHECK(runner::FaultInjector::release_journal(journal, problems, log).size() == 2);
  CHECK(LabState::load(lab.dir).timing.generation == gen);
  // No journal: no faults; a damaged one: a problem naming it, the lab untouched.
  CHECK(runner::FaultInjector::release_journal(results.path() + "/none.json", problems, log).empty());
  write_file(journal, "{\"faults\": [{\"held_ns\": 5}]}");
  CHECK(runner::FaultInjector::release_journal(journal, problems, log).empty());
  REQUIRE(problems.size() == 1);
  CHECK_THAT(problems[0], Contains(journal + ": not a fault journal"));
  CHECK(LabState::load(lab.dir).timing.generation == gen);
}

TEST_CASE("ocslab run --check shows a spec's faults; --reconfigurations may not cut one off", "[vlab][timing]") {
  testing::TempDir dir;
  const std::string spec = dir.path() + "/held.yaml";
  write_file(spec, "lab: {vlab: " + testing::source_dir() + "/experiments/labs/four-hosts.yaml}\n" +
                       "mappings:\n"
                       "  rail-a: [h1:eth1 <-> h2:eth1, h3:eth1 <-> h4:eth1]\n"
                       "  rail-b: [h1:eth1 <-> h3:eth1, h2:eth1 <-> h4:eth1]\n"
                       "schedule: {reconfigurations: 3}\n"
                       "probes: {carrier: {}}\n"
                       "faults:\n"
                       "  - {kind: nic-held-down, nic: h3:eth1, before_iteration: 2}\n");
  Result r = run_cli({"run", spec, "--check"});
  CHECK(r.rc == 0);
  CHECK_THAT(r.out, Contains("injected fault: nic-held-down on h3:eth1 before reconfiguration 2 (released when the run "
                             "ends)"));
  r = run_cli({"run", spec, "--check", "--reconfigurations", "1"});
  CHECK(r.rc == ocslab::cli::kExitInput);
  CHECK_THAT(r.err, Contains(spec + ":8:5: before_iteration 2 is after the run's last reconfiguration "
                                    "(--reconfigurations 1)"));
  CHECK(run_cli({"run", spec, "--check", "--reconfigurations", "2"}).rc == 0);
}


TEST_CASE("vlab timing --dark-for MS with --dark-port: a dark spell the emulator ends by itself", "[vlab][timing]") {
  Cache c;
  LabState lab = c.add_lab("spell", gone_pid(), two_hosts());
  FakeSupervisor sup(lab.dir);  // a started emulator: a spell is timed by its loop
  auto timing = [&](std::vector<std::string> words) {
    std::vector<std::string> args = {"vlab", "timing", "spell", "--cache", c.path};
    args.insert(args.end(), words.begin(), words.end());
    return run_cli(args);
  };
  Result r = timing({"--dark-port", "3", "--dark-port", "5", "--dark-for", "2000"});
  REQUIRE(r.rc == 0);
  CHECK_THAT(read_file(lab.timing_file()), Contains("dark_spell: {ports: [3, 5], ms: 2000}"));
  CHECK_FALSE(read_file(lab.timing_file()).find("dark_ports") != std::string::npos);  // not the dark set
  CHECK(LabState::load(lab.dir).timing.dark_ports.empty());
  // The same port again while its spell lasts: the emulator's refusal, named.
  r = timing({"--dark-port", "5", "--dark-for", "10"});
  CHECK(r.rc != 0);
  CHECK_THAT(r.err, Contains("dark_spell: port 5 is in a dark spell already"));

  // Named before anything is written.
  const uint64_t gen = LabState::load(lab.dir).timing.generation;
  r = timing({"--dark-port", "4", "--dark-for", "x"});
  CHECK(r.rc == ocslab::cli::kExitInput);
  CHECK_THAT(r.err, Contains("--dark-for 'x'"));
  r = timing({"--dark-port", "4", "--dark-for", "0"});
  CHECK(r.rc == ocslab::cli::kExitInput);
  CHECK_THAT(r.err, Contains("expected milliseconds above 0, at most 600000"));
  r = timing({"--dark-for", "10"});
  CHECK(r.rc == ocslab::cli::kExitUsage);
  CHECK_THAT(r.err, Contains("--dark-for MS: name the ports with --dark-port PORT"));
  r = timing({"--dark-for", "10", "--dark-port", "4", "--light-port", "4"});
  CHECK(r.rc == ocslab::cli::kExitUsage);
  CHECK_THAT(r.err, Contains("--dark-for takes --dark-port only"));
  CHECK(LabState::load(lab.dir).timing.generation == gen);
  r = run_cli({"vlab", "status", "--cache", c.path, "--dark-for", "5"});
  CHECK(r.rc == ocslab::cli::kExitUsage);
  CHECK_THAT(r.err, Contains("--dark-for only applies to `ocslab vlab timing`"));
}

}  // namespace vlab_timing_test
