#include "ocslab/probes/module_info.h"

#include <fmt/format.h>
#include <linux/ethtool.h>
#include <linux/sockios.h>
#include <net/if.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "ocslab/common/error.h"

namespace ocslab::probes {

namespace {

constexpr uint8_t kInfoA0 = 0x50;
constexpr uint8_t kInfoA2 = 0x51;

// Identity fields: offset and length of each ASCII field, per memory map.
struct IdentityLayout {
  unsigned connector, vendor, part, part_len, revision, revision_len, serial;
};
// SFF-8472 A0h bytes 2, 20-35, 40-55, 56-59, 68-83.
constexpr IdentityLayout kSff8472Ids{2, 20, 40, 16, 56, 4, 68};
// SFF-8636 upper page 00h bytes 130, 148-163, 168-183, 184-185, 196-211.
constexpr IdentityLayout kSff8636Ids{130, 148, 168, 16, 184, 2, 196};
// CMIS upper page 00h bytes 203, 129-144, 148-163, 164-165, 166-181.
constexpr IdentityLayout kCmisIds{203, 129, 148, 16, 164, 2, 166};
constexpr unsigned kNameLen = 16;

// Supply voltage monitors (u16, 100 uV): SFF-8472 A2h 98, SFF-8636 lower 26, CMIS lower 16.
constexpr unsigned k8472Vcc = 98;
constexpr unsigned k8472CalVSlope = 88;  // A2h: unsigned 8.8 slope, signed offset (100 uV) at 90
constexpr unsigned k8472DdmTypeByte = 92;
constexpr uint8_t k8472External = 1 << 4;
constexpr unsigned k8636Vcc = 26;
constexpr unsigned kCmisVcc = 16;

const IdentityLayout& layout_of(ModuleType t) {
  switch (t) {
    case ModuleType::kSff8472:
      return kSff8472Ids;
    case ModuleType::kSff8636:
      return kSff8636Ids;
    case ModuleType::kCmis:
      break;
  }
  return kCmisIds;
}

std::string ascii_field(const EepromImage& image, unsigned offset, unsigned length) {
  std::vector<uint8_t> b = image.get(kInfoA0, 0, 0, offset, length);
  std::string s;
  for (uint8_t c : b) s += (c >= 0x20 && c < 0x7f) ? static_cast<char>(c) : '?';
  while (!s.empty() && s.back() == ' ') s.pop_back();
  return s;
}

std::string identifier_name(uint8_t id) {
  switch (id) {
    case 0x03:
      return "SFP/SFP+/SFP28";
    case 0x0C:
      return "QSFP";
    case 0x0D:
      return "QSFP+";
    case 0x11:
      return "QSFP28";
    case 0x18:
      return "QSFP-DD";
    case 0x19:
      return "OSFP";
    case 0x1E:
      return "QSFP+ or later with CMIS";
    default:
      return "unknown";
  }
}

// SFF-8024 Table 4-3, the values optical-switch labs meet.
std::string connector_name(uint8_t c) {
  switch (c) {
    case 0x01:
      return "SC";
    case 0x07:
      return "LC";
    case 0x0B:
      return "optical pigtail";
    case 0x0C:
      return "MPO 1x12";
    case 0x0D:
      return "MPO 2x16";
    case 0x21:
      return "copper pigtail";
    case 0x22:
      return "RJ45";
    case 0x23:
      return "no separable connector";
    case 0x24:
      return "MXC 2x16";
    case 0x27:
      return "MPO 2x12";
    case 0x28:
      return "MPO 1x16";
    default:
      return "unknown";
  }
}

uint16_t u16_at(const EepromImage& image, uint8_t addr, unsigned offset) {
  auto b = image.get(addr, 0, 0, offset, 2);
  return static_cast<uint16_t>(b[0] << 8 | b[1]);
}

}  // namespace

std::string to_string(ModuleAbsence a) {
  switch (a) {
    case ModuleAbsence::kNoInterface:
      return "no_interface";
    case ModuleAbsence::kNotSupported:
      return "not_supported";
    case ModuleAbsence::kNoModule:
      return "no_module";
  }
  return "?";
}

ModuleIdentity decode_identity(const EepromImage& image) {
  ModuleIdentity id;
  id.identifier = image.byte(kInfoA0, 0, 0, 0);
  const IdentityLayout& l = layout_of(module_type_from_identifier(id.identifier));
  id.identifier_name = identifier_name(id.identifier);
  id.connector = image.get(kInfoA0, 0, 0, l.connector, 1)[0];
  id.connector_name = connector_name(id.connector);
  id.vendor = ascii_field(image, l.vendor, kNameLen);
  id.part = ascii_field(image, l.part, l.part_len);
  id.revision = ascii_field(image, l.revision, l.revision_len);
  id.serial = ascii_field(image, l.serial, kNameLen);
  return id;
}

double decode_supply_voltage(const EepromImage& image) {
  switch (module_type_from_identifier(image.byte(kInfoA0, 0, 0, 0))) {
    case ModuleType::kSff8636:
      return u16_at(image, kInfoA0, k8636Vcc) * 1e-4;
    case ModuleType::kCmis:
      return u16_at(image, kInfoA0, kCmisVcc) * 1e-4;
    case ModuleType::kSff8472:
      break;
  }
  double raw = u16_at(image, kInfoA2, k8472Vcc);
  if (image.get(kInfoA0, 0, 0, k8472DdmTypeByte, 1)[0] & k8472External) {
    auto cal = image.get(kInfoA2, 0, 0, k8472CalVSlope, 4);
    double slope = static_cast<uint16_t>(cal[0] << 8 | cal[1]) / 256.0;
    double offset = static_cast<int16_t>(static_cast<uint16_t>(cal[2] << 8 | cal[3]));
    raw = slope * raw + offset;
  }
  return raw * 1e-4;
}

std::vector<EepromRead> module_info_reads(ModuleType type, unsigned cmis_banks) {
  ReadPlan plan = read_plan(type, cmis_banks);
  std::vector<EepromRead> reads = plan.once;
  reads.insert(reads.end(), plan.each_poll.begin(), plan.each_poll.end());
  switch (type) {
    case ModuleType::kSff8472:
      reads.push_back({kInfoA0, 0, 0, 0, 96});              // serial ID: identifier .. serial
      reads.push_back({kInfoA2, 0, 0, k8472CalVSlope, 4});  // voltage calibration
      reads.push_back({kInfoA2, 0, 0, k8472Vcc, 2});        // Vcc
      break;
    case ModuleType::kSff8636:
    case ModuleType::kCmis:
      reads.push_back({kInfoA0, 0, 0, 128, 128});  // upper page 00h: identity
      reads.push_back({kInfoA0, 0, 0, static_cast<uint8_t>(type == ModuleType::kCmis ? kCmisVcc : k8636Vcc), 2});
      break;
  }
  return reads;
}

std::string interface_driver(const std::string& ifname) {
  std::error_code ec;
  auto link = std::filesystem::read_symlink("/sys/class/net/" + ifname + "/device/driver", ec);
  if (!ec) return link.filename().string();
  int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return {};
  ifreq ifr{};
  std::strncpy(ifr.ifr_name, ifname.c_str(), IFNAMSIZ - 1);
  ethtool_drvinfo info{};
  info.cmd = ETHTOOL_GDRVINFO;
  ifr.ifr_data = reinterpret_cast<char*>(&info);
  std::string driver;
  if (::ioctl(fd, SIOCETHTOOL, &ifr) == 0)
    driver = std::string(info.driver, ::strnlen(info.driver, sizeof info.driver));
  ::close(fd);
  return driver;
}

ModuleInfoResult read_module_info(EepromReader& reader, const std::string& ifname,
                                  const std::function<std::string(const std::string&)>& driver_of) {
  ModuleInfoResult out;
  EepromReadResult first = reader.read(ifname, kIdentifyRead);
  if (!first.ok()) {
    if (first.error == ENODEV) {
      out.absence = ModuleAbsence::kNoInterface;
      out.message = fmt::format("{}: no such interface", ifname);
      return out;
    }
    out.driver = driver_of(ifname);
    std::string drv = out.driver.empty() ? "no driver named" : "driver " + out.driver;
    if (first.error == EOPNOTSUPP) {
      out.absence = ModuleAbsence::kNotSupported;
      out.message = fmt::format("{}: module EEPROM not supported by this NIC ({})", ifname, drv);
    } else {
      out.absence = ModuleAbsence::kNoModule;
      out.message = fmt::format("{}: no module plugged in ({}: {})", ifname, drv, first.unavailable);
    }
    return out;
  }
  ModuleInfo info;
  info.interface = ifname;
  EepromImage image;
  image.set(kIdentifyRead.i2c_address, 0, 0, kIdentifyRead.offset, *first.bytes);
  info.type = module_type_from_identifier((*first.bytes)[0]);
  bool flat = info.type == ModuleType::kCmis && cmis_flat_memory(image);
  unsigned banks = 1;
  std::string missing;
  auto read_all = [&](const std::vector<EepromRead>& reads) {
    for (const auto& r : reads) {
      if (flat && r.page != 0) continue;  // a flat CMIS module has page 00h only
      EepromReadResult res = reader.read(ifname, r);
      if (res.ok()) {
        image.set(r.i2c_address, r.page, r.bank, r.offset, *res.bytes);
      } else if (missing.empty()) {
        missing = res.unavailable;
      }
    }
  };
  read_all(module_info_reads(info.type, 1));
  if (info.type == ModuleType::kCmis && !flat && image.has(kInfoA0, 1, 0, 142, 1)) {
    banks = cmis_banks_supported(image);
    if (banks > 1) read_all(module_info_reads(info.type, banks));
  }
  info.identity = decode_identity(image);
  try {
    info.voltage_v = decode_supply_voltage(image);
  } catch (const Error&) {
    // left empty: the module did not answer for those bytes
  }
  if (flat) {
    info.ddm_unavailable = "flat-memory CMIS module: no lane monitors (page 11h)";
  } else {
    try {
      info.ddm = decode_rx_power(image, banks);
    } catch (const Error& e) {
      info.ddm_unavailable = missing.empty() ? e.what() : missing;
    }
  }
  out.info = std::move(info);
  return out;
}

}  // namespace ocslab::probes
