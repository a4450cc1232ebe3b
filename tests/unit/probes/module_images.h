// Module memory images built byte by byte from the SFF-8636, SFF-8472 and CMIS memory maps, for
// the decoder tests and the replaying EEPROM reader (no transceiver exists on this machine).
#pragma once

#include <array>
#include <bit>
#include <cstdint>
#include <vector>

#include "ocslab/probes/module_eeprom.h"

namespace ocslab::probes::testimg {

using Bytes = std::array<uint8_t, 256>;

inline void put16(Bytes& b, unsigned at, uint16_t v) {
  b[at] = static_cast<uint8_t>(v >> 8);
  b[at + 1] = static_cast<uint8_t>(v);
}
inline void put_float(Bytes& b, unsigned at, float f) {
  auto u = std::bit_cast<uint32_t>(f);
  for (int i = 0; i < 4; ++i) b[at + i] = static_cast<uint8_t>(u >> (24 - 8 * i));
}
// An ASCII identity field, space padded as the specs lay them out.
inline void put_ascii(Bytes& b, unsigned at, unsigned len, const char* text) {
  for (unsigned i = 0; i < len; ++i) b[at + i] = ' ';
  for (unsigned i = 0; i < len && text[i]; ++i) b[at + i] = static_cast<uint8_t>(text[i]);
}
inline void load(EepromImage& img, uint8_t addr, uint8_t page, uint8_t bank, const Bytes& b, unsigned from,
                 unsigned to) {
  img.set(addr, page, bank, from, std::span<const uint8_t>(b.data() + from, to - from));
}

// SFF-8636 lower page 00h (QSFP28 by default).
struct Qsfp {
  uint8_t id = 0x11;
  std::array<uint16_t, 4> rx{};
  std::array<uint16_t, 4> tx{};
  int16_t temp_raw = 0;
  uint8_t los_byte = 0;   // byte 3: Tx LOS 7..4, Rx LOS 3..0
  uint16_t vcc = 0x8098;  // 3.2920 V
  Bytes lower() const {
    Bytes b{};
    b[0] = id;
    b[1] = 0x07;  // revision compliance: SFF-8636 rev 2.5+
    b[3] = los_byte;
    put16(b, 22, static_cast<uint16_t>(temp_raw));
    put16(b, 26, vcc);
    // Upper page 00h: connector, vendor name, PN, rev, SN.
    b[130] = 0x0C;  // MPO 1x12
    put_ascii(b, 148, 16, "FINISAR CORP");
    put_ascii(b, 168, 16, "FTLC1151RDPL");
    put_ascii(b, 184, 2, "A0");
    put_ascii(b, 196, 16, "X7A0Q2B");
    for (unsigned i = 0; i < 4; ++i) {
      put16(b, 34 + 2 * i, rx[i]);
      put16(b, 42 + 2 * i, 0x1770);  // Tx bias, not decoded
      put16(b, 50 + 2 * i, tx[i]);
    }
    b[128] = id;
    return b;
  }
  EepromImage image() const {
    EepromImage img;
    load(img, 0x50, 0, 0, lower(), 0, 256);
    return img;
  }
};

// SFF-8472 SFP: A0h and A2h.
struct Sfp {
  uint8_t ddm_type = 0x68;  // DDM implemented, internally calibrated, average power
  uint8_t options = 0x10;   // soft RX_LOS monitoring implemented
  uint16_t rx_ad = 0;
  uint16_t tx_ad = 0;
  int16_t temp_ad = 0;
  uint8_t status = 0;                          // A2h byte 110
  std::array<float, 5> rx_cal{0, 0, 0, 1, 0};  // Rx_PWR(4), (3), (2), (1), (0)
  uint16_t tx_slope = 0x0100, t_slope = 0x0100;
  int16_t tx_offset = 0, t_offset = 0;
  Bytes a0() const {
    Bytes b{};
    b[0] = 0x03;
    b[1] = 0x04;
    b[2] = 0x07;  // LC
    put_ascii(b, 20, 16, "Mellanox");
    put_ascii(b, 40, 16, "MMA2P00-AS");
    put_ascii(b, 56, 4, "A6");
    put_ascii(b, 68, 16, "MT2107FT01234");
    b[92] = ddm_type;
    b[93] = options;
    b[94] = 0x08;  // SFF-8472 rev 12.0
    return b;
  }
  Bytes a2() const {
    Bytes b{};
    for (unsigned i = 0; i < 5; ++i) put_float(b, 56 + 4 * i, rx_cal[i]);
    put16(b, 76, 0x0100);
    put16(b, 80, tx_slope);
    put16(b, 82, static_cast<uint16_t>(tx_offset));
    put16(b, 84, t_slope);
    put16(b, 86, static_cast<uint16_t>(t_offset));
    put16(b, 88, 0x0100);
    put16(b, 96, static_cast<uint16_t>(temp_ad));
    put16(b, 98, 0x8020);  // Vcc 3.28 V
    put16(b, 100, 0x1770);
    put16(b, 102, tx_ad);
    put16(b, 104, rx_ad);
    b[110] = status;
    return b;
  }
  EepromImage image() const {
    EepromImage img;
    load(img, 0x50, 0, 0, a0(), 0, 256);
    load(img, 0x51, 0, 0, a2(), 0, 256);
    return img;
  }
};

// CMIS module (QSFP-DD by default) with page 01h and page 11h banks.
struct Cmis {
  uint8_t id = 0x18;
  bool flat = false;
  int16_t temp_raw = 0;
  uint8_t banks_code = 0;       // page 01h byte 142 bits 1..0
  uint8_t rx_flags_adv = 0x02;  // page 01h byte 158: Rx LOS implemented
  uint8_t monitors_adv = 0x07;  // page 01h byte 160: Tx bias, Tx power, Rx power monitors
  std::vector<std::array<uint16_t, 8>> rx{std::array<uint16_t, 8>{}};
  std::vector<uint8_t> los{0};
  Bytes lower() const {
    Bytes b{};
    b[0] = id;
    b[1] = 0x50;  // CMIS 5.0
    b[2] = flat ? 0x80 : 0x00;
    b[3] = 0x06;  // ModuleReady
    put16(b, 14, static_cast<uint16_t>(temp_raw));
    put16(b, 16, 0x80E8);  // Vcc 3.3000 V
    b[128] = id;
    // Upper page 00h: vendor name, PN, rev, SN, connector (byte 203).
    put_ascii(b, 129, 16, "INNOLIGHT");
    put_ascii(b, 148, 16, "T-DL8CNT-N00");
    put_ascii(b, 164, 2, "1A");
    put_ascii(b, 166, 16, "INKBU0123");
    b[203] = 0x0C;  // MPO 1x12
    return b;
  }
  Bytes page01() const {
    Bytes b{};
    b[142] = banks_code;
    b[158] = rx_flags_adv;
    b[160] = monitors_adv;
    return b;
  }
  Bytes page11(size_t bank) const {
    Bytes b{};
    b[147] = los[bank];
    for (unsigned i = 0; i < 8; ++i) put16(b, 186 + 2 * i, rx[bank][i]);
    return b;
  }
  EepromImage image() const {
    EepromImage img;
    load(img, 0x50, 0, 0, lower(), 0, 256);
    if (flat) return img;
    load(img, 0x50, 1, 0, page01(), 128, 256);
    for (size_t bank = 0; bank < rx.size(); ++bank) {
      load(img, 0x50, 0x11, static_cast<uint8_t>(bank), page11(bank), 128, 256);
    }
    return img;
  }
};

}  // namespace ocslab::probes::testimg
