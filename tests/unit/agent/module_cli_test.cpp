// `ocslab-agent module IF [--json]` over a reader that replays the spec-built module images of
// the probe tests (tests/unit/probes/module_images.h: SFF-8636, SFF-8472, CMIS byte layouts),
// and its refusals for interfaces without a module, each with its own exit code. The last case
// reads the real `lo` through the real ethtool reader.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <cerrno>
#include <map>
#include <sstream>

#include "../probes/module_images.h"
#include "ocslab/agent/cli.h"
#include "ocslab/agent/module_cli.h"

using namespace ocslab;
using namespace ocslab::probes;
using namespace ocslab::probes::testimg;
using Catch::Matchers::Contains;

namespace module_cli_test {

// Images per interface; others answer with the errno given for them (ENODEV, EOPNOTSUPP, EIO),
// as the ethtool reader does.
class ImageReader : public EepromReader {
 public:
  std::map<std::string, EepromImage> images;
  std::map<std::string, int> errors;
  EepromReadResult read(const std::string& ifname, const EepromRead& r) override {
    if (auto it = images.find(ifname); it != images.end()) {
      if (!it->second.has(r.i2c_address, r.page, r.bank, r.offset, r.length)) {
        return {std::nullopt, ifname + ": " + to_string(r) + ": Input/output error", EIO};
      }
      return {it->second.get(r.i2c_address, r.page, r.bank, r.offset, r.length), {}, 0};
    }
    int e = errors.count(ifname) ? errors[ifname] : ENODEV;
    return {std::nullopt, ifname + ": " + std::strerror(e), e};
  }
  std::string method() const override { return "replay"; }
};

struct Out {
  int rc = -1;
  std::string out, err;
};

Out run(ImageReader& reader, std::vector<std::string> args) {
  std::ostringstream o, e;
  agent::ModuleSource src;
  src.reader = &reader;
  src.driver_of = [](const std::string& ifname) {
    return ifname == "veth0" ? "veth" : ifname == "lo" ? "" : "mlx5_core";
  };
  Out r;
  r.rc = agent::run_module_cli(args, o, e, src);
  r.out = o.str();
  r.err = e.str();
  return r;
}

}  // namespace module_cli_test

using module_cli_test::ImageReader;
using module_cli_test::run;

TEST_CASE("module: a QSFP28 (SFF-8636): identity, voltage, temperature, 4 lanes of Rx/Tx power, latched LOS",
          "[agent][module]") {
  Qsfp q;
  q.rx = {10000, 5012, 0, 1};
  q.tx = {12589, 10000, 7943, 10000};
  q.temp_raw = 0x2380;  // 35.5 C (1/256 C)
  q.los_byte = 0x04;    // Rx LOS lane 3
  ImageReader reader;
  reader.images["ens1f0"] = q.image();
  auto r = run(reader, {"ens1f0"});
  INFO(r.out << r.err);
  REQUIRE(r.rc == 0);
  CHECK_THAT(r.out, Contains("Identifier                        : 0x11 (QSFP28)"));
  CHECK_THAT(r.out, Contains("Management interface              : SFF-8636"));
  CHECK_THAT(r.out, Contains("Connector                         : 0x0c (MPO 1x12)"));
  CHECK_THAT(r.out, Contains("Vendor name                       : FINISAR CORP\n"));
  CHECK_THAT(r.out, Contains("Vendor PN                         : FTLC1151RDPL\n"));
  CHECK_THAT(r.out, Contains("Vendor rev                        : A0\n"));
  CHECK_THAT(r.out, Contains("Vendor SN                         : X7A0Q2B\n"));
  CHECK_THAT(r.out, Contains("Module temperature                : 35.50 degrees C"));
  CHECK_THAT(r.out, Contains("Module voltage                    : 3.2920 V"));
  CHECK_THAT(r.out, Contains("Rx power lane 1                   : 1.0000 mW / 0.00 dBm"));
  CHECK_THAT(r.out, Contains("Rx power lane 2                   : 0.5012 mW / -3.00 dBm"));
  CHECK_THAT(r.out, Contains("Rx power lane 3                   : 0.0000 mW / -inf dBm"));
  CHECK_THAT(r.out, Contains("Tx power lane 1                   : 1.2589 mW / 1.00 dBm"));
  CHECK_THAT(r.out, Contains("Rx LOS lane 3 (latched)           : yes"));
  CHECK_THAT(r.out, Contains("Rx LOS lane 1 (latched)           : no"));

  r = run(reader, {"ens1f0", "--json"});
  REQUIRE(r.rc == 0);
  auto j = nlohmann::json::parse(r.out);
  CHECK(j["interface"] == "ens1f0");
  CHECK(j["identifier"]["code"] == 0x11);
  CHECK(j["identifier"]["name"] == "QSFP28");
  CHECK(j["management"] == "SFF-8636");
  CHECK(j["vendor"] == "FINISAR CORP");
  CHECK(j["part"] == "FTLC1151RDPL");
  CHECK(j["serial"] == "X7A0Q2B");
  CHECK(j["temperature_c"].get<double>() == Approx(35.5));
  CHECK(j["voltage_v"].get<double>() == Approx(3.292));
  REQUIRE(j["ddm"]["rx"].size() == 4);
  CHECK(j["ddm"]["rx"][0]["mw"].get<double>() == Approx(1.0));
  CHECK(j["ddm"]["rx"][1]["dbm"].get<double>() == Approx(-3.0).margin(0.01));
  CHECK(j["ddm"]["rx"][2]["dbm"].is_null());  // no light: -inf has no JSON number
  CHECK(j["ddm"]["rx"][2]["los"] == true);
  CHECK(j["ddm"]["los_latched"] == true);
  CHECK(j["ddm"]["tx"].size() == 4);
}

