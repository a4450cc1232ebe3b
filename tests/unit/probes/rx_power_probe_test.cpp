// The Rx power probe driven by an EEPROM reader that replays specification-built module images
// (no transceiver exists on this machine), and the real ethtool reader against interfaces
// without a module.
#include "ocslab/probes/rx_power_probe.h"
#include "ocslab/testing/sample_collector.h"

#include <catch2/catch.hpp>
#include <chrono>
#include <map>
#include <mutex>
#include <thread>

#include "module_images.h"
#include "ocslab/common/clock.h"
#include "ocslab/common/error.h"
#include "ocslab/probes/eeprom_reader.h"

using namespace ocslab;
using namespace ocslab::probes;
using namespace ocslab::probes::testimg;
using namespace std::chrono_literals;

namespace {

// Replays images per interface; an interface without an image answers like a NIC without a
// module. Images can be swapped while the probe runs (light off, module pulled).
class ReplayReader : public EepromReader {
 public:
  void set(const std::string& ifname, EepromImage img) {
    std::lock_guard lk(mu_);
    images_[ifname] = std::move(img);
  }
  void remove(const std::string& ifname) {
    std::lock_guard lk(mu_);
    images_.erase(ifname);
  }
  EepromReadResult read(const std::string& ifname, const EepromRead& r) override {
    std::lock_guard lk(mu_);
    reads_.push_back(r);
    auto it = images_.find(ifname);
    if (it == images_.end()) return {std::nullopt, "no module / not supported on " + ifname};
    if (!it->second.has(r.i2c_address, r.page, r.bank, r.offset, r.length)) {
      return {std::nullopt, ifname + ": " + to_string(r) + ": Input/output error"};
    }
    return {it->second.get(r.i2c_address, r.page, r.bank, r.offset, r.length), {}};
  }
  std::string method() const override { return "replay"; }
  std::vector<EepromRead> reads() {
    std::lock_guard lk(mu_);
    return reads_;
  }

 private:
  std::mutex mu_;
  std::map<std::string, EepromImage> images_;
  std::vector<EepromRead> reads_;
};

using Collector = ocslab::testing::SampleCollector;

const Sample* find(const std::vector<Sample>& v, const std::string& subject, const std::string& signal) {
  for (const auto& s : v) {
    if (s.subject == subject && s.signal == signal) return &s;
  }
  return nullptr;
}

Qsfp lit_qsfp() {
  Qsfp q;
  q.rx = {10000, 5012, 0, 1};
  q.los_byte = 0x04;
  return q;
}

}  // namespace

TEST_CASE("rx_power probe emits dBm, mW and LOS per lane with both clocks") {
  auto reader = std::make_shared<ReplayReader>();
  reader->set("qsfp0", lit_qsfp().image());
  Sfp sfp;
  sfp.rx_ad = 2512;  // -6 dBm
  reader->set("sfp0", sfp.image());
  Cmis cmis;
  cmis.rx[0] = {10000, 10000, 10000, 10000, 10000, 10000, 10000, 0};
  cmis.los[0] = 0x80;
  reader->set("dd0", cmis.image());

  RxPowerProbe probe({{"qsfp0", "sfp0", "dd0"}, 10ms, "hostA"}, reader);
  CHECK(probe.name() == "rx_power");
  Collector c;
  int64_t before = realtime_ns();
  ProbeStatus st = probe.start(c.sink());
  REQUIRE(st.available);
  CHECK(st.reason.empty());
  CHECK(st.method == "replay (qsfp0 SFF-8636; sfp0 SFF-8472; dd0 CMIS)");
  // Several polls: the first (taken in start) plus at least two from the thread.
  REQUIRE(c.wait_for_sample([](const Sample&) { return true; }));
  c.wait([](const std::vector<Sample>& v) { return v.size() >= size_t{3} * (12 + 3 + 24); }, 2s);
  probe.stop();
  auto samples = c.samples();
  // 4 lanes x 3 + 1 lane x 3 + 8 lanes x 3 signals per poll.
  CHECK(samples.size() >= size_t{2} * (12 + 3 + 24));

  const Sample* s = find(samples, "qsfp0/lane1", "rx_power_dbm");
  REQUIRE(s);
  CHECK(s->value == Approx(0.0).margin(1e-9));
  CHECK(s->unit == "dBm");
  CHECK(s->source == "rx_power");
  CHECK(s->host == "hostA");
  CHECK(s->t_ns >= before);
  CHECK(s->mono_ns > 0);
  s = find(samples, "qsfp0/lane2", "rx_power_mw");
  REQUIRE(s);
  CHECK(s->value == Approx(0.5012));
  CHECK(s->unit == "mW");
  s = find(samples, "qsfp0/lane3", "rx_power_dbm");
  REQUIRE(s);
  CHECK(s->value == kSampleDbmFloor);  // no light: documented floor, exact 0 in mW
  CHECK(find(samples, "qsfp0/lane3", "rx_power_mw")->value == 0);
  s = find(samples, "qsfp0/lane3", "los");
  REQUIRE(s);
  CHECK(s->value == 1);
  CHECK(s->unit == "bool");
  CHECK(find(samples, "qsfp0/lane1", "los")->value == 0);
  CHECK(find(samples, "sfp0/lane1", "rx_power_dbm")->value == Approx(-6.0).margin(0.001));
  CHECK(find(samples, "sfp0/lane1", "los")->value == 0);
  CHECK(find(samples, "dd0/lane8", "los")->value == 1);
  CHECK(find(samples, "dd0/lane8", "rx_power_dbm")->value == kSampleDbmFloor);
  CHECK(find(samples, "dd0/lane7", "rx_power_dbm")->value == Approx(0.0).margin(1e-9));
  CHECK_FALSE(find(samples, "dd0/lane9", "rx_power_dbm"));

  // Timestamps move forward poll after poll on the monotonic clock.
  int64_t last = 0;
  for (const auto& x : samples) {
    if (x.subject != "qsfp0/lane1" || x.signal != "rx_power_mw") continue;
    CHECK(x.mono_ns > last);
    last = x.mono_ns;
  }
  // Nothing is emitted after stop() returned.
  size_t n = c.samples().size();
  // load-safe: time for a sample that must not come; a slow machine can only hide a fault, not fail the case.
  std::this_thread::sleep_for(30ms);  // kept: time for a sample that must not come
  CHECK(c.samples().size() == n);
  probe.stop();  // idempotent
}

