#include "rtnl_util.h"

#include <cstring>
#include <vector>

#include "ocslab/common/error.h"
#include "ocslab/common/netlink_ack.h"
#include "ocslab/forwarding/kernel_error.h"

namespace ocslab::forwarding::rtnl {

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
        int err = netlink::ack_error(m);
        if (err == 0) return;
        std::string ext = netlink::extack_message(m);
        throw KernelError(what + ": " + netlink::kernel_text(err, ext), err, ext);
      }
      if (on_reply) on_reply(m, ctx);
    }
  }
}

}  // namespace ocslab::forwarding::rtnl
