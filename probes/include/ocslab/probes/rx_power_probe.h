// The Rx power probe: polls the transceiver DDM of one or more interfaces and emits, per lane,
// the received optical power, so a timeline shows light vanishing and returning around an OCS
// reconfiguration. It reads through an EepromReader (ethtool netlink by default).
//
// Samples (source "rx_power"), one set per lane and poll:
//   subject "<ifname>/lane<N>" (N from 1; CMIS banks continue the count: bank 1 lane 1 = lane 9)
//   signal "rx_power_dbm", unit "dBm": kSampleDbmFloor (-40) when the module reads 0 (no light)
//   signal "rx_power_mw",  unit "mW":  exact, 0 for no light
//   signal "los",          unit "bool": only for modules that report Rx LOS (see RxPowerReading)
// and, when an interface stops (or starts again) being readable while running:
//   subject "<ifname>", signal "module_readable", unit "bool".
// t_ns / mono_ns are taken right after the last EEPROM read of the poll returns.
#pragma once

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "ocslab/probes/eeprom_reader.h"
#include "ocslab/probes/module_eeprom.h"
#include "ocslab/probes/probe.h"

namespace ocslab::probes {

struct RxPowerProbeConfig {
  std::vector<std::string> interfaces;
  // Modules refresh DDM every ~10-100 ms, so polling much faster only repeats values.
  std::chrono::milliseconds interval{100};
  std::string host;  // Sample::host; empty -> gethostname()
};

class RxPowerProbe : public Probe {
 public:
  // reader: null -> EthtoolEepromReader.
  explicit RxPowerProbe(RxPowerProbeConfig config, std::shared_ptr<EepromReader> reader = nullptr);
  ~RxPowerProbe() override;

  std::string name() const override { return "rx_power"; }
  // Identifies every interface's module and takes a first reading before returning. Available
  // when at least one interface has a readable module with Rx power monitors; reason then names
  // the interfaces left out, or, when unavailable, why each one failed.
  ProbeStatus start(SampleSink sink) override;
  void stop() override;

 private:
  struct Interface {
    std::string name;
    bool ready = false;    // identified and decodable
    bool reported = true;  // last module_readable state emitted (start() counts as readable)
    ModuleType type = ModuleType::kSff8636;
    unsigned banks = 1;
    ReadPlan plan;
    EepromImage image;
  };

  // Identify the module and read its static bytes; empty string on success, else the reason.
  std::string setup(Interface& itf);
  // One poll; appends samples, or returns the reason the interface could not be read.
  std::string poll(Interface& itf, std::vector<Sample>& out);
  void run();

  RxPowerProbeConfig config_;
  std::shared_ptr<EepromReader> reader_;
  std::vector<Interface> interfaces_;
  std::vector<Sample> first_;  // samples of start()'s reading, emitted first by the thread
  SampleSink sink_;
  std::thread thread_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  bool started_ = false;
};

}  // namespace ocslab::probes