TEST_CASE("module: an SFP (SFF-8472) and a QSFP-DD (CMIS) through the same decoders", "[agent][module]") {
  Sfp s;
  s.rx_ad = 5012;
  s.tx_ad = 10000;
  s.temp_ad = 0x1900;  // 25 C
  Cmis c;
  c.rx = {std::array<uint16_t, 8>{10000, 10000, 5012, 5012, 0, 1, 10000, 10000}};
  c.los = {0x10};  // lane 5
  ImageReader reader;
  reader.images["sfp0"] = s.image();
  reader.images["dd0"] = c.image();

  auto r = run(reader, {"sfp0"});
  INFO(r.out << r.err);
  REQUIRE(r.rc == 0);
  CHECK_THAT(r.out, Contains("0x03 (SFP/SFP+/SFP28)") && Contains("0x07 (LC)") && Contains(": Mellanox\n") &&
                        Contains(": MMA2P00-AS\n") && Contains(": MT2107FT01234\n") && Contains(": SFF-8472\n"));
  CHECK_THAT(r.out, Contains("Module voltage                    : 3.2800 V"));
  CHECK_THAT(r.out, Contains("Module temperature                : 25.00 degrees C"));
  CHECK_THAT(r.out, Contains("Rx power lane 1                   : 0.5012 mW / -3.00 dBm"));
  CHECK_THAT(r.out, Contains("Tx power lane 1                   : 1.0000 mW / 0.00 dBm"));

  r = run(reader, {"dd0", "--json"});
  INFO(r.out << r.err);
  REQUIRE(r.rc == 0);
  auto j = nlohmann::json::parse(r.out);
  CHECK(j["identifier"]["name"] == "QSFP-DD");
  CHECK(j["management"] == "CMIS");
  CHECK(j["vendor"] == "INNOLIGHT");
  CHECK(j["part"] == "T-DL8CNT-N00");
  CHECK(j["revision"] == "1A");
  CHECK(j["serial"] == "INKBU0123");
  CHECK(j["connector"]["name"] == "MPO 1x12");
  CHECK(j["voltage_v"].get<double>() == Approx(3.3));
  REQUIRE(j["ddm"]["rx"].size() == 8);
  CHECK(j["ddm"]["rx"][2]["mw"].get<double>() == Approx(0.5012));
  CHECK(j["ddm"]["rx"][4]["los"] == true);
  CHECK(j["ddm"]["rx"][3]["los"] == false);

  // A flat-memory CMIS module has no lane monitors: identity still, DDM unavailable with the reason.
  Cmis flat;
  flat.flat = true;
  reader.images["flat0"] = flat.image();
  r = run(reader, {"flat0"});
  REQUIRE(r.rc == 0);
  CHECK_THAT(r.out, Contains(": INNOLIGHT\n") && Contains("DDM") && Contains("flat-memory CMIS module"));
}

TEST_CASE("module: no interface (2), no module EEPROM access (3), no module plugged in (8); --json objects",
          "[agent][module]") {
  ImageReader reader;
  reader.errors["veth0"] = EOPNOTSUPP;
  reader.errors["ens2f0"] = EIO;
  auto r = run(reader, {"nosuch0"});
  CHECK(r.rc == kExitInput);
  CHECK_THAT(r.err, Contains("nosuch0: no such interface"));
  r = run(reader, {"veth0"});
  CHECK(r.rc == kExitRefused);
  CHECK_THAT(r.err, Contains("veth0: module EEPROM not supported by this NIC (driver veth)"));
  r = run(reader, {"ens2f0"});
  CHECK(r.rc == kExitAbsent);
  CHECK_THAT(r.err, Contains("ens2f0: no module plugged in (driver mlx5_core: ens2f0: Input/output error)"));

  r = run(reader, {"veth0", "--json"});
  CHECK(r.rc == kExitRefused);
  auto j = nlohmann::json::parse(r.out);
  CHECK(j["interface"] == "veth0");
  CHECK(j["error"] == "not_supported");
  CHECK(j["driver"] == "veth");
  CHECK_THAT(j["message"].get<std::string>(), Contains("not supported by this NIC"));
  r = run(reader, {"ens2f0", "--json"});
  CHECK(r.rc == kExitAbsent);
  CHECK(nlohmann::json::parse(r.out)["error"] == "no_module");
  r = run(reader, {"nosuch0", "--json"});
  CHECK(nlohmann::json::parse(r.out)["error"] == "no_interface");

  r = run(reader, {});
  CHECK(r.rc == kExitUsage);
  CHECK_THAT(r.err, Contains("missing IF"));
  r = run(reader, {"a", "b"});
  CHECK(r.rc == kExitUsage);
}

TEST_CASE("module: the real lo through the real ethtool reader is refused as a NIC without module access",
          "[agent][module]") {
  std::ostringstream o, e;
  int rc = agent::run_cli({"module", "lo", "--json"}, o, e);
  INFO(o.str() << e.str());
  CHECK(rc == kExitRefused);
  auto j = nlohmann::json::parse(o.str());
  CHECK(j["error"] == "not_supported");
  CHECK_THAT(e.str(), Contains("lo: module EEPROM not supported by this NIC"));
  std::ostringstream ho, he;
  CHECK(agent::run_cli({"--help"}, ho, he) == 0);
  CHECK_THAT(ho.str(), Contains("module") && Contains("like ethtool -m"));
}
