// An interface's neighbour entries (ARP and NDP), dumped with rtnetlink RTM_GETNEIGH
// (docs/protocols.md, "Neighbour entries over rtnetlink"). The GID probe (gid_probe.h) diffs
// successive dumps: on Soft-RoCE a queue pair's packets need the peer's entry, and carrier loss
// flushes the dynamic ones (docs/probes.md, "RDMA resume in the virtual lab").
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace ocslab {
class NetlinkSocket;
}

namespace ocslab::probes {

struct NeighEntry {
  std::string address;  // "10.10.0.2", "fe80::1"
  std::string lladdr;   // "52:54:00:12:34:02"; empty when the entry has none (INCOMPLETE, FAILED)
  uint16_t state = 0;   // NUD_* bits (linux/neighbour.h): 0x02 REACHABLE, 0x04 STALE, 0x80 PERMANENT, ...
  bool operator==(const NeighEntry&) const = default;
};

// "REACHABLE", "STALE", "PERMANENT", ...; several bits joined with '|'; "NONE" for 0.
std::string nud_state_name(uint16_t state);

// One RTM_NEWNEIGH message (its netlink header first, `len` bytes in all) of an IPv4 or IPv6
// entry on `ifindex`: the entry, else nullopt (another message type, family or interface, no
// destination, or a message shorter than it claims). Never reads past `len`.
std::optional<NeighEntry> parse_neigh_message(const void* data, size_t len, int ifindex);

// Dumps the neighbour table over `sock` (NETLINK_ROUTE) and keeps the entries of `ifindex`,
// sorted by address. Throws SystemError when the dump fails.
std::vector<NeighEntry> dump_neighbours(NetlinkSocket& sock, int ifindex);

struct NeighChange {
  enum class Kind { kAdded, kRemoved, kChanged } kind = Kind::kAdded;
  NeighEntry entry;  // the entry now; for kRemoved the entry that went
};
// Entries are matched by address; a changed state or lladdr is kChanged. Both sorted by address.
std::vector<NeighChange> diff_neighbours(const std::vector<NeighEntry>& before, const std::vector<NeighEntry>& after);

}  // namespace ocslab::probes
