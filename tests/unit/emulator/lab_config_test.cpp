#include <catch2/catch.hpp>

#include "ocslab/emulator/lab_config.h"

// This file's helpers in a namespace of its own: the unity build compiles it together with
// the other tests of its binary.
namespace lab_config_test {

using namespace ocslab;
using namespace ocslab::emu;

namespace {

EmulatorConfig parse(const std::string& text) { return parse_emulator_config(load_yaml_string(text, "lab.yaml")); }

const char* kGood = R"(switch:
  name: ocs1
  preset: mems-3d
  size: 8x8
  ack: before-settle
  listen: {tl1: 127.0.0.1:0, scpi: 5025}
nic_model: cx6dx-no-autoneg
ground_truth: gt.csv
nics:
  - name: h1-eth1
    tx_port: 1
    rx_port: 9
    tap: {name: ocs-h1, netns: h1}
  - name: h2-eth1
    tx_port: 2
    rx_port: 10
    model: ideal
    udp: {listen: 127.0.0.1:40002, peer: 127.0.0.1:41002}
    qmp: {socket: /run/ocslab/h2.qmp, netdev: d1}
)";

}  // namespace

TEST_CASE("a lab file describes the switch, its listeners and the wired NICs", "[emulator]") {
  auto cfg = parse(kGood);
  CHECK(cfg.sw.name == "ocs1");
  CHECK(cfg.sw.vendor == "CALIENT");
  CHECK(cfg.sw.ingress_ports == 8);
  CHECK(cfg.sw.switching.mean_ms() == 10);
  CHECK_FALSE(cfg.sw.ack_after_settle);
  REQUIRE(cfg.control.tl1);
  CHECK(cfg.control.tl1->port == 0);
  CHECK(cfg.control.scpi->port == 5025);
  CHECK(cfg.control.scpi->host == "127.0.0.1");
  REQUIRE(cfg.nics.size() == 2);
  CHECK(cfg.nics[0].link_preset == "cx6dx-no-autoneg");
  CHECK(cfg.nics[0].attachment.netns == "h1");
  CHECK(cfg.nics[1].link_preset == "ideal");
  CHECK(cfg.nics[1].attachment.qmp_netdev == "d1");
  CHECK(cfg.ground_truth_csv == "gt.csv");
  CHECK_THAT(cfg.describe(), Catch::Contains("h1-eth1") && Catch::Contains("tx->1") && Catch::Contains("tap ocs-h1 in netns h1"));
}

TEST_CASE("lab file errors name the line before anything starts", "[emulator]") {
  auto with = [](const std::string& from, const std::string& to) {
    std::string s = kGood;
    auto at = s.find(from);
    REQUIRE(at != std::string::npos);
    return s.replace(at, from.size(), to);
  };
  CHECK_THROWS_WITH(parse(with("preset: mems-3d", "preset: mems-2d")),
                    Catch::StartsWith("lab.yaml:3:11: unknown switch preset 'mems-2d'"));
  CHECK_THROWS_WITH(parse(with("rx_port: 10", "rx_port: 9")), Catch::StartsWith("lab.yaml:16:14: port 9 used twice (also by the NIC at line 10)"));
  CHECK_THROWS_WITH(parse(with("tx_port: 2", "tx_port: 12")), Catch::Contains("lab.yaml:15:14: h2-eth1: tx_port 12 is not an ingress port (switch is 8x8"));
  CHECK_THROWS_WITH(parse(with("rx_port: 9", "rx_port: 3")), Catch::Contains("rx_port 3 is not an egress port"));
  CHECK_THROWS_WITH(parse(with("    qmp: {socket: /run/ocslab/h2.qmp, netdev: d1}\n", "")),
                    Catch::Contains("lab.yaml:14:5: h2-eth1: a UDP (QEMU) NIC needs 'qmp"));
  CHECK_THROWS_WITH(parse(with("size: 8x8", "size: 8by8")), Catch::StartsWith("lab.yaml:4:9: size must be NxM"));
  CHECK_THROWS_WITH(parse(with("name: h2-eth1", "name: h1-eth1")), Catch::Contains("NIC name 'h1-eth1' used twice"));
  CHECK_THROWS_WITH(parse(with("model: ideal", "model: cx7")), Catch::Contains("lab.yaml:17:12: unknown NIC link preset 'cx7'"));
  CHECK_THROWS_WITH(parse(with("ack: before-settle", "ack: later")), Catch::Contains("ack must be after-settle or before-settle"));
  CHECK_THROWS_WITH(parse(with("scpi: 5025", "scpi: 5025, netconf: 127.0.0.1:5025")), Catch::Contains("lab.yaml:6:36: listen port 5025 used twice"));
  CHECK_THROWS_WITH(parse(with("tap: {name: ocs-h1, netns: h1}", "tap: {name: ocs-h1-very-long-name}")), Catch::Contains("at most 15 characters"));
  CHECK_THROWS_WITH(parse(with("    rx_port: 9\n", "    rx_port: 9\n    colour: red\n")), Catch::Contains("unknown key 'colour'"));
}

