// Private to the control plane: a TCP acceptor on the emulator's loop that gives every
// connection its own protocol session (TL1, SCPI), with async reads and ordered writes.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <memory>
#include <set>
#include <string>

#include "ocslab/emulator/lab_config.h"
#include "session_factory.h"

namespace ocslab::emu {

class TcpListener : public std::enable_shared_from_this<TcpListener> {
 public:
  // Binds at once; throws ocslab::Error naming the protocol and address.
  TcpListener(boost::asio::io_context& io, const ListenAddress& where, std::string protocol, SessionFactory make,
              SessionCounter open);
  void start();  // first accept
  int port() const { return port_; }
  // On the loop thread: stops accepting and ends every connection.
  void close();

 private:
  struct Conn;
  void accept();

  boost::asio::ip::tcp::acceptor acceptor_;
  std::string protocol_;
  SessionFactory make_;
  SessionCounter open_;
  int port_ = 0;
  bool closed_ = false;
  std::set<std::shared_ptr<Conn>> conns_;
};

}  // namespace ocslab::emu
