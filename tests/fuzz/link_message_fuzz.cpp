// rtnetlink link messages come from the kernel, but the carrier probe must survive any bytes in
// a datagram (a newer kernel's attributes, a truncated message): a parse, or nothing, never a
// crash; and the tracker must never emit more inferred transitions than it allows. The same
// messages through a tracker of the polled feed (the live bit, RTM_GETLINK replies): only
// carrier_bit and carrier_bit_inferred, within the same bound, and after the baseline each of
// them one transition (values alternate).
#include <libmnl/libmnl.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "ocslab/probes/carrier_tracker.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // Copied so the messages are aligned as a recvmsg buffer would be.
  std::vector<char> buf(size);
  if (size > 0) std::memcpy(buf.data(), data, size);
  using namespace ocslab::probes;
  CarrierTracker tracker("fuzz", {"tap0", "eth0", "lo"});
  CarrierTracker polled("fuzz", {"tap0", "eth0", "lo"}, CarrierFeed::kPolled);
  struct Seen {
    int ifindex;
    double value;
  };
  std::map<std::string, Seen> last_bit;  // per watched interface: its device and last carrier_bit value
  int64_t t = 0;
  for (const nlmsghdr* nlh : netlink_messages(buf.data(), buf.size())) {
    auto link = parse_link_message(nlh);
    if (!link) continue;
    std::vector<ocslab::Sample> out;
    ++t;
    tracker.on_link(*link, {t, t}, out);
    size_t inferred = 0;
    for (const auto& s : out) {
      if (s.subject != link->ifname) __builtin_trap();
      inferred += s.signal == kSignalCarrierInferred;
    }
    if (inferred >= kMaxInferredTransitions) __builtin_trap();

    std::vector<ocslab::Sample> bits;
    polled.on_link(*link, {t, t}, bits);
    if (link->deleted) {
      if (!bits.empty()) __builtin_trap();
      last_bit.erase(link->ifname);
      continue;
    }
    inferred = 0;
    auto it = last_bit.find(link->ifname);
    // First sight, or another device under the name: one baseline carrier_bit sample.
    bool baseline = it == last_bit.end() || it->second.ifindex != link->ifindex;
    if (baseline && !bits.empty()) {
      if (bits.size() != 1 || bits[0].signal != kSignalCarrierBit) __builtin_trap();
      last_bit.insert_or_assign(link->ifname, Seen{link->ifindex, bits[0].value});
      continue;
    }
    for (const auto& s : bits) {
      if (s.subject != link->ifname) __builtin_trap();
      if (s.signal != kSignalCarrierBit && s.signal != kSignalCarrierBitInferred) __builtin_trap();
      inferred += s.signal == kSignalCarrierBitInferred;
      if (s.value == it->second.value) __builtin_trap();  // each sample one transition
      it->second.value = s.value;
    }
    if (inferred >= kMaxInferredTransitions) __builtin_trap();
  }
  return 0;
}
