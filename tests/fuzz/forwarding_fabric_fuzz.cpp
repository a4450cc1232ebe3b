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
    (void)ocslab::forwarding::make_plan(fabric, routes);
  } catch (const ocslab::Error&) {
  }
  return 0;
}
