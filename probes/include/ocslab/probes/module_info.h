// A transceiver's identity (identifier, connector, vendor, part, revision, serial) and its DDM
// (per-lane Rx/Tx power, temperature, supply voltage, Rx LOS), read once through an EepromReader
// and decoded with the Rx power probe's decoders: what `ocslab-agent module IF` prints, like
// `ethtool -m`. Offsets: SFF-8472 A0h/A2h, SFF-8636 page 00h, CMIS page 00h (docs/probes-rx-power.md).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "ocslab/probes/eeprom_reader.h"
#include "ocslab/probes/module_eeprom.h"

namespace ocslab::probes {

struct ModuleIdentity {
  uint8_t identifier = 0;
  std::string identifier_name;  // SFF-8024: "SFP/SFP+/SFP28", "QSFP28", "QSFP-DD", ...
  uint8_t connector = 0;
  std::string connector_name;                  // "LC", "MPO 1x12", ... or "unknown"
  std::string vendor, part, revision, serial;  // ASCII fields, trailing spaces removed
};

// Needs the identity bytes of module_info_reads(type) in image; throws ocslab::Error naming a
// missing range.
ModuleIdentity decode_identity(const EepromImage& image);
// Supply voltage in V (100 uV units; SFF-8472 external calibration applied). Throws when missing.
double decode_supply_voltage(const EepromImage& image);

// Every read `module` needs for type: the Rx power probe's plan (once and each poll) plus the
// identity and voltage bytes.
std::vector<EepromRead> module_info_reads(ModuleType type, unsigned cmis_banks = 1);

struct ModuleInfo {
  std::string interface;
  ModuleType type = ModuleType::kSff8636;
  ModuleIdentity identity;
  std::optional<double> voltage_v;
  std::optional<RxPowerReading> ddm;  // nullopt when the module has no monitors (ddm_unavailable says why)
  std::string ddm_unavailable;
};

// Why an interface has no module to describe; each is its own exit code in `ocslab-agent module`.
enum class ModuleAbsence {
  kNoInterface,   // no such interface
  kNotSupported,  // the driver has no module EEPROM access (EOPNOTSUPP): lo, veth, virtio, ...
  kNoModule,      // the driver has access but the cage answered nothing (EIO, ENXIO, ...): empty cage
};
std::string to_string(ModuleAbsence a);  // "no_interface", "not_supported", "no_module"

struct ModuleInfoResult {
  std::optional<ModuleInfo> info;
  ModuleAbsence absence = ModuleAbsence::kNoModule;  // when info is empty
  std::string message;                               // when info is empty: one line for the user
  std::string driver;                                // the interface's driver, when known
};

// The interface's driver: /sys/class/net/IF/device/driver, else ETHTOOL_GDRVINFO; "" when neither
// names one (lo).
std::string interface_driver(const std::string& ifname);

// Reads and decodes the module in ifname through reader. driver_of names the driver for the
// message (interface_driver on a real host; tests inject theirs). Throws ocslab::Error when the
// bytes are there but do not decode (an identifier this code does not know).
ModuleInfoResult read_module_info(EepromReader& reader, const std::string& ifname,
                                  const std::function<std::string(const std::string&)>& driver_of = interface_driver);

}  // namespace ocslab::probes
