// The emulator survives hostile and broken clients on every protocol port and keeps serving
// the healthy sessions: fuzzed TL1 and SCPI byte streams, truncated and malformed NETCONF
// frames over SSH, garbage during SSH key exchange, clients that vanish mid-command (also
// while the mirrors settle), and many concurrent connections. Seeded, bounded, repeatable.
#include <netinet/in.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <random>
#include <thread>

#include "cp_lab.h"
#include "ocslab/emulator/emulator.h"
#include "ocslab/ocsctl/netconf_codec.h"
#include "ocslab/ocsctl/stream.h"

using namespace cp_test;
using ocs::Circuit;
using ocs::Port;
using ocs::Protocol;

namespace {

const std::vector<std::string> kTl1Seeds = {
    "ACT-USER::admin:1::root;",
    "ENT-PATCH::1,17:2:;",
    "DLT-PATCH::ALL:3:;",
    "RTRV-PATCH:::4:;",
    "RTRV-PORT-POWER::1&&32:5:;",
    "RTRV-EQPT::SYSTEM:6:::PARAMETER=SIZE;",
    "ENT-PATCH::1&&16,17&&32:7:;",
    "SET-PORT-PMON::3:8:::WAVE=1310;",
    "DLT-PATCH::1&&2000000000:9:;",
    "ENT-PATCH::\"1,17\":10:;",
    "RTRV-HDR:::11;",
    "OPR-PORT-SHUTTER::5:12:;",
};
const std::vector<std::string> kScpiSeeds = {
    "*IDN?",
    ":OXC:SWITch:CONNect:ADD (@1,2),(@17,18)",
    ":OXC:SWIT:CONN:STAT?",
    ":SYST:ERR?",
    "*CLS;*OPC?",
    ":oxc:swit:conn:sub (@1),(@17)",
    ":PMON:POW? (@1:32)",
    ":OXC:SWIT:DISC:ALL",
    ":OXC:SWIT:CONN:PORT? 2",
    ":OXC:SWIT:CONN:ADD (@1:1000000),(@17)",
    ":OXC:SWIT:CONN:ONLY (@3),(@19)",
};

// A seed command with bytes flipped, inserted, deleted or cut; sometimes pure noise.
std::string mutate(std::mt19937& rng, const std::vector<std::string>& seeds, const std::string& end) {
  std::uniform_int_distribution<int> pick(0, 9);
  std::string s;
  if (pick(rng) == 0) {
    std::uniform_int_distribution<int> len(1, 300), byte(0, 255);
    for (int i = len(rng); i > 0; --i) s += static_cast<char>(byte(rng));
    return s;
  }
  s = seeds[std::uniform_int_distribution<size_t>(0, seeds.size() - 1)(rng)];
  int edits = pick(rng) % 4;
  for (int i = 0; i < edits && !s.empty(); ++i) {
    size_t at = std::uniform_int_distribution<size_t>(0, s.size() - 1)(rng);
    char c = static_cast<char>(std::uniform_int_distribution<int>(0, 255)(rng));
    switch (pick(rng) % 4) {
      case 0:
        s[at] = c;
        break;
      case 1:
        s.insert(s.begin() + static_cast<long>(at), c);
        break;
      case 2:
        s.erase(at, 1);
        break;
      default:
        s.resize(at);
        break;
    }
  }
  return s + (pick(rng) < 8 ? end : "");
}

// One healthy session per protocol, checked between and after the abuse.
struct Healthy {
  explicit Healthy(Lab& lab) : lab(lab) {
    for (auto p : {Protocol::kTl1, Protocol::kTl1Ssh, Protocol::kNetconf, Protocol::kScpi}) {
      drivers.push_back(lab.driver(p));
      drivers.back()->list();
    }
  }
  // Every healthy driver still gets correct answers on its original connection.
  void check() {
    auto expect = lab.call([&] { return lab.model.circuits(); });
    for (auto& d : drivers) {
      INFO(d->name());
      auto got = d->list();
      std::sort(got.begin(), got.end());
      CHECK(got == expect);
      CHECK(d->info().ingress_ports == 16);
    }
  }
  Lab& lab;
  std::vector<std::unique_ptr<ocs::OcsDriver>> drivers;
};

std::unique_ptr<ocs::Stream> ssh_channel(const Lab& lab, int port, const std::string& subsystem) {
  ocs::SshOptions o;
  o.host = "127.0.0.1";
  o.port = port;
  o.user = "admin";
  o.password = "root";
  o.known_hosts_file = lab.known_hosts;
  o.subsystem = subsystem;
  o.connect_timeout = 5000ms;
  return ocs::ssh_open(o);
}

// Reads from an SSH stream until `needle` shows up, the peer closes, or the time is up.
std::string ssh_read(ocs::Stream& s, const std::string& needle, std::chrono::milliseconds timeout, bool& closed) {
  std::string got;
  closed = false;
  // load-safe: the ceiling of a wait for needle (the event); a hang guard.
  auto end = ocs::Clock::now() + timeout;
  while (got.find(needle) == std::string::npos && ocs::Clock::now() < end) {
    try {
      got += s.read_some(end);
    } catch (const ocs::ConnectionError&) {
      closed = true;
      break;
    }
  }
  return got;
}

}  // namespace

