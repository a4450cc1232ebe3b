// libFuzzer target for the SFF-8472 decoder: the first 128 input bytes are A0h 0..127, the
// rest A2h from byte 0 (calibration floats included, so NaN/inf coefficients get exercised).
#include "ocslab/common/error.h"
#include "probes_rx_power_check.h"

using namespace ocslab::probes;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  EepromImage img;
  size_t used = fuzz::place(img, 0x50, 0, 0, 0, 128, data, size);
  fuzz::place(img, 0x51, 0, 0, 0, 256, data + used, size - used);
  try {
    RxPowerReading r = decode_sff8472(img);
    fuzz::check_reading(r, 1, 1);
    bool soft_los = (data[93] & 0x10) != 0;
    if (r.rx[0].los.has_value() != soft_los) __builtin_trap();
  } catch (const ocslab::Error&) {
  }
  try {
    decode_rx_power(img);
  } catch (const ocslab::Error&) {
  }
  return 0;
}
