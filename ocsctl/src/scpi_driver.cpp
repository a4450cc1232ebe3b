// PLACEHOLDER: replaced by the Scpi driver implementation; must not survive the merge.
#include <stdexcept>

#include "ocslab/ocsctl/scpi_driver.h"

namespace ocslab::ocs {
ScpiDriver::ScpiDriver(SwitchUrl url, DriverOptions options) : OcsDriver(std::move(url), std::move(options)) {
  throw std::logic_error("Scpi driver not written yet");
}
ScpiDriver::~ScpiDriver() = default;
void ScpiDriver::do_open() {}
void ScpiDriver::do_close() {}
SwitchInfo ScpiDriver::do_info() { return {}; }
std::vector<Circuit> ScpiDriver::do_list() { return {}; }
void ScpiDriver::do_connect(const std::vector<Circuit>&) {}
void ScpiDriver::do_disconnect(const std::vector<Port>&) {}
std::vector<PortPower> ScpiDriver::do_power(const std::vector<Port>&) { return {}; }
}  // namespace ocslab::ocs
