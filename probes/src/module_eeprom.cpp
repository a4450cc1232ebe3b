#include "ocslab/probes/module_eeprom.h"

#include <fmt/format.h>

#include <bit>
#include <cmath>
#include <cstring>

#include "ocslab/common/error.h"

namespace ocslab::probes {

namespace {

// SFF-8024 identifier values (byte 0).
constexpr uint8_t kIdSfp = 0x03;
constexpr uint8_t kIdQsfp = 0x0C;
constexpr uint8_t kIdQsfpPlus = 0x0D;
constexpr uint8_t kIdQsfp28 = 0x11;
constexpr uint8_t kIdQsfpDd = 0x18;
constexpr uint8_t kIdOsfp = 0x19;
constexpr uint8_t kIdQsfpCmis = 0x1E;

constexpr uint8_t kA0 = 0x50;
constexpr uint8_t kA2 = 0x51;

// SFF-8636 lower page 00h.
constexpr unsigned k8636LosFlags = 3;  // bits 3..0: latched Rx LOS lanes 4..1 (bits 7..4 are Tx LOS)
constexpr unsigned k8636Temperature = 22;
constexpr unsigned k8636RxPower = 34;
constexpr unsigned k8636TxPower = 50;

// SFF-8472.
constexpr unsigned k8472DdmType = 92;  // A0h: bit 6 DDM implemented, 5 internal, 4 external calibration
constexpr uint8_t k8472DdmImplemented = 1 << 6;
constexpr uint8_t k8472ExternalCal = 1 << 4;
constexpr unsigned k8472Options = 93;  // A0h enhanced options: bit 4 soft RX_LOS monitoring implemented
constexpr uint8_t k8472SoftRxLos = 1 << 4;
constexpr unsigned k8472CalRxPwr4 = 56;  // A2h: Rx_PWR(4..0) floats at 56, 60, 64, 68, 72
constexpr unsigned k8472CalTxPwrSlope = 80;
constexpr unsigned k8472CalTxPwrOffset = 82;
constexpr unsigned k8472CalTSlope = 84;
constexpr unsigned k8472CalTOffset = 86;
constexpr unsigned k8472CalEnd = 92;
constexpr unsigned k8472Temperature = 96;
constexpr unsigned k8472TxPower = 102;
constexpr unsigned k8472RxPower = 104;
constexpr double kMaxMonitor = 65535;  // largest 16-bit monitor value, 0.1 uW
constexpr unsigned k8472Status = 110;  // A2h: bit 1 Rx_LOS state
constexpr uint8_t k8472StatusRxLos = 1 << 1;

// CMIS.
constexpr unsigned kCmisMemoryModel = 2;  // lower page: bit 7 flat memory
constexpr uint8_t kCmisFlatMemory = 0x80;
constexpr unsigned kCmisTemperature = 14;
constexpr uint8_t kCmisPage01 = 0x01;
constexpr unsigned kCmisBanksAdvert = 142;    // page 01h bits 1..0: 0 -> bank 0, 1 -> banks 0-1, 2 -> banks 0-3
constexpr unsigned kCmisRxFlagsAdvert = 158;  // page 01h bit 1: Rx LOS flag implemented
constexpr uint8_t kCmisRxLosAdvertised = 1 << 1;
constexpr unsigned kCmisMonitorsAdvert = 160;  // page 01h bit 2: Rx optical power monitor implemented
constexpr uint8_t kCmisRxPowerAdvertised = 1 << 2;
constexpr uint8_t kCmisPage11 = 0x11;
constexpr unsigned kCmisRxLosFlags = 147;  // page 11h: latched Rx LOS, bit i = lane i+1 of the bank
constexpr unsigned kCmisRxPower = 186;     // page 11h: 8 x u16, 0.1 uW
constexpr unsigned kCmisLanesPerBank = 8;
constexpr unsigned kCmisMaxBanks = 4;

uint16_t be16(const std::vector<uint8_t>& b, size_t at) { return static_cast<uint16_t>(b[at] << 8 | b[at + 1]); }
int16_t be16s(const std::vector<uint8_t>& b, size_t at) { return static_cast<int16_t>(be16(b, at)); }
float be_float(const std::vector<uint8_t>& b, size_t at) {
  uint32_t u = static_cast<uint32_t>(b[at]) << 24 | static_cast<uint32_t>(b[at + 1]) << 16 |
               static_cast<uint32_t>(b[at + 2]) << 8 | b[at + 3];
  return std::bit_cast<float>(u);
}

LanePower lane_power(int lane, double raw) {
  LanePower p;
  p.lane = lane;
  p.raw = raw;
  p.mw = tenth_uw_to_mw(raw);
  p.dbm = mw_to_dbm(p.mw);
  return p;
}

void expect_identifier(const EepromImage& image, ModuleType want) {
  uint8_t id = image.byte(kA0, 0, 0, 0);
  ModuleType got = module_type_from_identifier(id);
  if (got != want) {
    throw Error(fmt::format("identifier 0x{:02x} is a {} module, not {}", id, to_string(got), to_string(want)));
  }
}

}  // namespace

std::string to_string(ModuleType type) {
  switch (type) {
    case ModuleType::kSff8472:
      return "SFF-8472";
    case ModuleType::kSff8636:
      return "SFF-8636";
    case ModuleType::kCmis:
      return "CMIS";
  }
  return "unknown";
}

ModuleType module_type_from_identifier(uint8_t identifier) {
  switch (identifier) {
    case kIdSfp:
      return ModuleType::kSff8472;
    case kIdQsfp:
    case kIdQsfpPlus:
    case kIdQsfp28:
      return ModuleType::kSff8636;
    case kIdQsfpDd:
    case kIdOsfp:
    case kIdQsfpCmis:
      return ModuleType::kCmis;
    default:
      throw Error(fmt::format("unknown identifier 0x{:02x} (not SFP 0x03, QSFP 0x0c/0x0d/0x11, CMIS 0x18/0x19/0x1e)",
                              identifier));
  }
}

double tenth_uw_to_mw(double raw) { return raw * 1e-4; }

double mw_to_dbm(double mw) { return mw > 0 ? 10.0 * std::log10(mw) : kNoLightDbm; }

// --- EepromImage ---------------------------------------------------------------------------

EepromImage::Key EepromImage::key(uint8_t i2c_address, uint8_t page, uint8_t bank, unsigned offset) {
  // Lower memory does not depend on the page/bank select bytes.
  if (offset < 128) return {i2c_address, 0, 0};
  return {i2c_address, page, bank};
}

void EepromImage::set(uint8_t i2c_address, uint8_t page, uint8_t bank, unsigned offset,
                      std::span<const uint8_t> bytes) {
  if (offset + bytes.size() > 256) {
    throw Error(fmt::format("EEPROM bytes {}..{} past the 256-byte address space", offset, offset + bytes.size() - 1));
  }
  for (size_t i = 0; i < bytes.size(); ++i) {
    unsigned at = offset + static_cast<unsigned>(i);
    Page& p = pages_[key(i2c_address, page, bank, at)];
    p.data[at] = bytes[i];
    p.present[at] = true;
  }
}

bool EepromImage::has(uint8_t i2c_address, uint8_t page, uint8_t bank, unsigned offset, unsigned length) const {
  if (offset + length > 256) return false;
  for (unsigned at = offset; at < offset + length; ++at) {
    auto it = pages_.find(key(i2c_address, page, bank, at));
    if (it == pages_.end() || !it->second.present[at]) return false;
  }
  return true;
}

std::vector<uint8_t> EepromImage::get(uint8_t i2c_address, uint8_t page, uint8_t bank, unsigned offset,
                                      unsigned length) const {
  if (!has(i2c_address, page, bank, offset, length)) {
    throw Error(fmt::format("image too short: i2c 0x{:02x} page {:02x}h bank {} bytes {}..{} missing", i2c_address,
                            offset < 128 ? 0 : page, offset < 128 ? 0 : bank, offset, offset + length - 1));
  }
  std::vector<uint8_t> out(length);
  for (unsigned i = 0; i < length; ++i) {
    out[i] = pages_.at(key(i2c_address, page, bank, offset + i)).data[offset + i];
  }
  return out;
}

uint8_t EepromImage::byte(uint8_t i2c_address, uint8_t page, uint8_t bank, unsigned offset) const {
  return get(i2c_address, page, bank, offset, 1)[0];
}

// --- read plans ----------------------------------------------------------------------------

std::string to_string(const EepromRead& r) {
  return fmt::format("i2c 0x{:02x} page {:02x}h bank {} offset {} length {}", r.i2c_address, r.page, r.bank, r.offset,
                     r.length);
}

ReadPlan read_plan(ModuleType type, unsigned cmis_banks) {
  ReadPlan plan;
  switch (type) {
    case ModuleType::kSff8636:
      // Byte 3 alone: bytes 4..21 are other latched flags (Tx fault, alarms) that reading clears.
      plan.each_poll = {{kA0, 0, 0, k8636LosFlags, 1},
                        {kA0, 0, 0, k8636Temperature, static_cast<uint8_t>(k8636TxPower + 8 - k8636Temperature)}};
      break;
    case ModuleType::kSff8472:
      plan.once = {{kA0, 0, 0, k8472DdmType, 2},
                   {kA2, 0, 0, k8472CalRxPwr4, static_cast<uint8_t>(k8472CalEnd - k8472CalRxPwr4)}};
      plan.each_poll = {{kA2, 0, 0, k8472Temperature, static_cast<uint8_t>(k8472Status + 1 - k8472Temperature)}};
      break;
    case ModuleType::kCmis: {
      if (cmis_banks < 1 || cmis_banks > kCmisMaxBanks) {
        throw Error(fmt::format("CMIS bank count {} outside 1..{}", cmis_banks, kCmisMaxBanks));
      }
      plan.once = {{kA0, kCmisPage01, 0, kCmisBanksAdvert, 1},
                   {kA0, kCmisPage01, 0, kCmisRxFlagsAdvert,
                    static_cast<uint8_t>(kCmisMonitorsAdvert + 1 - kCmisRxFlagsAdvert)}};
      plan.each_poll = {{kA0, 0, 0, kCmisTemperature, 2}};
      for (unsigned b = 0; b < cmis_banks; ++b) {
        auto bank = static_cast<uint8_t>(b);
        // The LOS byte alone: its neighbours 148..153 are other latched flags.
        plan.each_poll.push_back({kA0, kCmisPage11, bank, kCmisRxLosFlags, 1});
        plan.each_poll.push_back({kA0, kCmisPage11, bank, kCmisRxPower, 2 * kCmisLanesPerBank});
      }
      break;
    }
  }
  return plan;
}

bool cmis_flat_memory(const EepromImage& image) {
  return (image.byte(kA0, 0, 0, kCmisMemoryModel) & kCmisFlatMemory) != 0;
}

unsigned cmis_banks_supported(const EepromImage& image) {
  uint8_t code = image.byte(kA0, kCmisPage01, 0, kCmisBanksAdvert) & 0x03;
  switch (code) {
    case 0:
      return 1;
    case 1:
      return 2;
    case 2:
      return 4;
    default:
      throw Error("CMIS page 01h byte 142: reserved bank support code 3");
  }
}

// --- decoders ------------------------------------------------------------------------------

RxPowerReading decode_sff8636(const EepromImage& image) {
  expect_identifier(image, ModuleType::kSff8636);
  RxPowerReading r;
  r.type = ModuleType::kSff8636;
  r.format = "SFF-8636";
  r.los_latched = true;
  uint8_t los = image.byte(kA0, 0, 0, k8636LosFlags);
  auto mon = image.get(kA0, 0, 0, k8636Temperature, k8636TxPower + 8 - k8636Temperature);
  r.temperature_c = be16s(mon, 0) / 256.0;
  for (int lane = 0; lane < 4; ++lane) {
    LanePower rx = lane_power(lane + 1, be16(mon, k8636RxPower - k8636Temperature + 2 * lane));
    rx.los = (los >> lane & 1) != 0;
    r.rx.push_back(rx);
    r.tx.push_back(lane_power(lane + 1, be16(mon, k8636TxPower - k8636Temperature + 2 * lane)));
  }
  return r;
}

RxPowerReading decode_sff8472(const EepromImage& image) {
  expect_identifier(image, ModuleType::kSff8472);
  uint8_t ddm = image.byte(kA0, 0, 0, k8472DdmType);
  if (!(ddm & k8472DdmImplemented)) {
    throw Error(fmt::format("SFP has no digital diagnostics (A0h byte 92 = 0x{:02x}, bit 6 clear)", ddm));
  }
  bool external = (ddm & k8472ExternalCal) != 0;
  bool soft_los = (image.byte(kA0, 0, 0, k8472Options) & k8472SoftRxLos) != 0;
  auto mon = image.get(kA2, 0, 0, k8472Temperature, k8472Status + 1 - k8472Temperature);
  auto at = [](unsigned offset) { return offset - k8472Temperature; };

  RxPowerReading r;
  r.type = ModuleType::kSff8472;
  r.format = external ? "SFF-8472 external calibration" : "SFF-8472 internal calibration";
  double rx_raw = be16(mon, at(k8472RxPower));
  double tx_raw = be16(mon, at(k8472TxPower));
  double temp_raw = be16s(mon, at(k8472Temperature));
  if (external) {
    auto cal = image.get(kA2, 0, 0, k8472CalRxPwr4, k8472CalEnd - k8472CalRxPwr4);
    auto c = [&](unsigned offset) { return offset - k8472CalRxPwr4; };
    // Rx_PWR = Rx_PWR(4)*AD^4 + ... + Rx_PWR(1)*AD + Rx_PWR(0), coefficients stored from (4) down.
    double ad = rx_raw;
    double sum = 0;
    for (unsigned i = 0; i < 5; ++i) sum = sum * ad + be_float(cal, c(k8472CalRxPwr4) + 4 * i);
    // Tx power and temperature: unsigned 8.8 fixed-point slope, signed offset in result units.
    double tx = be16(cal, c(k8472CalTxPwrSlope)) / 256.0 * tx_raw + be16s(cal, c(k8472CalTxPwrOffset));
    double temp = be16(cal, c(k8472CalTSlope)) / 256.0 * temp_raw + be16s(cal, c(k8472CalTOffset));
    // Beyond the 16-bit range an internally calibrated module can report, the constants are
    // garbage rather than the light being that bright.
    if (!std::isfinite(sum) || sum > kMaxMonitor) {
      throw Error(fmt::format("SFF-8472 external calibration of Rx power AD {} gives {}, outside 0..{}", rx_raw, sum,
                              kMaxMonitor));
    }
    if (tx > kMaxMonitor) {
      throw Error(fmt::format("SFF-8472 external calibration of Tx power AD {} gives {}, outside 0..{}", tx_raw, tx,
                              kMaxMonitor));
    }
    // A fitted polynomial can dip below zero near darkness; light cannot.
    rx_raw = std::max(sum, 0.0);
    tx_raw = std::max(tx, 0.0);
    temp_raw = temp;
  }
  LanePower rx = lane_power(1, rx_raw);
  if (soft_los) rx.los = (mon[at(k8472Status)] & k8472StatusRxLos) != 0;
  r.rx.push_back(rx);
  r.tx.push_back(lane_power(1, tx_raw));
  r.temperature_c = temp_raw / 256.0;
  return r;
}

RxPowerReading decode_cmis(const EepromImage& image, unsigned banks) {
  expect_identifier(image, ModuleType::kCmis);
  if (banks < 1 || banks > kCmisMaxBanks) {
    throw Error(fmt::format("CMIS bank count {} outside 1..{}", banks, kCmisMaxBanks));
  }
  if (cmis_flat_memory(image)) {
    throw Error("CMIS module has flat memory (byte 2 bit 7): no page 11h lane monitors");
  }
  uint8_t monitors = image.byte(kA0, kCmisPage01, 0, kCmisMonitorsAdvert);
  if (!(monitors & kCmisRxPowerAdvertised)) {
    throw Error(
        fmt::format("CMIS module does not implement Rx power monitors (page 01h byte 160 = 0x{:02x})", monitors));
  }
  bool has_los = (image.byte(kA0, kCmisPage01, 0, kCmisRxFlagsAdvert) & kCmisRxLosAdvertised) != 0;

  RxPowerReading r;
  r.type = ModuleType::kCmis;
  r.format = "CMIS page 11h";
  r.los_latched = true;
  auto temp = image.get(kA0, 0, 0, kCmisTemperature, 2);
  r.temperature_c = be16s(temp, 0) / 256.0;
  for (unsigned b = 0; b < banks; ++b) {
    auto bank = static_cast<uint8_t>(b);
    auto power = image.get(kA0, kCmisPage11, bank, kCmisRxPower, 2 * kCmisLanesPerBank);
    uint8_t los = has_los ? image.byte(kA0, kCmisPage11, bank, kCmisRxLosFlags) : 0;
    for (unsigned i = 0; i < kCmisLanesPerBank; ++i) {
      LanePower rx = lane_power(static_cast<int>(b * kCmisLanesPerBank + i + 1), be16(power, size_t{2} * i));
      if (has_los) rx.los = (los >> i & 1) != 0;
      r.rx.push_back(rx);
    }
  }
  return r;
}

RxPowerReading decode_rx_power(const EepromImage& image, unsigned cmis_banks) {
  switch (module_type_from_identifier(image.byte(kA0, 0, 0, 0))) {
    case ModuleType::kSff8472:
      return decode_sff8472(image);
    case ModuleType::kSff8636:
      return decode_sff8636(image);
    case ModuleType::kCmis:
      return decode_cmis(image, cmis_banks);
  }
  throw Error("unreachable module type");
}

}  // namespace ocslab::probes
