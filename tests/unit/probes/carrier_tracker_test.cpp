// The carrier probe's parsing and counter reconciliation, fed with RTM_NEWLINK bytes built
// with libmnl the way the kernel lays them out (ifinfomsg + attributes).
#include <net/if.h>

#include <libmnl/libmnl.h>
#include <linux/if.h>
#include <linux/if_link.h>
#include <linux/rtnetlink.h>

#include <catch2/catch.hpp>
#include <optional>
#include <string>
#include <vector>

#include "ocslab/probes/carrier_tracker.h"

using namespace ocslab;
using namespace ocslab::probes;

namespace {

struct LinkSpec {
  std::string name = "tap0";
  int ifindex = 7;
  bool carrier = true;
  bool with_carrier_attr = true;
  uint8_t operstate = IF_OPER_UP;
  std::optional<uint32_t> up = 1, down = 0;
  bool with_changes = true;
  uint16_t type = RTM_NEWLINK;
};

std::vector<char> build(const LinkSpec& l) {
  std::vector<char> buf(MNL_SOCKET_BUFFER_SIZE);
  auto* nlh = mnl_nlmsg_put_header(buf.data());
  nlh->nlmsg_type = l.type;
  auto* ifi = static_cast<ifinfomsg*>(mnl_nlmsg_put_extra_header(nlh, sizeof(ifinfomsg)));
  ifi->ifi_family = AF_UNSPEC;
  ifi->ifi_index = l.ifindex;
  ifi->ifi_flags = unsigned{IFF_UP} | (l.carrier ? unsigned{IFF_LOWER_UP} | unsigned{IFF_RUNNING} : 0u);
  mnl_attr_put_strz(nlh, IFLA_IFNAME, l.name.c_str());
  mnl_attr_put_u32(nlh, IFLA_MTU, 1500);  // an attribute the parser must step over
  mnl_attr_put_u8(nlh, IFLA_OPERSTATE, l.operstate);
  if (l.with_carrier_attr) mnl_attr_put_u8(nlh, IFLA_CARRIER, l.carrier ? 1 : 0);
  if (l.with_changes && l.up && l.down) mnl_attr_put_u32(nlh, IFLA_CARRIER_CHANGES, *l.up + *l.down);
  if (l.up) mnl_attr_put_u32(nlh, IFLA_CARRIER_UP_COUNT, *l.up);
  if (l.down) mnl_attr_put_u32(nlh, IFLA_CARRIER_DOWN_COUNT, *l.down);
  buf.resize(nlh->nlmsg_len);
  return buf;
}

LinkMessage parse(const LinkSpec& l) {
  auto bytes = build(l);
  auto m = parse_link_message(reinterpret_cast<const nlmsghdr*>(bytes.data()));
  REQUIRE(m);
  return *m;
}

Timestamp at(int64_t ms) { return {1'700'000'000'000'000'000 + ms * 1'000'000, ms * 1'000'000}; }

// "signal=value" for each sample about subject, in order, to compare sequences at a glance.
std::vector<std::string> seq(const std::vector<Sample>& out, const std::string& signal_prefix = "carrier") {
  std::vector<std::string> v;
  for (const auto& s : out) {
    if (s.signal.rfind(signal_prefix, 0) == 0 && s.unit == "bool") {
      v.push_back(s.signal + "=" + std::to_string(static_cast<int>(s.value)));
    }
  }
  return v;
}

const Sample* find(const std::vector<Sample>& out, const std::string& signal) {
  for (const auto& s : out) {
    if (s.signal == signal) return &s;
  }
  return nullptr;
}

}  // namespace

TEST_CASE("parse_link_message reads name, carrier, operstate and the counters") {
  LinkSpec l;
  l.carrier = false;
  l.operstate = IF_OPER_DOWN;
  l.up = 3;
  l.down = 4;
  auto m = parse(l);
  CHECK(m.ifname == "tap0");
  CHECK(m.ifindex == 7);
  CHECK_FALSE(m.deleted);
  CHECK_FALSE(m.carrier);
  CHECK(m.operstate == IF_OPER_DOWN);
  CHECK(m.carrier_changes == 7u);
  CHECK(m.carrier_up_count == 3u);
  CHECK(m.carrier_down_count == 4u);
}

