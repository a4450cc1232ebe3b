// if2 provisioning where the NIC has no second function (virtual lab, NICs without NPAR or
// SR-IOV): a macvlan in mode private over the port's if1, with the fabric's if2 MAC, no IP
// address and link up, created over rtnetlink. Idempotent, and it never touches an existing
// interface of that name that is not a macvlan of the expected parent.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ocslab/common/netlink_socket.h"
#include "ocslab/forwarding/fabric.h"

namespace ocslab::forwarding {

enum class LinkChange { unchanged, created, updated, deleted, absent };
const char* to_string(LinkChange c);

struct LinkState {
  int index = 0;
  std::string kind;  // IFLA_INFO_KIND: "macvlan", "veth", "" for a plain device
  int parent = 0;    // IFLA_LINK, 0 when none
  uint32_t macvlan_mode = 0;
  std::string mac;  // lower case
  bool up = false;  // IFF_UP
};

class If2Links {
 public:
  // A NETLINK_ROUTE socket in the calling thread's network namespace.
  If2Links();

  std::optional<LinkState> get(const std::string& name);
  // Creates the macvlan (IPv6 address generation off, so it gets no link-local address
  // either, then link up) or brings an existing macvlan of `parent` to the spec: MAC, mode
  // private, up. Throws Error when the parent is missing or `name` exists as anything else
  // (another kind, or a macvlan of another device), KernelError when the kernel refuses.
  LinkChange ensure_macvlan(const MacvlanSpec& spec);
  // Deletes it when it is a macvlan of `parent`; absent when there is none; refuses (Error)
  // anything else by that name.
  LinkChange delete_macvlan(const MacvlanSpec& spec);

 private:
  LinkState check_ours(const MacvlanSpec& spec, const LinkState& s, int parent_index, const char* doing);
  NetlinkSocket sock_;
};

}  // namespace ocslab::forwarding
