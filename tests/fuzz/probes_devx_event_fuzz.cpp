// libFuzzer target for the firmware probe's DevX event record decoder: the input is taken as one
// record read from a DevX event channel (any length). Checks the decoder's contract against the
// layout in firmware_probe.h (cookie, then the EQE: type byte 1, sub_type byte 3, port in the upper
// nibble of EQE byte 40), not only that it survives.
#include <cstdint>
#include <cstring>
#include <span>

#include "ocslab/probes/firmware_probe.h"

using namespace ocslab::probes;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::span<const uint8_t> record(data, size);
  try {
    auto e = decode_devx_event(record);
    if (size < kDevxEventRecordLen) __builtin_trap();
    const uint8_t* eqe = data + kDevxEventHeaderLen;
    if ((eqe[1] == kEventTypePortChange) != e.has_value()) __builtin_trap();
    if (!e) return 0;
    uint64_t cookie = 0;
    std::memcpy(&cookie, data, sizeof(cookie));
    if (e->cookie != cookie || e->subtype != eqe[3] || e->port != (eqe[40] >> 4)) __builtin_trap();
    auto link = e->link();
    if (eqe[3] == 4 && !(link && *link)) __builtin_trap();
    if (eqe[3] == 1 && !(link && !*link)) __builtin_trap();
    if (eqe[3] != 1 && eqe[3] != 4 && link) __builtin_trap();
    if (to_string(static_cast<PortChangeSubtype>(e->subtype)).empty()) __builtin_trap();
  } catch (const FirmwareEventError&) {
    if (size >= kDevxEventRecordLen) __builtin_trap();
  }
  return 0;
}
