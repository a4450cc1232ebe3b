// Controller files are user input: any text must load to a config whose initial topology
// composes onto its slots, or give an ocslab::Error; never crash.
#include <cstddef>
#include <cstdint>
#include <string>

#include "ocslab/phase/controller_config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  try {
    auto c = ocslab::phase::parse_controller_config(ocslab::load_yaml_string(text, "fuzz.yaml"));
    if (c.layout.ranks() > 4096) return 0;  // valid but too big to compose quickly
    ocslab::phase::SubMappingTable t(c.layout);
    for (const auto& r : c.rails) (void)ocslab::phase::to_circuits(t.compose(c.initial), r.slots);
  } catch (const ocslab::Error&) {
  } catch (const YAML::Exception&) {
  }
  return 0;
}
