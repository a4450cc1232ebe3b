#include "ocslab/ocsctl/credentials.h"
#include "ocslab/ocsctl/driver.h"
#include "ocslab/ocsctl/netconf_driver.h"
#include "ocslab/ocsctl/scpi_driver.h"
#include "ocslab/ocsctl/tl1_driver.h"

namespace ocslab::ocs {

std::unique_ptr<OcsDriver> make_driver(const SwitchUrl& url, DriverOptions options) {
  if (!options.password) options.password = resolve_password(url, default_credentials_path());
  switch (url.protocol) {
    case Protocol::kTl1:
    case Protocol::kTl1Ssh:
      return std::make_unique<Tl1Driver>(url, std::move(options));
    case Protocol::kNetconf:
      return std::make_unique<NetconfDriver>(url, std::move(options));
    case Protocol::kScpi:
      return std::make_unique<ScpiDriver>(url, std::move(options));
  }
  throw Error("unsupported protocol in " + url.to_string());
}

}  // namespace ocslab::ocs
