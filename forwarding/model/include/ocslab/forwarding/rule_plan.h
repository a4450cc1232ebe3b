// The per-host rule plan of host-based forwarding, as data: what each host's kernel must hold
// (routes, permanent neighbours, clsact + flower/pedit/mirred filters on if2) and the exact
// equivalent ip/tc commands. Every rule carries ocslab's tags so that later programming,
// verification and rollback touch only what ocslab made.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ocslab/forwarding/fabric.h"
#include "ocslab/forwarding/routes.h"

namespace ocslab::forwarding {

// Tagging scheme (docs/forwarding.md). Routes: rtm_protocol 79 (0x4f, named "ocslab" by an
// /etc/iproute2/rt_protos.d entry). Filters: chain 0 of the if2 clsact ingress, priorities
// 0x4f00..0x4fff owned by ocslab, one per destination on that device; each action carries
// kActionCookie. Neighbours have no protocol in the rendered text; they are owned by
// destination address (the /32 routes with protocol 79 name them).
inline constexpr int kRouteProtocol = 0x4f;
inline constexpr uint32_t kTcChain = 0;
inline constexpr uint16_t kTcPrioFirst = 0x4f00;
inline constexpr uint16_t kTcPrioLast = 0x4fff;
inline constexpr const char* kActionCookie = "6f63736c61622d66";  // "ocslab-f" in hex

struct RouteRule {
  std::string dst;  // "10.0.0.3/32"
  std::string dev;  // if1 of the port toward the next hop
  std::string src;  // that if1's own address
  int protocol = kRouteProtocol;
};

struct NeighbourRule {
  std::string dst;     // "10.0.0.3"
  std::string lladdr;  // next hop's if2 MAC, or the destination's if1 MAC when next hop = destination
  std::string dev;
};

struct QdiscRule {
  std::string dev;  // an if2: clsact
};

struct FilterRule {
  std::string dev;  // if2 on which relayed frames arrive (ingress)
  uint32_t chain = kTcChain;
  uint16_t prio = kTcPrioFirst;
  std::string dst;           // "10.0.0.3/32"
  std::string set_eth_dst;   // next relay's if2 MAC, or the destination's if1 MAC on the last hop
  std::string redirect_dev;  // if1 of the port toward the next hop (mirred egress redirect)
  std::string cookie = kActionCookie;
};

// An if2 that ocslab creates as a macvlan (mode private) over the port's if1, where the NIC
// has no second function (virtual lab). Not part of make_plan: the agent adds them when asked
// (--if2-macvlan); a macvlan is ocslab's only when ocslab created it (journal).
struct LinkRule {
  std::string name;    // the if2, e.g. "eth1v"
  std::string parent;  // the port's if1
  std::string mac;     // lower case
};

struct HostPlan {
  std::string host;
  std::vector<LinkRule> links;    // created first, removed last
  std::vector<RouteRule> routes;  // ordered by destination address
  std::vector<NeighbourRule> neighbours;
  std::vector<QdiscRule> qdiscs;
  std::vector<FilterRule> filters;  // ordered by device, then prio
};

struct Plan {
  std::vector<HostPlan> hosts;  // in the fabric's host order
  // Addresses some host cannot reach without passing through the owner's other ports,
  // e.g. "h1 -> 10.0.0.6 (h2:p1)": not programmed; use another address of that host.
  std::vector<std::string> unreachable;
  const HostPlan& host(const std::string& name) const;
};

struct PlanOptions {
  // Every NIC reaches every destination through its own circuit, not only the NIC its route
  // leaves. An RDMA device sends through its own port only (Soft-RoCE binds its route lookup to
  // its netdev, so a /32 route through another NIC never applies; a ConnectX port has one
  // link): a queue pair on NIC X whose peer's address is routed out of NIC Z is unreachable
  // unless X has a path of its own. Per host H, connected port X and destination D whose route
  // leaves another port: a neighbour `D lladdr <X's peer's if2 MAC> dev X` (the subnet route on
  // X then carries the frame), and on X's peer a filter for D on that if2 that follows the
  // peer's own tree. When X's peer is D's owner on another port, the owner sends the frame out
  // of D's port to D's circuit partner, whose tree hands it straight back (two extra hops; no
  // other rule kind can deliver a frame to another local NIC's RDMA device).
  bool every_nic = false;
};

// Throws Error if a device would need more filters than the priority range holds.
Plan make_plan(const Fabric& fabric, const Routes& routes, const PlanOptions& options = {});

std::string render(const RouteRule& r);      // ip route replace D/32 dev X src S proto 79
std::string render(const NeighbourRule& n);  // ip neigh replace D lladdr M dev X nud permanent
std::string render(const LinkRule& l);       // ip link add link P name X address M type macvlan mode private
std::string render(const QdiscRule& q);      // tc qdisc add dev X clsact
std::string render(const FilterRule& f);     // tc filter add dev X ingress protocol ip prio P flower ...
// All commands of one host in apply order: if2 macvlans, qdiscs, filters, neighbours, routes (a relay is
// ready before any source sends through it; a neighbour exists before its route is used).
std::vector<std::string> commands(const HostPlan& plan);

nlohmann::json to_json(const Plan& plan);

// A HostPlan as JSON (the fields of to_json(Plan) without commands) and back; the journal's
// format. from_json throws Error naming the missing or mistyped field.
nlohmann::json to_json(const HostPlan& plan);
HostPlan host_plan_from_json(const nlohmann::json& j);

}  // namespace ocslab::forwarding
