// The per-layer breakdown of a timeline (docs/experiments.md, `breakdown.csv`): one row per
// reconfiguration x host x interface with the first edge of each layer and the durations
// derived from them.
#pragma once

#include <array>
#include <cstdint>
#include <iosfwd>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "ocslab/analysis/timeline.h"

namespace ocslab::analysis {

// kDisconnected: a port whose circuit the new mapping removed on purpose (only with intents).
// kLost: the host's capture had ended before the command while the others' went on
// (Timeline::capture_lost_at: the agent died, was killed, or its host went away), so what the
// port saw is not known; edges the switch side saw (its power monitor, a virtual lab's ground
// truth) are kept.
// kUnseen: the port's light went dark for at least BreakdownOptions::unseen_min_ns and came
// back, or its link went down and came back however briefly (the firmware layer: the firmware
// probe, or a virtual lab's emulator delivering the change to the guest), its carrier is
// probed, and the carrier layer recorded no transition at all (no
// `carrier`, no `carrier_inferred`, no polled `carrier_bit` or `carrier_bit_inferred`) in the
// reconfiguration: the kernel never changed the carrier (a NIC or driver that held the link
// through it), or announced the change only after the next reconfiguration began (linkwatch
// holds a carrier-down announcement up to a second, docs/probes-carrier.md) and the probe did
// not poll the live bit. Its carrier durations do not measure that outage, so it is not `ok`.
// A live-bit edge in the row is the carrier layer having seen the outage: the row is judged as
// before (`ok` when all came back), its carrier columns still the announcement's.
enum class Status { kOk, kFailed, kUnaffected, kIncomplete, kDisconnected, kLost, kUnseen };
constexpr size_t kStatusCount = 7;
const char* status_name(Status s);

// What a reconfiguration was meant to do to one host/interface, from the mapping before it and
// the mapping it applies (intents_between):
//   kMove     a circuit before and after, to another partner (the rail case)
//   kUp       no circuit before, one after: the port comes up from dark
//   kDark     a circuit before, none after: the port goes dark on purpose
//   kStay     the same partner before and after, or no circuit in either mapping
//   kUnknown  not known (no mappings, or the state before the reconfiguration is not known)
enum class Intent { kUnknown, kMove, kUp, kDark, kStay };
const char* intent_name(Intent i);

// One end of a circuit.
struct Endpoint {
  std::string host, interface;
  auto operator<=>(const Endpoint&) const = default;
};

// A mapping as the hosts see it: its name and its links, each connecting two endpoints both ways.
struct MappingLinks {
  std::string name;
  std::vector<std::pair<Endpoint, Endpoint>> links;
};

// The intent of every endpoint either mapping names (ports in neither are not listed).
std::map<Endpoint, Intent> intents_between(const MappingLinks& before, const MappingLinks& after);

// The intents of one reconfiguration.
struct IterationIntent {
  std::string mapping;               // the mapping it applies; a row whose command names another gets kUnknown
  std::map<Endpoint, Intent> ports;  // a port not listed had no circuit before or after: kStay
  // Each port's partner host before and after (absent: no circuit). The RDMA probe runs one
  // queue pair per link of every mapping and labels each with its peer (`rxe0/eth1@h3`): a
  // port's outage is its old partner's pair stalling and its new partner's pair resuming, not
  // another pair's jitter.
  std::map<Endpoint, std::string> peer_before, peer_after;
};

// The intents of a run's reconfigurations, by iteration number (1..N); an iteration not listed
// is kUnknown for every port.
struct Intents {
  std::string run;   // the run they belong to; empty: any run of the timeline
  std::string from;  // where they came from, for the summary ("results/x/meta.json")
  std::map<int, IterationIntent> iterations;
  Intent at(const std::string& run, int iteration, const std::string& mapping, const std::string& host,
            const std::string& interface) const;
  // The reconfiguration's intents, or null where at() would say kUnknown for every port.
  const IterationIntent* find(const std::string& run, int iteration, const std::string& mapping) const;
};

// The intents of a sequence of reconfigurations: `initial` is the mapping in place before the
// first, `applied` each reconfiguration in order: its iteration number, the mapping it applied
// and whether it was applied (acked).
// After one that was not applied the switch's state is unknown, so the next one's intents are
// not listed (kUnknown); the one after that again knows its predecessor only if that succeeded.
struct AppliedMapping {
  int iteration = 0;
  std::string mapping;
  bool ok = true;
};
Intents derive_intents(const std::map<std::string, MappingLinks>& mappings, const std::string& initial,
                       const std::vector<AppliedMapping>& applied, const std::string& run = "");

// The edge times of a row, in breakdown.csv's column order. kCarrierDown / kCarrierUp are the
// kernel's announcement (`carrier`, `carrier_inferred`), what the durations and the status read;
// kCarrierBitDown / kCarrierBitUp the polled live bit (`carrier_bit`, `carrier_bit_inferred`),
// after the layer edges: an observation of the carrier layer that only the `unseen` rule reads.
enum Edge : int {
  kIssued,
  kAcked,
  kLightLost,
  kLightBack,
  kFirmwareDown,
  kFirmwareUp,
  kCarrierDown,
  kCarrierUp,
  kRdmaStalled,
  kRdmaResumed,
  kCarrierBitDown,
  kCarrierBitUp,
  kEdgeCount
};
const std::array<const char*, kEdgeCount>& edge_columns();  // "issued_ns", ...

// The derived durations, in breakdown.csv's column order.
enum Duration : int {
  kControl,
  kSwitching,
  kDark,
  kFirmware,
  kCarrier,
  kKernel,
  kRdma,
  kOutage,
  kTotal,
  kDurationCount
};
const std::array<const char*, kDurationCount>& duration_columns();  // "control_ms", ...

// BreakdownRow::awaited's bits.
constexpr uint8_t kAwaitedLight = 1, kAwaitedFirmware = 2, kAwaitedCarrier = 4, kAwaitedRdma = 8;

// A GID index that held an address of the interface before a reconfiguration and no longer
// holds it after (docs/experiments.md, "GID and neighbour changes"): a queue pair created with
// that index sends from a GID that is gone. Only RoCE v2 entries other than the link-local
// default (fe80::/10) count: the GIDs ocslab's queue pairs are created with.
struct GidLoss {
  std::string table;  // "<device>/<port>" ("rxe_eth1/1")
  int index = 0;
  std::string held;             // what it held: "<type> <address>" ("roce_v2 ::ffff:10.10.0.1")
  std::string now;              // what it holds after, "" when empty
  std::optional<int> moved_to;  // the index of the same table that holds `held` after, if any
};

struct BreakdownRow {
  std::string run;
  int iteration = 0;
  std::string mapping;
  std::string host;
  std::string interface;
  Status status = Status::kOk;
  Intent intent = Intent::kUnknown;  // kUnknown unless the breakdown had intents
  std::array<std::optional<int64_t>, kEdgeCount> edges;
  // A port coming up (intent kUp): the layers it had to bring up, one bit each (kAwaitedLight,
  // ...), so a localisation can tell a layer that never came up from one that is not probed.
  uint8_t awaited = 0;
  // kLost: the host's last heartbeat (its capture's end), before the command.
  std::optional<int64_t> capture_end_ns;
  // The gid probe's rows in the reconfiguration's window: GID table changes (gid_added,
  // gid_removed, gid_changed), neighbour changes, and the GID indexes that lost their address.
  int gid_changes = 0, neigh_changes = 0;
  std::vector<GidLoss> gid_lost;

