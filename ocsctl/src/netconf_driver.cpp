// PLACEHOLDER: replaced by the Netconf driver implementation; must not survive the merge.
#include <stdexcept>

#include "ocslab/ocsctl/netconf_driver.h"

namespace ocslab::ocs {
NetconfDriver::NetconfDriver(SwitchUrl url, DriverOptions options) : OcsDriver(std::move(url), std::move(options)) {
  throw std::logic_error("Netconf driver not written yet");
}
NetconfDriver::~NetconfDriver() = default;
void NetconfDriver::do_open() {}
void NetconfDriver::do_close() {}
SwitchInfo NetconfDriver::do_info() { return {}; }
std::vector<Circuit> NetconfDriver::do_list() { return {}; }
void NetconfDriver::do_connect(const std::vector<Circuit>&) {}
void NetconfDriver::do_disconnect(const std::vector<Port>&) {}
std::vector<PortPower> NetconfDriver::do_power(const std::vector<Port>&) { return {}; }
}  // namespace ocslab::ocs
