#include "ocslab/probes/carrier_tracker.h"

// glibc's <net/if.h> before <linux/if.h>, which adds IFF_LOWER_UP without redefinitions.
#include <net/if.h>

#include <libmnl/libmnl.h>
#include <linux/if.h>
#include <linux/if_link.h>
#include <linux/rtnetlink.h>

#include <algorithm>
#include <utility>

namespace ocslab::probes {

namespace {

struct Attrs {
  const nlattr* tb[IFLA_MAX + 1] = {};
  bool malformed = false;
};

int collect_link_attr(const nlattr* attr, void* data) {
  auto* a = static_cast<Attrs*>(data);
  uint16_t type = mnl_attr_get_type(attr);
  if (type > IFLA_MAX) return MNL_CB_OK;  // newer kernel attribute: not ours to judge
  int ok = 0;
  switch (type) {
    case IFLA_IFNAME:
      ok = mnl_attr_validate(attr, MNL_TYPE_NUL_STRING);
      break;
    case IFLA_CARRIER:
    case IFLA_OPERSTATE:
      ok = mnl_attr_validate(attr, MNL_TYPE_U8);
      break;
    case IFLA_CARRIER_CHANGES:
    case IFLA_CARRIER_UP_COUNT:
    case IFLA_CARRIER_DOWN_COUNT:
      ok = mnl_attr_validate(attr, MNL_TYPE_U32);
      break;
    default:
      return MNL_CB_OK;
  }
  if (ok < 0) {
    a->malformed = true;
    return MNL_CB_ERROR;
  }
  a->tb[type] = attr;
  return MNL_CB_OK;
}

std::optional<uint32_t> u32_attr(const Attrs& a, int type) {
  if (!a.tb[type]) return std::nullopt;
  return mnl_attr_get_u32(a.tb[type]);
}

}  // namespace

std::vector<const nlmsghdr*> netlink_messages(const char* data, size_t size) {
  std::vector<const nlmsghdr*> out;
  size_t off = 0;
  while (size - off >= sizeof(nlmsghdr)) {
    const auto* nlh = reinterpret_cast<const nlmsghdr*>(data + off);
    size_t len = nlh->nlmsg_len;
    if (len < sizeof(nlmsghdr) || len > size - off) break;
    out.push_back(nlh);
    off += std::min(static_cast<size_t>(MNL_ALIGN(len)), size - off);
  }
  return out;
}

std::optional<LinkMessage> parse_link_message(const nlmsghdr* nlh) {
  if (nlh->nlmsg_len < sizeof(nlmsghdr)) return std::nullopt;
  if (nlh->nlmsg_type != RTM_NEWLINK && nlh->nlmsg_type != RTM_DELLINK) return std::nullopt;
  if (mnl_nlmsg_get_payload_len(nlh) < sizeof(ifinfomsg)) return std::nullopt;
  const auto* ifi = static_cast<const ifinfomsg*>(mnl_nlmsg_get_payload(nlh));
  Attrs a;
  if (mnl_attr_parse(nlh, sizeof(ifinfomsg), collect_link_attr, &a) < 0 || a.malformed) return std::nullopt;
  if (!a.tb[IFLA_IFNAME]) return std::nullopt;
  LinkMessage m;
  m.deleted = nlh->nlmsg_type == RTM_DELLINK;
  m.ifindex = ifi->ifi_index;
  m.ifname = mnl_attr_get_str(a.tb[IFLA_IFNAME]);
  m.carrier = a.tb[IFLA_CARRIER] ? mnl_attr_get_u8(a.tb[IFLA_CARRIER]) != 0 : (ifi->ifi_flags & IFF_LOWER_UP) != 0;
  if (a.tb[IFLA_OPERSTATE]) m.operstate = mnl_attr_get_u8(a.tb[IFLA_OPERSTATE]);
  m.carrier_changes = u32_attr(a, IFLA_CARRIER_CHANGES);
  m.carrier_up_count = u32_attr(a, IFLA_CARRIER_UP_COUNT);
  m.carrier_down_count = u32_attr(a, IFLA_CARRIER_DOWN_COUNT);
  return m;
}

CarrierTracker::CarrierTracker(std::string host, std::vector<std::string> interfaces, CarrierFeed feed)
    : host_(std::move(host)), interfaces_(std::move(interfaces)), feed_(feed) {}

bool CarrierTracker::watches(const std::string& ifname) const {
  return std::find(interfaces_.begin(), interfaces_.end(), ifname) != interfaces_.end();
}

Sample CarrierTracker::make(const Timestamp& at, const std::string& subject, const char* signal, double value,
                            const char* unit) const {
  Sample s;
  s.t_ns = at.realtime_ns;
  s.mono_ns = at.monotonic_ns;
  s.host = host_;
  s.source = kCarrierSource;
  s.subject = subject;
  s.signal = signal;
  s.value = value;
  s.unit = unit;
  return s;
}

void CarrierTracker::on_link(const LinkMessage& link, const Timestamp& at, std::vector<Sample>& out) {
  if (!watches(link.ifname)) return;
  if (link.deleted) {
    known_.erase(link.ifname);
    return;
  }
  const std::string& name = link.ifname;
  // The polled feed reports the live bit only: operstate and the counters are the announcement's.
  const bool polled = feed_ == CarrierFeed::kPolled;
  const char* state_signal = polled ? kSignalCarrierBit : kSignalCarrier;
  const char* inferred_signal = polled ? kSignalCarrierBitInferred : kSignalCarrierInferred;
  auto counter_samples = [&](const Known* before) {
    if (polled) return;
    auto emit = [&](const std::optional<uint32_t>& now, const std::optional<uint32_t>* was, const char* signal) {
      if (now && (!was || *was != now)) out.push_back(make(at, name, signal, *now, "count"));
    };
    emit(link.carrier_changes, before ? &before->changes : nullptr, kSignalCarrierChanges);
    emit(link.carrier_up_count, before ? &before->up : nullptr, kSignalCarrierUpCount);
    emit(link.carrier_down_count, before ? &before->down : nullptr, kSignalCarrierDownCount);
  };
  Known now{link.ifindex,         link.carrier,          link.operstate,
            link.carrier_changes, link.carrier_up_count, link.carrier_down_count};

  auto it = known_.find(name);
  if (it == known_.end() || it->second.ifindex != link.ifindex) {
    // First sight (initial dump) or a different device under the same name: a baseline only.
    out.push_back(make(at, name, state_signal, link.carrier ? 1 : 0, "bool"));
    if (link.operstate && !polled) out.push_back(make(at, name, kSignalOperstate, *link.operstate, "enum"));
    counter_samples(nullptr);
    known_[name] = now;
    return;
  }
  const Known& was = it->second;

  // Transitions since the last message, from the counters when both messages carry them.
  // Unsigned differences survive a counter wrap; a "negative" one marks a stale message.
  std::optional<uint32_t> ups, downs, total;
  if (was.up && was.down && now.up && now.down) {
    ups = *now.up - *was.up;
    downs = *now.down - *was.down;
    if (static_cast<int32_t>(*ups) < 0 || static_cast<int32_t>(*downs) < 0) return;
    total = *ups + *downs;
  } else if (was.changes && now.changes) {
    total = *now.changes - *was.changes;
    if (static_cast<int32_t>(*total) < 0) return;
  }

  bool state_changed = now.carrier != was.carrier;
  uint32_t inferred = 0;
  if (total && *total <= kMaxInferredTransitions) {
    // Transitions alternate, starting with the one away from the previous state; they must end
    // in the state this message shows, and each direction must account for its counter.
    uint32_t n = *total;
    bool parity_ok = (n % 2 == 1) == state_changed;
    uint32_t away = (n + 1) / 2, back = n / 2;  // transitions leaving / returning to was.carrier
    bool split_ok = !ups || (was.carrier ? (*downs == away && *ups == back) : (*ups == away && *downs == back));
    // The last transition is the state this message shows; the ones before it nobody showed.
    if (parity_ok && split_ok && n > 0) inferred = n - 1;
  }
  for (uint32_t i = 0; i < inferred; ++i) {
    bool value = (i % 2 == 0) ? !was.carrier : was.carrier;
    out.push_back(make(at, name, inferred_signal, value ? 1 : 0, "bool"));
  }
  bool counters_changed = now.changes != was.changes || now.up != was.up || now.down != was.down;
  // A poll reads IFLA_CARRIER before the counters, with nothing holding off the driver, which
  // flips the bit and then counts: a poll that races a transition shows the bit and the counters
  // one transition apart, and the next poll moves the counters alone. So a poll's sample comes
  // from a changed bit or from transitions the counters prove (each one sample, alternating),
  // never from counters alone. An announcement is sent after both, so any change is one.
  bool emit_state = polled ? state_changed || inferred > 0 : state_changed || counters_changed;
  if (emit_state) out.push_back(make(at, name, state_signal, now.carrier ? 1 : 0, "bool"));
  if (now.operstate && now.operstate != was.operstate && !polled) {
    out.push_back(make(at, name, kSignalOperstate, *now.operstate, "enum"));
  }
  counter_samples(&was);
  it->second = now;
}

void CarrierTracker::on_overrun(const Timestamp& at, std::vector<Sample>& out) {
  ++overruns_;
  out.push_back(make(at, "rtnetlink", kSignalNetlinkOverruns, static_cast<double>(overruns_), "count"));
}

}  // namespace ocslab::probes
