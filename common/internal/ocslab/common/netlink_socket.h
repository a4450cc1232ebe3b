// RAII wrapper over a libmnl netlink socket: open/bind with multicast groups, send a
// request, and run the reply (or a dump) through a callback. Shared by the carrier probe
// and the forwarding programmer.
#pragma once

#include <libmnl/libmnl.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace ocslab {

class NetlinkSocket {
 public:
  // bus: NETLINK_ROUTE, NETLINK_GENERIC, ...; groups: multicast bitmask for bind.
  explicit NetlinkSocket(int bus, unsigned groups = 0);
  ~NetlinkSocket();
  NetlinkSocket(const NetlinkSocket&) = delete;
  NetlinkSocket& operator=(const NetlinkSocket&) = delete;

  int fd() const;
  unsigned port_id() const;
  uint32_t next_seq() { return ++seq_; }

  // Sends the message in buf (nlh->nlmsg_seq must be set by the caller).
  void send(const struct nlmsghdr* nlh);

  // Receives replies for seq and passes each message to cb until NLMSG_DONE or an ACK.
  // A netlink error (NLMSG_ERROR with a code) throws SystemError with the kernel's
  // extended ack message when present.
  using Callback = std::function<void(const struct nlmsghdr*)>;
  void run(uint32_t seq, const Callback& cb);

  // Convenience: send + run.
  void request(struct nlmsghdr* nlh, const Callback& cb);

  // Raw receive into buf; returns bytes, 0 on timeout (timeout_ms >= 0), throws on error.
  ssize_t recv(std::vector<char>& buf, int timeout_ms);

 private:
  struct mnl_socket* nl_ = nullptr;
  uint32_t seq_;
  std::string what_;
};

}  // namespace ocslab
