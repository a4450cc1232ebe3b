// The heartbeat probe: a counter emitted every interval_ms on the monotonic clock. The runner
// uses it to see that a host's agent is alive and to measure sample latency (arrival time minus
// t_ns, corrected by the clock offset); tests use it as a probe that runs anywhere.
#pragma once

#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "ocslab/probes/probe.h"

namespace ocslab::agent {

class HeartbeatProbe final : public probes::Probe {
 public:
  // Samples: source "heartbeat", subject = subject, signal "heartbeat", value 1, 2, 3, ...,
  // unit "count".
  HeartbeatProbe(std::string host, int interval_ms, std::string subject = "agent");
  ~HeartbeatProbe() override;

  std::string name() const override { return "heartbeat"; }
  probes::ProbeStatus start(probes::SampleSink sink) override;
  void stop() override;

 private:
  void run(probes::SampleSink sink);

  std::string host_;
  int interval_ms_;
  std::string subject_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  bool started_ = false;
  std::thread thread_;
};

}  // namespace ocslab::agent
