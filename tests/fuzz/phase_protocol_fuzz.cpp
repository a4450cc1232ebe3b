// Controller and shim both parse each other's lines: any bytes must decode to a message that
// re-encodes to an equal message, or give a ProtocolError; never crash or hang.
#include <cstddef>
#include <cstdint>
#include <string>

#include "ocslab/phase/protocol.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  try {
    auto m = ocslab::phase::decode(text);
    auto again = ocslab::phase::decode(ocslab::phase::encode(m));
    if (again.type != m.type || again.group != m.group || again.seq != m.seq || again.ranks != m.ranks ||
        again.topo != m.topo || again.digit != m.digit || again.token != m.token) {
      __builtin_trap();
    }
  } catch (const ocslab::Error&) {
  }
  return 0;
}
