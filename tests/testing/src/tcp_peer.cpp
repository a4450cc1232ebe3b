#include "ocslab/testing/peers.h"

namespace ocslab::testing {

TcpPeer::TcpPeer(PeerProtocol protocol, PeerSwitch& sw, PeerQuirks quirks) : quirks_(std::move(quirks)) {
  server_ = std::make_unique<TcpServer>([this, protocol, &sw](int fd) {
    PeerQuirks q = quirks_;
    switch (protocol) {
      case PeerProtocol::kTl1: serve_tl1_session(fd, fd, sw, q); break;
      case PeerProtocol::kScpi: serve_scpi_session(fd, fd, sw, q); break;
      case PeerProtocol::kNetconf: serve_netconf_session(fd, fd, sw, q); break;
    }
  });
}

}  // namespace ocslab::testing