TEST_CASE("parse_link_message falls back to IFF_LOWER_UP without IFLA_CARRIER") {
  LinkSpec l;
  l.with_carrier_attr = false;
  CHECK(parse(l).carrier);
  l.carrier = false;
  CHECK_FALSE(parse(l).carrier);
}

TEST_CASE("parse_link_message marks RTM_DELLINK and refuses other and broken messages") {
  LinkSpec l;
  l.type = RTM_DELLINK;
  CHECK(parse(l).deleted);

  l.type = RTM_NEWADDR;
  auto other = build(l);
  CHECK_FALSE(parse_link_message(reinterpret_cast<const nlmsghdr*>(other.data())));

  // Header only: no room for the ifinfomsg.
  std::vector<char> bare(MNL_SOCKET_BUFFER_SIZE);
  auto* nlh = mnl_nlmsg_put_header(bare.data());
  nlh->nlmsg_type = RTM_NEWLINK;
  CHECK_FALSE(parse_link_message(nlh));

  // IFLA_CARRIER with a u32 payload instead of a u8 is rejected, not misread.
  std::vector<char> bad(MNL_SOCKET_BUFFER_SIZE);
  nlh = mnl_nlmsg_put_header(bad.data());
  nlh->nlmsg_type = RTM_NEWLINK;
  mnl_nlmsg_put_extra_header(nlh, sizeof(ifinfomsg));
  mnl_attr_put_strz(nlh, IFLA_IFNAME, "tap0");
  mnl_attr_put_u16(nlh, IFLA_CARRIER_UP_COUNT, 1);
  CHECK_FALSE(parse_link_message(nlh));

  // No name: nothing to match against the watched interfaces.
  std::vector<char> anon(MNL_SOCKET_BUFFER_SIZE);
  nlh = mnl_nlmsg_put_header(anon.data());
  nlh->nlmsg_type = RTM_NEWLINK;
  mnl_nlmsg_put_extra_header(nlh, sizeof(ifinfomsg));
  mnl_attr_put_u8(nlh, IFLA_CARRIER, 1);
  CHECK_FALSE(parse_link_message(nlh));
}

TEST_CASE("the first message is the baseline: state, operstate and counters, nothing inferred") {
  CarrierTracker t("h1", {"tap0"});
  std::vector<Sample> out;
  LinkSpec l;
  l.up = 5;
  l.down = 4;
  t.on_link(parse(l), at(0), out);
  REQUIRE(out.size() == 5);
  CHECK(seq(out) == std::vector<std::string>{"carrier=1"});
  const Sample* c = find(out, "carrier");
  CHECK(c->host == "h1");
  CHECK(c->source == "carrier");
  CHECK(c->subject == "tap0");
  CHECK(c->unit == "bool");
  CHECK(c->t_ns == at(0).realtime_ns);
  CHECK(c->mono_ns == at(0).monotonic_ns);
  CHECK(find(out, "operstate")->value == double{IF_OPER_UP});
  CHECK(find(out, "operstate")->unit == "enum");
  CHECK(find(out, "carrier_changes")->value == 9);
  CHECK(find(out, "carrier_up_count")->value == 5);
  CHECK(find(out, "carrier_down_count")->value == 4);
  CHECK(find(out, "carrier_down_count")->unit == "count");
}

TEST_CASE("interfaces not watched are ignored") {
  CarrierTracker t("h1", {"tap0"});
  std::vector<Sample> out;
  LinkSpec l;
  l.name = "eth0";
  t.on_link(parse(l), at(0), out);
  CHECK(out.empty());
}

