// The RDMA port's own counters as the driver exposes them in sysfs: the driver-specific
// `hw_counters/` (mlx5: out_of_sequence, local_ack_timeout_err, ...; Soft-RoCE: sent_pkts,
// completer_retry_err, ...) and the IB PMA `counters/` (port_xmit_data, link_downed, ...).
// Listed once, kept open, re-read with pread so a read costs a few system calls; each read
// hands back only the counters that changed.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ocslab::probes {

class RdmaCounters {
 public:
  struct Change {
    std::string name;    // "hw.<file>" for hw_counters/<file>, "pma.<file>" for counters/<file>
    uint64_t value = 0;  // the counter now
    double delta = 0;    // since the previous read that succeeded; negative when it was reset
    bool first = false;  // its first good read (at start, or after failing until now): a baseline, delta 0
  };
  struct Reading {
    std::vector<Change> changes;
    // "<path>: <why>" for each counter that failed this time but not the time before (a file
    // that disappeared or cannot be read, content that is not a number): each failure is
    // reported once, and again only after the counter has read correctly in between.
    std::vector<std::string> errors;
  };

  // `port_dir` is "/sys/class/infiniband/<device>/ports/<port>" (or a fake tree in a test).
  // Lists the regular files of both folders (not `lifespan`, a setting in ms) and opens them;
  // a folder that is missing simply contributes no counter. Never throws for sysfs content:
  // a counter that cannot be opened is left out and named in `errors()`.
  explicit RdmaCounters(std::string port_dir);
  ~RdmaCounters();
  RdmaCounters(const RdmaCounters&) = delete;
  RdmaCounters& operator=(const RdmaCounters&) = delete;

  static std::string port_dir(const std::string& device, int port,
                              const std::string& sysfs_root = "/sys/class/infiniband");

  const std::string& dir() const { return dir_; }
  bool empty() const { return counters_.empty(); }
  std::vector<std::string> names() const;  // "hw.sent_pkts", ..., sorted
  // Problems met while listing (unopenable files); empty on a healthy tree.
  const std::vector<std::string>& errors() const { return list_errors_; }

  // Reads every counter. Returns each counter's first good read (`first`, delta 0: there is
  // no earlier value) and, after that, only the counters whose value changed.
  Reading read();

 private:
  struct Counter {
    std::string name, path;
    int fd = -1;
    bool have = false, failing = false;
    uint64_t value = 0;
  };
  std::string dir_;
  std::vector<Counter> counters_;
  std::vector<std::string> list_errors_;
};

}  // namespace ocslab::probes
