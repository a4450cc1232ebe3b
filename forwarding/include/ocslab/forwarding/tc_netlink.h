// Programs the relay side of host-based forwarding into the kernel over rtnetlink (libmnl):
// the clsact qdisc on an if2 and ocslab's flower/pedit/mirred filters on its ingress. Only
// filters carrying ocslab's tag (chain 0, prio 0x4f00..0x4fff, kActionCookie on every action)
// are ever listed, changed or deleted.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "ocslab/common/netlink_socket.h"
#include "ocslab/forwarding/kernel_error.h"
#include "ocslab/forwarding/rule_plan.h"
#include "ocslab/forwarding/tc_messages.h"

namespace ocslab::forwarding {

struct InstalledFilter {
  FilterRule rule;       // decoded back: dev, chain, prio, dst, set_eth_dst, redirect_dev, cookie
  uint64_t packets = 0;  // frames that matched (the pedit action's software counter)
  uint64_t bytes = 0;
  uint32_t handle = 0;
  // Empty when the filter has exactly the form ocslab installs; otherwise what differs (it
  // carries ocslab's tag, so a diff should replace it).
  std::string problem;
};

class TcNetlink {
 public:
  // A NETLINK_ROUTE socket in the calling thread's network namespace; every later call
  // works in that namespace, including device-name lookups.
  TcNetlink();

  bool has_clsact(const std::string& dev);
  // Throws KernelError when the device already has a clsact (or an ingress qdisc).
  void add_clsact(const std::string& dev);
  // Refuses (Error, naming them) while the clsact holds filters that are not ocslab's, on
  // either hook; ocslab's own filters go with it.
  void delete_clsact(const std::string& dev);

  // ocslab's filters on dev's ingress (chain 0, prio range, cookie), by prio.
  std::vector<InstalledFilter> list_owned(const std::string& dev);
  // Every filter on one hook of dev (tc::kIngressParent / kEgressParent), any chain, decoded.
  std::vector<tc::DecodedFilter> dump_filters(const std::string& dev, uint32_t parent);

  // Pipelined: all messages go out in a few large sends and the acks are collected after.
  // All-or-nothing per call: when the kernel refuses any rule, the rules of this call it
  // accepted are deleted again (deleted ones re-added) and KernelError names the first
  // refused rule with the kernel's extack text. Bad rule fields (unknown device, malformed
  // MAC or prefix, prio outside ocslab's range) throw Error before anything is sent.
  void add_filters(const std::vector<FilterRule>& rules);
  // Each rule is found by dev + chain + prio among ocslab's filters; a rule that is not
  // installed, or whose prio holds a filter that is not ocslab's, throws Error before
  // anything is sent.
  void delete_filters(const std::vector<FilterRule>& rules);

  // Raw bytes of the ingress dump of dev as the kernel sent them (fuzz corpus, debugging).
  std::vector<char> raw_filter_dump(const std::string& dev);

  // Device names <-> ifindex of this socket's namespace, read fresh from the kernel.
  std::map<std::string, int> link_indexes();

 private:
  struct Outcome {
    int err = 0;
    std::string extack;
  };
  // Sends the messages (each with a distinct seq from first_seq on, NLM_F_ACK set) in
  // chunks and returns one outcome per message.
  std::vector<Outcome> transact(const std::vector<char>& messages, uint32_t first_seq, size_t count);
  // A dump: every message of the reply, concatenated.
  std::vector<char> dump(std::vector<char> request);
  void single(std::vector<char> request, const std::string& what);
  int ifindex(const std::string& dev);

  NetlinkSocket sock_;
};

}  // namespace ocslab::forwarding