TEST_CASE("fuzzed TL1 and SCPI streams neither crash nor disturb healthy sessions", "[emulator_cp][robustness]") {
  Lab lab;
  Healthy healthy(lab);
  std::mt19937 rng(20240607);
  const auto ports = lab.cp.ports();
  // load-safe: the length of a stress run (clients coming and going), not an expected latency.
  auto deadline = std::chrono::steady_clock::now() + 20s;
  int clients = 0;
  for (int round = 0; round < 60 && std::chrono::steady_clock::now() < deadline; ++round) {
    bool tl1 = round % 2 == 0;
    RawClient c(tl1 ? *ports.tl1 : *ports.scpi);
    ++clients;
    if (tl1 && round % 4 == 0) c.send("ACT-USER::admin:1::root;");  // half the TL1 fuzz runs logged in
    int commands = std::uniform_int_distribution<int>(1, 40)(rng);
    std::string burst;
    for (int i = 0; i < commands; ++i) burst += mutate(rng, tl1 ? kTl1Seeds : kScpiSeeds, tl1 ? ";\r\n" : "\r\n");
    // Split the burst at random points, as TCP may.
    for (size_t off = 0; off < burst.size();) {
      size_t n = std::uniform_int_distribution<size_t>(1, 512)(rng);
      if (!c.send(std::string_view(burst).substr(off, n))) break;
      off += n;
    }
    if (round % 3 == 0)
      c.abort();  // vanish without reading the replies
    else
      c.read_until(tl1 ? "\r\n;" : "\r\n", 50ms);
    if (round % 10 == 9) healthy.check();
  }
  // Over-long input on both: TL1 refuses a command over 64 KiB, SCPI reports an overrun.
  {
    RawClient c(*ports.tl1);
    c.send(std::string(70 * 1024, 'A'));
    c.send(";RTRV-HDR:::77;");
    auto got = c.read_until("M  0 DENY");
    CHECK_THAT(got, Catch::Matchers::Contains("IICT"));
    CHECK_THAT(c.read_until("M  77 DENY"), Catch::Matchers::Contains("Not logged in"));
  }
  {
    RawClient c(*ports.scpi);
    c.send(std::string(70 * 1024, 'x') + "\r\n:SYST:ERR?\r\n");
    CHECK_THAT(c.read_until("\r\n"), Catch::Matchers::Contains("-363"));
  }
  INFO(clients << " fuzz clients");
  healthy.check();
  CHECK(lab.wait_sessions(4) == 4);
}

