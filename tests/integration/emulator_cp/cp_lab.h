// Test rig for the emulator's control plane: one SwitchModel and ControlPlane on a real
// io_context thread, listening on loopback (every protocol, any free port), with a
// known_hosts file for the SSH listeners and helpers to reach each port as the real drivers
// or as a raw byte client.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <chrono>
#include <fstream>
#include <future>
#include <memory>
#include <string>
#include <thread>

#include "ocslab/emulator/control_plane.h"
#include "ocslab/ocsctl/driver.h"
#include "ocslab/testing/sshd_fixture.h"
#include "ocslab/testing/wait.h"

namespace cp_test {

using namespace ocslab;
using namespace std::chrono_literals;

inline emu::SwitchParams small_switch(double switching_ms, bool ack_after_settle = true) {
  emu::SwitchParams p;
  p.name = "EMU-OCS";
  p.ingress_ports = 16;
  p.egress_ports = 16;
  p.switching = emu::Distribution::fixed(switching_ms);
  p.ack_after_settle = ack_after_settle;
  return p;
}

inline emu::ControlPlaneConfig all_listeners() {
  emu::ControlPlaneConfig c;
  c.tl1 = emu::ListenAddress{"127.0.0.1", 0};
  c.tl1_ssh = emu::ListenAddress{"127.0.0.1", 0};
  c.netconf = emu::ListenAddress{"127.0.0.1", 0};
  c.scpi = emu::ListenAddress{"127.0.0.1", 0};
  return c;
}

struct Lab {
  explicit Lab(emu::SwitchParams params = small_switch(5), emu::ControlPlaneConfig config = all_listeners())
      : model(io, std::move(params), truth), cp(io, model, truth, std::move(config)) {
    cp.start();
    auto p = cp.ports();
    std::ofstream kh(known_hosts);
    if (p.tl1_ssh) kh << cp.known_hosts("127.0.0.1", *p.tl1_ssh) << "\n";
    if (p.netconf) kh << cp.known_hosts("127.0.0.1", *p.netconf) << "\n";
    loop = std::thread([this] { io.run(); });
  }
  ~Lab() {
    cp.stop();
    work.reset();
    io.stop();
    loop.join();
  }

  std::string url(ocs::Protocol proto) const {
    auto p = cp.ports();
    switch (proto) {
      case ocs::Protocol::kTl1:
        return "tl1://admin@127.0.0.1:" + std::to_string(*p.tl1);
      case ocs::Protocol::kTl1Ssh:
        return "tl1+ssh://admin@127.0.0.1:" + std::to_string(*p.tl1_ssh);
      case ocs::Protocol::kNetconf:
        return "netconf://admin@127.0.0.1:" + std::to_string(*p.netconf);
      case ocs::Protocol::kScpi:
        return "scpi://127.0.0.1:" + std::to_string(*p.scpi);
    }
    return {};
  }
  ocs::DriverOptions options() const {
    ocs::DriverOptions o;
    o.password = "root";
    o.known_hosts_file = known_hosts;
    o.reply_timeout = 5000ms;
    o.connect_timeout = 5000ms;
    return o;
  }
  std::unique_ptr<ocs::OcsDriver> driver(ocs::Protocol proto, ocs::DriverOptions o) const {
    return ocs::make_driver(ocs::SwitchUrl::parse(url(proto)), std::move(o));
  }
  std::unique_ptr<ocs::OcsDriver> driver(ocs::Protocol proto) const { return driver(proto, options()); }

  // Runs fn on the loop (the model is loop-only) and returns its result.
  template <class F>
  auto call(F&& fn) -> decltype(fn()) {
    std::packaged_task<decltype(fn())()> task(std::forward<F>(fn));
    auto fut = task.get_future();
    boost::asio::post(io, [&task] { task(); });
    return fut.get();
  }

  // Samples with this source/subject/signal (value filter optional).
  size_t count(const std::string& source, const std::string& subject, const std::string& signal,
               std::optional<double> value = std::nullopt) const {
    size_t n = 0;
    for (const auto& s : truth.samples()) {
      n += s.source == source && s.subject == subject && s.signal == signal && (!value || s.value == *value);
    }
    return n;
  }

  // Polls until open_sessions() == n or the timeout passes; returns the last count.
  size_t wait_sessions(size_t n, std::chrono::milliseconds timeout = 5000ms) const {
    testing::poll_until([&] { return cp.open_sessions() == n; }, timeout);
    return cp.open_sessions();
  }

  boost::asio::io_context io;
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> work{io.get_executor()};
  emu::GroundTruth truth{"EMU-OCS"};
  emu::SwitchModel model;
  emu::ControlPlane cp;
  testing::TempDir tmp;
  std::string known_hosts = tmp.path() + "/known_hosts";
  std::thread loop;
};

// A blocking loopback TCP client for raw bytes (garbage, half commands, vanishing clients).
class RawClient {
 public:
  explicit RawClient(int port) : fd_(::socket(AF_INET, SOCK_STREAM, 0)) {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd_ < 0 || ::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
      throw std::runtime_error("connect to 127.0.0.1:" + std::to_string(port) + " failed");
    }
    timeval tv{0, 200 * 1000};
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  }
  ~RawClient() { close(); }
  RawClient(const RawClient&) = delete;
  RawClient& operator=(const RawClient&) = delete;

  bool send(std::string_view bytes) {
    while (!bytes.empty()) {
      ssize_t n = ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
      if (n <= 0) return false;
      bytes.remove_prefix(static_cast<size_t>(n));
    }
    return true;
  }
  // Reads until `until` appears (or the timeout passes / the peer closes); returns all read.
  std::string read_until(const std::string& until, std::chrono::milliseconds timeout = 3000ms) {
    // load-safe: the ceiling of a wait for `until` (the event); a hang guard.
    auto end = std::chrono::steady_clock::now() + timeout;
    while (got_.find(until) == std::string::npos && std::chrono::steady_clock::now() < end) {
      char buf[4096];
      ssize_t n = ::recv(fd_, buf, sizeof(buf), 0);
      if (n == 0) break;
      if (n > 0) got_.append(buf, static_cast<size_t>(n));
    }
    return got_;
  }
  // True when the server closed the connection within the timeout.
  bool closed_by_peer(std::chrono::milliseconds timeout = 3000ms) {
    // load-safe: the ceiling of a wait for the peer's close (the event); a hang guard.
    auto end = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < end) {
      char buf[4096];
      ssize_t n = ::recv(fd_, buf, sizeof(buf), 0);
      if (n == 0) return true;
      if (n > 0) got_.append(buf, static_cast<size_t>(n));
      if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) return true;
    }
    return false;
  }
  // Close with RST: the client "vanishes" without a FIN handshake.
  void abort() {
    linger l{1, 0};
    ::setsockopt(fd_, SOL_SOCKET, SO_LINGER, &l, sizeof(l));
    close();
  }
  void close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }
  const std::string& received() const { return got_; }

 private:
  int fd_;
  std::string got_;
};

}  // namespace cp_test
