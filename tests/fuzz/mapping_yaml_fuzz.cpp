// Mapping files come from users: any bytes must give a mapping or an ocslab::Error, never a
// crash, a hang or an unvalidated result.
#include <cstddef>
#include <cstdint>
#include <set>
#include <string>

#include "ocslab/common/error.h"
#include "ocslab/ocsctl/mapping.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  try {
    auto circuits = ocslab::ocs::parse_mapping_yaml(text, "fuzz.yaml");
    std::set<int> in, out;
    for (const auto& c : circuits) {
      if (c.ingress < 1 || c.egress < 1) __builtin_trap();
      if (!in.insert(c.ingress).second || !out.insert(c.egress).second) __builtin_trap();
    }
    // A valid mapping diffed against itself must be a no-op.
    if (!ocslab::ocs::diff_mapping(circuits, circuits, ocslab::ocs::ApplyMode::kReplace).empty()) __builtin_trap();
  } catch (const ocslab::Error&) {
  }
  return 0;
}