TEST_CASE("plain transitions give one carrier sample each, nothing inferred") {
  CarrierTracker t("h1", {"tap0"});
  std::vector<Sample> out;
  LinkSpec l;  // up, 1 up 0 down
  t.on_link(parse(l), at(0), out);
  out.clear();

  l.carrier = false;
  l.operstate = IF_OPER_DOWN;
  l.down = 1;
  t.on_link(parse(l), at(100), out);
  CHECK(seq(out) == std::vector<std::string>{"carrier=0"});
  CHECK(find(out, "carrier")->t_ns == at(100).realtime_ns);
  CHECK(find(out, "operstate")->value == double{IF_OPER_DOWN});
  CHECK(find(out, "carrier_down_count")->value == 1);
  CHECK_FALSE(find(out, "carrier_up_count"));  // unchanged
  out.clear();

  l.carrier = true;
  l.operstate = IF_OPER_UP;
  l.up = 2;
  t.on_link(parse(l), at(200), out);
  CHECK(seq(out) == std::vector<std::string>{"carrier=1"});
}

TEST_CASE("a message that changes neither state nor counters gives no carrier sample") {
  CarrierTracker t("h1", {"tap0"});
  std::vector<Sample> out;
  LinkSpec l;
  t.on_link(parse(l), at(0), out);
  out.clear();
  t.on_link(parse(l), at(50), out);  // e.g. an MTU change
  CHECK(out.empty());
}

TEST_CASE("a coalesced flap (off then on, one message showing up) is revealed by the counters") {
  CarrierTracker t("h1", {"tap0"});
  std::vector<Sample> out;
  LinkSpec l;  // up: 1 up, 0 down
  t.on_link(parse(l), at(0), out);
  out.clear();

  l.up = 2;
  l.down = 1;  // still up, but one down and one up happened in between
  t.on_link(parse(l), at(1000), out);
  // The on is the state the message shows; only the off needs inferring.
  CHECK(seq(out) == std::vector<std::string>{"carrier_inferred=0", "carrier=1"});
  for (const auto& s : out) CHECK(s.t_ns == at(1000).realtime_ns);  // when the kernel told us
  CHECK(find(out, "carrier_inferred")->unit == "bool");
  CHECK_FALSE(find(out, "operstate"));  // it never left "up" as far as messages go
}

TEST_CASE("a state change with extra transitions infers the ones before it, in order") {
  CarrierTracker t("h1", {"tap0"});
  std::vector<Sample> out;
  LinkSpec l;  // up: 1 up, 0 down
  t.on_link(parse(l), at(0), out);
  out.clear();

  // Down now, after down-up-down: 2 downs, 1 up since the last message.
  l.carrier = false;
  l.up = 2;
  l.down = 2;
  t.on_link(parse(l), at(10), out);
  CHECK(seq(out) == std::vector<std::string>{"carrier_inferred=0", "carrier_inferred=1", "carrier=0"});
}

TEST_CASE("several flaps coalesced, starting from down") {
  CarrierTracker t("h1", {"tap0"});
  std::vector<Sample> out;
  LinkSpec l;
  l.carrier = false;
  l.up = 0;
  l.down = 1;
  t.on_link(parse(l), at(0), out);
  out.clear();
  l.up = 2;
  l.down = 3;  // up-down-up-down, still down
  t.on_link(parse(l), at(10), out);
  CHECK(seq(out) ==
        std::vector<std::string>{"carrier_inferred=1", "carrier_inferred=0", "carrier_inferred=1", "carrier=0"});
}

TEST_CASE("counters that cannot describe alternating transitions are not turned into inferences") {
  CarrierTracker t("h1", {"tap0"});
  std::vector<Sample> out;
  LinkSpec l;  // up: 1 up, 0 down
  t.on_link(parse(l), at(0), out);
  out.clear();
  // Two ups and no down while staying up is impossible for one device: report, infer nothing.
  l.up = 3;
  t.on_link(parse(l), at(10), out);
  CHECK(seq(out) == std::vector<std::string>{"carrier=1"});
  CHECK(find(out, "carrier_up_count")->value == 3);
}

TEST_CASE("a stale message (counters behind what a dump showed) is ignored") {
  CarrierTracker t("h1", {"tap0"});
  std::vector<Sample> out;
  LinkSpec l;
  l.carrier = false;
  l.up = 1;
  l.down = 2;
  t.on_link(parse(l), at(0), out);  // the dump
  out.clear();
  LinkSpec old;  // an event queued before the dump
  old.up = 1;
  old.down = 1;
  t.on_link(parse(old), at(5), out);
  CHECK(out.empty());
}

