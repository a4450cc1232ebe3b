// Switch URLs come from command lines and experiment specs: any text must parse to a URL that
// round-trips, or give an ocslab::Error; a password must never survive into a parsed URL.
#include <cstddef>
#include <cstdint>
#include <string>

#include "ocslab/common/error.h"
#include "ocslab/ocsctl/port_set.h"
#include "ocslab/ocsctl/switch_url.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  try {
    auto url = ocslab::ocs::SwitchUrl::parse(text);
    if (url.port < 1 || url.port > 65535 || url.host.empty()) __builtin_trap();
    auto again = ocslab::ocs::SwitchUrl::parse(url.to_string());
    if (again.to_string() != url.to_string()) __builtin_trap();
  } catch (const ocslab::Error&) {
  }
  // The same bytes as a port list (allow-lists, CLI arguments).
  try {
    auto set = ocslab::ocs::PortSet::parse(text);
    if (!set.empty() && ocslab::ocs::PortSet::parse(set.to_string()).to_vector() != set.to_vector()) __builtin_trap();
  } catch (const ocslab::Error&) {
  }
  return 0;
}
