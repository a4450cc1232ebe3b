// Host preparation the runner does over SSH before it measures, and undoes (only what it added)
// when the run ends however it ends: Soft-RoCE devices on data NICs, and permanent neighbour
// entries between data NICs that exchange RDMA traffic.
//
// Why neighbours are pinned (docs/probes.md, "RDMA resume in the virtual lab"): Soft-RoCE sends
// through the kernel's IP stack, so every packet needs the peer's ARP entry. Carrier loss flushes
// the NIC's dynamic entries; the queue pair's retransmissions then start ARP, which repeats only
// every second (retrans_time), so RDMA resumed 0.05-1 s after carrier depending on where that
// timer stood. A ConnectX queue pair carries the peer's MAC in its address vector and needs no
// neighbour entry per packet; a permanent entry gives Soft-RoCE the same behaviour.
#pragma once

#include <cstddef>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "ocslab/runner/experiment_spec.h"

namespace ocslab::runner {

// One command over a fresh SSH session; a non-zero exit is an error naming the host and command.
std::string must_exec(const HostEntry& h, const std::string& cmd);

// A data NIC of a spec host.
struct NicRef {
  size_t host = 0;  // index into ExperimentSpec::hosts
  std::string nic;
  auto operator<=>(const NicRef&) const = default;
};

class HostPrep {
 public:
  using Log = std::function<void(const std::string&)>;
  explicit HostPrep(const ExperimentSpec& spec) : spec_(spec) {}
  ~HostPrep();
  HostPrep(const HostPrep&) = delete;
  HostPrep& operator=(const HostPrep&) = delete;

  // `rdma link add rxe_NIC` on every host of `hosts` that has no RDMA device on the NIC yet.
  void add_rxe(const std::vector<size_t>& hosts, const std::vector<std::string>& nics, const Log& log);
  // For every pair (a, b): a's host gets a permanent neighbour entry for b's IPv4 address with
  // b's MAC on a's NIC, and the other way round. An entry that is already permanent is left as
  // it is (not ocslab's) and not undone. Throws naming the host and NIC that has no IPv4
  // address or MAC.
  void pin_neighbours(const std::vector<std::pair<NicRef, NicRef>>& pairs, const Log& log);

  // What was done, for meta.json: {"rxe_added": [...], "pinned_neighbours": [{host, nic, ip, mac}],
  // "left_alone": [...]} (entries that were already permanent).
  nlohmann::json record() const { return record_; }

 private:
  struct Addr {
    std::string mac, ip;
  };
  // Every NIC's MAC and IPv4 address: one session per host, all hosts at once.
  std::map<NicRef, Addr> addresses_of(const std::set<NicRef>& nics) const;
  Addr parse_address(const NicRef& n, const std::string& out) const;

  const ExperimentSpec& spec_;
  std::vector<std::pair<size_t, std::string>> undo_;  // host, command; run in reverse order
  nlohmann::json record_ = nlohmann::json::object();
};

}  // namespace ocslab::runner
