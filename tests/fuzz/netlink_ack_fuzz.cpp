// Netlink acks come from the kernel, but the reader must survive any bytes (a newer kernel's
// attributes, a truncated datagram): an errno and a text, or nothing, never a read past the
// message (ASan) and never a text longer than the message.
#include <linux/netlink.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "ocslab/common/netlink_ack.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // Copied so the message is aligned as a recv() buffer would be.
  std::vector<char> buf(size);
  if (size > 0) std::memcpy(buf.data(), data, size);
  size_t off = 0;
  while (off + sizeof(nlmsghdr) <= size) {
    nlmsghdr h;
    std::memcpy(&h, buf.data() + off, sizeof(h));
    if (h.nlmsg_len < sizeof(nlmsghdr) || h.nlmsg_len > size - off) break;
    const auto* nlh = reinterpret_cast<const nlmsghdr*>(buf.data() + off);
    if (h.nlmsg_type == NLMSG_ERROR) {
      (void)ocslab::netlink::ack_error(nlh);
      if (ocslab::netlink::extack_message(nlh).size() >= h.nlmsg_len) __builtin_trap();
    }
    off += NLMSG_ALIGN(h.nlmsg_len);
  }
  return 0;
}
