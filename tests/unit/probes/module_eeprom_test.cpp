// Decoder tests over images laid out from the SFF-8636, SFF-8472 and CMIS memory maps.
#include "ocslab/probes/module_eeprom.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <limits>

#include "module_images.h"
#include "ocslab/common/error.h"

using namespace ocslab::probes;
using namespace ocslab::probes::testimg;

TEST_CASE("identifier byte selects the management interface") {
  CHECK(module_type_from_identifier(0x03) == ModuleType::kSff8472);
  CHECK(module_type_from_identifier(0x0C) == ModuleType::kSff8636);
  CHECK(module_type_from_identifier(0x0D) == ModuleType::kSff8636);
  CHECK(module_type_from_identifier(0x11) == ModuleType::kSff8636);
  CHECK(module_type_from_identifier(0x18) == ModuleType::kCmis);
  CHECK(module_type_from_identifier(0x19) == ModuleType::kCmis);
  CHECK(module_type_from_identifier(0x1E) == ModuleType::kCmis);
  CHECK_THROWS_AS(module_type_from_identifier(0x07), ocslab::Error);
  CHECK_THROWS_WITH(module_type_from_identifier(0x07), Catch::Contains("unknown identifier 0x07"));
  CHECK_THROWS_WITH(module_type_from_identifier(0x00), Catch::Contains("unknown identifier 0x00"));
  CHECK_THROWS_WITH(module_type_from_identifier(0xff), Catch::Contains("unknown identifier 0xff"));
  CHECK(to_string(ModuleType::kCmis) == "CMIS");
}

TEST_CASE("0.1 uW units convert to mW and dBm; zero is no light") {
  CHECK(tenth_uw_to_mw(10000) == Approx(1.0));
  CHECK(mw_to_dbm(1.0) == Approx(0.0).margin(1e-12));
  CHECK(mw_to_dbm(tenth_uw_to_mw(1)) == Approx(-40.0));
  CHECK(mw_to_dbm(tenth_uw_to_mw(65535)) == Approx(8.1648).epsilon(1e-4));
  CHECK(std::isinf(mw_to_dbm(0)));
  CHECK(mw_to_dbm(0) < 0);
  CHECK(mw_to_dbm(0) == kNoLightDbm);
}

TEST_CASE("SFF-8636: four Rx and Tx lanes, temperature, latched Rx LOS from byte 3 bits 0..3") {
  Qsfp q;
  q.rx = {10000, 5012, 0, 65535};  // 0 dBm, -3 dBm, dark, 8.16 dBm
  q.tx = {7943, 7000, 6000, 1};
  q.temp_raw = 0x1A80;  // 26.5 C
  q.los_byte = 0xF4;    // Tx LOS on all lanes (bits 7..4) must not leak into Rx; Rx LOS lane 3
  for (uint8_t id : {0x0C, 0x0D, 0x11}) {
    q.id = id;
    RxPowerReading r = decode_sff8636(q.image());
    CHECK(r.type == ModuleType::kSff8636);
    CHECK(r.format == "SFF-8636");
    CHECK(r.los_latched);
    REQUIRE(r.rx.size() == 4);
    REQUIRE(r.tx.size() == 4);
    CHECK(r.temperature_c == Approx(26.5));
    for (int i = 0; i < 4; ++i) CHECK(r.rx[i].lane == i + 1);
    CHECK(r.rx[0].mw == Approx(1.0));
    CHECK(r.rx[0].dbm == Approx(0.0).margin(1e-9));
    CHECK(r.rx[1].dbm == Approx(-3.0).margin(0.001));
    CHECK(r.rx[2].raw == 0);
    CHECK(r.rx[2].mw == 0);
    CHECK(r.rx[2].dbm == kNoLightDbm);
    CHECK(r.rx[3].mw == Approx(6.5535));
    CHECK(r.rx[0].los == false);
    CHECK(r.rx[1].los == false);
    CHECK(r.rx[2].los == true);
    CHECK(r.rx[3].los == false);
    CHECK(r.tx[0].dbm == Approx(-1.0).margin(0.001));
    CHECK(r.tx[3].dbm == Approx(-40.0));
    CHECK_FALSE(r.tx[0].los.has_value());
  }
  q.los_byte = 0x0F;
  RxPowerReading all = decode_sff8636(q.image());
  for (const auto& lane : all.rx) CHECK(lane.los == true);
  q.temp_raw = -0x0280;  // -2.5 C
  CHECK(decode_sff8636(q.image()).temperature_c == Approx(-2.5));
}

