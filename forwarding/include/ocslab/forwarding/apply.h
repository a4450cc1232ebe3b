// Transactional programming of one host's ocslab-owned forwarding state: read what ocslab owns,
// journal the previous and the intended state on disk before touching the kernel, apply the
// diff, and restore the previous state on any error or SIGINT/SIGTERM. `rollback` undoes the
// last operation from the journal (also after a kill -9 mid-apply); `clear` removes only ours.
#pragma once

#include <cstddef>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "ocslab/forwarding/diff.h"
#include "ocslab/forwarding/rule_plan.h"
#include "ocslab/forwarding/tc_netlink.h"

namespace ocslab::forwarding {

inline constexpr const char* kDefaultStateDir = "/var/lib/ocslab/forwarding";
// Test hook (docs/forwarding.md): after this many kernel changes of an apply or clear (not of
// a restore or rollback), print "test hook: paused after N changes" to stderr and wait until
// SIGINT/SIGTERM arrives (or a kill -9). Lets tests interrupt an apply at a known point.
inline constexpr const char* kPauseEnv = "OCSLAB_FORWARDING_TEST_PAUSE_AFTER";

struct ApplyOptions {
  std::string state_dir = kDefaultStateDir;
  size_t chunk = 256;      // kernel changes per pipelined batch (and between interrupt checks)
  size_t pause_after = 0;  // the test hook; 0: off. The CLI reads it from kPauseEnv.
  // false: program only the source side (routes, neighbours); the plan's macvlans, clsacts and
  // filters are left out (and ocslab's earlier ones removed). A plan without filters (a host
  // that relays nothing) never touches tc either way.
  bool relay = true;
  // The caller's name for this operation (kOpIdChars, at most 64; "" none), kept in the journal.
  // An apply retried under the same id after a dropped session finds its own journal entry and
  // reports it (ApplyReport::journaled) instead of a bare "no changes"; a rollback with an id
  // undoes only that operation, and is a no-op (with a note) when the journal's last operation
  // is another one or that one was already undone.
  std::string op_id;
};

inline constexpr const char* kOpIdChars = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._:-";
// Empty when id is a valid operation id, else what is wrong with it.
std::string op_id_problem(const std::string& id);

// The on-disk record (state_dir/journal.json) of the last operation.
struct Journal {
  std::string operation;  // apply, clear, rollback
  std::string status;     // applying, applied, rolling-back, rolled-back
  std::string host;
  std::string time;   // UTC, ISO 8601
  std::string op_id;  // ApplyOptions::op_id of the operation; "" when none was given
  HostPlan before;    // ocslab's state before the operation
  HostPlan target;    // the state the operation installs
};

struct ApplyReport {
  PlanDiff changes;  // made (apply, rollback, clear) or to make (diff)
  // Parts of the plan not programmed because ApplyOptions::relay is false.
  size_t skipped_qdiscs = 0;
  size_t skipped_filters = 0;
  // The journal's last operation is this one (ApplyOptions::op_id): written now, or by an
  // earlier attempt under the same id (then `changes` is empty and `note` says so). A lab-wide
  // rollback must include every host where this is true.
  bool journaled = false;
  std::string note;  // a retried apply, or a rollback that had nothing of its op_id to undo
};

// An apply that failed or was interrupted and whose previous state was restored.
class ApplyFailed : public Error {
 public:
  using Error::Error;
};
// An apply that failed and whose restore failed too: the journal keeps the previous state.
class RestoreFailed : public Error {
 public:
  using Error::Error;
};

// What a plan may name on this host. The plan arrives from outside (`--plan -`, run as root
// through sudo), so apply checks it against the kernel before anything is installed.
struct HostNics {
  std::set<std::string> management;                        // "lo" and the main table's default-route devices
  std::map<std::string, std::set<std::string>> addresses;  // device -> its IPv4 addresses
  std::set<std::string> devices;                           // every network device
};
// This network namespace's HostNics, read from the kernel.
HostNics host_nics();
// Empty when `plan` may be applied on a host with `nics`, else why not, naming the rule and
// its device. Refused: a rule on a management device; a route whose protocol is not
// kRouteProtocol (rollback and clear would never count it as ocslab's), whose destination is
// not a /32, or whose `src` is not an address of its own device (the plan's own NICs, its
// if1s, are the devices holding its routes' sources); a neighbour, a filter's redirect or a
// macvlan's parent on a device that is none of those if1s; a filter on a device without the
// plan's clsact.
std::string plan_problem(const HostPlan& plan, const HostNics& nics);

// What the engine programs of a plan: everything, except that without `relay`, or when the
// plan has no filters, the macvlans, clsacts and filters are left out.
HostPlan programmable(const HostPlan& plan, bool relay = true);

class Forwarder {
 public:
  explicit Forwarder(ApplyOptions options = {});

  // The ocslab-owned state installed now (see docs: ownership): routes, permanent neighbours,
  // macvlans and clsacts ocslab created (journal), tagged filters on those and on the devices
  // of `desired`'s filters.
  HostPlan installed(const std::string& host);
  HostPlan installed(const std::string& host, const HostPlan& desired);
  ApplyReport diff(const HostPlan& desired);
  // Throws ApplyFailed (previous state restored; message: the cause, e.g. the kernel's
  // extack) or RestoreFailed; Error when a previous operation was interrupted (rollback first)
  // or a foreign route / permanent neighbour holds a key the plan needs, or plan_problem refuses
  // the plan (nothing installed, no journal written).
  ApplyReport apply(const HostPlan& desired);
  ApplyReport clear(const std::string& host);
  ApplyReport rollback();

  std::optional<Journal> journal() const;
  std::string journal_path() const;

 private:
  ApplyReport transact(const HostPlan& target, const std::string& operation, const std::optional<Journal>& prev);
  ApplyOptions opt_;
};

// ocslab's installed filters (with their hit counters) on the devices of `plan`'s filters that
// exist and hold a clsact; none (and no tc socket) when the plan has no filters.
std::vector<InstalledFilter> owned_filters(const HostPlan& plan);

nlohmann::json to_json(const Journal& j);
Journal journal_from_json(const nlohmann::json& j);

}  // namespace ocslab::forwarding
