// Decoders for the transceiver management memory that carries per-lane receive power
// (SFF-8472 SFP, SFF-8636 QSFP, CMIS QSFP-DD/OSFP): pure functions over byte images, plus the
// list of the few EEPROM reads each module type needs, so the Rx power probe touches nothing else.
#pragma once

#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <tuple>
#include <vector>

namespace ocslab::probes {

enum class ModuleType { kSff8472, kSff8636, kCmis };

// "SFF-8472", "SFF-8636", "CMIS".
std::string to_string(ModuleType type);

// SFF-8024 identifier byte (byte 0 of i2c 0x50) -> management interface. Throws ocslab::Error
// naming the value ("unknown identifier 0x07") for anything this probe does not decode.
ModuleType module_type_from_identifier(uint8_t identifier);

// Raw monitor units are 0.1 uW. A raw value of 0 means no light at all: its dBm is -infinity
// (kNoLightDbm) in these structures. Samples cannot carry -inf through JSON, so the probe writes
// kSampleDbmFloor there instead and keeps the exact 0 in rx_power_mw.
inline constexpr double kNoLightDbm = -std::numeric_limits<double>::infinity();
inline constexpr double kSampleDbmFloor = -40.0;

double tenth_uw_to_mw(double raw);  // raw * 1e-4
double mw_to_dbm(double mw);        // 10*log10(mw); kNoLightDbm for mw <= 0

struct LanePower {
  int lane = 0;              // 1-based media lane (CMIS: across banks, bank b lane i = 8*b + i)
  double raw = 0;            // monitor value in 0.1 uW (after external calibration for SFF-8472)
  double mw = 0;             // >= 0
  double dbm = kNoLightDbm;  // kNoLightDbm when mw == 0
  std::optional<bool> los;   // Rx loss of signal, when the module reports it (see RxPowerReading)
};

struct RxPowerReading {
  ModuleType type = ModuleType::kSff8636;
  // How the values were obtained, e.g. "SFF-8636", "SFF-8472 internal calibration",
  // "SFF-8472 external calibration", "CMIS page 11h".
  std::string format;
  std::vector<LanePower> rx;  // one per lane, lane order
  std::vector<LanePower> tx;  // Tx power where the decoder reads it (SFF-8636, SFF-8472)
  std::optional<double> temperature_c;
  // SFF-8636 byte 3 and CMIS page 11h byte 147 are latched flags, cleared when read: los == true
  // means LOS was asserted at some time since the previous read. SFF-8472 byte 110 bit 1 is the
  // live state of the RX_LOS pin instead.
  bool los_latched = false;
};

// A sparse copy of module memory: bytes placed where they live, keyed by i2c address, page and
// bank. Lower memory (offsets 0..127) is the same whatever page/bank is selected, so it is always
// stored under page 0 bank 0. Decoders ask for exactly the bytes they use and fail with an
// ocslab::Error naming the missing range, so a truncated read is reported, never read as zeros.
class EepromImage {
 public:
  void set(uint8_t i2c_address, uint8_t page, uint8_t bank, unsigned offset, std::span<const uint8_t> bytes);
  bool has(uint8_t i2c_address, uint8_t page, uint8_t bank, unsigned offset, unsigned length) const;
  // Throws ocslab::Error ("image too short: i2c 0x51 page 00h bank 0 bytes 104..105 missing").
  std::vector<uint8_t> get(uint8_t i2c_address, uint8_t page, uint8_t bank, unsigned offset, unsigned length) const;
  uint8_t byte(uint8_t i2c_address, uint8_t page, uint8_t bank, unsigned offset) const;

 private:
  struct Page {
    uint8_t data[256] = {};
    bool present[256] = {};
  };
  using Key = std::tuple<uint8_t, uint8_t, uint8_t>;
  static Key key(uint8_t i2c_address, uint8_t page, uint8_t bank, unsigned offset);
  std::map<Key, Page> pages_;
};

// One module EEPROM read as ethtool's MODULE_EEPROM_GET takes it: 1..128 bytes that do not cross
// byte 128 (lower memory 0..127, or the selected upper page 128..255).
struct EepromRead {
  uint8_t i2c_address = 0x50;
  uint8_t page = 0;
  uint8_t bank = 0;
  uint8_t offset = 0;
  uint8_t length = 1;
  bool operator==(const EepromRead&) const = default;
};
std::string to_string(const EepromRead& r);

// Read first on every module: identifier (byte 0), revision, and byte 2 (SFF-8636/CMIS status,
// whose bit 7 marks a flat-memory CMIS module without the pages that hold lane monitors).
inline constexpr EepromRead kIdentifyRead{0x50, 0, 0, 0, 3};

// Reads split by how often they are needed: `once` holds what does not change while the module
// stays plugged (identifier, DDM type, calibration constants, CMIS advertisements); `each_poll`
// holds the monitors and the Rx LOS flags. Latched flag bytes other than Rx LOS are left alone,
// because reading them clears them for whoever else watches the module.
struct ReadPlan {
  std::vector<EepromRead> once;
  std::vector<EepromRead> each_poll;
};
// cmis_banks: lane banks to read (1 for up to 8 lanes); see cmis_banks_supported().
ReadPlan read_plan(ModuleType type, unsigned cmis_banks = 1);

// True for a CMIS module that exposes only page 00h (byte 2 bit 7): it has no lane monitors.
bool cmis_flat_memory(const EepromImage& image);

// Banks advertised by CMIS page 01h byte 142 bits 1..0 (1, 2 or 4); needs that byte in image.
unsigned cmis_banks_supported(const EepromImage& image);

// Decoders. Each needs the bytes its read_plan() lists and throws ocslab::Error when a byte is
// missing, the identifier is of another family, or the module lacks the monitors.
RxPowerReading decode_sff8636(const EepromImage& image);
RxPowerReading decode_sff8472(const EepromImage& image);
RxPowerReading decode_cmis(const EepromImage& image, unsigned banks = 1);
// Dispatches on the identifier byte.
RxPowerReading decode_rx_power(const EepromImage& image, unsigned cmis_banks = 1);

}  // namespace ocslab::probes
