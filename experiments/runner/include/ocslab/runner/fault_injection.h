// Fault injection in a virtual lab (the spec's `faults:`, docs/experiments.md#fault-injection):
// a NIC's link held down by the lab's emulated firmware from just before a reconfiguration to
// the end of the run. The holds go through the lab's timing channel (vlab::set_lab_timing,
// `hold_down`), so the emulator records each in its ground truth; the runner records each hold
// and release as a timeline row and in meta.json, and puts the lab's holds back as it found
// them when the run ends, however it ends.
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "ocslab/common/sample.h"
#include "ocslab/runner/experiment_spec.h"

namespace ocslab::runner {

class FaultInjector {
 public:
  using Row = std::function<void(const Sample&)>;  // a timeline row (runner clock)
  using Log = std::function<void(const std::string&)>;
  // lab_dir: the running virtual lab's run folder.
  FaultInjector(const ExperimentSpec& spec, std::string lab_dir, Row row, Log log);
  ~FaultInjector();  // releases what is still held; errors are logged
  FaultInjector(const FaultInjector&) = delete;
  FaultInjector& operator=(const FaultInjector&) = delete;

  // Holds the NICs whose fault is due before reconfiguration i (the lab's holds as found, plus
  // every NIC held so far). Returns a problem per fault that could not be injected.
  std::vector<std::string> before_reconfiguration(int i);
  // Puts the lab's holds back as they were before the first hold (nothing when none was made).
  // Returns the problem when that failed.
  std::vector<std::string> release();

  // meta.json's `faults`: per fault kind, host, nic, before_iteration, where, held_ns / held,
  // released_ns / released (0 and "" when it did not happen) and error.
  nlohmann::json record() const;

  // The timeline rows of a hold (value 1) and a release (0): host, source "fault", subject the
  // NIC, signal "held_down", unit bool.
  static Sample row(const std::string& host, const std::string& nic, bool held, int64_t t_ns);

 private:
  struct Applied {
    int64_t held_ns = 0, released_ns = 0;
    std::string error;
  };
  // The lab's holds as found, every NIC held so far, and `adding` (HOST:NIC each).
  std::vector<std::string> lab_set(const std::string& adding) const;

  const ExperimentSpec& spec_;
  std::string lab_dir_;
  Row row_;
  Log log_;
  std::vector<Applied> applied_;  // one per spec_.faults
  bool found_read_ = false;
  std::vector<std::string> found_;  // the lab's held NICs before the first hold (HOST:NIC)
  bool released_ = false;
};

}  // namespace ocslab::runner
