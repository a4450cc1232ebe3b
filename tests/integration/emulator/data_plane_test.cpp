// The optical data plane on the real kernel: TAP NICs in network namespaces (ping, no leak,
// carrier), UDP NICs in QEMU's wire format, and a real QEMU driven over QMP. Needs root.
#include "ocslab/emulator/data_plane.h"

#include <net/if.h>
#include <sys/socket.h>
#include <unistd.h>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/post.hpp>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdio>
#include <future>
#include <memory>
#include <thread>

#include "lab_fixtures.h"
#include "ocslab/common/clock.h"
#include "ocslab/common/error.h"
#include "ocslab/emulator/link_driver.h"
#include "ocslab/emulator/nic_link_model.h"
#include "ocslab/testing/sshd_fixture.h"
#include "ocslab/testing/wait.h"

using namespace ocslab;
using namespace ocslab::emu;
using namespace ocslab::emu::test;

namespace {

constexpr int kTotalPorts = 16;  // an 8x8 switch: ingress 1..8, egress 9..16

std::string tap_name(char which) { return "dp" + std::to_string(::getpid() % 1000000) + which; }

// NIC i transmits into ingress i+1 and receives from egress 9+i.
NicAttachment tap_nic(int i, const TestNetns& ns) {
  NicAttachment a;
  a.name = std::string("h") + std::to_string(i + 1) + "-eth1";
  a.kind = NicAttachment::Kind::kTap;
  a.tx_port = i + 1;
  a.rx_port = 9 + i;
  a.tap_name = tap_name(static_cast<char>('a' + i));
  a.netns = ns.name();
  return a;
}

std::string ip_of(int i) { return "10.77.0." + std::to_string(i + 1); }

// Addresses, admin-up and no IPv6 chatter (DAD, router solicitations) so the only frames are
// the ones a test sends.
void configure(const TestNetns& ns, const std::string& ifname, int i) {
  testing::run_command("ip netns exec " + ns.name() + " sysctl -qw net.ipv6.conf.all.disable_ipv6=1");
  testing::run_command("ip -n " + ns.name() + " addr add " + ip_of(i) + "/24 dev " + ifname);
  testing::run_command("ip -n " + ns.name() + " link set " + ifname + " up");
}

void light_pair(DataPlane& dp, size_t a, size_t b) {
  dp.set_path(dp.nics()[a].tx_port, dp.nics()[b].rx_port);
  dp.set_path(dp.nics()[b].tx_port, dp.nics()[a].rx_port);
}

struct TapLab {
  std::vector<std::unique_ptr<TestNetns>> ns;
  std::unique_ptr<DataPlane> dp;
  explicit TapLab(int n) {
    std::vector<NicAttachment> nics;
    for (int i = 0; i < n; ++i) {
      ns.push_back(std::make_unique<TestNetns>(std::string("dp") + static_cast<char>('a' + i)));
      nics.push_back(tap_nic(i, *ns.back()));
    }
    dp = std::make_unique<DataPlane>(nics, kTotalPorts);
    dp->start();
    for (int i = 0; i < n; ++i) configure(*ns[static_cast<size_t>(i)], nics[static_cast<size_t>(i)].tap_name, i);
  }
  // The data plane goes first: its TAPs live in the namespaces.
  ~TapLab() { dp.reset(); }
  const std::string& tap(size_t i) const { return dp->nics()[i].tap_name; }
  int ping(size_t from, int to_index, int count = 3) const {
    return ns[from]->exec_status("ping -n -q -c " + std::to_string(count) + " -W 1 -i 0.2 " + ip_of(to_index));
  }
};

}  // namespace