TEST_CASE("rx_power probe reads only the planned bytes, static ones once") {
  auto reader = std::make_shared<ReplayReader>();
  reader->set("sfp0", Sfp{}.image());
  RxPowerProbe probe({{"sfp0"}, 5ms, "h"}, reader);
  Collector c;
  REQUIRE(probe.start(c.sink()).available);
  // load-bound: a run of polls counted below (at least 3 of 5 ms in 50 ms): a starved probe thread polls fewer.
  std::this_thread::sleep_for(50ms);  // kept: a run of polls whose reads are counted below
  probe.stop();
  ReadPlan plan = read_plan(ModuleType::kSff8472);
  size_t identify = 0, once = 0, polls = 0;
  for (const auto& r : reader->reads()) {
    if (r == kIdentifyRead) {
      ++identify;
    } else if (r == plan.once[0] || r == plan.once[1]) {
      ++once;
    } else {
      CHECK(r == plan.each_poll[0]);
      ++polls;
    }
  }
  CHECK(identify == 1);
  CHECK(once == 2);
  CHECK(polls >= 3);
}

TEST_CASE("rx_power probe follows light going off and a module pulled and plugged back") {
  auto reader = std::make_shared<ReplayReader>();
  reader->set("qsfp0", lit_qsfp().image());
  RxPowerProbe probe({{"qsfp0"}, 5ms, "h"}, reader);
  Collector c;
  REQUIRE(probe.start(c.sink()).available);

  Qsfp dark = lit_qsfp();
  dark.rx = {0, 0, 0, 0};
  dark.los_byte = 0x0F;
  reader->set("qsfp0", dark.image());
  CHECK(c.wait_for_sample(
      [](const Sample& s) { return s.subject == "qsfp0/lane1" && s.signal == "rx_power_mw" && s.value == 0; }));
  CHECK(c.wait_for_sample(
      [](const Sample& s) { return s.subject == "qsfp0/lane1" && s.signal == "los" && s.value == 1; }));

  reader->remove("qsfp0");
  CHECK(c.wait_for_sample([](const Sample& s) {
    return s.subject == "qsfp0" && s.signal == "module_readable" && s.value == 0 && s.unit == "bool";
  }));
  Cmis replacement;  // a different module type comes back in the cage
  replacement.rx[0].fill(10000);
  reader->set("qsfp0", replacement.image());
  CHECK(c.wait_for_sample(
      [](const Sample& s) { return s.subject == "qsfp0" && s.signal == "module_readable" && s.value == 1; }));
  CHECK(c.wait_for_sample([](const Sample& s) { return s.subject == "qsfp0/lane8" && s.signal == "rx_power_mw"; }));
  probe.stop();
}

