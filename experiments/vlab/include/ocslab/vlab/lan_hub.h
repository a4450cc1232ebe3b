// The virtual lab's management LAN: an Ethernet hub over QEMU's `-netdev socket,udp=` links.
// Every frame one host sends reaches every other host, as through a lab's management switch;
// it never passes through the emulated OCS, so it keeps working while circuits are dark.
#pragma once

#include <atomic>
#include <thread>
#include <vector>

namespace ocslab::vlab {

struct HubPort {
  int hub_port = 0;   // bound by the hub on 127.0.0.1
  int qemu_port = 0;  // QEMU's localaddr port: frames for this host go there
};

class LanHub {
 public:
  explicit LanHub(std::vector<HubPort> ports);
  ~LanHub();
  LanHub(const LanHub&) = delete;
  LanHub& operator=(const LanHub&) = delete;

  // Binds every hub port and starts forwarding. Throws SystemError naming the port.
  void start();
  void stop();  // idempotent

  uint64_t frames() const { return frames_; }

 private:
  void run();
  std::vector<HubPort> ports_;
  std::vector<int> fds_;
  int wake_fd_ = -1;
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> frames_{0};
  std::thread thread_;
};

}  // namespace ocslab::vlab