TEST_CASE("TAP NICs in namespaces talk only over lit circuits") {
  TapLab lab(4);
  DataPlane& dp = *lab.dp;
  for (size_t i = 0; i < 4; ++i) {
    // The TAP lives in its namespace, not here.
    CHECK(::if_nametoindex(lab.tap(i).c_str()) == 0);
    CHECK(shell_status("ip -n " + lab.ns[i]->name() + " link show dev " + lab.tap(i)) == 0);
    CHECK(dp.tap_fd(i) >= 0);
  }

  SECTION("dark switch: nothing passes") {
    CHECK(lab.ping(0, 1, 2) != 0);
    CHECK(dp.counters(0).rx_frames > 0);  // ARP requests left A...
    CHECK(dp.counters(0).dropped_dark == dp.counters(0).rx_frames);
    CHECK(dp.counters(1).tx_frames == 0);  // ...and reached nobody
  }

  SECTION("a lit circuit pair carries ping; switching it away breaks it") {
    light_pair(dp, 0, 1);
    CHECK(lab.ping(0, 1) == 0);
    auto b = dp.counters(1);
    CHECK(b.tx_frames >= 4);  // ARP request + 3 echo requests delivered to B
    CHECK(b.rx_frames >= 4);  // and B answered
    CHECK(dp.counters(0).tx_frames >= 4);

    // Reconfigure: A's transmit now lands on C, C's on A; B is dark.
    dp.set_path(dp.nics()[1].tx_port, std::nullopt);
    light_pair(dp, 0, 2);
    uint64_t b_before = dp.counters(1).tx_frames;
    uint64_t c_before = dp.counters(2).tx_frames;
    CHECK(lab.ping(0, 1, 2) != 0);
    CHECK(dp.counters(1).tx_frames == b_before);  // B got nothing of it
    CHECK(dp.counters(2).tx_frames > c_before);   // C received A's frames (and ignored them)

    // And A <-> C really works now.
    CHECK(lab.ping(0, 2) == 0);
  }

  SECTION("no leak: with only A <-> B lit, nothing reaches C or D") {
    light_pair(dp, 0, 1);
    REQUIRE(lab.ping(0, 1, 1) == 0);
    uint64_t c_kernel = lab.ns[2]->rx_packets(lab.tap(2));
    uint64_t d_kernel = lab.ns[3]->rx_packets(lab.tap(3));
    CHECK(c_kernel == 0);
    CHECK(d_kernel == 0);
    uint64_t b_before = dp.counters(1).tx_frames;

    // From A: unicast to C and D (ARP broadcasts), a broadcast ping, and a UDP broadcast.
    CHECK(lab.ping(0, 2, 2) != 0);
    CHECK(lab.ping(0, 3, 2) != 0);
    lab.ns[0]->exec_status("ping -n -q -b -c 2 -W 1 -i 0.2 10.77.0.255");
    lab.ns[0]->exec_status("sh -c 'echo leak > /dev/udp/10.77.0.255/9'");
    // From C and D themselves: their ingress ports are dark.
    lab.ping(2, 3, 2);
    lab.ping(3, 2, 2);

    CHECK(dp.counters(2).tx_frames == 0);
    CHECK(dp.counters(3).tx_frames == 0);
    CHECK(lab.ns[2]->rx_packets(lab.tap(2)) == c_kernel);
    CHECK(lab.ns[3]->rx_packets(lab.tap(3)) == d_kernel);
    // Everything A sent went to B: the broadcasts are on B's side of the fibre.
    CHECK(dp.counters(1).tx_frames > b_before);
    CHECK(dp.counters(0).dropped_dark == 0);
    CHECK(dp.counters(2).dropped_dark == dp.counters(2).rx_frames);
    CHECK(dp.counters(3).dropped_dark == dp.counters(3).rx_frames);
    CHECK(dp.counters(2).rx_frames > 0);
    CHECK(dp.counters(3).rx_frames > 0);
    // The kernel agrees with the emulator about what B received.
    CHECK(lab.ns[1]->rx_packets(lab.tap(1)) == dp.counters(1).tx_frames);
  }

  SECTION("a NIC whose link is down neither sends nor receives") {
    light_pair(dp, 0, 1);
    REQUIRE(lab.ping(0, 1, 1) == 0);
    dp.set_nic_link(1, false);
    CHECK(lab.ping(0, 1, 2) != 0);
    CHECK(dp.counters(1).dropped_link_down > 0);
    dp.set_nic_link(1, true);
    CHECK(lab.ping(0, 1, 2) == 0);
  }
}