TEST_CASE("truncated and malformed NETCONF over SSH get an rpc-error or a clean close", "[emulator_cp][robustness]") {
  Lab lab;
  Healthy healthy(lab);
  const int port = *lab.cp.ports().netconf;
  const std::string hello11 =
      ocs::encode_frame(ocs::build_hello({ocs::kNetconfBase10, ocs::kNetconfBase11}), ocs::Framing::kEndOfMessage);
  const std::string hello10 = ocs::encode_frame(ocs::build_hello({ocs::kNetconfBase10}), ocs::Framing::kEndOfMessage);
  struct Case {
    const char* what;
    std::string hello, bytes;
    bool expect_error;  // an rpc-error comes back before (or instead of) the close
    bool expect_close;
  };
  std::vector<Case> cases = {
      {"bad chunk header", hello11, "\n#xyz\n<rpc/>\n##\n", true, true},
      {"chunk size beyond the limit", hello11, "\n#99999999999\n<rpc", true, true},
      {"XML that is not well-formed (chunked)", hello11,
       ocs::encode_frame("<rpc message-id='1'><get>", ocs::Framing::kChunked), true, false},
      {"XML that is not well-formed (EOM)", hello10, "<<<garbage]]>]]>", true, false},
      {"rpc without an operation", hello11,
       ocs::encode_frame("<rpc xmlns='urn:ietf:params:xml:ns:netconf:base:1.0' message-id='5'/>",
                         ocs::Framing::kChunked),
       true, false},
      {"unknown operation", hello11, ocs::encode_frame(ocs::build_rpc(6, "<reboot/>"), ocs::Framing::kChunked), true,
       false},
      {"not a hello first", "", ocs::encode_frame(ocs::build_rpc(1, "<get/>"), ocs::Framing::kEndOfMessage), false,
       true},
      {"truncated chunk then vanish", hello11, "\n#500\n<rpc message-id='9'>", false, false},
  };
  for (const auto& c : cases) {
    INFO(c.what);
    auto s = ssh_channel(lab, port, "netconf");
    bool closed = false;
    std::string hello = ssh_read(*s, "]]>]]>", 3000ms, closed);
    REQUIRE_THAT(hello, Catch::Matchers::Contains("urn:ietf:params:netconf:base:1.1"));
    if (!c.hello.empty()) s->write(c.hello);
    s->write(c.bytes);
    if (!c.expect_error && !c.expect_close) {
      s->close();  // vanishes mid-message
      continue;
    }
    std::string got = ssh_read(*s, c.expect_close ? "\x01never" : "</rpc-reply>", 3000ms, closed);
    if (c.expect_error) CHECK_THAT(got, Catch::Matchers::Contains("rpc-error"));
    if (c.expect_close) CHECK(closed);
    if (!c.expect_close) {
      // Still a working session: a valid get answers with data.
      s->write(ocs::encode_frame(ocs::build_rpc(42, "<get/>"),
                                 c.hello == hello10 ? ocs::Framing::kEndOfMessage : ocs::Framing::kChunked));
      CHECK_THAT(ssh_read(*s, "message-id=\"42\"", 3000ms, closed), Catch::Matchers::Contains("product-information"));
    }
  }
  healthy.check();
  CHECK(lab.wait_sessions(4) == 4);
}

TEST_CASE("garbage during SSH key exchange and failed logins leave the SSH ports serving",
          "[emulator_cp][robustness]") {
  Lab lab;
  Healthy healthy(lab);
  std::mt19937 rng(7);
  const auto ports = lab.cp.ports();
  for (int port : {*ports.tl1_ssh, *ports.netconf}) {
    for (int i = 0; i < 6; ++i) {
      RawClient c(port);
      std::string junk = i % 2 ? "SSH-2.0-fuzz\r\n" : "";
      for (int n = std::uniform_int_distribution<int>(1, 4000)(rng); n > 0; --n) {
        junk += static_cast<char>(std::uniform_int_distribution<int>(0, 255)(rng));
      }
      c.send(junk);
      if (i % 3 == 0)
        c.abort();
      else
        CHECK(c.closed_by_peer(12000ms));  // the server hangs up on a broken key exchange
    }
    // A wrong password is refused; the listener keeps going.
    ocs::SshOptions o;
    o.host = "127.0.0.1";
    o.port = port;
    o.user = "admin";
    o.password = "wrong";
    o.known_hosts_file = lab.known_hosts;
    o.subsystem = port == *ports.netconf ? "netconf" : "";
    CHECK_THROWS_AS(ocs::ssh_open(o), ocs::ConnectionError);
  }
  // A netconf subsystem request on the TL1 shell port is refused too.
  CHECK_THROWS_AS(ssh_channel(lab, *ports.tl1_ssh, "netconf"), ocs::ConnectionError);
  healthy.check();
  CHECK(lab.wait_sessions(4) == 4);
}

