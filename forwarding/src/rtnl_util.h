// Private helpers for the rtnetlink programmers of this library: a C++ attribute walk
// (mnl_attr_for_each needs C's void* conversions) and a request that waits for its ack and turns
// a refusal into KernelError. Acks and their extended-ack text: ocslab/common/netlink_ack.h.
#pragma once

#include <libmnl/libmnl.h>
#include <linux/netlink.h>

#include <cstring>
#include <string>

#include "ocslab/common/netlink_socket.h"

namespace ocslab::forwarding::rtnl {

template <typename Fn>
void for_each_attr(const struct nlmsghdr* nlh, size_t header, Fn fn) {
  const char* p = static_cast<const char*>(mnl_nlmsg_get_payload(nlh)) + MNL_ALIGN(header);
  const char* end = reinterpret_cast<const char*>(nlh) + nlh->nlmsg_len;
  while (p + sizeof(struct nlattr) <= end) {
    const auto* a = reinterpret_cast<const struct nlattr*>(p);
    if (a->nla_len < sizeof(struct nlattr) || p + a->nla_len > end) break;
    fn(a);
    p += MNL_ALIGN(a->nla_len);
  }
}

// Sends one request (NLM_F_ACK is set) and waits for its ack; a refusal throws KernelError
// "<what>: <kernel_text>". Replies other than the ack go to on_reply when given.
void request_ack(NetlinkSocket& sock, struct nlmsghdr* nlh, const std::string& what,
                 void (*on_reply)(const struct nlmsghdr*, void*) = nullptr, void* ctx = nullptr);

}  // namespace ocslab::forwarding::rtnl