TEST_CASE("stop() removes the TAP devices; a failed start() releases what it created") {
  TestNetns ns("dpstop");
  {
    DataPlane dp({tap_nic(0, ns)}, kTotalPorts);
    dp.start();
    CHECK(shell_status("ip -n " + ns.name() + " link show dev " + tap_name('a')) == 0);
    dp.stop();
    CHECK(shell_status("ip -n " + ns.name() + " link show dev " + tap_name('a')) != 0);
    CHECK(dp.tap_fd(0) == -1);
    dp.stop();  // idempotent
  }

  // NIC 1 cannot bind its port: NIC 0's TAP and UDP socket must be gone afterwards.
  UdpSocket squatter;
  int free_port = free_udp_port();
  NicAttachment udp0;
  udp0.name = "h2-eth1";
  udp0.kind = NicAttachment::Kind::kUdp;
  udp0.tx_port = 2;
  udp0.rx_port = 10;
  udp0.listen.port = free_port;
  udp0.peer.port = free_udp_port();
  NicAttachment udp1 = udp0;
  udp1.name = "h3-eth1";
  udp1.tx_port = 3;
  udp1.rx_port = 11;
  udp1.listen.port = squatter.port();
  DataPlane dp({tap_nic(0, ns), udp0, udp1}, kTotalPorts);
  CHECK_THROWS_WITH(
      dp.start(), "h3-eth1: cannot bind UDP 127.0.0.1:" + std::to_string(squatter.port()) + ": Address already in use");
  CHECK(shell_status("ip -n " + ns.name() + " link show dev " + tap_name('a')) != 0);
  CHECK(::if_nametoindex(tap_name('a').c_str()) == 0);
  UdpSocket rebind(free_port);  // would throw if the data plane still held it
  CHECK(rebind.port() == free_port);

  // A namespace that does not exist: named in the error, and the TAP is not left behind.
  NicAttachment lost = tap_nic(0, ns);
  lost.netns = "ocslab-t-missing-" + std::to_string(::getpid());
  DataPlane dp2({lost}, kTotalPorts);
  CHECK_THROWS_WITH(dp2.start(), Catch::StartsWith("h1-eth1: cannot open network namespace /run/netns/" + lost.netns));
  CHECK(::if_nametoindex(lost.tap_name.c_str()) == 0);
}

TEST_CASE("carrier follows the light through the NIC link model, with the firmware delay") {
  TapLab lab(2);
  DataPlane& dp = *lab.dp;
  light_pair(dp, 0, 1);
  REQUIRE(lab.ping(0, 1, 1) == 0);

  constexpr double kFirmwareMs = 300;
  boost::asio::io_context io;
  auto work = boost::asio::make_work_guard(io);
  GroundTruth truth("ocs1");
  NicLinkParams params;
  params.los_ms = 1;
  params.firmware_up = Distribution::fixed(kFirmwareMs);
  // NIC A's receive fibre is egress 9, lit from B's ingress 2.
  auto model = std::make_unique<NicLinkModel>(
      io, dp.nics()[0].name, params, make_tap_carrier_driver(dp.tap_fd(0), dp.nics()[0].tap_name), truth,
      [&dp](bool up) { dp.set_nic_link(0, up); }, 1);
  std::thread loop([&io] { io.run(); });
  struct Joiner {
    std::thread& t;
    boost::asio::io_context& io;
    ~Joiner() {
      io.stop();
      t.join();
    }
  } joiner{loop, io};
  auto on_loop = [&io](auto fn) {
    std::promise<int64_t> done;
    boost::asio::post(io, [&] {
      int64_t t = monotonic_ns();
      fn();
      done.set_value(t);
    });
    return done.get_future().get();
  };
  on_loop([&] { model->force(true); });

  CarrierWatcher watcher(lab.ns[0]->name(), lab.tap(0));

  // Darken the circuit into A: the switch model clears the path and tells A's NIC.
  int64_t dark = on_loop([&] {
    dp.set_path(dp.nics()[1].tx_port, std::nullopt);
    model->on_light(false);
  });
  auto down = watcher.wait_for_edge(false, dark, 3000);
  REQUIRE(down);
  // Linkwatch batches non-urgent events (carrier loss is one) up to a second apart.
  std::printf("carrier down seen in the namespace %.1f ms after the light went (LOS 1 ms + linkwatch)\n",
              static_cast<double>(down->mono_ns - dark) / 1e6);
  CHECK(lab.ns[0]->exec_status("sh -c 'ip link show dev " + lab.tap(0) + " | grep -q NO-CARRIER'") == 0);
  CHECK_FALSE(model->link_up());

  // Let linkwatch's one-second pacing run out, so the up event below is not paced by it.
  // load-safe: a lower bound: past linkwatch's 1 s pacing; a late wake only lengthens it.
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));  // kept: kernel pacing, not an event
  int64_t lit = on_loop([&] {
    dp.set_path(dp.nics()[1].tx_port, dp.nics()[0].rx_port);
    model->on_light(true);
  });
  auto up = watcher.wait_for_edge(true, lit, 3000);
  REQUIRE(up);
  double measured = static_cast<double>(up->mono_ns - lit) / 1e6;
  std::printf("carrier up seen in the namespace %.1f ms after the light returned (configured firmware delay %.0f ms)\n",
              measured, kFirmwareMs);
  CHECK(measured >= kFirmwareMs - 0.5);
  CHECK(measured <= kFirmwareMs + 20);
  CHECK(model->link_up());
  CHECK(lab.ping(1, 0, 1) == 0);  // and frames pass again

  // Ground truth recorded both link transitions for A.
  int links = 0;
  for (const auto& s : truth.samples()) links += (s.signal == "link" && s.subject == "h1-eth1") ? 1 : 0;
  CHECK(links == 3);  // force(up), down, up

  // A flap while the firmware is still bringing the link up: the host never sees carrier.
  int64_t dark2 = on_loop([&] { model->on_light(false); });
  REQUIRE(watcher.wait_for_edge(false, dark2, 3000));
  int64_t relit = on_loop([&] { model->on_light(true); });
  // load-bound: the flap must stay shorter than the link-up delay it is checked against; a long preemption here
  // lengthens the flap.
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // kept: the short flap is the point
  on_loop([&] { model->on_light(false); });
  CHECK_FALSE(watcher.wait_for_edge(true, relit, 600));
  CHECK_FALSE(model->link_up());
  CHECK(lab.ns[0]->exec_status("sh -c 'ip link show dev " + lab.tap(0) + " | grep -q NO-CARRIER'") == 0);
  on_loop([&] { model.reset(); });
}

