// The switch's own view of the light: polls the optical power monitors of the egress ports that
// feed lab hosts' receivers, on a second session to the switch (so the runner's command session
// is never queued behind monitoring), and turns the readings into `ocs_power` Samples: the power
// when it moves, and light 1/0 when it crosses a threshold. See docs/experiments.md.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "ocslab/common/sample.h"
#include "ocslab/ocsctl/driver.h"

namespace ocslab::runner {

// An egress port whose light arrives at one host's interface.
struct WatchedPort {
  ocs::Port port = 0;
  std::string host;       // the sample's host
  std::string interface;  // the sample's subject
};

struct PowerMonitorOptions {
  std::chrono::milliseconds interval{20};  // one power request for all watched ports per interval
  // Light is 1 at or above this power. The drivers report only dBm (no per-port LOS flag or
  // threshold: ocs::PortPower), so the threshold is ours.
  double threshold_dbm = -25.0;
  double min_change_db = 0.5;  // power_dbm is emitted when it moved by more than this
};

struct PowerMonitorStats {
  uint64_t polls = 0;         // power requests answered
  uint64_t failed_polls = 0;  // power requests that failed (switch gone, timeout, refusal)
  uint64_t failure_runs = 0;  // runs of consecutive failures (each logged once)
  uint64_t samples = 0;       // handed to the sink
  std::string last_error;     // the newest failure's message, empty when none yet
};

class OcsPowerMonitor {
 public:
  // Called on the monitor's thread only (never concurrently with itself); it must be safe
  // against the caller's other threads (e.g. push under the runner's samples mutex) and short:
  // it delays the next poll.
  using Sink = std::function<void(const Sample&)>;

  // Opens its own driver session to url (make_driver: the password from options or the
  // credentials file); driver_options' on_timing and on_event are not used, so the command
  // session's options can be passed as they are. Nothing is sent before start(). Throws
  // ocslab::Error when ports is empty or names a port twice, when options.allow is set and does
  // not contain a watched port (the allow-list is the lab user's share of the switch: watching
  // another user's port is refused even though reading power changes nothing), or when the
  // interval is not positive.
  OcsPowerMonitor(const ocs::SwitchUrl& url, ocs::DriverOptions driver_options, std::vector<WatchedPort> ports,
                  Sink sink, PowerMonitorOptions options = {});
  // The same over a driver the caller made (tests, or a driver type make_driver does not know).
  OcsPowerMonitor(std::unique_ptr<ocs::OcsDriver> driver, std::vector<WatchedPort> ports, Sink sink,
                  PowerMonitorOptions options = {});
  ~OcsPowerMonitor();
  OcsPowerMonitor(const OcsPowerMonitor&) = delete;
  OcsPowerMonitor& operator=(const OcsPowerMonitor&) = delete;

  // Starts the polling thread (the first poll connects). Idempotent.
  void start();
  // Stops and joins the thread, then closes the session. Idempotent. A poll in progress is
  // finished first, so this waits at most the driver's reply (or connect) timeout.
  void stop();
  bool running() const { return thread_.joinable(); }

  PowerMonitorStats stats() const;
  const std::vector<WatchedPort>& ports() const { return ports_; }
  const PowerMonitorOptions& options() const { return options_; }

 private:
  struct PortState {
    std::optional<double> last_dbm;  // last power_dbm emitted
    std::optional<bool> light;       // last light emitted
  };

  void validate_ports(const std::optional<ocs::PortSet>& allow) const;
  void init();
  void run();
  void poll_once();
  void emit(const WatchedPort& w, const char* signal, double value, const char* unit, const Timestamp& t);

  std::unique_ptr<ocs::OcsDriver> driver_;
  std::vector<WatchedPort> ports_;
  std::vector<ocs::Port> request_;  // the port list of every power request
  Sink sink_;
  PowerMonitorOptions options_;
  std::vector<PortState> state_;  // by index into ports_; touched by the thread only
  bool failing_ = false;          // inside a run of failures (thread only)
  uint64_t run_failures_ = 0;     // failures in the current run (thread only)

  mutable std::mutex mutex_;  // stats_, stop_
  std::condition_variable wake_;
  bool stop_ = false;
  PowerMonitorStats stats_;
  std::thread thread_;
};

}  // namespace ocslab::runner
