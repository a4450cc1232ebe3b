// libFuzzer target for the CMIS decoder: input byte 0 picks the bank count (1..4), then lower
// memory 0..127, page 01h 128..255, and page 11h 128..255 for banks 0..3, each cut short where
// the input ends.
#include "ocslab/common/error.h"
#include "probes_rx_power_check.h"

using namespace ocslab::probes;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  unsigned banks = data[0] % 4 + 1;
  ++data;
  --size;
  EepromImage img;
  size_t used = fuzz::place(img, 0x50, 0, 0, 0, 128, data, size);
  used += fuzz::place(img, 0x50, 0x01, 0, 128, 256, data + used, size - used);
  for (uint8_t bank = 0; bank < 4; ++bank) {
    used += fuzz::place(img, 0x50, 0x11, bank, 128, 256, data + used, size - used);
  }
  try {
    RxPowerReading r = decode_cmis(img, banks);
    fuzz::check_reading(r, 8 * banks, 0);
  } catch (const ocslab::Error&) {
  }
  try {
    unsigned supported = cmis_banks_supported(img);
    if (supported != 1 && supported != 2 && supported != 4) __builtin_trap();
    decode_rx_power(img, supported);
  } catch (const ocslab::Error&) {
  }
  return 0;
}
