// RoCE v2 building blocks shared by the RDMA probe and the verbs collective workload: GIDs as
// text (the form both exchange with their peers), the device and GID index that carry an
// interface's IPv4 address, and the RC queue pair's RESET -> INIT -> RTR -> RTS transitions.
// The transitions return false with errno set by libibverbs, so each caller names the queue pair
// in its own error.
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>
#include <string>

namespace ocslab::verbs {

// ::ffff:a.b.c.d, the GID RoCE v2 gives an IPv4 address.
bool ipv4_mapped(const ibv_gid& g);
// 32 lowercase hex digits, the wire form of a GID in queue-pair announcements.
std::string gid_hex(const ibv_gid& g);
// Exactly 32 hex digits (either case) into g; false, g untouched, for anything else.
bool parse_gid(const std::string& hex, ibv_gid& g);
// For people: the IPv4 address of a mapped GID, else the IPv6 text.
std::string gid_text(const ibv_gid& g);

// An opened device whose `port` carries a RoCE v2 IPv4-mapped GID on the interface. The caller
// owns ctx (ibv_close_device).
struct RoceDevice {
  ibv_context* ctx = nullptr;
  std::string name;
  int gid_index = -1;
  ibv_gid gid{};
};

struct RoceSearch {
  enum class Outcome { kFound, kNoInterface, kNoDevices, kNoGid } outcome = Outcome::kNoGid;
  RoceDevice device;  // kFound only
  std::string tried;  // the devices looked at, ", "-separated
};

// Looks at every RDMA device (only `only_device` when not empty) for the GID table entry of the
// interface's IPv4 address on `port`.
RoceSearch find_roce_device(const std::string& interface, int port, const std::string& only_device = "");

// RESET -> INIT on `port`, no remote access.
bool qp_to_init(ibv_qp* qp, int port);

struct RtrParams {
  uint32_t dest_qpn = 0, rq_psn = 0;
  ibv_gid dgid{};
  int sgid_index = 0;
  int port = 1;
  ibv_mtu mtu = IBV_MTU_1024;
  uint8_t min_rnr_timer = 12;  // 0.64 ms: a peer that has not posted its receive yet is retried soon
};
// INIT -> RTR towards the remote queue pair (global routing: RoCE).
bool qp_to_rtr(ibv_qp* qp, const RtrParams& p);

struct RtsParams {
  uint32_t sq_psn = 0;
  uint8_t timeout = 14, retry_cnt = 7, rnr_retry = 7;
};
// RTR -> RTS.
bool qp_to_rts(ibv_qp* qp, const RtsParams& p);

}  // namespace ocslab::verbs
