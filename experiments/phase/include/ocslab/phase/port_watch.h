// Failure detection for the phase controller: watches the light on a rail's made circuits
// through the switch's own power monitors (a second driver session, so the orchestrator's command
// session is never queued behind monitoring) and reports a port that failed. For a circuit
// ingress A -> egress B: A dark means no light enters the switch at A (A, or the NIC and fibre
// feeding it, failed); A lit and B dark means the light is lost inside the switch at B. Either
// held for `dark_polls` consecutive readings, on a circuit made at least `settle` earlier,
// reports the port once (the time of its first dark reading is the failure's `seen`).
// Masked ports and circuits that are being re-made are not judged.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "ocslab/common/periodic.h"
#include "ocslab/ocsctl/driver.h"
#include "ocslab/phase/orchestrator.h"

namespace ocslab::phase {

struct PortWatchOptions {
  std::chrono::milliseconds interval{20};  // one power request for the rail's circuit ports per interval
  double threshold_dbm = -25.0;            // dark below this (the drivers give power only, no LOS flag)
  int dark_polls = 2;                      // consecutive dark readings before a port counts as failed
  // A circuit younger than this is not judged (its light is still coming up); 0: the interval x 3.
  std::chrono::milliseconds settle{0};
};

// Every job's circuits on the rail, as its orchestrator has them now (what the watches judge).
std::vector<ocs::Circuit> rail_circuits(const Orchestrator& rail);

// One failure the watch found.
struct PortFailure {
  std::string rail;
  int port = 0;
  int64_t seen_mono_ns = 0;  // the first dark reading of the run that crossed dark_polls
  std::string evidence;      // "no light leaves egress port 19 of circuit 3->19 (power -60.0 dBm, 2 readings)"
};

class PortWatch {
 public:
  using OnFailure = std::function<void(const PortFailure&)>;  // on the watch's thread
  // Watches `rail`'s circuits (every job's, read from the orchestrator at each poll) through
  // `driver` (its own session to the same switch). Throws ocslab::Error for an interval, settle
  // or dark_polls that is not positive.
  PortWatch(std::shared_ptr<Orchestrator> rail, std::unique_ptr<ocs::OcsDriver> driver, OnFailure on_failure,
            PortWatchOptions options = {});
  ~PortWatch();
  PortWatch(const PortWatch&) = delete;
  PortWatch& operator=(const PortWatch&) = delete;

  void start();  // idempotent
  void stop();   // idempotent; joins the thread (waits at most one power request)

  // One poll's judgement, without the thread (the thread calls this once per interval):
  // readings are the power per port at mono_ns. Returns the failures found by this reading.
  std::vector<PortFailure> judge(const std::vector<ocs::Circuit>& circuits, const std::vector<ocs::PortPower>& power,
                                 int64_t mono_ns);

  uint64_t polls() const;
  uint64_t failed_polls() const;  // power requests that failed (logged once per run of failures)

 private:
  void poll();  // one power request and its judgement (the loop's tick)

  std::shared_ptr<Orchestrator> rail_;
  std::unique_ptr<ocs::OcsDriver> driver_;
  OnFailure on_failure_;
  PortWatchOptions options_;
  struct Track {
    ocs::Port partner = 0;      // the circuit's other end when first seen
    int64_t made_ns = 0;        // when this circuit was first seen
    int dark = 0;               // consecutive dark readings
    int64_t first_dark_ns = 0;  // the first of them
    bool reported = false;
  };
  std::map<ocs::Port, Track> tracks_;  // by the port judged (ingress or egress)
  mutable std::mutex mu_;  // the counters
  uint64_t polls_ = 0, failed_polls_ = 0;
  bool failing_ = false;  // the last poll failed (the loop's own)
  std::unique_ptr<Periodic> loop_;  // last: stopped before the rest goes
};

}  // namespace ocslab::phase