TEST_CASE("the switch size is exactly NxM and NIC delays are real delays", "[emulator]") {
  // Caught by emulator_lab_config_fuzz's properties: sscanf took trailing text and its
  // N + M overflowed int (undefined behaviour); los_ms and rapid_window_ms took negative,
  // NaN and infinite values the NIC model then set timers with.
  auto with = [](const std::string& from, const std::string& to) {
    std::string s = kGood;
    auto at = s.find(from);
    REQUIRE(at != std::string::npos);
    return s.replace(at, from.size(), to);
  };
  for (const char* bad : {"2147483647x1", "1x2147483647", "99999999999x1", "8x8x8", "8x8 ports", "8x", "x8", "-8x8",
                          "8x-8", "50000x50001", "0x8", "9223372036854775807x1", "1x9223372036854775807"}) {
    INFO(bad);
    CHECK_THROWS_WITH(parse(with("size: 8x8", std::string("size: ") + bad)),
                      Catch::StartsWith("lab.yaml:4:9: size must be NxM"));
  }
  CHECK(parse(with("size: 8x8", "size: 8X8")).sw.egress_ports == 8);
  auto big = parse("switch: {size: 50000x50000}\n").sw;
  CHECK(big.ingress_ports == 50000);
  CHECK(big.egress_ports == 50000);

  CHECK_THROWS_WITH(parse(with("model: ideal", "model: {los_ms: -1}")),
                    Catch::StartsWith("lab.yaml:17:21: a delay cannot be negative"));
  CHECK_THROWS_WITH(parse(with("model: ideal", "model: {los_ms: .nan}")), Catch::Contains("finite number"));
  CHECK_THROWS_WITH(parse(with("model: ideal", "model: {rapid_window_ms: .inf}")), Catch::Contains("finite number"));
  CHECK_THROWS_WITH(parse(with("model: ideal", "model: {rapid_window_ms: -5}")), Catch::Contains("cannot be negative"));
  auto ok = parse(with("model: ideal", "model: {preset: ideal, los_ms: 2, rapid_window_ms: 500}"));
  CHECK(ok.nics[1].link.los_ms == 2);
  CHECK(ok.nics[1].link.rapid_window_ms == 500);
}

}  // namespace lab_config_test

namespace lab_config_test {

TEST_CASE("link_gbps caps every lit circuit; a bad rate names its line", "[emulator][link-rate]") {
  CHECK(parse(kGood).link_gbps == 0);  // absent: no cap
  const EmulatorConfig capped = parse(std::string("link_gbps: 2.5\n") + kGood);
  CHECK(capped.link_gbps == 2.5);
  CHECK_THAT(capped.describe(), Catch::Contains("every lit circuit capped at 2.5 Gbit/s"));
  CHECK(parse(std::string("link_gbps: 0\n") + kGood).link_gbps == 0);
  for (const char* bad : {"-1", "0.0001", "1001", ".nan", "fast", "[1]"}) {
    INFO(bad);
    CHECK_THROWS_WITH(parse(std::string("link_gbps: ") + bad + "\n" + kGood),
                      Catch::StartsWith("lab.yaml:1:12: link_gbps: expected a link rate in Gbit/s, 0.001..1000 (0: "
                                        "no cap)"));
  }
}

}  // namespace lab_config_test
