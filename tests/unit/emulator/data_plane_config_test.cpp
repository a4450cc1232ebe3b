// What the data plane refuses before it touches the system (no root needed).
#include <catch2/catch.hpp>

#include "ocslab/common/error.h"
#include "ocslab/emulator/data_plane.h"

using namespace ocslab;
using namespace ocslab::emu;

namespace {
NicAttachment udp(const std::string& name, int tx, int rx) {
  NicAttachment a;
  a.name = name;
  a.kind = NicAttachment::Kind::kUdp;
  a.tx_port = tx;
  a.rx_port = rx;
  a.listen.port = 40000 + tx;
  a.peer.port = 41000 + tx;
  return a;
}
NicAttachment tap(const std::string& name, int tx, int rx, const std::string& ifname) {
  NicAttachment a;
  a.name = name;
  a.kind = NicAttachment::Kind::kTap;
  a.tx_port = tx;
  a.rx_port = rx;
  a.tap_name = ifname;
  return a;
}
}  // namespace

TEST_CASE("the data plane validates its NIC wiring and names the offending NIC") {
  CHECK_NOTHROW(DataPlane({udp("h1-eth1", 1, 9), udp("h2-eth1", 2, 10)}, 16));
  CHECK_THROWS_AS(DataPlane({udp("h1-eth1", 0, 9)}, 16), Error);
  CHECK_THROWS_WITH(DataPlane({udp("h1-eth1", 0, 9)}, 16), "h1-eth1: tx port 0 is outside 1..16");
  CHECK_THROWS_WITH(DataPlane({udp("h1-eth1", 1, 17)}, 16), "h1-eth1: rx port 17 is outside 1..16");
  CHECK_THROWS_WITH(DataPlane({udp("h1-eth1", 3, 3)}, 16), "h1-eth1: tx and rx port are both 3");
  CHECK_THROWS_WITH(DataPlane({udp("h1-eth1", 1, 9), udp("h2-eth1", 1, 10)}, 16),
                    "h2-eth1: tx port 1 is already another NIC's tx port");
  CHECK_THROWS_WITH(DataPlane({udp("h1-eth1", 1, 9), udp("h2-eth1", 2, 9)}, 16),
                    "h2-eth1: rx port 9 is already another NIC's rx port");
  CHECK_THROWS_WITH(DataPlane({udp("h1-eth1", 1, 9), udp("h1-eth1", 2, 10)}, 16), "h1-eth1: NIC name used twice");
  CHECK_THROWS_WITH(DataPlane({udp("", 1, 9)}, 16), "data plane: a NIC attachment has no name");
  auto no_port = udp("h1-eth1", 1, 9);
  no_port.peer.port = 0;
  CHECK_THROWS_WITH(DataPlane({no_port}, 16), Catch::StartsWith("h1-eth1: UDP attachment needs listen and peer ports"));
  CHECK_THROWS_WITH(DataPlane({tap("h1-eth1", 1, 9, "")}, 16), "h1-eth1: TAP name '' must have 1..15 characters");
  CHECK_THROWS_WITH(DataPlane({tap("h1-eth1", 1, 9, "a-very-long-tap-name")}, 16),
                    Catch::StartsWith("h1-eth1: TAP name 'a-very-long-tap-name' must have"));
  CHECK_THROWS_WITH(DataPlane({tap("h1-eth1", 1, 9, "t0"), tap("h2-eth1", 2, 10, "t0")}, 16),
                    "h2-eth1: TAP name t0 used twice");
  CHECK_THROWS_WITH(DataPlane({}, 0), Catch::StartsWith("data plane: the switch has no ports"));
}

TEST_CASE("data plane state changes are checked before start") {
  DataPlane dp({udp("h1-eth1", 1, 9)}, 16);
  CHECK_NOTHROW(dp.set_path(1, 9));
  CHECK_NOTHROW(dp.set_path(1, std::nullopt));
  CHECK_THROWS_WITH(dp.set_path(0, 9), "data plane: ingress port 0 is outside 1..16");
  CHECK_THROWS_WITH(dp.set_nic_link(1, true), "data plane: no NIC #1");
  CHECK(dp.tap_fd(0) == -1);
  auto c = dp.counters(0);
  CHECK(c.rx_frames + c.tx_frames + c.dropped_dark + c.dropped_link_down + c.tx_errors == 0);
  CHECK_NOTHROW(dp.stop());  // stopping what never started is fine
  CHECK(dp.rate_gbps() == 0);  // no cap unless set
  CHECK_NOTHROW(dp.set_rate_gbps(25));
  CHECK(dp.rate_gbps() == 25);
  CHECK_THROWS_WITH(dp.set_rate_gbps(1001), "data plane: link rate 1001 Gbit/s is outside 0.001..1000 (0: no cap)");
  CHECK_THROWS_WITH(dp.set_rate_gbps(-0.5), Catch::StartsWith("data plane: link rate -0.5 Gbit/s"));
  CHECK(dp.rate_gbps() == 25);  // a refused rate changes nothing
  CHECK_NOTHROW(dp.set_rate_gbps(0));
}

TEST_CASE("a UDP endpoint that cannot be resolved is named") {
  auto a = udp("h1-eth1", 1, 9);
  a.listen.host = "no-such-host.invalid";
  DataPlane dp({a}, 16);
  CHECK_THROWS_WITH(dp.start(), Catch::StartsWith("h1-eth1: cannot resolve UDP listen host 'no-such-host.invalid'"));
}
