// Private to the control plane: a libssh server for TL1 over SSH (shell channel) and NETCONF
// (subsystem "netconf"). One thread accepts, one thread per SSH session runs libssh; channel
// bytes are posted to the emulator's loop, where the protocol session runs, and its replies
// come back through a queue that the SSH thread drains. libssh objects never leave their thread.
#pragma once

#include <libssh/libssh.h>
#include <libssh/server.h>

#include <atomic>
#include <boost/asio/io_context.hpp>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "ocslab/emulator/lab_config.h"
#include "session_factory.h"

namespace ocslab::emu {

class SshListener {
 public:
  enum class Mode { kShell, kNetconf };
  static constexpr size_t kMaxSessions = 128;  // SSH sessions (threads) at once

  // host_key: private key in OpenSSH base64 form. Binds at once; throws ocslab::Error naming
  // the protocol and address.
  SshListener(boost::asio::io_context& io, const ListenAddress& where, std::string protocol, Mode mode,
              const std::string& host_key, const ControlPlaneConfig& config, SessionFactory make,
              SessionCounter open);
  ~SshListener();
  SshListener(const SshListener&) = delete;
  SshListener& operator=(const SshListener&) = delete;

  void start();
  int port() const { return port_; }
  // Closes the listener and every session, joins every thread. Any thread but the loop's.
  void stop();

 private:
  struct Bridge;
  struct Conn;
  void accept_loop();
  void serve(Conn& conn, ssh_session session);
  void reap(bool all);

  boost::asio::io_context& io_;
  std::string protocol_;
  Mode mode_;
  std::string user_, password_;
  SessionFactory make_;
  SessionCounter open_;
  ssh_bind bind_ = nullptr;
  int port_ = 0;
  std::atomic<bool> stopping_{false};
  std::thread acceptor_;
  std::mutex mutex_;  // conns_
  std::list<std::unique_ptr<Conn>> conns_;
};

}  // namespace ocslab::emu