TEST_CASE("counters that wrap around 2^32 still count transitions") {
  CarrierTracker t("h1", {"tap0"});
  std::vector<Sample> out;
  LinkSpec l;
  l.up = 0xffffffffu;
  l.down = 0xfffffffeu;
  l.with_changes = false;
  t.on_link(parse(l), at(0), out);
  out.clear();
  l.up = 0;  // wrapped: one more up
  l.down = 0xffffffffu;
  t.on_link(parse(l), at(10), out);
  CHECK(seq(out) == std::vector<std::string>{"carrier_inferred=0", "carrier=1"});
}

TEST_CASE("without up/down counters, IFLA_CARRIER_CHANGES alone still reveals a flap") {
  CarrierTracker t("h1", {"tap0"});
  std::vector<Sample> out;
  LinkSpec l;
  LinkMessage m = parse(l);
  m.carrier_up_count.reset();
  m.carrier_down_count.reset();
  t.on_link(m, at(0), out);
  out.clear();
  m.carrier_changes = *m.carrier_changes + 2;
  t.on_link(m, at(10), out);
  CHECK(seq(out) == std::vector<std::string>{"carrier_inferred=0", "carrier=1"});
}

TEST_CASE("a deleted and recreated interface starts a new baseline instead of inventing transitions") {
  CarrierTracker t("h1", {"tap0"});
  std::vector<Sample> out;
  LinkSpec l;
  l.up = 40;
  l.down = 39;
  t.on_link(parse(l), at(0), out);
  LinkSpec del = l;
  del.type = RTM_DELLINK;
  t.on_link(parse(del), at(5), out);
  out.clear();
  LinkSpec fresh;  // same name, counters from zero
  fresh.ifindex = 9;
  t.on_link(parse(fresh), at(10), out);
  CHECK(seq(out) == std::vector<std::string>{"carrier=1"});
  CHECK(find(out, "carrier_up_count")->value == 1);

  // A new ifindex under the same name without a DELLINK seen (lost in an overrun): same rule.
  out.clear();
  fresh.ifindex = 11;
  fresh.up = 0;
  fresh.down = 1;
  fresh.carrier = false;
  t.on_link(parse(fresh), at(20), out);
  CHECK(seq(out) == std::vector<std::string>{"carrier=0"});
}

TEST_CASE("an absurd counter jump infers nothing") {
  CarrierTracker t("h1", {"tap0"});
  std::vector<Sample> out;
  LinkSpec l;
  t.on_link(parse(l), at(0), out);
  out.clear();
  l.up = 1 + kMaxInferredTransitions;
  l.down = kMaxInferredTransitions;
  t.on_link(parse(l), at(10), out);
  CHECK(seq(out) == std::vector<std::string>{"carrier=1"});
}

TEST_CASE("overruns are counted and reported") {
  CarrierTracker t("h1", {"tap0"});
  std::vector<Sample> out;
  t.on_overrun(at(0), out);
  t.on_overrun(at(1), out);
  CHECK(t.overruns() == 2);
  REQUIRE(out.size() == 2);
  CHECK(out[1].signal == "netlink_overruns");
  CHECK(out[1].subject == "rtnetlink");
  CHECK(out[1].value == 2);
  CHECK(out[1].unit == "count");
}

TEST_CASE("netlink_messages splits a datagram and stops at a message that does not fit") {
  LinkSpec a, b;
  b.name = "tap1";
  auto first = build(a);
  auto second = build(b);
  std::vector<char> dgram(first);
  dgram.insert(dgram.end(), second.begin(), second.end());
  auto msgs = netlink_messages(dgram.data(), dgram.size());
  REQUIRE(msgs.size() == 2);
  CHECK(parse_link_message(msgs[1])->ifname == "tap1");

  // Cut inside the second message: only the first is whole.
  CHECK(netlink_messages(dgram.data(), dgram.size() - 4).size() == 1);
  CHECK(netlink_messages(dgram.data(), 8).empty());

  // A length of 2^31 or more, which mnl_nlmsg_ok() accepts through its int cast.
  std::vector<char> huge(first);
  reinterpret_cast<nlmsghdr*>(huge.data())->nlmsg_len = 0x80000010u;
  CHECK(netlink_messages(huge.data(), huge.size()).empty());
  // A length below the header's own size would never advance.
  reinterpret_cast<nlmsghdr*>(huge.data())->nlmsg_len = 4;
  CHECK(netlink_messages(huge.data(), huge.size()).empty());
}

