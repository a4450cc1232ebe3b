// The emulator's optical data plane: host NICs attach to switch ports (transmit fibre into an
// ingress port, receive fibre from an egress port) through loopback UDP sockets in QEMU's
// `-netdev socket,udp=` format or TAP devices the emulator creates (optionally in a network
// namespace). A frame a NIC transmits enters its ingress port and leaves at the NIC wired to
// the egress port that ingress is lit to; nothing passes while a circuit is dark or
// switching, or when either NIC's link is down.
//
// A lit circuit may carry a link rate (set_rate_gbps: the lab's `link_gbps`): a token bucket per
// ingress port, which lights one circuit at a time, so per lit circuit. Frames beyond the rate are
// delayed, not dropped: the forwarding thread stops reading that NIC until the bucket has refilled,
// and its frames wait in the NIC's own queue (the UDP socket's receive buffer, the TAP's transmit
// queue), which drops only when full, as a shaper's queue would. Policing (dropping at once) makes
// Soft-RoCE go back N and TCP halve its window, so neither would converge on the rate. A frame
// costs its length plus kWireOverheadBytes (preamble, FCS, inter-frame gap) as on an Ethernet fibre.
//
// QEMU's `-netdev socket,udp=R,localaddr=L` binds its UDP socket to L and sends every frame as
// one datagram to R; it accepts datagrams from any sender on L (net/socket.c,
// net_socket_udp_init: `lhost` is bound, `rhost` becomes the datagram destination; checked
// against QEMU 7.2 here). So the emulator binds R (`listen`) and sends to L (`peer`).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "ocslab/ocsctl/types.h"

namespace ocslab::emu {

struct UdpEndpoint {
  std::string host = "127.0.0.1";
  int port = 0;
};

struct NicAttachment {
  enum class Kind { kUdp, kTap };
  std::string name;       // unique, e.g. "h1-eth1"
  ocs::Port tx_port = 0;  // ingress port this NIC transmits into
  ocs::Port rx_port = 0;  // egress port this NIC receives from
  Kind kind = Kind::kTap;
  // UDP: QEMU runs `-netdev socket,id=<qmp_netdev>,udp=<listen>,localaddr=<peer>`: the
  // emulator binds `listen` and sends this NIC's received frames to `peer`.
  UdpEndpoint listen, peer;
  std::string qmp_socket;  // QEMU QMP unix socket that drives this NIC's link (UDP only)
  std::string qmp_netdev;  // the netdev id set_link names
  // TAP: the emulator creates the device (IFF_TAP | IFF_NO_PI) and moves it into `netns`
  // (a name under /run/netns) when given; carrier is driven with TUNSETCARRIER.
  std::string tap_name;
  std::string netns;
};

struct NicCounters {
  uint64_t rx_frames = 0;  // frames received from this NIC (it transmitted them)
  uint64_t rx_bytes = 0;
  uint64_t tx_frames = 0;  // frames delivered to this NIC
  uint64_t tx_bytes = 0;
  uint64_t dropped_dark = 0;       // entered this NIC's ingress port while it led nowhere lit
  uint64_t dropped_link_down = 0;  // this NIC's link was down (sending or receiving side)
  uint64_t tx_errors = 0;          // forwarded to this NIC but refused by its socket / TAP (queue full, TAP down)
  uint64_t rate_waits = 0;         // times this NIC's circuit used up its rate and the NIC was paused for it
};

// What a frame costs on the fibre beyond its bytes: preamble and start delimiter (8), FCS (4),
// inter-frame gap (12). The frames a TAP or QEMU hands over carry none of them.
constexpr int kWireOverheadBytes = 24;
// The link rates a circuit may be capped at (0: no cap, the host's own speed).
constexpr double kMinLinkGbps = 0.001;
constexpr double kMaxLinkGbps = 1000;

class DataPlane {
 public:
  // total_ports: N + M of the switch. Validates that every NIC has distinct tx/rx ports in
  // range; throws ocslab::Error naming the NIC.
  DataPlane(std::vector<NicAttachment> nics, int total_ports);
  ~DataPlane();
  DataPlane(const DataPlane&) = delete;
  DataPlane& operator=(const DataPlane&) = delete;

  // Creates sockets / TAP devices and starts the forwarding thread. Throws ocslab::Error naming
  // the NIC and the resource on failure, after releasing what it had created.
  void start();
  void stop();  // idempotent; removes the TAP devices it created

  // The switch model's forwarding state: frames entering `ingress` leave at `egress`
  // (nullopt: dark or switching). Safe to call from any thread.
  void set_path(ocs::Port ingress, std::optional<ocs::Port> egress);
  // The NIC link model's state: a NIC whose link is down neither sends nor receives.
  void set_nic_link(size_t nic, bool up);
  // Every lit circuit's rate from now on, Gbit/s on the wire; 0 removes the cap. Throws
  // ocslab::Error for a rate outside [kMinLinkGbps, kMaxLinkGbps] (other than 0). Safe to call
  // from any thread; a NIC paused for the old rate is woken to use the new one.
  void set_rate_gbps(double gbps);
  double rate_gbps() const;

  const std::vector<NicAttachment>& nics() const { return nics_; }
  NicCounters counters(size_t nic) const;
  int tap_fd(size_t nic) const;  // -1 for UDP attachments or before start()

 private:
  struct Impl;
  std::vector<NicAttachment> nics_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ocslab::emu
