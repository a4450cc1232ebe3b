// OcsDriver for NETCONF (RFC 6241/6242) over SSH with the Polatis optical-switch YANG model.
#pragma once

#include <memory>
#include <string>

#include "ocslab/ocsctl/driver.h"
#include "ocslab/ocsctl/stream.h"

namespace ocslab::ocs {

class NetconfDriver final : public OcsDriver {
 public:
  NetconfDriver(SwitchUrl url, DriverOptions options);
  ~NetconfDriver() override;

 protected:
  void do_open() override;
  void do_close() override;
  SwitchInfo do_info() override;
  std::vector<Circuit> do_list() override;
  void do_connect(const std::vector<Circuit>& circuits) override;
  void do_disconnect(const std::vector<Port>& ports) override;
  std::vector<PortPower> do_power(const std::vector<Port>& ports) override;

 private:
  std::unique_ptr<Stream> stream_;
};

}  // namespace ocslab::ocs
