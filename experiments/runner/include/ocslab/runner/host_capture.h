// Host probes through a run that is not a reconfiguration schedule (the phase-workload type):
// one agent session per host with the spec's probes, every sample on disk as it arrives
// (RESULTS/capture/), the switch's power monitors, the runner's own rows (its switch commands)
// and a virtual lab's ground truth, merged at the end into one timeline on the runner's clock.
// The pieces the reconfiguration type shares with it (host streams, clock correction, spool
// release) are the free functions below.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <mutex>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "ocslab/common/sample.h"
#include "ocslab/runner/host_session.h"
#include "ocslab/runner/merge.h"

namespace ocslab::runner {

struct Target;
class RunContext;
class CaptureStore;
class OcsPowerMonitor;

// Capture stream names: one per host, then the runner's own, merged in this order.
std::string host_stream(const std::string& host);
inline constexpr const char* kControlStream = "runner.control";
inline constexpr const char* kForwardingStream = "runner.forwarding";
inline constexpr const char* kPowerStream = "runner.switch_power";
inline constexpr const char* kGroundTruthStream = "lab.ground_truth";

// Host clock -> runner clock for one host's samples: its offset interpolated linearly between
// its estimates before (at before_ns) and after (at after_ns) the capture.
std::function<void(Sample&)> clock_correction(const HostReport& r, int64_t before_ns, int64_t after_ns);

// Once a capture's samples are safely in the results (store closed), each host's spool whose
// capture is whole on disk goes (spool.delete), all hosts at once; a lost host, a failed
// stream or one short of the agent's last seq keeps its spool. Failures are logged. gate: the
// session pool's, so these handshakes count against lab.connect_concurrency too.
void release_whole_spools(const CaptureStore& store, const std::vector<HostReport>& hosts,
                          const std::vector<HostTarget>& targets, const std::function<void(const std::string&)>& log,
                          HandshakeGate& gate);

// One line for the run's log after connect_all: hosts reached, the time it took, the
// handshake bound and its peak, and the slowest host's phases (ConnectPhases).
std::string connect_summary(SessionPool& pool, std::chrono::steady_clock::duration took);

// After store.close(): its streams as merge_capture inputs in merge order (each host's with its
// clock correction, then the runner's own and the lab's), and one problem per failed stream.
std::vector<CaptureInput> capture_inputs(const CaptureStore& store, const std::vector<HostReport>& hosts,
                                         int64_t before_ns, int64_t after_ns, std::vector<std::string>& problems);

class HostCapture {
 public:
  // Opens folder/capture and one session per host of the target (host_targets).
  HostCapture(Target& target, const RunContext& ctx, const std::string& folder, const std::string& run_id);
  ~HostCapture();  // stops whatever still runs; what was captured stays on disk
  HostCapture(const HostCapture&) = delete;
  HostCapture& operator=(const HostCapture&) = delete;

  // Connects to every agent and starts its probes and the switch's power monitor. Throws Error
  // naming each host that failed (the others are stopped again).
  void start();
  // A row of the runner's own (switch commands and acks), stamped on this machine's clock.
  void control(const Sample& s);
  // Every host sample as it arrives, once stored, on its session's thread (host clock; see
  // clock_estimates): for what must act during the run (phase.detect_nic). It must return quickly.
  // An empty one stops the calls; set_tap returns once no call of the previous one is running.
  using Tap = std::function<void(const std::string& host, const Sample&)>;
  void set_tap(Tap tap);
  // Hosts not capturing any more, in words ("h2: lost: ..."), for the run's problems.
  std::vector<std::string> unhealthy() const;

  struct Outcome {
    std::vector<HostReport> hosts;
    std::vector<std::string> problems;
    uint64_t rows = 0;  // rows written to the timeline
  };
  // Stops probes and monitor, adds the lab's ground truth, closes the store and merges every
  // stream into timeline_path (run and iteration columns as merge_capture writes them);
  // releases the spools once that is written.
  Outcome finish(const std::string& timeline_path, const std::string& run, const std::function<int(int64_t)>& iteration);

  int64_t started_ns() const { return before_ns_; }
  // Each agent's clock estimate at start (host clock minus the runner's; agent::ClockEstimate),
  // by host name: far tighter than a round trip over SSH.
  std::map<std::string, agent::ClockEstimate> clock_estimates() const;

 private:
  Target& target_;
  const RunContext& ctx_;
  std::string folder_;
  std::vector<HostTarget> targets_;
  std::unique_ptr<CaptureStore> store_;
  std::unique_ptr<SessionPool> pool_;
  std::unique_ptr<OcsPowerMonitor> monitor_;
  int64_t before_ns_ = 0, after_ns_ = 0;
  bool finished_ = false;
  std::mutex tap_mu_;  // held while the tap runs, so set_tap never leaves one running
  Tap tap_;
};

}  // namespace ocslab::runner