TEST_CASE("clients vanishing mid-command, also while the mirrors settle, are cleaned up", "[emulator_cp][robustness]") {
  Lab lab(small_switch(120));
  Healthy healthy(lab);
  const auto ports = lab.cp.ports();
  // TCP: log in, enter a patch, reset the connection before the COMPLD (mirrors still moving).
  for (int i = 0; i < 4; ++i) {
    RawClient c(*ports.tl1);
    c.send("ACT-USER::admin:1::root;");
    c.read_until("M  1 COMPLD");
    c.send("ENT-PATCH::" + std::to_string(5 + i) + "," + std::to_string(21 + i) + ":2:;RTRV-PATCH:::3:;");
    // load-safe: aims the abort into the settle; an abort after the settle is a case the emulator must survive as well.
    std::this_thread::sleep_for(20ms);  // kept: paces the abort into the settle (mirrors still moving)
    c.abort();
  }
  // Half a command, then gone.
  {
    RawClient c(*ports.scpi);
    c.send(":OXC:SWITch:CONNect:ADD (@9),(@25)\r\n:SYST:E");
    c.abort();
  }
  // SSH: the same over TL1+SSH and NETCONF, closing the channel during the settle.
  {
    auto s = ssh_channel(lab, *ports.tl1_ssh, "");
    s->write("ENT-PATCH::10,26:4:;\r\n");
    // load-safe: aims the close into the settle; a close after the settle is a case the emulator must survive as well.
    std::this_thread::sleep_for(20ms);  // kept: paces the close into the settle
    s->close();
  }
  {
    auto s = ssh_channel(lab, *ports.netconf, "netconf");
    bool closed = false;
    ssh_read(*s, "]]>]]>", 3000ms, closed);
    s->write(
        ocs::encode_frame(ocs::build_hello({ocs::kNetconfBase10, ocs::kNetconfBase11}), ocs::Framing::kEndOfMessage));
    s->write(
        ocs::encode_frame(ocs::build_rpc(1, ocs::build_edit_config(ocs::build_cross_connects({{11, 27}}, {}, "pair"))),
                          ocs::Framing::kChunked));
    // load-safe: aims the close into the settle; a close after the settle is a case the emulator must survive as well.
    std::this_thread::sleep_for(20ms);  // kept: paces the close into the settle
    s->close();
  }
  CHECK(lab.wait_sessions(4) == 4);
  // The abandoned commands were still carried out (all or nothing), and nobody hangs.
  const std::vector<Circuit> abandoned{{5, 21}, {6, 22}, {7, 23}, {8, 24}, {9, 25}, {10, 26}, {11, 27}};
  std::vector<Circuit> circuits;
  testing::poll_until(
      [&] {  // until every abandoned patch has settled
        circuits = lab.call([&] { return lab.model.circuits(); });
        for (Circuit c : abandoned)
          if (std::count(circuits.begin(), circuits.end(), c) == 0) return false;
        return true;
      },
      5000ms);
  for (Circuit c : abandoned) {
    INFO(ocs::to_string(c));
    CHECK(std::count(circuits.begin(), circuits.end(), c) == 1);
  }
  healthy.check();
  healthy.drivers[0]->clear();
  healthy.check();
}

TEST_CASE("a TL1 client that never reads its replies is dropped once 4 MiB wait; the others are unaffected",
          "[emulator_cp][robustness][output-cap]") {
  Lab lab;
  Healthy healthy(lab);
  RawClient hog(*lab.cp.ports().tl1);
  std::string burst;
  for (int i = 0; i < 20000; ++i) burst += "RTRV-HDR:::1:;";
  bool sent_all = true;
  for (int i = 0; i < 30 && sent_all; ++i) sent_all = hog.send(burst);  // 600,000 DENYs, ~50 MB of replies
  CHECK(hog.closed_by_peer(10000ms));
  healthy.check();
}

TEST_CASE("many concurrent TL1 and SCPI connections are served side by side", "[emulator_cp][robustness]") {
  Lab lab;
  Healthy healthy(lab);
  const auto ports = lab.cp.ports();
  std::vector<std::unique_ptr<RawClient>> tl1, scpi;
  for (int i = 0; i < 40; ++i) {
    tl1.push_back(std::make_unique<RawClient>(*ports.tl1));
    scpi.push_back(std::make_unique<RawClient>(*ports.scpi));
  }
  CHECK(lab.wait_sessions(84) == 84);
  for (size_t i = 0; i < tl1.size(); ++i) {
    tl1[i]->send("ACT-USER::admin:" + std::to_string(i) + "::root;RTRV-EQPT::SYSTEM:x" + std::to_string(i) +
                 ":::PARAMETER=SIZE;");
    scpi[i]->send("*IDN?;:OXC:SWIT:SIZE?\r\n");
  }
  for (size_t i = 0; i < tl1.size(); ++i) {
    auto got = tl1[i]->read_until("M  x" + std::to_string(i) + " COMPLD");
    CHECK_THAT(got, Catch::Matchers::Contains("SYSTEM:SIZE=16x16"));
    CHECK_THAT(got, Catch::Matchers::Contains("EMU-OCS"));
    CHECK_THAT(scpi[i]->read_until("\r\n"),
               Catch::Matchers::Contains("POLATIS,6000,OCSLAB-EMU-0001,ocslab-emulator;16,16"));
  }
  healthy.check();
  tl1.clear();
  scpi.clear();
  CHECK(lab.wait_sessions(4) == 4);
  healthy.check();
}

