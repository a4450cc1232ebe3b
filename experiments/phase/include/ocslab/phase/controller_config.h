// The standalone controller's file (`ocslab controller CONFIG.yaml`): the job's layout and
// starting topo_id, where to listen, the ACK timeout policy, and each rail's switch URL,
// allow-list and slots. Every error names file:line:col.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "ocslab/common/config.h"
#include "ocslab/ocsctl/port_set.h"
#include "ocslab/phase/allocator.h"
#include "ocslab/phase/controller.h"
#include "ocslab/phase/port_watch.h"
#include "ocslab/phase/topology.h"

namespace ocslab::phase {

//   job: gpt-3d
//   pp: 2
//   dims: [{name: dp, size: 2}, {name: cp, size: 2}]
//   initial: "11"                 # optional; default every stage on the first dimension
//   listen: 127.0.0.1:7100        # optional (127.0.0.1:0); port 0 = any free port
//   token_file: /run/user/1000/ocslab-gpt-3d.token  # the shims' secret: 0600, owned by you
//   token: ...                    # or inline (then keep this file private); one of the two
//                                 # is required to listen on anything but loopback
//   ack_timeout_ms: 2000          # optional (10000)
//   max_retries: 2                # optional (2)
//   policy: safe-window           # optional: on-request (default), safe-window or greedy
//   allocator: orchestrrl         # greedy: largest-demand (default), uniform or orchestrrl
//   phase_table: phases.csv       # safe-window: index,group,type,bytes,idle_us (relative: next to this file)
//   switch_time_ms: 25            # safe-window: reconfigure only when idle_us exceeds this
//   detect:                       # optional: watch each rail's circuits, mask failed ports
//     interval_ms: 20             #   power readings per rail (1..60000)
//     threshold_dbm: -25          #   dark below this (-100..10)
//     dark_polls: 2               #   consecutive dark readings make a failure (1..100)
//     settle_ms: 60               #   a circuit younger than this is not judged (0..600000; 0: 3 intervals)
//   rails:
//     - name: rail0
//       switch: tl1://admin@10.0.0.5:3082
//       allow: 1..8,65..72        # optional driver allow-list
//       slots: [1-65, 2-66, ...]  # one INGRESS-EGRESS per rank, in rank order
struct RailConfig {
  std::string name;
  std::string url;
  std::optional<ocs::PortSet> allow;
  std::vector<Slot> slots;
};

struct ControllerConfig {
  std::string origin;
  JobLayout layout;
  TopoId initial;
  std::string listen_host = "127.0.0.1";
  int listen_port = 0;
  std::string token;       // inline `token:`
  std::string token_file;  // `token_file:`, relative paths resolved against the file's folder
  int ack_timeout_ms = 10000;
  int max_retries = 2;
  Policy policy = Policy::kOnRequest;
  Allocator allocator = Allocator::kLargestDemand;  // greedy's circuit allocator (allocator.h)
  std::string phase_table;    // safe-window's table, relative paths resolved against the file's folder
  double switch_time_ms = 0;  // safe-window's switch time
  PhaseWindows windows;       // load_controller_config reads phase_table (parse_controller_config does not)
  std::optional<PortWatchOptions> detect;  // `detect:`: a PortWatch per rail feeds Controller::port_failed
  std::vector<RailConfig> rails;
};

// Checks the policy's keys (unknown name, safe-window without phase_table or switch_time_ms)
// but reads no file; load_controller_config also loads the phase table (errors name its
// file:line:col), all before any switch is touched.
ControllerConfig parse_controller_config(const YamlDoc& doc);

// The policy keys of a mapping (the controller file's root, a phase-workload spec's phase:):
// policy, allocator (greedy only), phase_table (resolved against the document's folder),
// switch_time_ms. Refuses an unknown policy or allocator, an allocator under another policy,
// safe-window without its table or switch time, and those keys under another policy, naming
// file:line:col. Reads no file.
struct PolicyConfig {
  Policy policy = Policy::kOnRequest;
  Allocator allocator = Allocator::kLargestDemand;
  std::string phase_table;
  double switch_time_ms = 0;
};
// windows_elsewhere: the safe-window table comes from elsewhere (a phase-workload spec's
// safe_window_from): phase_table is refused, and only switch_time_ms is required.
PolicyConfig parse_policy_config(const YamlDoc& doc, const YAML::Node& map, bool windows_elsewhere = false);
// `detect: {interval_ms, threshold_dbm, dark_polls, settle_ms}` (each optional; ranges checked,
// errors at file:line:col): the PortWatch options of the controller config and of the runner's
// phase-workload spec (phase.detect).
PortWatchOptions parse_detect_config(const YamlDoc& doc, const YAML::Node& node);
ControllerConfig load_controller_config(const std::string& path);
// The shims' token: the inline one, or token_file read with read_secret_file's checks (a
// regular file owned by this user, mode 0600 or stricter, no symlink); empty when neither.
std::string controller_token(const ControllerConfig& c);
// The shortest token accepted (inline or from a file).
inline constexpr size_t kMinTokenLength = 16;

}  // namespace ocslab::phase
