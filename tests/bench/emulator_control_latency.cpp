// Control-plane latency of the OCS emulator: ENT-PATCH + DLT-PATCH round trips through the
// real TL1 driver over loopback TCP with switching time 0, next to the same round trips
// against the TL1 grammar test peer in the same run. Prints p50/p99; asserts nothing.
#include <algorithm>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <cstdio>
#include <thread>
#include <vector>

#include "ocslab/emulator/control_plane.h"
#include "ocslab/ocsctl/driver.h"
#include "ocslab/testing/peers.h"

using namespace ocslab;

namespace {

constexpr int kRounds = 2000;

struct Figures {
  double p50, p99;
};

// Each round: connect one circuit, then delete it; both calls timed by the driver itself.
Figures measure(ocs::OcsDriver& d) {
  std::vector<double> ms;
  d.list();
  for (int i = 0; i < kRounds; ++i) {
    ocs::Port in = 1 + i % 16;
    d.connect({{in, in + 32}});
    ms.push_back(d.last_timing()->latency_ms());
    d.disconnect({in});
    ms.push_back(d.last_timing()->latency_ms());
  }
  std::sort(ms.begin(), ms.end());
  return {ms[ms.size() / 2], ms[ms.size() * 99 / 100]};
}

}  // namespace

int main() {
  ocs::DriverOptions opts;
  opts.password = "root";

  boost::asio::io_context io;
  auto work = boost::asio::make_work_guard(io);
  emu::GroundTruth truth("bench-ocs");
  emu::SwitchParams p;
  p.switching = emu::Distribution::fixed(0);
  emu::SwitchModel model(io, p, truth);
  emu::ControlPlaneConfig cfg;
  cfg.tl1 = emu::ListenAddress{"127.0.0.1", 0};
  emu::ControlPlane cp(io, model, truth, cfg);
  cp.start();
  std::thread loop([&] { io.run(); });
  Figures emu_fig;
  {
    auto d = ocs::make_driver(ocs::SwitchUrl::parse("tl1://admin@127.0.0.1:" + std::to_string(*cp.ports().tl1)), opts);
    emu_fig = measure(*d);
  }
  cp.stop();
  work.reset();
  io.stop();
  loop.join();

  testing::PeerSwitch sw(32, 32);
  testing::TcpPeer peer(testing::PeerProtocol::kTl1, sw);
  Figures peer_fig;
  {
    auto d = ocs::make_driver(ocs::SwitchUrl::parse("tl1://admin@127.0.0.1:" + std::to_string(peer.port())), opts);
    peer_fig = measure(*d);
  }

  std::printf("TL1 ENT-PATCH/DLT-PATCH round trip over loopback TCP, %d rounds, switching 0 ms\n", kRounds);
  std::printf("  emulator control plane: p50 %.3f ms  p99 %.3f ms\n", emu_fig.p50, emu_fig.p99);
  std::printf("  grammar test peer:      p50 %.3f ms  p99 %.3f ms\n", peer_fig.p50, peer_fig.p99);
  return 0;
}
