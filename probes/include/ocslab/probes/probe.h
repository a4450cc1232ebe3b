// The contract every probe keeps: started with a sink, it samples on a thread of its own and
// hands each Sample (CLOCK_REALTIME and CLOCK_MONOTONIC ns, host, source, subject, signal,
// value, unit) to the sink; a probe that cannot run on this host (no such interface, no RDMA
// device, no module plugged, no DevX permission) says so instead of throwing, so the other
// probes keep running.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "ocslab/common/sample.h"

namespace ocslab::probes {

// Called from the probe's own thread; must be thread-safe when one sink serves several probes.
using SampleSink = std::function<void(const Sample&)>;

struct ProbeStatus {
  bool available = false;
  std::string method;  // how it measures, e.g. "rtnetlink", "devx QUERY_VPORT_STATE", "ibv_query_port"
  std::string reason;  // why it is unavailable (names the interface / device)
};

class Probe {
 public:
  virtual ~Probe() = default;
  virtual std::string name() const = 0;  // "carrier", "firmware", "rx_power", "rdma"
  // Starts sampling and returns at once. When unavailable nothing runs and the sink is never
  // called. Throws ocslab::Error only for misuse (started twice).
  virtual ProbeStatus start(SampleSink sink) = 0;
  // Stops and joins the probe's thread; no sink call happens after it returns. Idempotent.
  virtual void stop() = 0;
};

}  // namespace ocslab::probes
