// Fabric files come from users: any bytes must give a validated fabric or an ocslab::Error
// naming the input, never a crash or a hang; a fabric that loads must also route and plan.
#include <cstddef>
#include <cstdint>
#include <string>

#include "ocslab/common/error.h"
#include "ocslab/forwarding/fabric.h"
#include "ocslab/forwarding/routes.h"
#include "ocslab/forwarding/rule_plan.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 4096) return 0;  // big fabrics only make each run slower, not different
  std::string text(reinterpret_cast<const char*>(data), size);
  try {
    auto fabric = ocslab::forwarding::load_fabric_string(text, "fuzz.yaml");
    auto routes = ocslab::forwarding::compute_routes(fabric);
    auto plain = ocslab::forwarding::make_plan(fabric, routes);
    // every_nic only adds rules: the same routes, at least as many neighbours and filters.
    auto every = ocslab::forwarding::make_plan(fabric, routes, {.every_nic = true});
    if (every.hosts.size() != plain.hosts.size()) __builtin_trap();
    for (size_t h = 0; h < plain.hosts.size(); ++h) {
      if (every.hosts[h].routes.size() != plain.hosts[h].routes.size() ||
          every.hosts[h].neighbours.size() < plain.hosts[h].neighbours.size() ||
          every.hosts[h].filters.size() < plain.hosts[h].filters.size())
        __builtin_trap();
    }
  } catch (const ocslab::Error&) {
  }
  return 0;
}
