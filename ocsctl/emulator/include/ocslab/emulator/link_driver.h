// How the emulator takes a host NIC's link down and up: TUNSETCARRIER on a TAP device it
// owns, or QMP `set_link` on a QEMU netdev, so the guest kernel sees a real carrier change.
#pragma once

#include <memory>
#include <string>

namespace ocslab::emu {

class LinkDriver {
 public:
  virtual ~LinkDriver() = default;
  // Throws ocslab::Error naming the device and the failure.
  virtual void set_link(bool up) = 0;
  virtual std::string describe() const = 0;
};

std::unique_ptr<LinkDriver> make_tap_carrier_driver(int tap_fd, std::string tap_name);
// Connects lazily; reconnects once if QEMU closed the socket.
std::unique_ptr<LinkDriver> make_qmp_link_driver(std::string socket_path, std::string netdev_id);

}  // namespace ocslab::emu
