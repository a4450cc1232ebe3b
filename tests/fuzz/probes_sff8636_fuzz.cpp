// libFuzzer target for the SFF-8636 decoder: the input is lower page 00h from byte 0 (a short
// input is a truncated read). ocslab::Error is the documented rejection.
#include "ocslab/common/error.h"
#include "probes_rx_power_check.h"

using namespace ocslab::probes;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  EepromImage img;
  fuzz::place(img, 0x50, 0, 0, 0, 128, data, size);
  try {
    RxPowerReading r = decode_sff8636(img);
    fuzz::check_reading(r, 4, 4);
    for (int i = 0; i < 4; ++i) {
      if (!r.rx[i].los || *r.rx[i].los != ((data[3] >> i & 1) != 0)) __builtin_trap();
    }
  } catch (const ocslab::Error&) {
  }
  try {
    decode_rx_power(img);
  } catch (const ocslab::Error&) {
  }
  return 0;
}
