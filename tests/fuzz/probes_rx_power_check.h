// Shared invariants of the Rx power decoder fuzz targets: a decoder either throws ocslab::Error
// or returns lanes numbered 1..n whose mW is finite and non-negative and whose dBm agrees with
// it (-inf exactly when there is no light). Anything else traps.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>

#include "ocslab/probes/module_eeprom.h"

namespace ocslab::probes::fuzz {

inline void check_lanes(const std::vector<LanePower>& lanes, size_t expected) {
  if (lanes.size() != expected) __builtin_trap();
  for (size_t i = 0; i < lanes.size(); ++i) {
    const LanePower& l = lanes[i];
    if (l.lane != static_cast<int>(i + 1)) __builtin_trap();
    if (!std::isfinite(l.mw) || l.mw < 0 || !std::isfinite(l.raw) || l.raw < 0) __builtin_trap();
    if (l.mw == 0 ? l.dbm != kNoLightDbm : !(std::fabs(l.dbm - 10 * std::log10(l.mw)) < 1e-9)) __builtin_trap();
    if (l.mw > 0 && l.dbm > 8.2) __builtin_trap();  // 16-bit 0.1 uW monitors end at 6.5535 mW
  }
}

inline void check_reading(const RxPowerReading& r, size_t rx_lanes, size_t tx_lanes) {
  check_lanes(r.rx, rx_lanes);
  if (!r.tx.empty()) check_lanes(r.tx, tx_lanes);
  if (!r.temperature_c || !std::isfinite(*r.temperature_c)) __builtin_trap();
}

// Places up to `size` bytes of data at offset `from` of the given page; returns bytes consumed.
inline size_t place(EepromImage& img, uint8_t addr, uint8_t page, uint8_t bank, unsigned from, unsigned to,
                    const uint8_t* data, size_t size) {
  size_t n = std::min<size_t>(size, to - from);
  if (n > 0) img.set(addr, page, bank, from, std::span<const uint8_t>(data, n));
  return n;
}

}  // namespace ocslab::probes::fuzz
