// Host-based forwarding that follows the fabric during a run (forwarding.reroute_on_dark,
// make_before_break, verify_change; docs/forwarding.md "Around a dark circuit and before breaking
// one"). The switch's power monitor and the hosts' carrier probes say which ports are dark; a
// circuit of the current mapping with a dark end gets the routes recomputed on the surviving
// circuits and applied at once (transactional, as every apply), and again when it lights. Before
// a planned reconfiguration, the routes that can move onto the circuits it keeps move first
// (make-before-break); the verify matrix taken during the change counts the pairs that lost
// reachability. Every reroute and change is a record (meta.json's `forwarding`) and timeline rows
// (source forwarding, host lab).
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "ocslab/common/sample.h"
#include "ocslab/forwarding/fabric.h"
#include "ocslab/runner/lab_forwarding.h"

namespace ocslab::runner {

// What the power monitor last said of one port's light, and since when (runner clock, ns).
struct PortLight {
  bool lit = true;
  int64_t since_ns = 0;
};

// Pure: the ends of `fabric`'s circuits whose light is out (a port absent from `light` counts as
// lit: nothing said otherwise).
std::set<forwarding::PortRef> dark_circuit_ends(const forwarding::Fabric& fabric,
                                                const std::map<forwarding::PortRef, PortLight>& light);

// What a run knows of each port's light, from two sources: the switch's power monitor (source
// ocs_power, signal light, host and interface = the port its egress feeds) and the hosts'
// carrier probes (source carrier, signal carrier). A port is dark when either says so. A host's
// carrier is down on every circuit a reconfiguration makes until the link has come up (a NIC's
// link-up time, not a failure): expect_link_up() puts such ports aside until their carrier has
// been up once. Thread-safe: observe() is called from the monitor's and the sessions' threads.
class PortStates {
 public:
  // `received_ns`: when the runner got it, the time of a host's sample (whose own clock is not
  // corrected until the run ends); the power monitor's are stamped on the runner's clock.
  void observe(const Sample& s, int64_t received_ns);
  void expect_link_up(const std::set<forwarding::PortRef>& ports);
  // Every port either source has spoken of; `version` (optional) changes whenever it does.
  std::map<forwarding::PortRef, PortLight> snapshot(uint64_t* version = nullptr) const;
  uint64_t version() const;

 private:
  struct State {
    PortLight light, carrier;
    bool awaiting_up = false;  // expect_link_up: carrier down does not count yet
  };
  mutable std::mutex mutex_;
  std::map<forwarding::PortRef, State> ports_;
  uint64_t version_ = 0;
};

// One reroute: the routes recomputed because the set of dark circuits changed.
struct RerouteRecord {
  int iteration = 0;  // the reconfiguration whose mapping was installed (0: the first)
  std::string mapping;
  std::vector<std::string> dark;  // the circuits left out, "h4:eth2 <-> h1:eth1"; empty: all lit again
  int64_t detected_ns = 0;        // the power monitor's reading that changed the set
  int64_t applied_ns = 0;         // every host's apply finished
  size_t circuits = 0;            // the circuits the routes were computed on
  size_t unrouted_pairs = 0;      // ordered pairs the survivors cannot join
  bool ok = false;
  std::string error;
  std::string matrix;  // verify_change: the matrix's label; "" when none
  size_t matrix_reachable = 0, matrix_pairs = 0;
};

// One planned reconfiguration as forwarding saw it.
struct ChangeRecord {
  int iteration = 0;
  std::string from, to;
  size_t kept = 0, broken = 0, made = 0;
  bool make_before_break = false;
  int64_t bridge_started_ns = 0, bridge_applied_ns = 0;  // make-before-break's apply (0: none)
  bool bridge_ok = false;
  std::string bridge_error;
  // Pairs the routes cannot complete while the broken circuits are down, as the model predicts
  // (forwarding::pairs_lost): with the routes installed at the switch's command (the bridge with
  // make-before-break), and with the routes the change started from (breaking first).
  size_t predicted_lost = 0;
  size_t predicted_lost_break_first = 0;
  int pairs_lost = -1;  // verify_change: unreachable pairs of the matrix during the change; -1: none
  size_t pairs = 0;
  int64_t measured_ns = 0;  // that matrix's end
  std::string matrix;
};

nlohmann::json to_json(const RerouteRecord& r);
nlohmann::json to_json(const ChangeRecord& c);

class ForwardingFollower {
 public:
  // `fwd` has the first mapping applied. Writes matrices into `folder`.
  ForwardingFollower(LabForwarding& fwd, const Mapping& first, std::string folder);

  // The power monitor's and the hosts' samples (any thread): PortStates::observe.
  void observe(const Sample& s, int64_t received_ns) { states_.observe(s, received_ns); }
  // The runner's thread: reroutes when the dark circuits of the current mapping are not the
  // ones the installed routes avoid. `iteration`: the current mapping's reconfiguration.
  void check(int iteration);
  // Around reconfiguration `iteration` to `to`: before the switch's command (make-before-break),
  // after it (the matrix during the change, with verify_change), and once the new mapping's
  // routes are on every host (`applied`: they are; false: the reconfiguration failed or forwarding
  // could not follow it, and the hosts keep what they have).
  void before_switch(const Mapping& to, int iteration);
  void after_switch(const Mapping& to, int iteration, bool switched);
  void reconfigured(const Mapping& to, bool applied);

  const std::vector<RerouteRecord>& reroutes() const { return reroutes_; }
  const std::vector<ChangeRecord>& changes() const { return changes_; }
  std::vector<Sample> samples() const;
  nlohmann::json record() const;
  // Failed reroutes and bridges (the run goes on with what the hosts hold).
  const std::vector<std::string>& problems() const { return problems_; }

 private:
  void reroute(const std::set<forwarding::PortRef>& dark, int64_t detected_ns, int iteration);

  LabForwarding& fwd_;
  const Mapping* current_;
  std::string folder_;
  std::set<forwarding::PortRef> avoided_;  // the dark ends the installed routes were computed without
  PortStates states_;
  uint64_t checked_ = ~uint64_t{0};  // the states' version check() last judged (none yet)
  std::vector<RerouteRecord> reroutes_;
  std::vector<ChangeRecord> changes_;
  std::vector<std::string> problems_;
};

}  // namespace ocslab::runner
