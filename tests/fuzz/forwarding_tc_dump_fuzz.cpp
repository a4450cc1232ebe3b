// A tc filter dump as the kernel sends it (RTM_NEWTFILTER messages with flower options,
// actions and statistics): any bytes must decode or throw ocslab::Error, never crash or read
// out of bounds. Seeds: dumps captured from the virtual lab's guest kernel (Debian 6.1).
#include <cstddef>
#include <cstdint>

#include "ocslab/common/error.h"
#include "ocslab/forwarding/tc_messages.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    for (const auto& f : ocslab::forwarding::tc::decode_filter_dump(data, size)) (void)f.tagged();
  } catch (const ocslab::Error&) {
  }
  return 0;
}
