// libFuzzer target for the mlx5 QUERY_VPORT_STATE codec of the firmware probe: the input is
// taken as a firmware reply (any length), and its first bytes also pick a query to encode.
// Checks the decoder's contract (docs/protocols.md#mlx5-firmware-link-state), not only that it survives.
#include <cstdint>
#include <span>

#include "ocslab/probes/firmware_probe.h"

using namespace ocslab::probes;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::span<const uint8_t> out(data, size);
  try {
    VportState v = decode_query_vport_state(out);
    if (size < kQueryVportStateOutLen || data[0] != 0) __builtin_trap();
    if (v.state != (data[15] & 0x0f) || v.admin_state != (data[15] >> 4)) __builtin_trap();
    if (v.up() != (v.state == 1)) __builtin_trap();
  } catch (const FirmwareCommandError& e) {
    if (size < kQueryVportStateOutLen || data[0] == 0 || e.status() != data[0]) __builtin_trap();
    uint32_t syndrome = (uint32_t{data[4]} << 24) | (uint32_t{data[5]} << 16) | (uint32_t{data[6]} << 8) | data[7];
    if (e.syndrome() != syndrome) __builtin_trap();
  } catch (const FirmwareReplyError&) {
    if (size >= kQueryVportStateOutLen) __builtin_trap();
  }

  if (size >= 3) {
    VportStateQuery q;
    q.op_mod = static_cast<VportOpMod>(data[0] % 3);
    q.other_vport = (data[0] & 0x80) != 0;
    q.vport_number = static_cast<uint16_t>((data[1] << 8) | data[2]);
    auto in = encode_query_vport_state(q);
    if (in[0] != 0x07 || in[1] != 0x50) __builtin_trap();
    if (((in[6] << 8) | in[7]) != static_cast<int>(q.op_mod)) __builtin_trap();
    if (((in[8] & 0x80) != 0) != q.other_vport || (in[8] & 0x7f) != 0) __builtin_trap();
    if (((in[10] << 8) | in[11]) != q.vport_number) __builtin_trap();
    for (size_t i : {2, 3, 4, 5, 9, 12, 13, 14, 15}) {
      if (in[i] != 0) __builtin_trap();
    }
  }
  return 0;
}
