// The GID probe: watches the RDMA GID table entries of one interface (gid_table.h) and its
// neighbour entries (neigh_table.h), so a timeline shows an address that left its GID index, or
// a peer's neighbour entry that went, across a reconfiguration. A queue pair keeps the GID index
// it was created with; if the kernel re-adds the interface's address at another index (the
// address was removed and added again), that queue pair sends from a GID that is gone.
//
// Samples (source "gid"), the table at start and then one per change seen by a poll:
//   subject "<device>/<port>/<interface>" ("rxe_eth1/1/eth1"), value = the GID index,
//   unit = "<type> <address>" ("roce_v2 ::ffff:10.10.0.1"; type roce_v1, roce_v2 or unknown):
//     gid           an entry of the table at start
//     gid_added     an index that was empty (or another interface's) now holds this entry
//     gid_removed   the entry (unit: what it held) is gone from the index
//     gid_changed   the index holds another GID or type (unit: the new one)
//   subject "<interface>@<neighbour address>" ("eth1@10.10.0.2"), value = its NUD state bits
//   (2 REACHABLE, 4 STALE, 128 PERMANENT, ...), unit = "<STATE> <lladdr>" ("REACHABLE
//   52:54:00:12:34:02"; the lladdr is left out when the entry has none):
//     neigh          an entry at start
//     neigh_added, neigh_removed (unit: its last state), neigh_changed (state or lladdr)
// t_ns / mono_ns are taken right after the poll that saw the change; the change happened since
// the poll before (at most interval earlier).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "ocslab/probes/gid_table.h"
#include "ocslab/probes/neigh_table.h"
#include "ocslab/probes/probe.h"

namespace ocslab::probes {

struct GidProbeConfig {
  std::string interface;  // the RDMA port's netdev ("eth1")
  // Poll period of both tables. A poll reads the GID files of the slots up to the highest in
  // use plus GidTableReader::kScanMargin and dumps the neighbour table once.
  std::chrono::milliseconds interval{100};
  // Every this many polls the whole GID table is read (a safety net under the lowest-free-slot
  // rule the shorter reads rely on).
  int full_scan_every = 50;
  bool neighbours = true;  // false: the GID table only
  std::string host;        // Sample.host
  std::string sysfs_root = "/sys/class/infiniband";
};

class GidProbe : public Probe {
 public:
  explicit GidProbe(GidProbeConfig config);
  ~GidProbe() override;
  std::string name() const override { return "gid"; }
  // Finds the ports whose GID table names the interface and reads both tables once before
  // returning (their Samples are the first the thread emits). Available when the GID table or the
  // neighbour table can be watched; the method says which, the reason what is left out and why.
  ProbeStatus start(SampleSink sink) override;
  void stop() override;

  // Polls done since start (the first reading counts): for tests that wait for quiet polls.
  uint64_t polls() const;

 private:
  void run();
  void poll(std::vector<Sample>& out, bool first);
  Sample sample(const std::string& subject, const std::string& signal, double value, const std::string& unit) const;

  GidProbeConfig config_;
  std::unique_ptr<GidTableReader> gids_;
  std::unique_ptr<NetlinkSocket> neigh_sock_;
  int ifindex_ = 0;
  bool neigh_failing_ = false;
  std::vector<GidEntry> gid_table_;
  std::vector<NeighEntry> neigh_table_;
  std::vector<Sample> first_;
  SampleSink sink_;
  std::thread thread_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false, started_ = false;
  uint64_t polls_ = 0;
};

}  // namespace ocslab::probes
