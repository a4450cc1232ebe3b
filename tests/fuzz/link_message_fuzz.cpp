// rtnetlink link messages come from the kernel, but the carrier probe must survive any bytes in
// a datagram (a newer kernel's attributes, a truncated message): a parse, or nothing, never a
// crash; and the tracker must never emit more inferred transitions than it allows.
#include <libmnl/libmnl.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "ocslab/probes/carrier_tracker.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // Copied so the messages are aligned as a recvmsg buffer would be.
  std::vector<char> buf(size);
  if (size > 0) std::memcpy(buf.data(), data, size);
  ocslab::probes::CarrierTracker tracker("fuzz", {"tap0", "eth0", "lo"});
  int64_t t = 0;
  for (const nlmsghdr* nlh : ocslab::probes::netlink_messages(buf.data(), buf.size())) {
    auto link = ocslab::probes::parse_link_message(nlh);
    if (!link) continue;
    std::vector<ocslab::Sample> out;
    tracker.on_link(*link, {++t, t}, out);
    size_t inferred = 0;
    for (const auto& s : out) {
      if (s.subject != link->ifname) __builtin_trap();
      inferred += s.signal == ocslab::probes::kSignalCarrierInferred;
    }
    if (inferred >= ocslab::probes::kMaxInferredTransitions) __builtin_trap();
  }
  return 0;
}