TEST_CASE("SFF-8636: truncated image and wrong family are errors naming the problem") {
  Qsfp q;
  auto full = q.lower();
  EepromImage img;
  load(img, 0x50, 0, 0, full, 0, 41);  // stops before Tx power
  CHECK_THROWS_WITH(decode_sff8636(img), Catch::Contains("image too short") && Catch::Contains("bytes 22..57"));
  CHECK_THROWS_WITH(decode_sff8636(EepromImage{}), Catch::Contains("bytes 0..0 missing"));
  CHECK_THROWS_WITH(decode_sff8636(Sfp{}.image()), Catch::Contains("SFF-8472 module, not SFF-8636"));
  Qsfp bad;
  bad.id = 0x42;
  CHECK_THROWS_WITH(decode_sff8636(bad.image()), Catch::Contains("unknown identifier 0x42"));
  CHECK_THROWS_WITH(decode_rx_power(bad.image()), Catch::Contains("unknown identifier 0x42"));
}

TEST_CASE("SFF-8472 internal calibration: A2h 104..105 in 0.1 uW, soft RX_LOS at A2h 110 bit 1") {
  Sfp s;
  s.rx_ad = 8000;  // 0.8 mW
  s.tx_ad = 5000;
  s.temp_ad = 0x2D00;  // 45 C
  s.status = 0x02;
  s.rx_cal = {1, 1, 1, 1, 1};  // present but must be ignored: internally calibrated
  RxPowerReading r = decode_sff8472(s.image());
  CHECK(r.format == "SFF-8472 internal calibration");
  CHECK_FALSE(r.los_latched);
  REQUIRE(r.rx.size() == 1);
  CHECK(r.rx[0].lane == 1);
  CHECK(r.rx[0].mw == Approx(0.8));
  CHECK(r.rx[0].dbm == Approx(-0.9691).epsilon(1e-4));
  CHECK(r.rx[0].los == true);
  CHECK(r.tx[0].mw == Approx(0.5));
  CHECK(r.temperature_c == Approx(45.0));

  s.status = 0xFD;  // every bit but Rx_LOS
  CHECK(decode_sff8472(s.image()).rx[0].los == false);
  s.options = 0x00;  // no soft RX_LOS: no LOS reported at all
  CHECK_FALSE(decode_sff8472(s.image()).rx[0].los.has_value());

  s.rx_ad = 0;
  RxPowerReading dark = decode_sff8472(s.image());
  CHECK(dark.rx[0].mw == 0);
  CHECK(dark.rx[0].dbm == kNoLightDbm);
}

TEST_CASE("SFF-8472 external calibration: Rx_PWR(4..0) polynomial, slope/offset for Tx power and temperature") {
  Sfp s;
  s.ddm_type = 0x58;  // DDM implemented, externally calibrated, average power
  s.rx_ad = 2000;
  // 1e-12*AD^4 + 0*AD^3 + 1e-4*AD^2 + 2*AD - 50 = 16 + 400 + 4000 - 50 = 4366 (0.1 uW)
  s.rx_cal = {1e-12f, 0.0f, 1e-4f, 2.0f, -50.0f};
  s.tx_ad = 3000;
  s.tx_slope = 0x0200;  // 2.0
  s.tx_offset = -100;   // -> 5900
  s.temp_ad = 0x1900;   // 25 C raw
  s.t_slope = 0x0180;   // 1.5
  s.t_offset = 0x0200;  // +2 C -> 39.5 C
  RxPowerReading r = decode_sff8472(s.image());
  CHECK(r.format == "SFF-8472 external calibration");
  CHECK(r.rx[0].raw == Approx(4366).epsilon(1e-5));
  CHECK(r.rx[0].mw == Approx(0.4366).epsilon(1e-5));
  CHECK(r.rx[0].dbm == Approx(10 * std::log10(0.4366)).epsilon(1e-5));
  CHECK(r.tx[0].raw == Approx(5900));
  CHECK(r.temperature_c == Approx(39.5));

  s.rx_cal = {0, 0, 0, 1, -5000};  // fit below zero near darkness: clamped, reported as no light
  s.rx_ad = 10;
  RxPowerReading dark = decode_sff8472(s.image());
  CHECK(dark.rx[0].mw == 0);
  CHECK(dark.rx[0].dbm == kNoLightDbm);

  s.rx_cal = {0, 0, 0, std::numeric_limits<float>::quiet_NaN(), 0};
  CHECK_THROWS_WITH(decode_sff8472(s.image()), Catch::Contains("external calibration"));
  // Beyond the 16-bit monitor range the constants are garbage, not a 600 mW signal.
  s.rx_cal = {0, 0, 0, 100, 0};
  s.rx_ad = 60000;
  CHECK_THROWS_WITH(decode_sff8472(s.image()), Catch::Contains("Rx power AD 60000 gives 6000000, outside 0..65535"));
  s.rx_cal = {0, 0, 0, 1, 0};
  s.tx_slope = 0xFF00;
  s.tx_ad = 60000;
  CHECK_THROWS_WITH(decode_sff8472(s.image()), Catch::Contains("Tx power AD 60000"));
}

