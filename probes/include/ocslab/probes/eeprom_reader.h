// Access to a transceiver's management memory by interface name: the interface the Rx power
// probe reads through, and its real implementation over ethtool generic netlink
// (ETHTOOL_MSG_MODULE_EEPROM_GET) with the legacy SIOCETHTOOL ioctl as fallback.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ocslab/probes/module_eeprom.h"

namespace ocslab::probes {

// A read either gives the bytes or says, naming the interface, why this interface has no
// readable module: that is a normal outcome (no such interface, nothing plugged, a driver
// without module access such as lo or a veth), not an exception.
struct EepromReadResult {
  std::optional<std::vector<uint8_t>> bytes;
  std::string unavailable;  // set when bytes is empty
  // The kernel's errno behind `unavailable` when there is one: ENODEV no such interface,
  // EOPNOTSUPP the driver has no module access, others (EIO, ENXIO, ...) what the driver said
  // about its cage; 0 when the reason is not an errno.
  int error = 0;
  bool ok() const { return bytes.has_value(); }
};

class EepromReader {
 public:
  virtual ~EepromReader() = default;
  // Reads r.length bytes at (i2c address, page, bank, offset) of the module in ifname.
  // Throws ocslab::Error only for failures of the reader itself (netlink socket unusable).
  virtual EepromReadResult read(const std::string& ifname, const EepromRead& r) = 0;
  // How it reads, for ProbeStatus::method.
  virtual std::string method() const = 0;
};

// ethtool netlink first; where the kernel lacks the ethtool family or the command, the legacy
// ioctl (ETHTOOL_GMODULEINFO + ETHTOOL_GMODULEEEPROM), which can only reach page 00h/03h-style
// flat offsets and bank 0.
// Not thread-safe (one netlink socket): give each probe its own.
class EthtoolEepromReader : public EepromReader {
 public:
  EthtoolEepromReader();
  ~EthtoolEepromReader() override;
  EepromReadResult read(const std::string& ifname, const EepromRead& r) override;
  std::string method() const override;

 private:
  struct Netlink;
  std::unique_ptr<Netlink> nl_;  // null when the kernel has no ethtool genl family
  bool use_ioctl_ = false;
  // err: the kernel's errno when it refused the request, else 0.
  EepromReadResult read_netlink(const std::string& ifname, const EepromRead& r, int* err);
};

// The legacy path alone, exposed for tests and for kernels older than 5.13.
EepromReadResult read_module_eeprom_ioctl(const std::string& ifname, const EepromRead& r);

}  // namespace ocslab::probes