  // ns, empty when either end is missing.
  std::optional<int64_t> duration_ns(Duration d) const;
};

// What a row's status is decided from (classify_row); compute_breakdown gathers them from the
// row's edges, its intent and the layers its pair is probed on.
struct RowFacts {
  // The timeline has OCS commands and this iteration's was not acknowledged as applied.
  bool command_failed = false;
  Intent intent = Intent::kUnknown;
  // A port coming up (kUp): some layer it is probed on was not up at the command, or it runs RDMA
  // (whose first traffic must come); some layer or RDMA came up; every one of those came up.
  bool up_expected = false, any_up = false, came_up = false;
  // Any other intent: some layer went down or RDMA stalled; one of them did not come back.
  bool went_down = false, stayed_down = false;
  // The host's capture ended before the command (Timeline::capture_lost_at).
  bool capture_lost = false;
  // The port's light was dark for at least BreakdownOptions::unseen_min_ns and came back, or its
  // firmware-layer link went down and came back; its carrier is probed, and the carrier layer
  // has no edge in the row: neither announced nor polled (the live bit).
  bool carrier_unseen = false;
};

// A row's status: kFailed for a failed command (even with the capture lost: that is the switch's),
// else kLost for a lost capture; a port coming up is kOk when all it awaited came up, kIncomplete
// when some did not, kUnaffected when it awaited nothing and nothing came up; a port going dark
// is kDisconnected; any other is kUnaffected when nothing went down, kIncomplete when something
// stayed down, kUnseen when the carrier did not see a dark spell that long, else kOk.
Status classify_row(const RowFacts& facts);

struct BreakdownOptions {
  double dark_dbm = -30;  // rx_power_dbm below this counts as dark
  // A dark spell this long that the carrier layer did not show makes the row kUnseen. 20 ms:
  // well above the virtual lab's link models' loss of signal (1 ms) (docs/experiments.md,
  // "unseen").
  int64_t unseen_min_ns = 20'000'000;
};

struct Breakdown {
  std::vector<BreakdownRow> rows;  // by run, iteration, host, interface
  size_t iterations = 0;
  // How the timeline was cut into reconfigurations: "iteration column", "ocs commands" or
  // "layer edges".
  std::string iterations_from;
  // With intents: breakdown.csv gets a last column `intent`; where they came from (Intents::from).
  bool has_intents = false;
  std::string intents_from;
  // The timeline has gid probe rows: breakdown.csv ends in `gid_changes`, `neigh_changes`.
  bool has_gid = false;
};

// `intents`: what each reconfiguration meant to do to each port (docs/experiments.md,
// "Intents"); null: every port is judged by its edges alone, as if it moved.
Breakdown compute_breakdown(const Timeline& timeline, const BreakdownOptions& options = {},
                            const Intents* intents = nullptr);

// All breakdown.csv columns, in order, but the optional last ones (`intent`, then
// `gid_changes` and `neigh_changes`).
std::vector<std::string> breakdown_columns();
// A duration in ms as written to breakdown.csv: exact to the nanosecond ("12.000345").
std::string format_ms(int64_t ns);
void write_breakdown_csv(const Breakdown& b, std::ostream& out);

}  // namespace ocslab::analysis