TEST_CASE("SFF-8472: no DDM, truncated A2h and missing calibration are errors") {
  Sfp s;
  s.ddm_type = 0x00;
  CHECK_THROWS_WITH(decode_sff8472(s.image()), Catch::Contains("no digital diagnostics"));
  Sfp ok;
  EepromImage img;
  load(img, 0x50, 0, 0, ok.a0(), 0, 128);
  load(img, 0x51, 0, 0, ok.a2(), 96, 105);  // Rx power cut in half
  CHECK_THROWS_WITH(decode_sff8472(img), Catch::Contains("i2c 0x51") && Catch::Contains("96..110"));
  Sfp ext;
  ext.ddm_type = 0x58;
  EepromImage no_cal;
  load(no_cal, 0x50, 0, 0, ext.a0(), 0, 128);
  load(no_cal, 0x51, 0, 0, ext.a2(), 96, 111);
  CHECK_THROWS_WITH(decode_sff8472(no_cal), Catch::Contains("56..91"));
}

TEST_CASE("CMIS: page 11h Rx power lanes 1..8 and latched Rx LOS byte 147, per bank") {
  Cmis c;
  c.temp_raw = 0x2280;  // 34.5 C
  c.rx[0] = {10000, 1, 0, 20000, 5012, 7943, 100, 65535};
  c.los[0] = 0x84;  // lanes 3 and 8
  for (uint8_t id : {0x18, 0x19, 0x1E}) {
    c.id = id;
    RxPowerReading r = decode_cmis(c.image());
    CHECK(r.type == ModuleType::kCmis);
    CHECK(r.format == "CMIS page 11h");
    CHECK(r.los_latched);
    REQUIRE(r.rx.size() == 8);
    CHECK(r.temperature_c == Approx(34.5));
    CHECK(r.rx[0].dbm == Approx(0.0).margin(1e-9));
    CHECK(r.rx[1].dbm == Approx(-40.0));
    CHECK(r.rx[2].dbm == kNoLightDbm);
    CHECK(r.rx[3].dbm == Approx(3.0103).epsilon(1e-4));
    CHECK(r.rx[6].mw == Approx(0.01));
    CHECK(r.rx[7].mw == Approx(6.5535));
    for (int i = 0; i < 8; ++i) {
      CHECK(r.rx[i].lane == i + 1);
      CHECK(r.rx[i].los == (i == 2 || i == 7));
    }
    CHECK(r.tx.empty());
  }

  SECTION("two banks: lanes 9..16 come from bank 1") {
    c.banks_code = 1;
    c.rx.push_back({1000, 2000, 3000, 4000, 5000, 6000, 7000, 8000});
    c.los.push_back(0x01);
    EepromImage img = c.image();
    CHECK(cmis_banks_supported(img) == 2);
    RxPowerReading r = decode_cmis(img, 2);
    REQUIRE(r.rx.size() == 16);
    CHECK(r.rx[8].lane == 9);
    CHECK(r.rx[8].mw == Approx(0.1));
    CHECK(r.rx[8].los == true);
    CHECK(r.rx[15].lane == 16);
    CHECK(r.rx[15].mw == Approx(0.8));
    CHECK(r.rx[15].los == false);
    CHECK(r.rx[2].los == true);  // bank 0 unchanged
    CHECK_THROWS_WITH(decode_cmis(img, 4), Catch::Contains("page 11h bank 2"));
  }
  SECTION("Rx LOS not advertised: no LOS per lane") {
    c.rx_flags_adv = 0x00;
    RxPowerReading r = decode_cmis(c.image());
    for (const auto& lane : r.rx) CHECK_FALSE(lane.los.has_value());
  }
}

TEST_CASE("CMIS: bank advertisement, flat memory and absent monitors") {
  Cmis c;
  CHECK(cmis_banks_supported(c.image()) == 1);
  c.banks_code = 2;
  CHECK(cmis_banks_supported(c.image()) == 4);
  c.banks_code = 3;
  CHECK_THROWS_WITH(cmis_banks_supported(c.image()), Catch::Contains("reserved"));

  Cmis flat;
  flat.flat = true;
  CHECK(cmis_flat_memory(flat.image()));
  CHECK_THROWS_WITH(decode_cmis(flat.image()), Catch::Contains("flat memory"));
  Cmis no_mon;
  no_mon.monitors_adv = 0x03;  // Tx monitors only
  CHECK_THROWS_WITH(decode_cmis(no_mon.image()), Catch::Contains("does not implement Rx power monitors"));
  CHECK_THROWS_WITH(decode_cmis(Cmis{}.image(), 0), Catch::Contains("bank count 0"));
  CHECK_THROWS_WITH(decode_cmis(Qsfp{}.image()), Catch::Contains("not CMIS"));
}

