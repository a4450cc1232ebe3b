// The netlink messages of ocslab's relay rules (clsact, flower dst_ip -> pedit eth dst ->
// mirred egress redirect), encoded and decoded without a socket, so the exact bytes can be
// checked in unit tests and the dump decoder can be fuzzed. tc_netlink.h sends them.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ocslab/forwarding/rule_plan.h"

namespace ocslab::forwarding::tc {

// Parents of the clsact hooks: TC_H_MAKE(TC_H_CLSACT, TC_H_MIN_INGRESS / _EGRESS).
inline constexpr uint32_t kClsactHandle = 0xFFFF0000u;
inline constexpr uint32_t kIngressParent = 0xFFFFFFF2u;
inline constexpr uint32_t kEgressParent = 0xFFFFFFF3u;
// Every ocslab filter is the only filter of its priority, with this handle: an add with
// NLM_F_EXCL then fails ("Filter already exists") instead of silently joining a foreign
// flower filter that already holds the priority.
inline constexpr uint32_t kFilterHandle = 1;

// Appends one complete netlink message to `out`. Devices are ifindexes in the netns of the
// socket that will send them. Throws Error naming the rule when a field is malformed
// (prefix, MAC, cookie hex, prio outside 16 bits).
void put_new_filter(std::vector<char>& out, uint32_t seq, const FilterRule& rule, int ifindex, int redirect_ifindex);
void put_del_filter(std::vector<char>& out, uint32_t seq, int ifindex, uint32_t chain, uint16_t prio, uint32_t handle);
// A dump of one clsact hook's filters; chain limits it to one chain (all chains otherwise).
void put_get_filters(std::vector<char>& out, uint32_t seq, int ifindex, uint32_t parent, std::optional<uint32_t> chain);
void put_new_clsact(std::vector<char>& out, uint32_t seq, int ifindex);
void put_del_clsact(std::vector<char>& out, uint32_t seq, int ifindex);
void put_get_qdiscs(std::vector<char>& out, uint32_t seq);
void put_get_links(std::vector<char>& out, uint32_t seq);

// "02:00:00:00:00:0a" -> 6 bytes; throws Error naming `what` when malformed.
std::vector<uint8_t> mac_bytes(const std::string& mac, const std::string& what);
// The two pedit keys iproute2 makes of `pedit ex munge eth dst set MAC` (tc/p_eth.c +
// m_pedit.c pack_mac): a 32-bit set at offset 0 (bytes 0-3, mask 0) and one at offset 4 whose
// mask keeps bytes 6-7 (the source MAC's first two bytes). val/mask in network byte order as
// they sit in struct tc_pedit_key.
struct PeditKey {
  uint32_t off = 0;
  uint32_t val = 0;
  uint32_t mask = 0;
};
std::vector<PeditKey> eth_dst_keys(const std::vector<uint8_t>& mac);

// One RTM_NEWTFILTER message of a dump, decoded. Unknown attributes are ignored; values that
// are present but not in ocslab's form are described in `problem`.
struct DecodedFilter {
  int ifindex = 0;
  uint32_t parent = 0;
  uint32_t handle = 0;
  uint32_t chain = 0;
  uint16_t prio = 0;
  uint16_t protocol = 0;             // host byte order, 0x0800 for IPv4
  std::string kind;                  // "flower", "u32", ...
  std::vector<std::string> actions;  // action kinds in order
  std::vector<std::string> cookies;  // per action, lower-case hex, "" when none
  bool skip_hw = false;
  std::string dst;           // "10.0.0.3/32" when the flower matches an IPv4 destination
  std::string set_eth_dst;   // from the pedit keys, when they are exactly eth_dst_keys(MAC)
  int redirect_ifindex = 0;  // mirred egress redirect target
  uint64_t packets = 0;      // the first action's software counters: frames that matched
  uint64_t bytes = 0;
  std::string problem;  // empty when the filter has exactly ocslab's shape

  // ocslab's tag: the ingress hook, chain kTcChain, prio in [kTcPrioFirst, kTcPrioLast] and
  // every action carrying kActionCookie. Only such filters are ever listed or touched.
  bool tagged() const;
};

// Decodes one message; nullopt when it is not a filter (another message type, or the
// per-priority header a dump sends before the filters, which has no handle). Throws Error
// when the message is truncated or an attribute is malformed.
std::optional<DecodedFilter> decode_filter(const void* msg, size_t len);
// Every filter message in a buffer of netlink messages (as read from a dump), in order.
std::vector<DecodedFilter> decode_filter_dump(const void* data, size_t len);

}  // namespace ocslab::forwarding::tc
