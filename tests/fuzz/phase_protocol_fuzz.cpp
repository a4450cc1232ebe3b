// Controller and shim both parse each other's lines: any bytes must decode to a message that
// re-encodes to an equal message, or give a ProtocolError; never crash or hang. The quick path
// (wire::decode_compact, a hand-written reader of the compact form) is held to the full one:
// a line it accepts must decode through nlohmann to the same message, and encode must write
// the bytes nlohmann's dump writes.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "ocslab/phase/protocol.h"

namespace phase = ocslab::phase;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  std::optional<phase::Message> quick = phase::wire::decode_compact(text);
  try {
    auto m = phase::wire::decode_json(text);
    if (quick && !(*quick == m)) __builtin_trap();   // the quick path decoded it differently
    if (!(phase::decode(text) == m)) __builtin_trap();  // what the controller and shim use
    if (phase::encode(m) != phase::wire::encode_json(m)) __builtin_trap();
    auto again = phase::decode(phase::encode(m));
    if (again.type != m.type || again.group != m.group || again.seq != m.seq || again.ranks != m.ranks ||
        again.topo != m.topo || again.digit != m.digit || again.token != m.token) {
      __builtin_trap();
    }
  } catch (const ocslab::Error&) {
    if (quick) __builtin_trap();  // the quick path accepted what the full path refuses
  }
  return 0;
}