// The polled feed: RTM_GETLINK replies read every few ms, whose IFLA_CARRIER is the live bit.
TEST_CASE("a polled tracker emits carrier_bit only, reconciled with the counters like carrier") {
  CarrierTracker t("h1", {"tap0"}, CarrierFeed::kPolled);
  std::vector<Sample> out;
  LinkSpec l;  // up: 1 up, 0 down
  t.on_link(parse(l), at(0), out);
  // The baseline is the bit alone: operstate and the counters are the announcement's.
  REQUIRE(out.size() == 1);
  CHECK(out[0].signal == "carrier_bit");
  CHECK(out[0].source == "carrier");
  CHECK(out[0].unit == "bool");
  CHECK(out[0].value == 1);
  out.clear();

  t.on_link(parse(l), at(5), out);  // nothing changed between two polls
  CHECK(out.empty());

  l.carrier = false;
  l.operstate = IF_OPER_DOWN;
  l.down = 1;
  t.on_link(parse(l), at(10), out);
  CHECK(seq(out) == std::vector<std::string>{"carrier_bit=0"});
  CHECK(out.size() == 1);
  CHECK(out[0].t_ns == at(10).realtime_ns);
  out.clear();

  // A flap shorter than the poll interval: down again at the next poll, after up and down.
  l.up = 2;
  l.down = 2;
  t.on_link(parse(l), at(15), out);
  CHECK(seq(out) == std::vector<std::string>{"carrier_bit_inferred=1", "carrier_bit=0"});
  for (const auto& s : out) CHECK(s.t_ns == at(15).realtime_ns);
  out.clear();

  // Up, and a flap inside one poll interval from up: shown up, the down-up pair inferred.
  l.carrier = true;
  l.up = 4;
  l.down = 3;
  t.on_link(parse(l), at(20), out);
  CHECK(seq(out) == std::vector<std::string>{"carrier_bit_inferred=1", "carrier_bit_inferred=0", "carrier_bit=1"});
}

TEST_CASE("a poll racing a transition (bit and counters one apart) gives one carrier_bit sample") {
  CarrierTracker t("h1", {"tap0"}, CarrierFeed::kPolled);
  std::vector<Sample> out;
  LinkSpec l;  // up: 1 up, 0 down
  t.on_link(parse(l), at(0), out);
  out.clear();

  // The driver cleared the bit but had not counted yet when the reply read the counters.
  l.carrier = false;
  t.on_link(parse(l), at(5), out);
  CHECK(seq(out) == std::vector<std::string>{"carrier_bit=0"});
  out.clear();
  // The next poll sees the count catch up: no transition, no sample.
  l.down = 1;
  t.on_link(parse(l), at(10), out);
  CHECK(out.empty());

  // The other order: the reply read the old bit and the new count; the next poll shows the bit.
  l.up = 2;
  t.on_link(parse(l), at(15), out);
  CHECK(out.empty());
  l.carrier = true;
  t.on_link(parse(l), at(20), out);
  CHECK(seq(out) == std::vector<std::string>{"carrier_bit=1"});
}

TEST_CASE("a polled tracker starts afresh after the device went away") {
  CarrierTracker t("h1", {"tap0"}, CarrierFeed::kPolled);
  std::vector<Sample> out;
  LinkSpec l;
  l.up = 7;
  l.down = 6;
  t.on_link(parse(l), at(0), out);
  LinkMessage gone;
  gone.deleted = true;
  gone.ifname = "tap0";
  t.on_link(gone, at(5), out);
  out.clear();
  l.ifindex = 9;  // a new device under the same name, counters from zero
  l.up = 1;
  l.down = 0;
  t.on_link(parse(l), at(10), out);
  CHECK(seq(out) == std::vector<std::string>{"carrier_bit=1"});  // a baseline, nothing inferred
}
