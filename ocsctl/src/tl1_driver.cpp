// PLACEHOLDER: replaced by the Tl1 driver implementation; must not survive the merge.
#include <stdexcept>

#include "ocslab/ocsctl/tl1_driver.h"

namespace ocslab::ocs {
Tl1Driver::Tl1Driver(SwitchUrl url, DriverOptions options) : OcsDriver(std::move(url), std::move(options)) {
  throw std::logic_error("Tl1 driver not written yet");
}
Tl1Driver::~Tl1Driver() = default;
void Tl1Driver::do_open() {}
void Tl1Driver::do_close() {}
SwitchInfo Tl1Driver::do_info() { return {}; }
std::vector<Circuit> Tl1Driver::do_list() { return {}; }
void Tl1Driver::do_connect(const std::vector<Circuit>&) {}
void Tl1Driver::do_disconnect(const std::vector<Port>&) {}
std::vector<PortPower> Tl1Driver::do_power(const std::vector<Port>&) { return {}; }
}  // namespace ocslab::ocs
