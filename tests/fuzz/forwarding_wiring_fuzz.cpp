// Wiring files come from users: any bytes must give a validated wiring or an ocslab::Error
// naming the input, never a crash or a hang. A wiring that loads is also derived into a fabric
// (cables paired up in file order, both directions, plus one one-way circuit when the count is
// odd), and a derived fabric must survive to_yaml() and load back with the same circuits.
#include <cstddef>
#include <cstdint>
#include <string>

#include "ocslab/common/error.h"
#include "ocslab/forwarding/fabric.h"
#include "ocslab/forwarding/wiring.h"

namespace fw = ocslab::forwarding;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 4096) return 0;  // big files only make each run slower, not different
  std::string text(reinterpret_cast<const char*>(data), size);
  fw::Wiring wiring;
  try {
    wiring = fw::load_wiring_string(text, "fuzz.yaml");
  } catch (const ocslab::Error&) {
    return 0;
  }
  std::vector<fw::OcsCircuit> circuits;
  const auto& c = wiring.cables;
  for (size_t i = 0; i + 1 < c.size(); i += 2) {
    circuits.push_back({c[i].tx, c[i + 1].rx, "pair"});
    circuits.push_back({c[i + 1].tx, c[i].rx, "pair"});
  }
  if (c.size() % 2 == 1) circuits.push_back({c.back().tx, c.front().rx, "odd"});
  fw::DerivedFabric d;
  try {
    d = fw::derive_fabric(wiring, circuits);
  } catch (const ocslab::Error&) {
    return 0;
  }
  std::string yaml;
  try {
    yaml = fw::to_yaml(d.fabric, "fuzz");
  } catch (const ocslab::Error&) {
    return 0;  // a value yaml-cpp cannot emit: refused with a message, not written wrong
  }
  fw::Fabric back = fw::load_fabric_string(yaml, "derived.yaml");  // must not throw
  if (back.circuits.size() != d.fabric.circuits.size() || back.hosts.size() != d.fabric.hosts.size()) __builtin_trap();
  for (size_t i = 0; i < back.circuits.size(); ++i)
    if (back.circuits[i].a != d.fabric.circuits[i].a || back.circuits[i].b != d.fabric.circuits[i].b) __builtin_trap();
  return 0;
}
