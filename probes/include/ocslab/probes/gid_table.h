// An interface's entries in the RDMA GID table, read from sysfs the way the kernel lays it out
// (docs/protocols.md, "RDMA GID table in sysfs"): per port of a device, `gids/<i>` is the GID,
// `gid_attrs/ndevs/<i>` the netdev it belongs to and `gid_attrs/types/<i>` its type. A queue
// pair is created with one index of this table (its source GID); when an address is removed
// and added again the kernel may give it another index, and the index the queue pair holds no
// longer carries its address. The GID probe (gid_probe.h) diffs successive readings.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ocslab::probes {

using GidBytes = std::array<uint8_t, 16>;

// "RoCE v2" -> kRoceV2; "IB/RoCE v1" (the kernel prints the same for IB and RoCE v1; on an
// Ethernet netdev it is RoCE v1) -> kRoceV1; anything else kUnknown.
enum class GidType { kUnknown, kRoceV1, kRoceV2 };
GidType parse_gid_type(std::string_view text);
const char* gid_type_name(GidType t);  // "roce_v1", "roce_v2", "unknown"

// A GID as sysfs prints it: eight groups of four hex digits separated by ':' and a newline
// ("fe80:0000:0000:0000:5054:00ff:fe12:3401"). nullopt for anything else.
std::optional<GidBytes> parse_sysfs_gid(std::string_view text);
// The GID as an IPv6 address ("::ffff:10.10.0.1", "fe80::5054:ff:fe12:3401").
std::string gid_address(const GidBytes& g);
// All zero: the kernel's empty table slot.
bool gid_empty(const GidBytes& g);
// The default GID of a RoCE port (fe80::/10, from the MAC): no address a queue pair was
// configured for.
bool gid_link_local(const GidBytes& g);

struct GidEntry {
  std::string device;  // "rxe_eth1"
  int port = 1;
  int index = 0;
  GidBytes gid{};
  GidType type = GidType::kUnknown;
  bool operator==(const GidEntry&) const = default;
};

// One port of a device whose table has at least one entry on the interface.
struct GidPort {
  std::string device;
  int port = 1;
  int table_size = 0;  // entries in gids/ (at most kMaxGidTable)
};

inline constexpr int kMaxGidTable = 4096;
inline constexpr size_t kMaxSysfsRead = 256;  // every file read here is one short line

// The ports under sysfs_root ("/sys/class/infiniband", or a fake tree) whose gid_attrs/ndevs
// name `interface`, sorted by device and port. Device and port folders with names that are not
// plain words are skipped.
std::vector<GidPort> find_gid_ports(const std::string& interface, const std::string& sysfs_root);

// Reads the interface's entries of the given ports. Keeps each slot's last GID so that the
// netdev and type files are read again only for a slot whose GID changed (or whose attributes
// could not be read last time); and because the
// kernel puts a new entry into the lowest free slot, a reading that is not `full` reads the
// slots up to the highest one in use plus kScanMargin.
class GidTableReader {
 public:
  static constexpr int kScanMargin = 16;
  GidTableReader(std::string sysfs_root, std::string interface, std::vector<GidPort> ports);

  // The interface's entries, sorted by device, port and index. Never throws for sysfs content: a
  // slot whose GID file cannot be read or parsed keeps its last reading (a failed read is not a
  // removal), and is named in errors() once until it reads again.
  std::vector<GidEntry> read(bool full);
  // "<path>: <why>" of the failures of the last read() that are new since the read before.
  const std::vector<std::string>& errors() const { return errors_; }
  const std::vector<GidPort>& ports() const { return ports_; }

 private:
  struct Slot {
    GidBytes gid{};
    bool ours = false, failing = false;
    bool known = false;  // the netdev (and for ours the type) were read for this GID
    GidType type = GidType::kUnknown;
  };
  void read_slot(const GidPort& p, int index, Slot& s);

  std::string root_, interface_;
  std::vector<GidPort> ports_;
  std::vector<std::vector<Slot>> slots_;  // per port, per index
  std::vector<int> highest_;              // per port: the highest slot in use, -1 for none
  std::vector<std::string> errors_;
};

// What changed from one reading to the next (both sorted as GidTableReader::read returns them).
struct GidChange {
  enum class Kind { kAdded, kRemoved, kChanged } kind = Kind::kAdded;
  GidEntry entry;   // the entry now; for kRemoved the entry that went
  GidEntry before;  // kChanged: what the slot held
};
std::vector<GidChange> diff_gid_tables(const std::vector<GidEntry>& before, const std::vector<GidEntry>& after);

// Bounded read of a small sysfs file without following a final symbolic link: at most
// kMaxSysfsRead bytes, or nullopt with errno's text in `why`.
std::optional<std::string> read_sysfs_line(const std::string& path, std::string& why);

}  // namespace ocslab::probes