TEST_CASE("UDP NICs in QEMU's wire format: frames forward on lit paths only") {
  // The test's sockets play QEMU: bound to localaddr= (the attachment's peer), sending to
  // udp= (the attachment's listen).
  UdpSocket q0, q1, q2;
  std::vector<NicAttachment> nics;
  const UdpSocket* qs[] = {&q0, &q1, &q2};
  for (int i = 0; i < 3; ++i) {
    NicAttachment a;
    a.name = "u" + std::to_string(i);
    a.kind = NicAttachment::Kind::kUdp;
    a.tx_port = i + 1;
    a.rx_port = 9 + i;
    a.listen.port = free_udp_port();
    a.peer.port = qs[i]->port();
    nics.push_back(a);
  }
  DataPlane dp(nics, kTotalPorts);
  dp.start();
  CHECK(dp.tap_fd(0) == -1);
  dp.set_path(1, 10);  // u0 -> u1 only

  std::string small(60, 'a'), jumbo(9000, 'j'), huge(65000, 'h');
  small[0] = 's';
  for (const auto* f : {&small, &jumbo, &huge}) q0.send_to(nics[0].listen.port, *f);
  for (const auto* f : {&small, &jumbo, &huge}) {
    auto got = q1.receive(1000);
    REQUIRE(got);
    CHECK(got->size() == f->size());
    CHECK(*got == *f);  // byte for byte, in order
  }
  CHECK(q2.drain(200) == 0);
  CHECK(q0.drain(50) == 0);

  // Reverse direction is dark.
  q1.send_to(nics[1].listen.port, small);
  CHECK_FALSE(q0.receive(200));
  auto c1 = dp.counters(1);
  CHECK(c1.tx_frames == 3);
  CHECK(c1.tx_bytes == 60 + 9000 + 65000);
  CHECK(c1.rx_frames == 1);
  CHECK(c1.dropped_dark == 1);
  auto c0 = dp.counters(0);
  CHECK(c0.rx_frames == 3);
  CHECK(c0.rx_bytes == 60 + 9000 + 65000);

  // Receiving NIC's link down: dropped and counted on it; back up: passes.
  dp.set_nic_link(1, false);
  q0.send_to(nics[0].listen.port, small);
  CHECK_FALSE(q1.receive(200));
  CHECK(dp.counters(1).dropped_link_down == 1);
  dp.set_nic_link(1, true);
  // Sending NIC's link down.
  dp.set_nic_link(0, false);
  q0.send_to(nics[0].listen.port, small);
  CHECK_FALSE(q1.receive(200));
  CHECK(dp.counters(0).dropped_link_down == 1);
  dp.set_nic_link(0, true);

  // Reconfigure u0 -> u2: u1 gets nothing more.
  dp.set_path(1, 11);
  for (int i = 0; i < 100; ++i) q0.send_to(nics[0].listen.port, small);
  CHECK(q2.drain(200) == 100);
  CHECK(q1.drain(50) == 0);
  // Lit into an egress no NIC is wired to: dark for the sender.
  dp.set_path(1, 16);
  q0.send_to(nics[0].listen.port, small);
  CHECK(q1.drain(100) + q2.drain(100) == 0);
  CHECK(dp.counters(0).dropped_dark == 1);

  CHECK_THROWS_WITH(dp.set_path(17, 9), "data plane: ingress port 17 is outside 1..16");
  CHECK_THROWS_WITH(dp.set_path(1, 0), "data plane: egress port 0 is outside 1..16");
  dp.stop();
  UdpSocket rebind(nics[0].listen.port);  // stop() released the sockets
}

