// Routes and permanent neighbours over rtnetlink (libnl-route builds and parses the messages):
// dumps of what the kernel holds and pipelined add/replace/delete batches, many requests per
// send and one ack each, so thousands of rules cost a few system calls instead of processes.
#pragma once

#include <cstddef>
#include <map>
#include <string>
#include <vector>

#include "ocslab/forwarding/change.h"
#include "ocslab/forwarding/kernel_error.h"
#include "ocslab/forwarding/rule_plan.h"

struct nl_sock;

namespace ocslab::forwarding {

// An IPv4 unicast route of the main table, whoever made it.
struct KernelRoute {
  RouteRule rule;  // rule.protocol: the route's rtm_protocol
  int prefix_len = 32;
  int priority = 0;  // metric; ocslab's routes have 0
};

struct KernelNeighbour {
  NeighbourRule rule;
  uint16_t state = 0;  // NUD_* bits
  bool permanent() const;
};

struct RouteRequest {
  ChangeOp op = ChangeOp::add;  // add: must not exist yet (EXCL); replace: create or overwrite
  RouteRule rule;
};
struct NeighbourRequest {
  ChangeOp op = ChangeOp::add;
  NeighbourRule rule;
};

class RouteNetlink {
 public:
  // NETLINK_ROUTE sockets in the calling thread's network namespace.
  RouteNetlink();
  ~RouteNetlink();
  RouteNetlink(const RouteNetlink&) = delete;
  RouteNetlink& operator=(const RouteNetlink&) = delete;

  // IPv4 unicast routes of the main table (all protocols; ocslab's are protocol kRouteProtocol).
  std::vector<KernelRoute> list_routes();
  // Every IPv4 neighbour entry, any state.
  std::vector<KernelNeighbour> list_neighbours();

  // Pipelined batches: up to `window` requests per send, then their acks. Every request is
  // sent even when an earlier one fails (the kernel carries on too); then the first failure,
  // in request order, is thrown as KernelError naming its rule (as the ip command) with the
  // kernel's errno and extack text, plus how many others failed. An unknown device is an
  // Error naming the device and the rule, raised before anything of the batch is sent.
  void apply(const std::vector<RouteRequest>& requests);
  void apply(const std::vector<NeighbourRequest>& requests);

  // Device name -> ifindex in this namespace; throws Error naming `dev` when it does not exist.
  int ifindex(const std::string& dev);
  std::string ifname(int index);

  size_t window = 256;

 private:
  struct Pending;
  void refresh_links();
  void send_and_ack(std::vector<Pending>& batch);
  nl_sock* dump_ = nullptr;
  nl_sock* req_ = nullptr;
  uint32_t seq_ = 1;
  std::map<std::string, int> by_name_;
  std::map<int, std::string> by_index_;
};


}  // namespace ocslab::forwarding
