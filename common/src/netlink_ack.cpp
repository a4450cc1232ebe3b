#include "ocslab/common/netlink_ack.h"

#include <cerrno>
#include <cstring>

namespace ocslab::netlink {

int ack_error(const nlmsghdr* nlh) {
  if (nlh->nlmsg_len < NLMSG_LENGTH(sizeof(nlmsgerr))) return EBADMSG;
  nlmsgerr e;
  std::memcpy(&e, NLMSG_DATA(nlh), sizeof(e));
  // The kernel sends 0 or -errno (errno <= 4095, MAX_ERRNO); anything else (INT_MIN, which has no
  // negation, among them) is a broken message.
  if (e.error > 0 || e.error < -4095) return EBADMSG;
  return -e.error;
}

std::string extack_message(const nlmsghdr* nlh) {
  if (!(nlh->nlmsg_flags & NLM_F_ACK_TLVS) || nlh->nlmsg_len < NLMSG_LENGTH(sizeof(nlmsgerr))) return "";
  nlmsgerr e;
  std::memcpy(&e, NLMSG_DATA(nlh), sizeof(e));
  // The attributes follow the nlmsgerr, which echoes the request's header (NLM_F_CAPPED) or the
  // whole request.
  size_t off = NLMSG_HDRLEN + sizeof(nlmsgerr);
  if (!(nlh->nlmsg_flags & NLM_F_CAPPED)) {
    if (e.msg.nlmsg_len < NLMSG_HDRLEN) return "";
    off += NLMSG_ALIGN(e.msg.nlmsg_len - NLMSG_HDRLEN);
  }
  const char* base = reinterpret_cast<const char*>(nlh);
  while (off + NLA_HDRLEN <= nlh->nlmsg_len) {
    nlattr a;
    std::memcpy(&a, base + off, sizeof(a));
    if (a.nla_len < NLA_HDRLEN || a.nla_len > nlh->nlmsg_len - off) break;
    if ((a.nla_type & NLA_TYPE_MASK) == NLMSGERR_ATTR_MSG) {
      const char* s = base + off + NLA_HDRLEN;
      return std::string(s, strnlen(s, a.nla_len - NLA_HDRLEN));
    }
    off += NLA_ALIGN(a.nla_len);
  }
  return "";
}

std::string kernel_text(int err, const std::string& extack) {
  return std::string(std::strerror(err)) + (extack.empty() ? "" : " (kernel: " + extack + ")");
}

}  // namespace ocslab::netlink
