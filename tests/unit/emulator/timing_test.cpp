// Re-timing a running emulator: the timing file's parser (the lab file's syntax and errors)
// and Emulator::retime on a started emulator, measured from the ground truth it records. The
// NIC case attaches one UDP NIC whose QEMU end is a minimal QMP responder on a unix socket.
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <fmt/format.h>
#include <atomic>
#include <catch2/catch.hpp>
#include <condition_variable>
#include <cstring>
#include <future>
#include <mutex>
#include <thread>

#include "ocslab/common/clock.h"
#include "ocslab/common/process.h"
#include "ocslab/emulator/emulator.h"
#include "ocslab/emulator/lab_config.h"
#include "ocslab/testing/sshd_fixture.h"

// This file's helpers in a namespace of its own: the unity build compiles it together with
// the other tests of its binary.
namespace timing_test {

using namespace ocslab;
using namespace ocslab::emu;
using Catch::Contains;

namespace {

TimingUpdate parse(const std::string& text) { return parse_timing_update(load_yaml_string(text, "timing.yaml")); }

// Waits (on ground-truth events, not a clock) for the first sample at or after `since` that
// matches; empty after timeout.
std::optional<Sample> await_sample(GroundTruth& truth, const std::string& subject, const std::string& signal,
                                   double value, int64_t since, std::chrono::milliseconds timeout) {
  auto match = [&](const Sample& s) {
    return s.subject == subject && s.signal == signal && s.value == value && s.mono_ns >= since;
  };
  std::mutex m;
  std::condition_variable cv;
  std::optional<Sample> found;
  int id = truth.subscribe([&](const Sample& s) {
    if (!match(s)) return;
    std::lock_guard lock(m);
    if (!found) found = s;
    cv.notify_all();
  });
  for (const auto& s : truth.samples()) {
    if (match(s)) {
      std::lock_guard lock(m);
      if (!found) found = s;
    }
  }
  std::unique_lock lock(m);
  // load-safe: an event wait (a matching sample); timeout is its hang guard.
  cv.wait_for(lock, timeout, [&] { return found.has_value(); });
  auto out = found;
  lock.unlock();
  truth.unsubscribe(id);
  return out;
}

double gap_ms(const Sample& from, const Sample& to) { return static_cast<double>(to.mono_ns - from.mono_ns) / 1e6; }

// QEMU's QMP as the link driver sees it: a greeting, then {"return": {}} for every command.
class QmpResponder {
 public:
  explicit QmpResponder(std::string path) : path_(std::move(path)) {
    fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, path_.c_str(), sizeof(addr.sun_path) - 1);
    REQUIRE(::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0);
    REQUIRE(::listen(fd_, 4) == 0);
    thread_ = std::thread([this] { serve(); });
  }
  ~QmpResponder() {
    stop_ = true;
    thread_.join();
    ::close(fd_);
  }

 private:
  void serve() {
    int client = -1;
    std::string buffer;
    while (!stop_) {
      pollfd p[2] = {{fd_, POLLIN, 0}, {client, POLLIN, 0}};
      if (::poll(p, client >= 0 ? 2 : 1, 20) <= 0) continue;
      if (p[0].revents & POLLIN) {
        if (client >= 0) ::close(client);
        client = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
        send(client, R"({"QMP": {"version": {}, "capabilities": []}})");
      }
      if (client >= 0 && (p[1].revents & (POLLIN | POLLHUP))) {
        char chunk[1024];
        ssize_t n = ::recv(client, chunk, sizeof(chunk), 0);
        if (n <= 0) {
          ::close(client);
          client = -1;
          continue;
        }
        buffer.append(chunk, static_cast<size_t>(n));
        for (auto nl = buffer.find('\n'); nl != std::string::npos; nl = buffer.find('\n')) {
          buffer.erase(0, nl + 1);
          send(client, R"({"return": {}})");
        }
      }
    }
    if (client >= 0) ::close(client);
  }
  static void send(int fd, const std::string& line) {
    std::string l = line + "\r\n";
    (void)::send(fd, l.data(), l.size(), MSG_NOSIGNAL);
  }

