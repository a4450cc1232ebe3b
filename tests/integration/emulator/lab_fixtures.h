// Fixtures for the emulator's integration tests: network namespaces that are always deleted,
// loopback UDP sockets that play QEMU's `-netdev socket,udp=` side, an rtnetlink carrier
// watcher running inside a namespace, and a QEMU process that is always reaped.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace ocslab::emu::test {

// `ip netns add ocslab-t-<tag>-<pid>`; deleted on destruction, also when a test fails.
class TestNetns {
 public:
  explicit TestNetns(const std::string& tag);
  ~TestNetns();
  TestNetns(const TestNetns&) = delete;
  TestNetns& operator=(const TestNetns&) = delete;
  const std::string& name() const { return name_; }
  // Runs cmd inside the namespace (`ip netns exec`); returns its exit status.
  int exec_status(const std::string& cmd) const;
  // `ip -n NAME -s -j link show dev IF` packet counters.
  uint64_t rx_packets(const std::string& ifname) const;
  uint64_t tx_packets(const std::string& ifname) const;

 private:
  std::string name_;
};

// Exit status of a shell command (output discarded).
int shell_status(const std::string& cmd);

// A free UDP port on 127.0.0.1 (bound then released).
int free_udp_port();

// A loopback UDP socket bound to 127.0.0.1:port (0 = any).
class UdpSocket {
 public:
  explicit UdpSocket(int port = 0);
  ~UdpSocket();
  UdpSocket(const UdpSocket&) = delete;
  UdpSocket& operator=(const UdpSocket&) = delete;
  int fd() const { return fd_; }
  int port() const { return port_; }
  void send_to(int port, const std::string& payload) const;
  // One datagram, or nullopt after timeout_ms.
  std::optional<std::string> receive(int timeout_ms) const;
  // Counts datagrams until none arrives for quiet_ms.
  int drain(int quiet_ms) const;

 private:
  int fd_ = -1;
  int port_ = 0;
};

struct CarrierEvent {
  int64_t mono_ns;  // CLOCK_MONOTONIC right after recv
  bool lower_up;    // IFF_LOWER_UP: the carrier
};

// Listens to RTMGRP_LINK inside a namespace (a thread that setns()es into it) and records the
// carrier state of one interface at every RTM_NEWLINK about it.
class CarrierWatcher {
 public:
  CarrierWatcher(const std::string& netns, const std::string& ifname);
  ~CarrierWatcher();
  CarrierWatcher(const CarrierWatcher&) = delete;
  CarrierWatcher& operator=(const CarrierWatcher&) = delete;
  std::vector<CarrierEvent> events() const;
  // First event after since_mono_ns whose carrier equals `up`, waiting up to timeout_ms.
  std::optional<CarrierEvent> wait_for_edge(bool up, int64_t since_mono_ns, int timeout_ms) const;

 private:
  void run(std::string netns);
  std::string ifname_;
  mutable std::mutex mutex_;
  std::vector<CarrierEvent> events_;
  std::atomic<bool> stop_{false};
  std::atomic<int> ready_{0};  // 1 listening, -1 failed
  std::string error_;
  std::thread thread_;
};

// A QEMU process (qemu-system-x86_64 with the given arguments, no guest); SIGKILLed and reaped
// on destruction. Its output goes to log_path, quoted when it fails to start.
class QemuProcess {
 public:
  QemuProcess(const std::vector<std::string>& args, std::string log_path);
  ~QemuProcess();
  QemuProcess(const QemuProcess&) = delete;
  QemuProcess& operator=(const QemuProcess&) = delete;
  // Waits until the QMP socket accepts connections.
  void wait_for_socket(const std::string& path, int timeout_ms) const;

 private:
  pid_t pid_ = -1;
  std::string log_path_;
};

}  // namespace ocslab::emu::test