TEST_CASE("a capped circuit delays frames beyond its rate and loses none of them") {
  UdpSocket q0, q1;
  std::vector<NicAttachment> nics;
  const UdpSocket* qs[] = {&q0, &q1};
  for (int i = 0; i < 2; ++i) {
    NicAttachment a;
    a.name = "r" + std::to_string(i);
    a.kind = NicAttachment::Kind::kUdp;
    a.tx_port = i + 1;
    a.rx_port = 9 + i;
    a.listen.port = free_udp_port();
    a.peer.port = qs[i]->port();
    nics.push_back(a);
  }
  // The receiving end as QEMU's would be sized on a busy host: a capped circuit that catches up
  // on time its forwarding thread was descheduled delivers a burst (at most 100 ms of the rate),
  // which the default 208 kB receive buffer of this test's socket would drop part of.
  const int big = 4 << 20;
  REQUIRE(::setsockopt(q1.fd(), SOL_SOCKET, SO_RCVBUFFORCE, &big, sizeof(big)) == 0);
  DataPlane dp(nics, kTotalPorts);
  CHECK_THROWS_WITH(dp.set_rate_gbps(-1), Catch::Contains("link rate -1 Gbit/s is outside 0.001..1000"));
  dp.set_rate_gbps(0.1);  // 12.5 MB/s on the wire
  CHECK(dp.rate_gbps() == 0.1);
  dp.start();
  dp.set_path(1, 10);

  // 1000 frames of 1000 bytes sent at once: 1.024 MB with the wire overhead, which the cap
  // stretches over at least (1.024 MB - the bucket's 12.5 kB) / 12.5 MB/s = 81 ms. All of them
  // wait in the sender's socket buffer (4 MiB) instead of being dropped.
  constexpr int kFrames = 1000;
  const std::string frame(1000, 'r');
  const int64_t t0 = monotonic_ns();
  for (int i = 0; i < kFrames; ++i) q0.send_to(nics[0].listen.port, frame);
  int got = 0;
  int64_t last = t0;
  while (auto f = q1.receive(1000)) {
    CHECK(f->size() == frame.size());
    last = monotonic_ns();
    if (++got == kFrames) break;
  }
  CHECK(got == kFrames);
  const double wire_bytes = kFrames * (1000.0 + kWireOverheadBytes);
  const double min_ms = (wire_bytes - 12500) / 12.5e6 * 1e3;
  const double took_ms = static_cast<double>(last - t0) / 1e6;
  INFO("took " << took_ms << " ms, the cap allows no less than " << min_ms << " ms");
  CHECK(took_ms >= min_ms * 0.98);  // never faster than the rate (2 %: the clocks' reads)
  // The forwarding thread counts a batch after handing it over, and pauses after counting: the
  // test may have the last frame first.
  CHECK(testing::poll_until([&] { return dp.counters(1).tx_frames == static_cast<uint64_t>(kFrames); },
                            std::chrono::seconds(2)));
  auto c = dp.counters(0);
  CHECK(c.rate_waits > 0);
  CHECK(c.rx_frames == static_cast<uint64_t>(kFrames));

  // Uncapped again: the next burst is not paused (the last pause, if any, ends within a frame's time).
  dp.set_rate_gbps(0);
  CHECK(q0.drain(100) == 0);  // nothing in flight: the thread is idle, its last pause counted
  const uint64_t waits = dp.counters(0).rate_waits;
  for (int i = 0; i < 50; ++i) q0.send_to(nics[0].listen.port, frame);
  CHECK(q1.drain(200) == 50);
  CHECK(dp.counters(0).rate_waits == waits);
  dp.stop();
}

