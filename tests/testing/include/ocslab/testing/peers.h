// Grammar test peers: small servers that speak TL1, SCPI and NETCONF as docs/protocols.md
// describes them, including the quirks in PeerQuirks. Each serves a session over a pair of
// file descriptors (a TCP socket, or stdin/stdout when sshd runs the peer), so the same code
// is reached over raw TCP and over real SSH.
#pragma once

#include <memory>

#include "ocslab/testing/peer_switch.h"
#include "ocslab/testing/tcp_server.h"

namespace ocslab::testing {

// Each returns when the client disconnects or a quirk drops the connection.
void serve_tl1_session(int in_fd, int out_fd, PeerSwitch& sw, const PeerQuirks& quirks);
void serve_scpi_session(int in_fd, int out_fd, PeerSwitch& sw, const PeerQuirks& quirks);
void serve_netconf_session(int in_fd, int out_fd, PeerSwitch& sw, const PeerQuirks& quirks);

enum class PeerProtocol { kTl1, kScpi, kNetconf };

// A peer on a loopback TCP port (TL1, SCPI; NETCONF framing without SSH for unit tests).
class TcpPeer {
 public:
  TcpPeer(PeerProtocol protocol, PeerSwitch& sw, PeerQuirks quirks = {});
  int port() const { return server_->port(); }
  TcpServer& server() { return *server_; }
  PeerQuirks& quirks() { return quirks_; }  // change between sessions, not during one

 private:
  PeerQuirks quirks_;
  std::unique_ptr<TcpServer> server_;
};

}  // namespace ocslab::testing
