// Reading the kernel's acks (NLMSG_ERROR messages) and the text of their extended ack: the one
// place that walks an ack's attributes, for the common netlink socket and the forwarding
// library's rtnetlink and tc programmers. Every read stays within the message's nlmsg_len.
#pragma once

#include <linux/netlink.h>

#include <string>

namespace ocslab::netlink {

// The error an NLMSG_ERROR message carries, as a positive errno; 0 for an ACK. EBADMSG when the
// message is too short to hold a struct nlmsgerr or its error is no -errno (only a broken peer
// sends that).
int ack_error(const nlmsghdr* nlh);

// NLMSGERR_ATTR_MSG of an NLMSG_ERROR message (NLM_F_ACK_TLVS set, the request echoed unless
// NLM_F_CAPPED), "" when the kernel attached none or the message is malformed.
std::string extack_message(const nlmsghdr* nlh);

// "Operation not permitted (kernel: <extack>)"; just strerror when extack is "".
std::string kernel_text(int err, const std::string& extack);

}  // namespace ocslab::netlink