TEST_CASE("lower memory is shared by every page; upper pages and banks are separate") {
  EepromImage img;
  std::array<uint8_t, 2> v{0xAB, 0xCD};
  img.set(0x50, 0x11, 3, 10, v);
  CHECK(img.byte(0x50, 0, 0, 10) == 0xAB);
  CHECK(img.byte(0x50, 0x01, 0, 11) == 0xCD);
  img.set(0x50, 0x11, 1, 200, v);
  CHECK(img.has(0x50, 0x11, 1, 200, 2));
  CHECK_FALSE(img.has(0x50, 0x11, 0, 200, 1));
  CHECK_FALSE(img.has(0x51, 0, 0, 10, 1));
  CHECK_FALSE(img.has(0x50, 0x11, 1, 255, 2));
  CHECK_THROWS_WITH(img.set(0x50, 0, 0, 255, v), Catch::Contains("past the 256-byte"));
}

namespace {

// A sparse image holding only the bytes a probe would read: identify read + plan.
EepromImage planned_subset(const EepromImage& full, ModuleType type, unsigned banks) {
  EepromImage out;
  ReadPlan plan = read_plan(type, banks);
  std::vector<EepromRead> reads{kIdentifyRead};
  reads.insert(reads.end(), plan.once.begin(), plan.once.end());
  reads.insert(reads.end(), plan.each_poll.begin(), plan.each_poll.end());
  for (const auto& r : reads) {
    out.set(r.i2c_address, r.page, r.bank, r.offset, full.get(r.i2c_address, r.page, r.bank, r.offset, r.length));
  }
  return out;
}

void check_reads_legal(const ReadPlan& plan) {
  std::vector<EepromRead> reads{kIdentifyRead};
  reads.insert(reads.end(), plan.once.begin(), plan.once.end());
  reads.insert(reads.end(), plan.each_poll.begin(), plan.each_poll.end());
  for (const auto& r : reads) {
    INFO(to_string(r));
    CHECK(r.length >= 1);
    CHECK(r.length <= 128);
    if (r.offset < 128) {
      CHECK(r.offset + r.length <= 128);
      CHECK(r.page == 0);
      CHECK(r.bank == 0);
    } else {
      CHECK(r.offset + r.length <= 256);
    }
    CHECK((r.i2c_address == 0x50 || r.i2c_address == 0x51));
  }
}

}  // namespace

TEST_CASE("read plans: legal ethtool reads, and exactly enough for the decoders") {
  for (auto type : {ModuleType::kSff8636, ModuleType::kSff8472, ModuleType::kCmis}) {
    check_reads_legal(read_plan(type));
  }
  check_reads_legal(read_plan(ModuleType::kCmis, 4));
  CHECK(read_plan(ModuleType::kSff8636).once.empty());
  CHECK(read_plan(ModuleType::kSff8636).each_poll.size() == 2);
  CHECK(read_plan(ModuleType::kCmis, 2).each_poll.size() == 5);
  CHECK_THROWS_WITH(read_plan(ModuleType::kCmis, 5), Catch::Contains("bank count 5"));

  // SFF-8636 must not read bytes 4..21 (latched Tx fault and alarm flags).
  for (const auto& r : read_plan(ModuleType::kSff8636).each_poll) {
    CHECK((r.offset + r.length <= 4 || r.offset >= 22));
  }

  Qsfp q;
  q.rx = {1, 2, 3, 4};
  q.los_byte = 0x02;
  RxPowerReading a = decode_sff8636(planned_subset(q.image(), ModuleType::kSff8636, 1));
  CHECK(a.rx[3].raw == 4);
  CHECK(a.rx[1].los == true);

  Sfp s;
  s.ddm_type = 0x58;
  s.rx_ad = 100;
  s.rx_cal = {0, 0, 0, 2, 0};
  CHECK(decode_sff8472(planned_subset(s.image(), ModuleType::kSff8472, 1)).rx[0].raw == Approx(200));

  Cmis c;
  c.banks_code = 2;
  c.rx.assign(4, std::array<uint16_t, 8>{5, 5, 5, 5, 5, 5, 5, 9});
  c.los.assign(4, 0x80);
  RxPowerReading m = decode_cmis(planned_subset(c.image(), ModuleType::kCmis, 4), 4);
  REQUIRE(m.rx.size() == 32);
  CHECK(m.rx[31].raw == 9);
  CHECK(m.rx[31].los == true);
}