TEST_CASE("an unreachable switch (fault injection): every protocol's command waits out the spell, in order",
          "[emulator_cp][robustness]") {
  Lab lab(small_switch(1));
  for (Protocol proto : {Protocol::kTl1, Protocol::kTl1Ssh, Protocol::kNetconf, Protocol::kScpi}) {
    INFO("protocol " << static_cast<int>(proto));
    auto drv = lab.driver(proto);  // logged in before the spell: an open session goes silent too
    const Port in = 1 + static_cast<Port>(proto), out = 17 + static_cast<Port>(proto);
    const auto t0 = std::chrono::steady_clock::now();
    lab.call([&] {
      lab.cp.silence(400ms);
      return 0;
    });
    drv->apply({{in, out}}, ocs::ApplyMode::kMerge);
    const auto took = std::chrono::steady_clock::now() - t0;
    CHECK(took >= 400ms);
    CHECK(took < 3000ms);
    // Nothing reached the switch before the spell ended: the circuit is there now.
    auto circuits = lab.call([&] { return lab.model.circuits(); });
    CHECK(std::find(circuits.begin(), circuits.end(), Circuit{in, out}) != circuits.end());
  }
  CHECK(lab.count("switch", "control", "unreachable", 1.0) == 4);
  CHECK(testing::poll_until([&] { return lab.count("switch", "control", "unreachable", 0.0) == 4; }, 2000ms));

  // Commands sent during the spell are applied after it, each once and in order.
  auto drv = lab.driver(Protocol::kTl1);
  // Stamped before the spell begins: the spell runs from the silence call on the emulator's loop,
  // and a stamp after the second call came 3.8 ms late under ASan beside three other entries (a
  // fresh-clone CI run, 2026-11-29), so the 300 ms looked short.
  const auto t1 = std::chrono::steady_clock::now();
  lab.call([&] {
    lab.cp.silence(300ms);
    return 0;
  });
  lab.call([&] {
    lab.cp.silence(100ms);  // a shorter spell inside a longer one changes nothing
    return 0;
  });
  drv->apply({{9, 25}}, ocs::ApplyMode::kMerge);
  drv->apply({{9, 26}}, ocs::ApplyMode::kReplace);
  CHECK(std::chrono::steady_clock::now() - t1 >= 300ms);
  auto circuits = lab.call([&] { return lab.model.circuits(); });
  CHECK(circuits == std::vector<Circuit>{{9, 26}});
}

namespace {

// A blocking loopback client of the events stream; rcvbuf > 0 sets SO_RCVBUF before connect.
int events_client(int port, int rcvbuf = 0) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  REQUIRE(fd >= 0);
  if (rcvbuf > 0) ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof(rcvbuf));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0);
  return fd;
}

// What one read gives within 50 ms: bytes (>0), the end (0, also a reset) or nothing yet (-1).
ssize_t read_some(int fd) {
  pollfd p{fd, POLLIN, 0};
  if (::poll(&p, 1, 50) != 1) return -1;  // load-safe: callers poll_until for seconds
  char buf[65536];
  ssize_t n = ::read(fd, buf, sizeof(buf));
  return n < 0 ? 0 : n;
}

}  // namespace

