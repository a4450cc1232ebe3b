// Reading an experiment timeline (`timeline.csv` of a run, or an `ocslab-agent capture` file)
// fast: the file is mapped, columns are found by header name, and only the rows the breakdown
// reads (control and layer signals) are kept, with their strings interned to small ids.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace ocslab::analysis {

// The (source, signal) pairs the breakdown reads; every other row is counted and dropped.
enum class Kind : uint8_t {
  kCommand,        // ocs command
  kAck,            // ocs ack
  kLightEmulator,  // emulator light
  kLightOcsPower,  // ocs_power light
  kRxPower,        // rx_power rx_power_dbm (value in dBm)
  kLinkEmulator,   // emulator link
  kLinkFirmware,   // firmware link
  kCarrier,        // carrier carrier (and carrier_inferred): the kernel's announcement
  kStalled,        // rdma stalled
  kResumed,        // rdma resumed
  kCarrierBit,     // carrier carrier_bit (and carrier_bit_inferred): the polled live bit
  kGidInitial,     // gid gid: an entry of the GID table when the probe started (no change)
  kGidSet,         // gid gid_added, gid_changed: the index now holds the row's GID
  kGidRemoved,     // gid gid_removed: the index no longer holds the row's GID
  kNeighChange,    // gid neigh_added, neigh_removed, neigh_changed
};
constexpr int kKindCount = 15;

// A GID-table kind (kGidInitial, kGidSet, kGidRemoved).
constexpr bool is_gid_kind(Kind k) { return k == Kind::kGidInitial || k == Kind::kGidSet || k == Kind::kGidRemoved; }

// Strings interned to dense ids; id 0 is always the empty string.
class StringTable {
 public:
  StringTable();
  uint32_t intern(std::string_view s);
  std::optional<uint32_t> find(std::string_view s) const;  // the id of a string interned already
  const std::string& str(uint32_t id) const { return strings_[id]; }
  size_t size() const { return strings_.size(); }

 private:
  struct Hash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  std::vector<std::string> strings_;
  std::unordered_map<std::string, uint32_t, Hash, std::equal_to<>> ids_;
};

struct Event {
  int64_t t_ns = 0;
  double value = 0;
  uint32_t host = 0;       // string id
  uint32_t subject = 0;    // string id: the interface for layer rows, the raw subject for ocs rows
  uint32_t peer = 0;       // string id: rdma stalled/resumed rows, the peer after '@' ("" without)
  uint32_t run = 0;        // string id ("" without a run column)
  int32_t iteration = -1;  // -1 without an iteration column
  Kind kind = Kind::kCommand;
  uint32_t line = 0;  // line of the file (1 = header)
  // GID rows (is_gid_kind): the table, the subject before its interface ("rxe_eth1/1"), and the
  // unit, the GID's type and address ("roce_v2 ::ffff:10.10.0.1"); string ids, "" otherwise.
  uint32_t table = 0;
  uint32_t detail = 0;
};

struct Timeline {
  std::string path;
  StringTable strings;
  std::vector<Event> events;  // kept rows, in file order
  bool has_run = false;
  bool has_iteration = false;
  size_t rows = 0;  // data rows read, kept or not
  // Each host's heartbeats, by heartbeat_key(run, host) (string ids): the last one and the gap
  // before it. A host whose heartbeats stop before a reconfiguration's command, while other
  // hosts' go on well after (more than two of its gaps), had no capture then: its agent was
  // lost. Hosts without heartbeat rows are not listed.
  struct Heartbeats {
    int64_t last_ns = 0, gap_ns = 0;
  };
  std::unordered_map<uint64_t, Heartbeats> heartbeats;
  static uint64_t heartbeat_key(uint32_t run, uint32_t host) { return (uint64_t{run} << 32) | host; }
  // A host's heartbeats in run, if it has any; run "" matches a timeline without runs.
  std::optional<Heartbeats> heartbeats_of(const std::string& run, const std::string& host) const;
  // When host's capture ended before the rest of the run's: its last heartbeat, when the run's
  // other hosts sent heartbeats more than two of its gaps (at least 100 ms) after it.
  std::optional<int64_t> capture_lost_at(const std::string& run, const std::string& host) const;
};

// The interface a subject names: the part before the first '@', after its last '/'
// (`rxe_eth1/eth1@h2` -> `eth1`).
std::string_view interface_of(std::string_view subject);
// The peer label after '@' of an rdma subject ("rxe0/eth1@h3" -> "h3"), "" without one; a
// queue-pair matrix's label is PEER:tTrR ("rxe0/eth1@h3:t12r2" -> "h3").
std::string_view peer_of(std::string_view subject);

// Which breakdown input a row is, if any.
bool classify(std::string_view source, std::string_view signal, Kind& kind);

// Reads a timeline file. Throws ocslab::ConfigError ("path:line: what") for malformed input
// (missing column, wrong field count, bad number, unterminated quote) and ocslab::Error when
// the file cannot be opened.
Timeline read_timeline(const std::string& path);

// The same over text in memory; `name` stands for the path in messages.
Timeline parse_timeline(std::string_view text, const std::string& name);

}  // namespace ocslab::analysis
