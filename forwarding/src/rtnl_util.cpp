#include "rtnl_util.h"

#include <cstring>
#include <vector>

#include "ocslab/common/error.h"
#include "ocslab/forwarding/kernel_error.h"

namespace ocslab::forwarding::rtnl {

std::string extack_of(const struct nlmsghdr* nlh) {
  if (!(nlh->nlmsg_flags & NLM_F_ACK_TLVS)) return {};
  const auto* err = static_cast<const struct nlmsgerr*>(mnl_nlmsg_get_payload(nlh));
  size_t off = sizeof(*err);
  if (!(nlh->nlmsg_flags & NLM_F_CAPPED)) off += err->msg.nlmsg_len - sizeof(struct nlmsghdr);
  const char* p = static_cast<const char*>(mnl_nlmsg_get_payload(nlh)) + off;
  const char* end = reinterpret_cast<const char*>(nlh) + nlh->nlmsg_len;
  while (p + sizeof(struct nlattr) <= end) {
    struct nlattr a;
    std::memcpy(&a, p, sizeof(a));
    if (a.nla_len < sizeof(a) || p + a.nla_len > end) break;
    if ((a.nla_type & NLA_TYPE_MASK) == NLMSGERR_ATTR_MSG && a.nla_len > sizeof(a)) {
      return std::string(p + sizeof(a), strnlen(p + sizeof(a), a.nla_len - sizeof(a)));
    }
    p += MNL_ALIGN(a.nla_len);
  }
  return {};
}

std::string kernel_text(int err, const std::string& extack) {
  return std::string(std::strerror(err)) + (extack.empty() ? "" : " (kernel: " + extack + ")");
}

void request_ack(NetlinkSocket& sock, struct nlmsghdr* nlh, const std::string& what,
                 void (*on_reply)(const struct nlmsghdr*, void*), void* ctx) {
  nlh->nlmsg_flags |= NLM_F_ACK;
  if (nlh->nlmsg_seq == 0) nlh->nlmsg_seq = sock.next_seq();
  uint32_t seq = nlh->nlmsg_seq;
  sock.send(nlh);
  std::vector<char> buf(64 * 1024);
  for (;;) {
    ssize_t n = sock.recv(buf, 30000);
    if (n == 0) throw Error(what + ": no netlink reply within 30 s");
    int len = static_cast<int>(n);
    for (auto* m = reinterpret_cast<const struct nlmsghdr*>(buf.data()); mnl_nlmsg_ok(m, len);
         m = mnl_nlmsg_next(m, &len)) {
      if (m->nlmsg_seq != seq) continue;
      if (m->nlmsg_type == NLMSG_ERROR) {
        const auto* e = static_cast<const struct nlmsgerr*>(mnl_nlmsg_get_payload(m));
        if (e->error == 0) return;
        std::string ext = extack_of(m);
        throw KernelError(what + ": " + kernel_text(-e->error, ext), -e->error, ext);
      }
      if (on_reply) on_reply(m, ctx);
    }
  }
}

}  // namespace ocslab::forwarding::rtnl