TEST_CASE(
    "the events stream: a client cap, a client that never reads dropped, dead clients removed, accept "
    "errors survived",
    "[emulator_cp][robustness][events]") {
  emu::EmulatorConfig cfg;
  cfg.sw = small_switch(0);
  cfg.control.events = emu::ListenAddress{"127.0.0.1", 0};
  emu::Emulator emu(cfg);
  emu.start();
  const int port = *emu.events_port();
  auto event = [&] { emu.truth().record("test", "events", "tick", 1, ""); };
  // Every client in fds has its first bytes: events reach it (events recorded meanwhile).
  auto all_served = [&](const std::vector<int>& fds) {
    std::vector<bool> got(fds.size(), false);
    return ocslab::testing::poll_until(
        [&] {
          event();
          for (size_t i = 0; i < fds.size(); ++i) got[i] = got[i] || read_some(fds[i]) > 0;
          return std::all_of(got.begin(), got.end(), [](bool g) { return g; });
        },
        10s, 1ms);  // load-bound: 64 loopback clients, each served within a few loop turns
  };
  auto dropped = [&](int fd) {
    return ocslab::testing::poll_until(
        [&] {
          event();
          ssize_t n;
          while ((n = read_some(fd)) > 0) {
          }
          return n == 0;
        },
        20s, 1ms);  // load-bound: the server closes it on its next event
  };

  // A client that never reads is dropped once 4 MiB wait for it; a reading one is not.
  int slow = events_client(port, 4096);
  int reader = events_client(port);
  REQUIRE(all_served({reader}));
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> lines_read{0};
  std::thread drain([&] {
    char buf[65536];
    while (!stop) {
      pollfd p{reader, POLLIN, 0};
      if (::poll(&p, 1, 50) != 1) continue;  // load-safe: one turn of the loop, which checks stop
      const ssize_t n = ::read(reader, buf, sizeof(buf));
      if (n <= 0) break;
      lines_read += static_cast<uint64_t>(std::count(buf, buf + n, '\n'));
    }
  });
  // About 18 MB of lines (one per event, ~150 bytes), in batches of 500. Before each batch the
  // reader is within 5,000 lines (under 1 MiB) of the events sent, so only the client that never
  // reads falls 4 MiB behind, however slowly a loaded machine runs the reader's thread. (A fixed
  // pace of 500 per 2 ms let a starved reader fall 4 MiB behind and be dropped too, under
  // stress-ng, 2026-12-06.)
  uint64_t sent = 0;
  bool kept_up = true;
  for (int batch = 0; batch < 240 && kept_up; ++batch) {
    kept_up = ocslab::testing::poll_until([&] { return lines_read + 5000 >= sent; }, 60s,
                                          1ms);  // load-bound: a hang guard, the reader reads on
    for (int i = 0; i < 500; ++i) event();
    sent += 500;
  }
  stop = true;
  drain.join();
  CHECK(kept_up);
  CHECK(dropped(slow));
  CHECK(all_served({reader}));
  ::close(slow);

  // The cap: 64 clients served, the 65th closed at once.
  std::vector<int> fds{reader};
  for (int i = 1; i < 64; ++i) fds.push_back(events_client(port));
  REQUIRE(all_served(fds));
  int extra = events_client(port);
  CHECK(dropped(extra));
  ::close(extra);

  // Dead clients are removed: ten gone, ten new ones served.
  for (int i = 0; i < 10; ++i) ::close(fds[static_cast<size_t>(i)]);
  fds.erase(fds.begin(), fds.begin() + 10);
  // A dead client is noticed when a write to it fails: a new client turned away before that
  // connects again, as a watcher would.
  std::vector<int> fresh;
  for (int i = 0; i < 10; ++i) {
    int fd = events_client(port);
    bool served = ocslab::testing::poll_until(
        [&] {
          event();
          ssize_t n = read_some(fd);
          if (n == 0) {
            ::close(fd);
            fd = events_client(port);
          }
          return n > 0;
        },
        10s, 1ms);  // load-bound: two failed writes per dead client, a few loop turns
    CHECK(served);
    fresh.push_back(fd);
  }
  int refused = events_client(port);  // and the cap still holds: 54 + 10 served
  CHECK(dropped(refused));
  ::close(refused);

  // An accept that fails (no descriptors left) does not end the accept loop.
  for (int fd : fresh) ::close(fd);
  for (int fd : fds) ::close(fd);
  // One event: writing it, the loop finds the closed clients and forgets them.
  event();
  int pending = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  REQUIRE(pending >= 0);
  rlimit old{};
  REQUIRE(::getrlimit(RLIMIT_NOFILE, &old) == 0);
  rlimit tight = old;
  tight.rlim_cur = static_cast<rlim_t>(pending + 1);  // no descriptor above the client's
  REQUIRE(::setrlimit(RLIMIT_NOFILE, &tight) == 0);
  ::close(pending);
  int late = events_client(port);      // takes the freed number; the server's accept has none
  std::this_thread::sleep_for(300ms);  // load-safe: only lets accept fail a few times
  REQUIRE(::setrlimit(RLIMIT_NOFILE, &old) == 0);
  CHECK(all_served({late}));
  ::close(late);
  emu.stop();
}