  std::string path_;
  int fd_ = -1;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

EmulatorConfig small_switch(double switching_ms) {
  return parse_emulator_config(
      load_yaml_string("switch: {size: 4x4, switching_ms: " + std::to_string(switching_ms) + "}\n", "lab.yaml"));
}

// Starts a connect on the loop; the future is ready (with its monotonic time) at the ack.
std::future<int64_t> start_connect(Emulator& emu, Port in, Port out, std::shared_ptr<std::promise<int64_t>> p) {
  auto fut = p->get_future();
  auto err = emu.call([&] { return emu.model().connect({{in, out}}, [p] { p->set_value(monotonic_ns()); }); });
  REQUIRE_FALSE(err);
  return fut;
}

// A lab of one NIC, n1 (switch ports 1 -> 5, its QMP at dir/qmp.sock), on a 4x4 switch that
// switches in 1 ms, with a fixed firmware link-up delay.
std::string one_nic_lab(const std::string& dir, int firmware_up_ms) {
  int listen = free_loopback_port(SOCK_DGRAM), peer = free_loopback_port(SOCK_DGRAM);
  return fmt::format(
      "switch: {{size: 4x4, switching_ms: 1}}\n"
      "nic_model: {{firmware_up_ms: {}}}\n"
      "nics:\n"
      "  - {{name: n1, tx_port: 1, rx_port: 5, udp: {{listen: 127.0.0.1:{}, peer: 127.0.0.1:{}}},\n"
      "     qmp: {{socket: {}/qmp.sock, netdev: d1}}}}\n",
      firmware_up_ms, listen, peer, dir);
}

}  // namespace

TEST_CASE("a timing file takes the lab file's switch preset, switching_ms and nic_model", "[emulator][timing]") {
  TimingUpdate u = parse("switch: {preset: mems-3d}\n");
  REQUIRE(u.switching);
  CHECK(u.switching->mean_ms() == SwitchParams::preset("mems-3d").switching.mean_ms());
  CHECK(u.switch_preset == "mems-3d");
  CHECK_FALSE(u.nic_link);

  u = parse("switch:\n  preset: rotor\n  switching_ms: {uniform: [10, 20]}\n");
  CHECK(u.switching->to_string() == "uniform 10..20 ms");
  CHECK(u.switch_preset == "rotor");

  u = parse("switch: {switching_ms: 7}\nnic_model: cx6dx-no-autoneg\n");
  CHECK(u.switching->to_string() == "fixed 7 ms");
  CHECK(u.switch_preset == "custom");
  REQUIRE(u.nic_link);
  CHECK(u.nic_preset == "cx6dx-no-autoneg");
  CHECK(u.nic_link->firmware_up.mean_ms() == 3000);

  u = parse("nic_model: {preset: cx6dx-autoneg, los_ms: 4, firmware_up_ms: 50}\n");
  CHECK_FALSE(u.switching);
  CHECK(u.nic_preset == "cx6dx-autoneg");
  CHECK(u.nic_link->los_ms == 4);
  CHECK(u.nic_link->firmware_up.to_string() == "fixed 50 ms");
  CHECK(u.nic_link->rapid_window_ms == NicLinkParams::preset("cx6dx-autoneg").rapid_window_ms);

  CHECK(parse("").empty());
}

TEST_CASE("timing file errors name file:line:col like the lab file's", "[emulator][timing]") {
  CHECK_THROWS_WITH(parse("switch: {preset: warp-drive}\n"),
                    Contains("timing.yaml:1:18: unknown switch preset 'warp-drive' (known: polatis-6000"));
  CHECK_THROWS_WITH(parse("switch:\n  switching_ms: -3\n"), Contains("timing.yaml:2:17: a delay cannot be negative"));
  CHECK_THROWS_WITH(parse("switch: {switching_ms: {uniform: [9, 2]}}\n"),
                    Contains("timing.yaml:1:34: uniform: HI is below LO"));
  CHECK_THROWS_WITH(parse("switch: {}\n"), Contains("timing.yaml:1:9: give 'preset' and/or 'switching_ms'"));
  CHECK_THROWS_WITH(parse("switch: {size: 8x8}\n"), Contains("timing.yaml:1:10: unknown key 'size'"));
  CHECK_THROWS_WITH(parse("nics: []\n"), Contains("timing.yaml:1:1: unknown key 'nics'"));
  CHECK_THROWS_WITH(parse("nic_model: fast\n"), Contains("timing.yaml:1:12: unknown NIC link preset 'fast'"));
  CHECK_THROWS_WITH(parse("nic_model:\n  firmware_up_ms: abc\n"),
                    Contains("timing.yaml:2:19: expected a number of milliseconds, got 'abc'"));
  CHECK_THROWS_WITH(parse("- 1\n"), Contains("timing.yaml:1:1: expected a mapping"));
}

TEST_CASE("retime: the next connect takes the new switching time, a move under way keeps its draw",
          "[emulator][timing]") {
  Emulator emu(small_switch(1000));
  emu.start();
  auto slow = start_connect(emu, 1, 5, std::make_shared<std::promise<int64_t>>());
  emu.retime(parse("switch: {switching_ms: 20}\n"));
  int64_t t_fast = monotonic_ns();
  auto fast = start_connect(emu, 2, 6, std::make_shared<std::promise<int64_t>>());
  // load-safe: a hang guard; the future's value is the event.
  REQUIRE(fast.wait_for(std::chrono::seconds(5)) == std::future_status::ready);
  double fast_ms = static_cast<double>(fast.get() - t_fast) / 1e6;
  CHECK(fast_ms >= 20.0);
  CHECK(fast_ms < 1000.0);
  // The move that started before the change is still switching with its 1000 ms draw.
  // load-bound: asks the slow move's state at once; it is still switching only if the fast move took under its 1000 ms
  // draw, the bound checked above.
  CHECK(slow.wait_for(std::chrono::seconds(0)) == std::future_status::timeout);
  // load-safe: a hang guard; the future's value is the event.
  REQUIRE(slow.wait_for(std::chrono::seconds(5)) == std::future_status::ready);

  std::map<std::string, double> drawn;  // switch_start records the drawn time, in ms
  std::optional<double> mean;
  for (const auto& s : emu.truth().samples()) {
    if (s.signal == "switch_start") drawn[s.subject] = s.value;
    if (s.signal == "switching_mean" && s.subject == "timing") mean = s.value;
  }
  CHECK(drawn["1-5"] == 1000.0);
  CHECK(drawn["2-6"] == 20.0);
  CHECK(mean == 20.0);
  CHECK(emu.config().sw.switching.to_string() == "fixed 20 ms");
  emu.stop();
}

TEST_CASE("retime: every NIC's new firmware_up applies to the next light return", "[emulator][timing]") {
  testing::TempDir dir;
  QmpResponder qmp(dir.path() + "/qmp.sock");
  Emulator emu(parse_emulator_config(load_yaml_string(one_nic_lab(dir.path(), 400), "lab.yaml")));
  emu.start();
  auto light_to_link_ms = [&](int64_t since) {
    auto lit = await_sample(emu.truth(), "n1", "light", 1, since, std::chrono::seconds(5));
    REQUIRE(lit);
    auto up = await_sample(emu.truth(), "n1", "link", 1, lit->mono_ns, std::chrono::seconds(5));
    REQUIRE(up);
    return gap_ms(*lit, *up);
  };

  int64_t t0 = monotonic_ns();
  auto lit_ack = start_connect(emu, 1, 5, std::make_shared<std::promise<int64_t>>());
  CHECK(light_to_link_ms(t0) >= 400.0);
  emu.call([&] { return emu.model().disconnect({1}); });
  REQUIRE(await_sample(emu.truth(), "n1", "link", 0, t0, std::chrono::seconds(5)));

  emu.retime(parse("nic_model: {firmware_up_ms: 30}\n"));
  int64_t t1 = monotonic_ns();
  auto relit_ack = start_connect(emu, 1, 5, std::make_shared<std::promise<int64_t>>());
  double new_ms = light_to_link_ms(t1);
  CHECK(new_ms >= 30.0);
  CHECK(new_ms < 400.0);
  auto mean = await_sample(emu.truth(), "n1", "firmware_up_mean", 30, t0, std::chrono::seconds(0));
  CHECK(mean);
  CHECK(emu.config().nics[0].link_preset == "custom");
  emu.stop();
}

TEST_CASE("a NIC model's max_up_ms caps the link-up; a distribution's YAML reads back to itself",
          "[emulator][timing]") {
  TimingUpdate u =
      parse("nic_model: {preset: cx6dx-autoneg, firmware_up_ms: 600, rapid_window_ms: 500, max_up_ms: 1000}\n");
  REQUIRE(u.nic_link);
  CHECK(u.nic_preset == "cx6dx-autoneg");
  CHECK(u.nic_link->max_up_ms == 1000);
  CHECK(u.nic_link->rapid_window_ms == 500);
  CHECK(u.nic_link->rapid_extra.to_string() == "uniform 0..4000 ms");  // the preset's, kept
  CHECK(parse("nic_model: cx6dx-no-autoneg\n").nic_link->max_up_ms == 10000);  // the presets' 10 s
  CHECK(parse("nic_model: {firmware_up_ms: 5}\n").nic_link->max_up_ms == 0);   // no preset: no cap
  CHECK_THROWS_WITH(parse("nic_model: {max_up_ms: -1}\n"), Contains("timing.yaml:1:24:"));
  CHECK_THROWS_WITH(parse("nic_model: {max_up_ms: .inf}\n"), Contains("timing.yaml:1:24:"));
  for (const auto& d : {Distribution::fixed(25), Distribution::uniform(0, 400.5), Distribution::normal(600, 30, 500)}) {
    auto doc = load_yaml_string(d.to_yaml(), "d.yaml");
    CHECK(Distribution::from_yaml(doc, doc.root).to_string() == d.to_string());
  }

  testing::TempDir dir;
  QmpResponder qmp(dir.path() + "/qmp.sock");
  Emulator emu(parse_emulator_config(load_yaml_string(one_nic_lab(dir.path(), 30), "lab.yaml")));
  emu.start();
  emu.retime(parse("nic_model: {firmware_up_ms: 400, max_up_ms: 40}\n"));
  int64_t t0 = monotonic_ns();
  auto lit_ack = start_connect(emu, 1, 5, std::make_shared<std::promise<int64_t>>());
  auto lit = await_sample(emu.truth(), "n1", "light", 1, t0, std::chrono::seconds(5));
  REQUIRE(lit);
  auto drawn = await_sample(emu.truth(), "n1", "firmware_delay", 40, t0, std::chrono::seconds(5));
  CHECK(drawn);  // 400 drawn, 40 the cap
  auto up = await_sample(emu.truth(), "n1", "link", 1, lit->mono_ns, std::chrono::seconds(5));
  REQUIRE(up);
  CHECK(gap_ms(*lit, *up) >= 40.0);
  CHECK(gap_ms(*lit, *up) < 400.0);
  emu.stop();
}

TEST_CASE("a timing file's hold_down: the set of NICs held down, checked against the emulator's",
          "[emulator][timing]") {
  TimingUpdate u = parse("hold_down: [h3-eth1, h1-eth2]\n");
  REQUIRE(u.hold_down);
  CHECK(*u.hold_down == std::vector<std::string>{"h3-eth1", "h1-eth2"});
  CHECK_FALSE(u.switching);
  CHECK_FALSE(u.empty());
  u = parse("hold_down: []\n");  // releases every NIC
  REQUIRE(u.hold_down);
  CHECK(u.hold_down->empty());
  CHECK_FALSE(u.empty());
  CHECK_FALSE(parse("switch: {switching_ms: 5}\n").hold_down);  // absent: holds unchanged

  CHECK_THROWS_WITH(parse("hold_down: h1-eth1\n"),
                    Contains("timing.yaml:1:12: hold_down: expected a list of NIC names"));
  CHECK_THROWS_WITH(parse("hold_down: [a, {b: 1}]\n"), Contains("timing.yaml:1:16: hold_down: expected a NIC name"));
  CHECK_THROWS_WITH(parse("hold_down:\n  - a\n  - a\n"), Contains("timing.yaml:3:5: hold_down: NIC 'a' named twice"));

  EmulatorConfig cfg = parse_emulator_config(
      load_yaml_string("switch: {size: 4x4}\nnics:\n  - {name: h1-eth1, tx_port: 1, rx_port: 5, tap: {name: t1}}\n"
                       "  - {name: h2-eth1, tx_port: 2, rx_port: 6, tap: {name: t2}}\n",
                       "lab.yaml"));
  auto doc = load_yaml_string("nic_model: ideal\nhold_down: [h2-eth1, h9-eth1]\n", "timing.yaml");
  CHECK_THROWS_WITH(parse_timing_update(doc, cfg),
                    Contains("timing.yaml:2:22: hold_down: unknown NIC 'h9-eth1' (NICs: h1-eth1, h2-eth1)"));
  auto ok = parse_timing_update(load_yaml_string("hold_down: [h2-eth1]\n", "timing.yaml"), cfg);
  CHECK(*ok.hold_down == std::vector<std::string>{"h2-eth1"});
}

TEST_CASE("retime: a NIC held down stays down when its light returns and comes up after release",
          "[emulator][timing]") {
  testing::TempDir dir;
  QmpResponder qmp(dir.path() + "/qmp.sock");
  Emulator emu(parse_emulator_config(load_yaml_string(one_nic_lab(dir.path(), 30), "lab.yaml")));
  emu.start();
  // A NIC it does not have is refused, and nothing changes.
  CHECK_THROWS_WITH(emu.retime(parse("nic_model: ideal\nhold_down: [n2]\n")), Contains("unknown NIC 'n2'"));
  CHECK(emu.config().nics[0].link.firmware_up.to_string() == "fixed 30 ms");

  int64_t t0 = monotonic_ns();
  emu.retime(parse("hold_down: [n1]\n"));
  auto held = await_sample(emu.truth(), "n1", "held_down", 1, t0, std::chrono::seconds(0));
  CHECK(held);
  auto ack = start_connect(emu, 1, 5, std::make_shared<std::promise<int64_t>>());
  auto lit = await_sample(emu.truth(), "n1", "light", 1, t0, std::chrono::seconds(5));
  REQUIRE(lit);
  // Ten firmware delays later the link is still down: nothing to wait for but time here.
  CHECK_FALSE(await_sample(emu.truth(), "n1", "link", 1, t0, std::chrono::milliseconds(300)));

  emu.retime(parse("hold_down: []\n"));
  auto released = await_sample(emu.truth(), "n1", "held_down", 0, t0, std::chrono::seconds(0));
  REQUIRE(released);
  auto up = await_sample(emu.truth(), "n1", "link", 1, t0, std::chrono::seconds(5));
  REQUIRE(up);
  CHECK(gap_ms(*released, *up) >= 30.0);
  emu.stop();
}

TEST_CASE("a timing file's dark_ports: the set of switch ports darkened, checked against the switch's",
          "[emulator][timing]") {
  TimingUpdate u = parse("dark_ports: [3, 19]\n");
  REQUIRE(u.dark_ports);
  CHECK(*u.dark_ports == std::vector<Port>{3, 19});
  CHECK_FALSE(u.hold_down);
  CHECK_FALSE(u.empty());
  u = parse("dark_ports: []\n");  // lights every port the channel darkened
  REQUIRE(u.dark_ports);
  CHECK(u.dark_ports->empty());
  CHECK_FALSE(parse("hold_down: []\n").dark_ports);  // absent: unchanged

  CHECK_THROWS_WITH(parse("dark_ports: 3\n"),
                    Contains("timing.yaml:1:13: dark_ports: expected a list of switch ports"));
  CHECK_THROWS_WITH(parse("dark_ports: [3, x]\n"),
                    Contains("timing.yaml:1:17: dark_ports: expected a switch port number (1 or more)"));
  CHECK_THROWS_WITH(parse("dark_ports: [0]\n"),
                    Contains("timing.yaml:1:14: dark_ports: expected a switch port number"));
  CHECK_THROWS_WITH(parse("dark_ports: [5, 5]\n"), Contains("timing.yaml:1:17: dark_ports: port 5 named twice"));

  EmulatorConfig cfg = parse_emulator_config(load_yaml_string(
      "switch: {size: 4x4}\nnics:\n  - {name: h1-eth1, tx_port: 1, rx_port: 5, tap: {name: t1}}\n", "lab.yaml"));
  CHECK_THROWS_WITH(parse_timing_update(load_yaml_string("dark_ports: [2, 9]\n", "timing.yaml"), cfg),
                    Contains("timing.yaml:1:17: dark_ports: the switch has no port 9 (ports 1..8)"));
  CHECK(*parse_timing_update(load_yaml_string("dark_ports: [8]\n", "timing.yaml"), cfg).dark_ports ==
        std::vector<Port>{8});
}

TEST_CASE("a timing file's unreachable_ms: a one-off spell of milliseconds, checked", "[emulator][timing]") {
  TimingUpdate u = parse("unreachable_ms: 2500\n");
  REQUIRE(u.unreachable_ms);
  CHECK(*u.unreachable_ms == 2500);
  CHECK_FALSE(u.empty());
  CHECK_FALSE(parse("dark_ports: []\n").unreachable_ms);
  for (const char* bad : {"unreachable_ms: 0\n", "unreachable_ms: -5\n", "unreachable_ms: .inf\n",
                          "unreachable_ms: [1]\n", "unreachable_ms: x\n", "unreachable_ms: 3600001\n"}) {
    INFO(bad);
    CHECK_THROWS_WITH(parse(bad), Contains("timing.yaml:1:17: unreachable_ms: expected milliseconds above 0, at most "
                                           "3600000"));
  }
}

TEST_CASE("a timing file's dark_spell: ports dark for ms, checked", "[emulator][timing]") {
  TimingUpdate u = parse("dark_spell: {ports: [1, 5], ms: 50}\n");
  REQUIRE(u.dark_spell);
  CHECK(u.dark_spell->ports == std::vector<Port>{1, 5});
  CHECK(u.dark_spell->ms == 50);
  CHECK_FALSE(u.dark_ports);  // a spell is not the dark_ports set
  CHECK_FALSE(u.empty());
  CHECK_FALSE(parse("dark_ports: []\n").dark_spell);
  CHECK_THROWS_WITH(parse("dark_spell: [1]\n"), Contains("timing.yaml:1:13: dark_spell: expected {ports: [PORT, ...], ms: MS}"));
  CHECK_THROWS_WITH(parse("dark_spell: {ms: 5}\n"), Contains("timing.yaml:1:13: dark_spell: 'ports' is required"));
  CHECK_THROWS_WITH(parse("dark_spell: {ports: [1]}\n"), Contains("timing.yaml:1:13: dark_spell: 'ms' is required"));
  CHECK_THROWS_WITH(parse("dark_spell: {ports: [], ms: 5}\n"),
                    Contains("timing.yaml:1:21: dark_spell: name at least one port"));
  CHECK_THROWS_WITH(parse("dark_spell: {ports: [2, 2], ms: 5}\n"),
                    Contains("timing.yaml:1:25: dark_spell: ports: port 2 named twice"));
  CHECK_THROWS_WITH(parse("dark_spell: {ports: [1], ms: 5, for: 2}\n"), Contains("timing.yaml:1:"));
  for (const char* bad : {"0", "-5", ".inf", "x", "600001"}) {
    INFO(bad);
    CHECK_THROWS_WITH(parse(fmt::format("dark_spell: {{ports: [1], ms: {}}}\n", bad)),
                      Contains("timing.yaml:1:30: dark_spell: ms: expected milliseconds above 0, at most 600000"));
  }
  EmulatorConfig cfg = parse_emulator_config(load_yaml_string("switch: {size: 4x4}\n", "lab.yaml"));
  CHECK_THROWS_WITH(parse_timing_update(load_yaml_string("dark_spell: {ports: [9], ms: 5}\n", "timing.yaml"), cfg),
                    Contains("timing.yaml:1:22: dark_spell: ports: the switch has no port 9 (ports 1..8)"));
}

TEST_CASE("a timing file's link_gbps: every lit circuit's rate from now on, checked", "[emulator][timing][link-rate]") {
  TimingUpdate u = parse("link_gbps: 10\n");
  REQUIRE(u.link_gbps);
  CHECK(*u.link_gbps == 10);
  CHECK_FALSE(u.empty());
  CHECK(*parse("link_gbps: 0\n").link_gbps == 0);  // the cap removed
  CHECK_FALSE(parse("dark_ports: []\n").link_gbps);
  for (const char* bad : {"-2", "0.0005", "2000", ".inf", "x", "{a: 1}"}) {
    INFO(bad);
    CHECK_THROWS_WITH(parse(fmt::format("link_gbps: {}\n", bad)),
                      Contains("timing.yaml:1:12: link_gbps: expected a link rate in Gbit/s, 0.001..1000 (0: no cap)"));
  }
  TimingUpdate out_of_range;
  out_of_range.link_gbps = 5000;
  Emulator emu(parse_emulator_config(load_yaml_string("switch: {size: 4x4}\n", "lab.yaml")));
  CHECK_THROWS_WITH(emu.retime(out_of_range), Contains("link_gbps: 5000 Gbit/s is outside 0.001..1000"));
  CHECK(emu.config().link_gbps == 0);
  emu.retime(u);
  CHECK(emu.config().link_gbps == 10);
}

TEST_CASE("retime: a dark spell darkens its ports for exactly its ms, timed by the emulator", "[emulator][timing]") {
  testing::TempDir dir;
  QmpResponder qmp(dir.path() + "/qmp.sock");
  Emulator emu(parse_emulator_config(load_yaml_string(one_nic_lab(dir.path(), 0), "lab.yaml")));
  CHECK_THROWS_WITH(emu.retime(parse("dark_spell: {ports: [5], ms: 20}\n")), Contains("the emulator is not running"));
  emu.start();
  int64_t t0 = monotonic_ns();
  start_connect(emu, 1, 5, std::make_shared<std::promise<int64_t>>());
  REQUIRE(await_sample(emu.truth(), "n1", "link", 1, t0, std::chrono::seconds(5)));

  for (double ms : {5.0, 40.0}) {
    INFO(ms);
    int64_t t1 = monotonic_ns();
    emu.retime(parse(fmt::format("dark_spell: {{ports: [5], ms: {}}}\n", ms)));
    auto closed = await_sample(emu.truth(), "port 5", "shutter_closed", 1, t1, std::chrono::seconds(5));
    REQUIRE(closed);
    CHECK(await_sample(emu.truth(), "dark_spell", "dark_spell", ms, t1, std::chrono::seconds(0)));
    auto opened = await_sample(emu.truth(), "port 5", "shutter_closed", 0, closed->mono_ns, std::chrono::seconds(5));
    REQUIRE(opened);
    // The steady timer never fires early; late only by the loop's scheduling.
    CHECK(gap_ms(*closed, *opened) >= ms);
    auto dark = await_sample(emu.truth(), "n1", "light", 0, t1, std::chrono::seconds(5));
    REQUIRE(dark);
    REQUIRE(await_sample(emu.truth(), "n1", "light", 1, dark->mono_ns, std::chrono::seconds(5)));
    REQUIRE(await_sample(emu.truth(), "n1", "link", 1, dark->mono_ns, std::chrono::seconds(5)));
    CHECK_FALSE(emu.call([&] { return emu.model().shutter_closed(5); }));
  }

  // A port already dark is refused, whoever darkened it, and nothing of the update applies.
  emu.retime(parse("dark_spell: {ports: [5], ms: 2000}\n"));
  CHECK_THROWS_WITH(emu.retime(parse("dark_spell: {ports: [1, 5], ms: 10}\n")),
                    Contains("dark_spell: port 5 is in a dark spell already"));
  CHECK_FALSE(emu.call([&] { return emu.model().shutter_closed(1); }));
  emu.retime(parse("dark_ports: [2]\n"));
  CHECK_THROWS_WITH(emu.retime(parse("hold_down: [n1]\ndark_spell: {ports: [2], ms: 10}\n")),
                    Contains("dark_spell: port 2 is dark already"));
  CHECK(emu.call([&] { return emu.model().shutter_closed(2); }));
  CHECK_THROWS_WITH(emu.retime(parse("dark_spell: {ports: [9], ms: 10}\n")),
                    Contains("dark_spell: the switch has no port 9 (ports 1..8)"));
  emu.stop();  // with a spell under way: its timer goes with the loop
}

TEST_CASE("retime: a dark port keeps its circuit's light from the NIC until it is lit again", "[emulator][timing]") {
  testing::TempDir dir;
  QmpResponder qmp(dir.path() + "/qmp.sock");
  Emulator emu(parse_emulator_config(load_yaml_string(one_nic_lab(dir.path(), 30), "lab.yaml")));
  emu.start();
  // A port the switch does not have is refused, and nothing changes.
  CHECK_THROWS_WITH(emu.retime(parse("dark_ports: [1, 9]\n")), Contains("the switch has no port 9 (ports 1..8)"));
  int64_t t0 = monotonic_ns();
  auto ack = start_connect(emu, 1, 5, std::make_shared<std::promise<int64_t>>());
  REQUIRE(await_sample(emu.truth(), "n1", "link", 1, t0, std::chrono::seconds(5)));

  // The NIC's receive port goes dark: light and link go down, and stay down.
  int64_t t1 = monotonic_ns();
  emu.retime(parse("dark_ports: [5]\n"));
  CHECK(emu.call([&] { return emu.model().shutter_closed(5); }));
  auto dark = await_sample(emu.truth(), "n1", "light", 0, t1, std::chrono::seconds(5));
  REQUIRE(dark);
  REQUIRE(await_sample(emu.truth(), "n1", "link", 0, t1, std::chrono::seconds(5)));
  CHECK(await_sample(emu.truth(), "port 5", "shutter_closed", 1, t1, std::chrono::seconds(0)));
  CHECK_FALSE(await_sample(emu.truth(), "n1", "light", 1, dark->mono_ns, std::chrono::milliseconds(200)));

  // A shutter the control plane closed is not the channel's: lighting the channel's ports
  // leaves it closed.
  REQUIRE_FALSE(emu.call([&] { return emu.model().set_shutter({2}, true); }));
  int64_t t2 = monotonic_ns();
  emu.retime(parse("dark_ports: []\n"));
  CHECK_FALSE(emu.call([&] { return emu.model().shutter_closed(5); }));
  CHECK(emu.call([&] { return emu.model().shutter_closed(2); }));
  REQUIRE(await_sample(emu.truth(), "n1", "light", 1, t2, std::chrono::seconds(5)));
  REQUIRE(await_sample(emu.truth(), "n1", "link", 1, t2, std::chrono::seconds(5)));
  emu.stop();
}

}  // namespace timing_test
