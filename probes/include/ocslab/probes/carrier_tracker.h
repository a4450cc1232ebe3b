// The carrier probe's logic without sockets or threads: parses RTM_NEWLINK messages and turns
// the link states they show into Samples, using the kernel's carrier up/down counters to reveal
// transitions that linkwatch coalesced or that a socket overrun lost. Kept apart so unit tests
// can feed it netlink bytes they build themselves.
#pragma once

#include <linux/netlink.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "ocslab/common/clock.h"
#include "ocslab/common/sample.h"

namespace ocslab::probes {

// What one RTM_NEWLINK (event or dump reply) says about one interface.
struct LinkMessage {
  bool deleted = false;  // RTM_DELLINK: the interface went away
  int ifindex = 0;
  std::string ifname;
  // IFLA_CARRIER when present (it is what the counters count, and it is set also while the
  // interface is administratively down); IFF_LOWER_UP otherwise.
  bool carrier = false;
  std::optional<uint8_t> operstate;            // IFLA_OPERSTATE, RFC 2863 value (IF_OPER_*)
  std::optional<uint32_t> carrier_changes;     // IFLA_CARRIER_CHANGES
  std::optional<uint32_t> carrier_up_count;    // IFLA_CARRIER_UP_COUNT (Linux >= 4.16)
  std::optional<uint32_t> carrier_down_count;  // IFLA_CARRIER_DOWN_COUNT (Linux >= 4.16)
};

// The netlink messages in one received datagram. Unlike a loop over mnl_nlmsg_ok(), which
// casts nlmsg_len to int and so accepts a length of 2^31 or more, it stops at any message that
// does not fit in what is left of the datagram.
std::vector<const struct nlmsghdr*> netlink_messages(const char* data, size_t size);

// The link described by nlh when it is a well-formed RTM_NEWLINK or RTM_DELLINK carrying
// IFLA_IFNAME; nullopt for any other message, a truncated one or malformed attributes. nlh must
// lie in a buffer of at least nlh->nlmsg_len bytes (netlink_messages checked it).
std::optional<LinkMessage> parse_link_message(const struct nlmsghdr* nlh);

// Signals the probe emits (source "carrier", subject = interface name):
//   carrier             bool   1/0, the state a message showed; emitted at the initial dump and
//                              whenever the state or a carrier counter changed
//   carrier_inferred    bool   1/0, a transition the counters prove happened but no message
//                              showed (linkwatch coalesced a short flap, or an overrun lost the
//                              message); stamped with the time of the message that revealed it,
//                              emitted in the order the transitions happened, before that
//                              message's own `carrier` sample
// After the first `carrier` sample (the baseline), each `carrier` or `carrier_inferred` sample is
// one transition, so their values alternate: a flap coalesced into one message showing "up"
// reads carrier_inferred=0 then carrier=1, both at the message's time. (Only counters that
// cannot describe alternating transitions - reset or foreign - break this; nothing is inferred
// from them and the `carrier` sample may then repeat the previous value.)
//   operstate           enum   IF_OPER_* (RFC 2863: 2 down, 5 dormant, 6 up, ...), on change
//   carrier_changes     count  IFLA_CARRIER_CHANGES, on change
//   carrier_up_count    count  IFLA_CARRIER_UP_COUNT, on change
//   carrier_down_count  count  IFLA_CARRIER_DOWN_COUNT, on change
// and, subject "rtnetlink": netlink_overruns (count), after each socket overrun (ENOBUFS).
//
// A tracker of the polled feed (CarrierFeed::kPolled: RTM_GETLINK replies the probe asks for
// every few ms, whose IFLA_CARRIER is the driver's live netif_carrier_ok(), not delayed by
// linkwatch) emits instead:
//   carrier_bit           bool   1/0, the live bit a poll read; at the first poll and whenever
//                                the bit changed or the counters prove transitions no poll saw
//   carrier_bit_inferred  bool   1/0, a transition the counters prove happened between two
//                                polls (a flap shorter than the poll interval); stamped with the
//                                poll that revealed it, before that poll's `carrier_bit` sample
// with the same reconciliation and alternation as `carrier` / `carrier_inferred`, and nothing
// else: operstate and the counters stay the announcement's.
inline constexpr const char* kCarrierSource = "carrier";
inline constexpr const char* kSignalCarrier = "carrier";
inline constexpr const char* kSignalCarrierInferred = "carrier_inferred";
inline constexpr const char* kSignalOperstate = "operstate";
inline constexpr const char* kSignalCarrierChanges = "carrier_changes";
inline constexpr const char* kSignalCarrierUpCount = "carrier_up_count";
inline constexpr const char* kSignalCarrierDownCount = "carrier_down_count";
inline constexpr const char* kSignalNetlinkOverruns = "netlink_overruns";
inline constexpr const char* kSignalCarrierBit = "carrier_bit";
inline constexpr const char* kSignalCarrierBitInferred = "carrier_bit_inferred";

// Which stream of link states a tracker reads: the kernel's announcements (RTM_NEWLINK events
// and dumps, sent by linkwatch) or the probe's own polls of the live bit.
enum class CarrierFeed { kAnnounced, kPolled };

// More transitions than this between two messages means the counters cannot be trusted (a
// counter was reset or the interface was replaced); nothing is inferred then.
inline constexpr uint32_t kMaxInferredTransitions = 10000;

class CarrierTracker {
 public:
  CarrierTracker(std::string host, std::vector<std::string> interfaces, CarrierFeed feed = CarrierFeed::kAnnounced);

  bool watches(const std::string& ifname) const;

  // Adds to out the samples for one message about a link, seen at `at`. Messages about
  // interfaces not watched are ignored; so is a stale message, whose counters are behind what
  // the tracker already knows (an event queued before a dump that already showed it).
  // After a deleted link the next message about its name starts afresh: a new device's counters
  // start at zero, so comparing them with the old device's would invent transitions.
  void on_link(const LinkMessage& link, const Timestamp& at, std::vector<Sample>& out);

  // Adds the overrun sample (total count so far) to out.
  void on_overrun(const Timestamp& at, std::vector<Sample>& out);
  uint64_t overruns() const { return overruns_; }

 private:
  struct Known {
    int ifindex = 0;
    bool carrier = false;
    std::optional<uint8_t> operstate;
    std::optional<uint32_t> changes, up, down;
  };
  Sample make(const Timestamp& at, const std::string& subject, const char* signal, double value,
              const char* unit) const;

  std::string host_;
  std::vector<std::string> interfaces_;
  CarrierFeed feed_;
  std::map<std::string, Known> known_;
  uint64_t overruns_ = 0;
};

}  // namespace ocslab::probes