TEST_CASE("a real QEMU: frames cross its socket netdevs and QMP set_link cuts them") {
  // QEMU without a guest: two `-netdev socket,udp=` backends joined by an emulated hub, so a
  // frame entering one leaves at the other. The data plane talks to netdev n0 exactly as it
  // will to a VM's NIC; set_link on n0 must stop frames both ways.
  testing::TempDir dir;
  std::string qmp = dir.path() + "/qmp.sock";
  UdpSocket far;  // what hangs off QEMU's second netdev n1
  int qemu_n0_local = free_udp_port(), qemu_n1_local = free_udp_port();
  int dp_listen = free_udp_port();
  auto start_qemu = [&] {
    ::unlink(qmp.c_str());
    auto q = std::make_unique<QemuProcess>(
        std::vector<std::string>{"-M", "none", "-nographic", "-nodefaults", "-netdev",
                                 "socket,id=n0,udp=127.0.0.1:" + std::to_string(dp_listen) +
                                     ",localaddr=127.0.0.1:" + std::to_string(qemu_n0_local),
                                 "-netdev",
                                 "socket,id=n1,udp=127.0.0.1:" + std::to_string(far.port()) +
                                     ",localaddr=127.0.0.1:" + std::to_string(qemu_n1_local),
                                 "-netdev", "hubport,id=h0,hubid=0,netdev=n0", "-netdev",
                                 "hubport,id=h1,hubid=0,netdev=n1", "-qmp", "unix:" + qmp + ",server=on,wait=off"},
        dir.path() + "/qemu.log");
    q->wait_for_socket(qmp, 10000);
    return q;
  };
  auto qemu = start_qemu();

  UdpSocket local;  // the other NIC on the switch, played by a plain socket
  NicAttachment vm;
  vm.name = "vm1-eth1";
  vm.kind = NicAttachment::Kind::kUdp;
  vm.tx_port = 1;
  vm.rx_port = 9;
  vm.listen.port = dp_listen;
  vm.peer.port = qemu_n0_local;
  vm.qmp_socket = qmp;
  vm.qmp_netdev = "n0";
  NicAttachment other;
  other.name = "h2-eth1";
  other.kind = NicAttachment::Kind::kUdp;
  other.tx_port = 2;
  other.rx_port = 10;
  other.listen.port = free_udp_port();
  other.peer.port = local.port();
  DataPlane dp({vm, other}, kTotalPorts);
  dp.start();
  light_pair(dp, 0, 1);

  std::string frame(1500, 'q');
  // h2 -> switch -> QEMU n0 -> hub -> n1 -> far
  local.send_to(other.listen.port, frame);
  auto got = far.receive(2000);
  REQUIRE(got);
  CHECK(*got == frame);
  // far -> n1 -> hub -> n0 -> switch -> h2
  far.send_to(qemu_n1_local, "back" + frame);
  auto back = local.receive(2000);
  REQUIRE(back);
  CHECK(*back == "back" + frame);

  auto link = make_qmp_link_driver(qmp, "n0");
  CHECK(link->describe() == "QMP " + qmp + " netdev n0");
  link->set_link(false);
  local.send_to(other.listen.port, frame);
  CHECK_FALSE(far.receive(300));  // QEMU drops frames to a netdev whose link is down
  far.send_to(qemu_n1_local, frame);
  CHECK_FALSE(local.receive(300));       // and from it
  CHECK(dp.counters(0).tx_frames == 2);  // the data plane did deliver; QEMU held the link down

  link->set_link(true);
  local.send_to(other.listen.port, frame);
  CHECK(far.receive(2000));

  // QEMU restarted under the driver (its old session is dead): one reconnect, no error.
  qemu.reset();
  qemu = start_qemu();
  link->set_link(false);
  local.send_to(other.listen.port, frame);
  CHECK_FALSE(far.receive(300));
  link->set_link(true);
  local.send_to(other.listen.port, frame);
  CHECK(far.receive(2000));

  // QEMU refuses an unknown netdev with its own error class.
  auto wrong = make_qmp_link_driver(qmp, "nope");
  // QEMU serves one QMP client at a time: release the first session.
  link.reset();
  CHECK_THROWS_WITH(wrong->set_link(true),
                    Catch::Contains("set_link refused: DeviceNotFound: Device 'nope' not found"));
  wrong.reset();

  // No QEMU behind the socket: the error names the socket and the failure.
  auto absent = make_qmp_link_driver(dir.path() + "/none.sock", "n0");
  CHECK_THROWS_WITH(absent->set_link(true),
                    Catch::Contains("QMP " + dir.path() + "/none.sock netdev n0: cannot connect"));
}
