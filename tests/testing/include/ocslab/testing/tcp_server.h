// A loopback TCP server for test peers: listens on 127.0.0.1 (port 0 = any free port),
// runs the handler for each accepted connection on its own thread, and joins everything
// on destruction.
#pragma once

#include <atomic>
#include <functional>
#include <list>
#include <mutex>
#include <thread>

namespace ocslab::testing {

// A blocking TCP client socket connected to 127.0.0.1:port (receive buffer rcvbuf bytes when
// above 0, set before connecting); throws std::runtime_error naming the port when it cannot.
int connect_loopback(int port, int rcvbuf = 0);

class TcpServer {
 public:
  // handler(fd): owns the connection until it returns; the server closes fd afterwards.
  explicit TcpServer(std::function<void(int fd)> handler, int port = 0);
  ~TcpServer();
  TcpServer(const TcpServer&) = delete;
  TcpServer& operator=(const TcpServer&) = delete;

  int port() const { return port_; }
  // Closes every open connection (simulates a switch that drops its sessions).
  void drop_connections();
  int accepted() const { return accepted_; }

 private:
  void accept_loop();

  std::function<void(int)> handler_;
  int listen_fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<int> accepted_{0};
  std::thread acceptor_;
  std::mutex mutex_;
  std::list<std::thread> workers_;
  std::list<int> fds_;
};

// Writes all bytes (MSG_NOSIGNAL); returns false when the peer is gone.
bool write_all(int fd, const std::string& data);

}  // namespace ocslab::testing