TEST_CASE("rx_power probe is unavailable, naming each interface, when nothing is readable") {
  auto reader = std::make_shared<ReplayReader>();
  Sfp no_ddm;  // no DDM: nothing answers at A2h either
  no_ddm.ddm_type = 0;
  EepromImage a0_only;
  load(a0_only, 0x50, 0, 0, no_ddm.a0(), 0, 256);
  reader->set("sfp0", a0_only);
  Qsfp unknown;
  unknown.id = 0x07;
  reader->set("weird0", unknown.image());
  Cmis flat;
  flat.flat = true;
  reader->set("flat0", flat.image());
  RxPowerProbe probe({{"eth9", "sfp0", "weird0", "flat0"}, 10ms, "h"}, reader);
  Collector c;
  ProbeStatus st = probe.start(c.sink());
  CHECK_FALSE(st.available);
  CHECK_THAT(st.reason, Catch::Contains("not supported on eth9"));
  CHECK_THAT(st.reason, Catch::Contains("sfp0: SFP has no digital diagnostics"));
  CHECK_THAT(st.reason, Catch::Contains("weird0: unknown identifier 0x07"));
  CHECK_THAT(st.reason, Catch::Contains("flat0: CMIS module has flat memory"));
  // load-safe: time for a poll that must not happen; a slow machine can only hide a fault, not fail the case.
  std::this_thread::sleep_for(20ms);  // kept: time for a poll that must not happen
  probe.stop();
  CHECK(c.samples().empty());
  CHECK_THROWS_AS(probe.start(c.sink()), ocslab::Error);
}

TEST_CASE("rx_power probe runs on the interfaces that work and names the others") {
  auto reader = std::make_shared<ReplayReader>();
  reader->set("qsfp0", lit_qsfp().image());
  RxPowerProbe probe({{"qsfp0", "veth7"}, 10ms, "h"}, reader);
  Collector c;
  ProbeStatus st = probe.start(c.sink());
  CHECK(st.available);
  CHECK_THAT(st.reason, Catch::Contains("left out") && Catch::Contains("veth7"));
  CHECK(c.wait_for_sample([](const Sample& s) { return s.subject == "qsfp0/lane4"; }));
  probe.stop();
  for (const auto& s : c.samples()) CHECK(s.subject.rfind("qsfp0", 0) == 0);
  CHECK_THROWS_AS(probe.start(c.sink()), ocslab::Error);
  CHECK_THROWS_WITH(RxPowerProbe({{"x"}, 0ms, "h"}, reader), Catch::Contains("interval must be positive"));
}

// Real kernel, real netlink: lo and a missing interface have no module. Runs as root in CI;
// the ethtool GET needs no privilege, so it runs unprivileged too.
TEST_CASE("ethtool reader: lo has no module, a missing interface is named") {
  EthtoolEepromReader reader;
  CHECK(reader.method() == "ethtool netlink MODULE_EEPROM_GET");
  EepromReadResult r = reader.read("lo", kIdentifyRead);
  CHECK_FALSE(r.ok());
  CHECK_THAT(r.unavailable, Catch::Contains("not supported on lo"));
  INFO(r.unavailable);

  EepromReadResult none = reader.read("ocslabnope0", kIdentifyRead);
  CHECK_FALSE(none.ok());
  CHECK(none.unavailable == "no such interface ocslabnope0");
  CHECK(reader.read(std::string(40, 'x'), kIdentifyRead).unavailable.find("no such interface") == 0);

  EepromReadResult legacy = read_module_eeprom_ioctl("lo", kIdentifyRead);
  CHECK_FALSE(legacy.ok());
  CHECK_THAT(legacy.unavailable, Catch::Contains("lo: SIOCETHTOOL ETHTOOL_GMODULEINFO"));

  CHECK_THROWS_WITH(reader.read("lo", EepromRead{0x50, 0, 0, 100, 40}), Catch::Contains("crosses byte 128"));
}

TEST_CASE("rx_power probe with the real reader on lo is unavailable with the reason") {
  RxPowerProbe probe({{"lo"}, 100ms, ""});
  Collector c;
  ProbeStatus st = probe.start(c.sink());
  CHECK_FALSE(st.available);
  CHECK_THAT(st.reason, Catch::Contains("lo"));
  CHECK_THAT(st.reason, Catch::Contains("not supported"));
  CHECK(st.method == "ethtool netlink MODULE_EEPROM_GET");
  probe.stop();
  CHECK(c.samples().empty());
}
