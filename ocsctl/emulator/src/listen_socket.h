// Opening a loopback TCP listener the same way for every emulator service (TL1, SCPI, the
// live ground-truth stream), with an error that names the service and the address.
#pragma once

#include <boost/asio/ip/tcp.hpp>
#include <string>

#include "ocslab/common/error.h"
#include "ocslab/emulator/lab_config.h"

namespace ocslab::emu {

// Binds and listens (port 0: any free port); returns the bound port. Throws ocslab::Error
// "<what> listener on HOST:PORT: <reason>".
inline int open_listener(boost::asio::ip::tcp::acceptor& acceptor, const ListenAddress& where,
                         const std::string& what) {
  using boost::asio::ip::tcp;
  try {
    tcp::endpoint ep(boost::asio::ip::make_address(where.host), static_cast<unsigned short>(where.port));
    acceptor.open(ep.protocol());
    acceptor.set_option(tcp::acceptor::reuse_address(true));
    acceptor.bind(ep);
    acceptor.listen();
    return acceptor.local_endpoint().port();
  } catch (const std::exception& e) {
    throw Error(what + " listener on " + where.to_string() + ": " + e.what());
  }
}

}  // namespace ocslab::emu
