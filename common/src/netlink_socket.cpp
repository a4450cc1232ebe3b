#include "ocslab/common/netlink_socket.h"

#include <linux/netlink.h>
#include <poll.h>
#include <time.h>

#include <cerrno>
#include <cstring>

#include "ocslab/common/error.h"
#include "ocslab/common/netlink_ack.h"

namespace ocslab {

NetlinkSocket::NetlinkSocket(int bus, unsigned groups)
    : seq_(static_cast<uint32_t>(time(nullptr))), what_("netlink bus " + std::to_string(bus)) {
  nl_ = mnl_socket_open(bus);
  if (!nl_) throw SystemError("mnl_socket_open(" + what_ + ")", errno);
  // Extended ACKs carry the kernel's human-readable reason for a refused request.
  int one = 1;
  mnl_socket_setsockopt(nl_, NETLINK_EXT_ACK, &one, sizeof(one));
  if (mnl_socket_bind(nl_, groups, MNL_SOCKET_AUTOPID) < 0) {
    int err = errno;
    mnl_socket_close(nl_);
    throw SystemError("mnl_socket_bind(" + what_ + ")", err);
  }
}

NetlinkSocket::~NetlinkSocket() {
  if (nl_) mnl_socket_close(nl_);
}

int NetlinkSocket::fd() const { return mnl_socket_get_fd(nl_); }
unsigned NetlinkSocket::port_id() const { return mnl_socket_get_portid(nl_); }

void NetlinkSocket::send(const struct nlmsghdr* nlh) {
  if (mnl_socket_sendto(nl_, nlh, nlh->nlmsg_len) < 0) {
    throw SystemError("netlink send (" + what_ + ")", errno);
  }
}

void NetlinkSocket::run(uint32_t seq, const Callback& cb) {
  std::vector<char> buf(MNL_SOCKET_BUFFER_SIZE * 4);
  for (;;) {
    ssize_t n = mnl_socket_recvfrom(nl_, buf.data(), buf.size());
    if (n < 0) throw SystemError("netlink receive (" + what_ + ")", errno);
    int len = static_cast<int>(n);
    for (auto* nlh = reinterpret_cast<const struct nlmsghdr*>(buf.data()); mnl_nlmsg_ok(nlh, len);
         nlh = mnl_nlmsg_next(nlh, &len)) {
      if (nlh->nlmsg_seq != seq) continue;
      if (nlh->nlmsg_type == NLMSG_DONE) return;
      if (nlh->nlmsg_type == NLMSG_ERROR) {
        int err = netlink::ack_error(nlh);
        if (err == 0) return;  // ACK
        std::string ext = netlink::extack_message(nlh);
        throw SystemError("netlink request refused by the kernel" + (ext.empty() ? "" : " (" + ext + ")"), err);
      }
      cb(nlh);
    }
  }
}

void NetlinkSocket::request(struct nlmsghdr* nlh, const Callback& cb) {
  if (nlh->nlmsg_seq == 0) nlh->nlmsg_seq = next_seq();
  nlh->nlmsg_flags |= NLM_F_ACK;
  send(nlh);
  run(nlh->nlmsg_seq, cb);
}

ssize_t NetlinkSocket::recv(std::vector<char>& buf, int timeout_ms) {
  if (timeout_ms >= 0) {
    pollfd p{fd(), POLLIN, 0};
    int r = ::poll(&p, 1, timeout_ms);
    if (r < 0) throw SystemError("poll on netlink socket", errno);
    if (r == 0) return 0;
  }
  ssize_t n = mnl_socket_recvfrom(nl_, buf.data(), buf.size());
  if (n < 0) throw SystemError("netlink receive (" + what_ + ")", errno);
  return n;
}

}  // namespace ocslab
