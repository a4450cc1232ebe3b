// OcsDriver: the one interface through which ocslab drives an optical circuit switch.
// Concrete drivers (TL1, NETCONF, SCPI) implement the protected do_* hooks; this base adds
// what every protocol needs the same way: port safety (allow-list and switch size checked
// before anything is sent), reconnection after a dropped connection, per-call timing, and
// partial-failure reporting for reconfigurations.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ocslab/ocsctl/errors.h"
#include "ocslab/ocsctl/mapping.h"
#include "ocslab/ocsctl/port_set.h"
#include "ocslab/ocsctl/stream.h"
#include "ocslab/ocsctl/switch_url.h"
#include "ocslab/ocsctl/types.h"

namespace ocslab::ocs {

// A message the switch sent on its own (TL1 autonomous report, NETCONF notification).
struct OcsEvent {
  Timestamp received;
  std::string text;
};

struct DriverOptions {
  std::chrono::milliseconds reply_timeout{10000};    // per request
  std::chrono::milliseconds connect_timeout{10000};  // TCP / SSH connect + login
  std::chrono::milliseconds keepalive_interval{0};   // 0: off (TL1 sends RTRV-HDR when idle)
  std::optional<PortSet> allow;                      // ports this driver may change
  std::optional<std::string> password;               // resolved by the caller (credentials.h)
  std::string identity_file;                         // SSH transports
  std::string known_hosts_file;                      // SSH transports
  bool accept_unknown_host = false;                  // SSH transports
  bool replace_patched = true;  // delete-then-enter when an ingress must change egress
  std::function<void(const OcsEvent&)> on_event;     // autonomous messages
  std::function<void(const CallTiming&)> on_timing;  // every completed or failed call
};

struct ApplyReport {
  MappingDiff diff;
  std::vector<CallTiming> calls;  // the protocol calls made, in order
  Timestamp started;              // first request issued (or list when nothing changed)
  Timestamp finished;             // last completion
};

class OcsDriver {
 public:
  OcsDriver(SwitchUrl url, DriverOptions options);
  virtual ~OcsDriver();
  OcsDriver(const OcsDriver&) = delete;
  OcsDriver& operator=(const OcsDriver&) = delete;

  // Connects and logs in (also done implicitly by every call). Reads the switch size.
  void open();
  void close();
  bool is_open() const { return open_; }

  SwitchInfo info();
  std::vector<Circuit> list();
  // Makes the circuits in as few protocol commands as the protocol allows.
  void connect(const std::vector<Circuit>& circuits);
  // Deletes the circuits that have any of these ports at either end.
  void disconnect(const std::vector<Port>& ports);
  // Reads the current circuits, computes the minimal diff and applies it.
  ApplyReport apply(const std::vector<Circuit>& target, ApplyMode mode, bool dry_run = false);
  // Removes every circuit (only those on allowed ports when there is an allow-list).
  ApplyReport clear();
  // The protocol requests a reconfiguration would send, for --dry-run. The default describes
  // them generically; drivers render their exact wire text.
  virtual std::vector<std::string> render_commands(const MappingDiff& diff) const;
  std::vector<PortPower> power(const std::vector<Port>& ports);

  const SwitchUrl& url() const { return url_; }
  std::string name() const { return url_.to_string(); }
  const DriverOptions& options() const { return options_; }
  std::optional<CallTiming> last_timing() const;

  // Checks ports against the allow-list and the switch size; throws PortError. Public so
  // callers (orchestrators, the CLI's --dry-run) can validate before planning.
  void check_circuits(const std::vector<Circuit>& circuits);
  void check_ports(const std::vector<Port>& ports, bool modifying);

 protected:
  virtual void do_open() = 0;  // connect + login; must leave the driver ready for requests
  virtual void do_close() = 0;
  virtual SwitchInfo do_info() = 0;
  virtual std::vector<Circuit> do_list() = 0;
  virtual void do_connect(const std::vector<Circuit>& circuits) = 0;
  virtual void do_disconnect(const std::vector<Port>& ports) = 0;
  virtual std::vector<PortPower> do_power(const std::vector<Port>& ports) = 0;
  // Removes diff.remove and makes diff.add. Default: one disconnect, then one connect.
  // Protocols with an atomic edit (NETCONF) override it.
  virtual void do_reconfigure(const MappingDiff& diff);

  // Called by implementations around each request: right before the first byte is written
  // and right after the completion is read.
  // Each returns the time it recorded.
  Timestamp stamp_issued(std::string_view command);
  Timestamp stamp_acked();
  void emit_event(const OcsEvent& ev);
  // For background work (keep-alive) that finds the connection gone: the next call reconnects.
  // Call with call_mutex() held.
  void mark_lost();
  // Names the protocol step in progress (list, disconnect, connect) for timing records. op is
  // kept as a view, not copied (this runs on every call): pass a string literal.
  void set_op(std::string_view op);

  // Held during every call, and by a keep-alive thread between calls.
  std::recursive_mutex& call_mutex() { return mutex_; }

 private:
  template <class F>
  auto call(std::string_view op, F&& fn) -> decltype(fn());
  void ensure_open();
  void drop();  // closes the transport after an error that leaves its state unknown
  void check_port(Port p, bool modifying);
  void record();  // finishes the current record
  CallTiming& current() { return timings_[current_]; }
  void apply_diff(ApplyReport& report);

  SwitchUrl url_;
  DriverOptions options_;
  bool open_ = false;
  std::optional<SwitchInfo> info_;
  std::recursive_mutex mutex_;
  // The timing records' clock: one clock read per stamp (both clocks' readings), the wall
  // clock's offset measured again on every connect and every 20 ms of use.
  PairedClock clock_;
  std::string_view op_;  // what set_op() named (a literal), for the records of the requests that follow
  // The request in progress and the last one finished, in turn: finishing a request hands its
  // record over without a copy, and the strings of both keep their capacity.
  CallTiming timings_[2];
  int current_ = 0;                 // timings_[current_] is the request in progress
  bool has_last_ = false;           // timings_[current_ ^ 1] is the last one finished
  bool pending_ = false;            // current() issued but not yet acknowledged
  std::vector<CallTiming> recent_;  // calls completed inside the current apply()
  bool collect_ = false;            // true while an apply() collects its calls
};

// Creates the driver for url's protocol. The password comes from options or, when unset,
// from credentials.h's resolve_password.
std::unique_ptr<OcsDriver> make_driver(const SwitchUrl& url, DriverOptions options);

}  // namespace ocslab::ocs
