// The netlink form of ocslab's relay filter, attribute by attribute, against what iproute2's
// `tc filter add ... flower skip_hw dst_ip D action pedit ex munge eth dst set M pipe action
// mirred egress redirect dev X` sends (tc/f_flower.c, m_action.c, m_pedit.c + p_eth.c,
// m_mirred.c), and the dump decoder on the encoder's own output. The kernel's side is checked
// in the virtual lab (tests/vlab/forwarding_tc_test.cpp).
#include <arpa/inet.h>
#include <linux/pkt_cls.h>
#include <linux/rtnetlink.h>
#include <linux/tc_act/tc_mirred.h>
#include <linux/tc_act/tc_pedit.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "ocslab/forwarding/tc_messages.h"

using namespace ocslab;
using namespace ocslab::forwarding;

namespace {

// An attribute walker of its own, so the encoder is not checked with the decoder's code.
struct A {
  uint16_t type = 0;
  bool nested = false;
  std::vector<uint8_t> data;
};

std::vector<A> walk(const uint8_t* p, size_t len) {
  std::vector<A> out;
  size_t off = 0;
  while (off + 4 <= len) {
    uint16_t alen, type;
    std::memcpy(&alen, p + off, 2);
    std::memcpy(&type, p + off + 2, 2);
    REQUIRE(alen >= 4);
    REQUIRE(off + alen <= len);
    out.push_back({static_cast<uint16_t>(type & NLA_TYPE_MASK), (type & NLA_F_NESTED) != 0,
                   std::vector<uint8_t>(p + off + 4, p + off + alen)});
    off += (alen + 3u) & ~3u;
  }
  REQUIRE(off == len);
  return out;
}
std::vector<A> walk(const A& a) { return walk(a.data.data(), a.data.size()); }

const A& find(const std::vector<A>& v, uint16_t type) {
  for (const auto& a : v) {
    if (a.type == type) return a;
  }
  FAIL("attribute " << type << " missing");
  return v.front();
}

std::vector<uint8_t> bytes(std::initializer_list<int> b) {
  std::vector<uint8_t> v;
  for (int x : b) v.push_back(static_cast<uint8_t>(x));
  return v;
}
std::string str(const A& a) { return std::string(a.data.begin(), a.data.end()); }

FilterRule example_rule() {
  FilterRule r;
  r.dev = "eth1v";
  r.prio = 0x4f01;
  r.dst = "10.0.0.30/32";
  r.set_eth_dst = "02:11:22:33:44:55";
  r.redirect_dev = "eth2";
  return r;
}

}  // namespace

TEST_CASE("flower + pedit + mirred filter: every attribute as tc encodes it") {
  std::vector<char> buf;
  tc::put_new_filter(buf, 77, example_rule(), 5, 7);
  REQUIRE(buf.size() >= sizeof(nlmsghdr) + sizeof(tcmsg));
  nlmsghdr h;
  std::memcpy(&h, buf.data(), sizeof(h));
  CHECK(h.nlmsg_len == buf.size());
  CHECK(h.nlmsg_type == RTM_NEWTFILTER);
  CHECK(h.nlmsg_flags == (NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE | NLM_F_EXCL));
  CHECK(h.nlmsg_seq == 77);
  tcmsg t;
  std::memcpy(&t, buf.data() + sizeof(h), sizeof(t));
  CHECK(t.tcm_family == AF_UNSPEC);
  CHECK(t.tcm_ifindex == 5);
  CHECK(t.tcm_handle == 1);
  CHECK(t.tcm_parent == 0xFFFFFFF2u);  // clsact ingress (ffff:fff2)
  CHECK(t.tcm_info == ((0x4f01u << 16) | htons(0x0800)));

  auto top =
      walk(reinterpret_cast<const uint8_t*>(buf.data()) + sizeof(h) + sizeof(t), buf.size() - sizeof(h) - sizeof(t));
  REQUIRE(top.size() == 3);
  CHECK(top[0].type == TCA_KIND);
  CHECK(str(top[0]) == std::string("flower", 7));  // with its NUL, as tc sends it
  CHECK(top[1].type == TCA_CHAIN);
  CHECK(top[1].data == bytes({0, 0, 0, 0}));
  CHECK(top[2].type == TCA_OPTIONS);
  CHECK(top[2].nested);

  auto opts = walk(top[2]);
  CHECK(find(opts, TCA_FLOWER_KEY_IPV4_DST).data == bytes({10, 0, 0, 30}));
  CHECK(find(opts, TCA_FLOWER_KEY_IPV4_DST_MASK).data == bytes({0xff, 0xff, 0xff, 0xff}));
  CHECK(find(opts, TCA_FLOWER_KEY_ETH_TYPE).data == bytes({0x08, 0x00}));
  uint32_t flags;
  std::memcpy(&flags, find(opts, TCA_FLOWER_FLAGS).data.data(), 4);
  CHECK(flags == TCA_CLS_FLAGS_SKIP_HW);
  CHECK(opts.size() == 5);

  auto acts = walk(find(opts, TCA_FLOWER_ACT));
  REQUIRE(acts.size() == 2);
  CHECK(acts[0].type == 1);  // action order, as tc numbers them
  CHECK(acts[1].type == 2);
  const std::vector<uint8_t> cookie = {'o', 'c', 's', 'l', 'a', 'b', '-', 'f'};

  // Action 1: pedit ex munge eth dst set 02:11:22:33:44:55 pipe.
  auto pedit = walk(acts[0]);
  CHECK(str(find(pedit, TCA_ACT_KIND)) == std::string("pedit", 6));
  CHECK(find(pedit, TCA_ACT_COOKIE).data == cookie);
  auto popts = walk(find(pedit, TCA_ACT_OPTIONS));
  REQUIRE(popts.size() == 2);
  const auto& parms = find(popts, TCA_PEDIT_PARMS_EX);
  REQUIRE(parms.data.size() == sizeof(tc_pedit_sel) + 2 * sizeof(tc_pedit_key));
  tc_pedit_sel sel;
  std::memcpy(&sel, parms.data.data(), sizeof(sel));
  CHECK(sel.action == TC_ACT_PIPE);
  CHECK(sel.nkeys == 2);
  CHECK(sel.index == 0);
  tc_pedit_key k[2];
  std::memcpy(k, parms.data.data() + sizeof(sel), sizeof(k));
  // Key 0: the first four bytes of the frame replaced (mask 0 keeps nothing).
  CHECK(k[0].off == 0);
  CHECK(std::memcmp(&k[0].val, bytes({0x02, 0x11, 0x22, 0x33}).data(), 4) == 0);
  CHECK(k[0].mask == 0);
  // Key 1: bytes 4-5 replaced, bytes 6-7 (the source MAC's start) kept by the mask.
  CHECK(k[1].off == 4);
  CHECK(std::memcmp(&k[1].val, bytes({0x44, 0x55, 0x00, 0x00}).data(), 4) == 0);
  CHECK(std::memcmp(&k[1].mask, bytes({0x00, 0x00, 0xff, 0xff}).data(), 4) == 0);
  for (const auto& key : k) CHECK((key.at == 0 && key.offmask == 0 && key.shift == 0));
  auto kex = walk(find(popts, TCA_PEDIT_KEYS_EX));
  REQUIRE(kex.size() == 2);
  for (const auto& e : kex) {
    CHECK(e.type == TCA_PEDIT_KEY_EX);
    CHECK(e.nested);
    auto f = walk(e);
    CHECK(find(f, TCA_PEDIT_KEY_EX_HTYPE).data == bytes({TCA_PEDIT_KEY_EX_HDR_TYPE_ETH, 0}));
    CHECK(find(f, TCA_PEDIT_KEY_EX_CMD).data == bytes({TCA_PEDIT_KEY_EX_CMD_SET, 0}));
  }

  // Action 2: mirred egress redirect to ifindex 7, the frame consumed.
  auto mirred = walk(acts[1]);
  CHECK(str(find(mirred, TCA_ACT_KIND)) == std::string("mirred", 7));
  CHECK(find(mirred, TCA_ACT_COOKIE).data == cookie);
  auto mopts = walk(find(mirred, TCA_ACT_OPTIONS));
  const auto& mp = find(mopts, TCA_MIRRED_PARMS);
  REQUIRE(mp.data.size() == sizeof(tc_mirred));
  tc_mirred m;
  std::memcpy(&m, mp.data.data(), sizeof(m));
  CHECK(m.eaction == TCA_EGRESS_REDIR);
  CHECK(m.action == TC_ACT_STOLEN);
  CHECK(m.ifindex == 7);
}

TEST_CASE("a shorter prefix is sent as address + mask, the host bits cleared") {
  FilterRule r = example_rule();
  r.dst = "10.1.2.77/24";
  std::vector<char> buf;
  tc::put_new_filter(buf, 1, r, 5, 7);
  auto top = walk(reinterpret_cast<const uint8_t*>(buf.data()) + sizeof(nlmsghdr) + sizeof(tcmsg),
                  buf.size() - sizeof(nlmsghdr) - sizeof(tcmsg));
  auto opts = walk(find(top, TCA_OPTIONS));
  CHECK(find(opts, TCA_FLOWER_KEY_IPV4_DST).data == bytes({10, 1, 2, 0}));
  CHECK(find(opts, TCA_FLOWER_KEY_IPV4_DST_MASK).data == bytes({0xff, 0xff, 0xff, 0}));
  auto d = tc::decode_filter(buf.data(), buf.size());
  REQUIRE(d);
  CHECK(d->dst == "10.1.2.0/24");
}

TEST_CASE("delete, dump and clsact requests") {
  std::vector<char> buf;
  tc::put_del_filter(buf, 9, 5, 0, 0x4f02, 1);
  nlmsghdr h;
  tcmsg t;
  std::memcpy(&h, buf.data(), sizeof(h));
  std::memcpy(&t, buf.data() + sizeof(h), sizeof(t));
  CHECK(h.nlmsg_type == RTM_DELTFILTER);
  CHECK(h.nlmsg_flags == (NLM_F_REQUEST | NLM_F_ACK));
  CHECK(t.tcm_handle == 1);
  CHECK(t.tcm_info == ((0x4f02u << 16) | htons(0x0800)));

  buf.clear();
  tc::put_new_clsact(buf, 3, 4);
  std::memcpy(&h, buf.data(), sizeof(h));
  std::memcpy(&t, buf.data() + sizeof(h), sizeof(t));
  CHECK(h.nlmsg_type == RTM_NEWQDISC);
  CHECK(h.nlmsg_flags == (NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE | NLM_F_EXCL));
  CHECK(t.tcm_parent == 0xFFFFFFF1u);  // TC_H_CLSACT
  CHECK(t.tcm_handle == 0xFFFF0000u);  // ffff:
  auto top =
      walk(reinterpret_cast<const uint8_t*>(buf.data()) + sizeof(h) + sizeof(t), h.nlmsg_len - sizeof(h) - sizeof(t));
  CHECK(str(find(top, TCA_KIND)) == std::string("clsact", 7));

  buf.clear();
  tc::put_get_filters(buf, 4, 6, tc::kIngressParent, 0u);
  std::memcpy(&h, buf.data(), sizeof(h));
  CHECK(h.nlmsg_type == RTM_GETTFILTER);
  CHECK((h.nlmsg_flags & NLM_F_DUMP) == NLM_F_DUMP);
}

TEST_CASE("the decoder reads the encoder's message back into the rule") {
  std::vector<char> buf;
  tc::put_new_filter(buf, 1, example_rule(), 5, 7);
  tc::put_new_filter(
      buf, 2,
      [] {
        FilterRule r = example_rule();
        r.prio = 0x4f02;
        r.dst = "10.0.0.41/32";
        r.set_eth_dst = "02:00:00:00:04:11";
        return r;
      }(),
      5, 8);
  auto all = tc::decode_filter_dump(buf.data(), buf.size());
  REQUIRE(all.size() == 2);
  const auto& f = all[0];
  CHECK(f.problem == "");
  CHECK(f.tagged());
  CHECK(f.ifindex == 5);
  CHECK(f.handle == 1);
  CHECK(f.parent == tc::kIngressParent);
  CHECK(f.prio == 0x4f01);
  CHECK(f.protocol == 0x0800);
  CHECK(f.kind == "flower");
  CHECK(f.skip_hw);
  CHECK(f.dst == "10.0.0.30/32");
  CHECK(f.set_eth_dst == "02:11:22:33:44:55");
  CHECK(f.redirect_ifindex == 7);
  CHECK(f.actions == std::vector<std::string>{"pedit", "mirred"});
  CHECK(f.cookies == std::vector<std::string>{kActionCookie, kActionCookie});
  CHECK(all[1].dst == "10.0.0.41/32");
  CHECK(all[1].set_eth_dst == "02:00:00:00:04:11");
  CHECK(all[1].redirect_ifindex == 8);
  CHECK(all[1].prio == 0x4f02);
}

TEST_CASE("the tag: another cookie or a priority outside the range is not ocslab's") {
  std::vector<char> buf;
  FilterRule r = example_rule();
  r.cookie = "01020304";
  tc::put_new_filter(buf, 1, r, 5, 7);
  auto d = tc::decode_filter(buf.data(), buf.size());
  REQUIRE(d);
  CHECK(d->problem == "");   // same shape,
  CHECK_FALSE(d->tagged());  // not ours
  buf.clear();
  r = example_rule();
  r.prio = 0x4e00;
  tc::put_new_filter(buf, 1, r, 5, 7);
  d = tc::decode_filter(buf.data(), buf.size());
  REQUIRE(d);
  CHECK_FALSE(d->tagged());
}

TEST_CASE("malformed input: bad rule fields name the rule, truncated messages throw") {
  std::vector<char> buf;
  FilterRule r = example_rule();
  r.set_eth_dst = "02:11:22:33:44";
  CHECK_THROWS_WITH(tc::put_new_filter(buf, 1, r, 5, 7),
                    Catch::Contains("dev eth1v prio 20225 dst 10.0.0.30/32") && Catch::Contains("not a MAC"));
  r = example_rule();
  r.dst = "10.0.0/33";
  CHECK_THROWS_WITH(tc::put_new_filter(buf, 1, r, 5, 7), Catch::Contains("not an IPv4 prefix"));
  r = example_rule();
  r.cookie = "xyz";
  CHECK_THROWS_WITH(tc::put_new_filter(buf, 1, r, 5, 7), Catch::Contains("cookie"));

  buf.clear();
  tc::put_new_filter(buf, 1, example_rule(), 5, 7);
  for (size_t cut : {size_t{10}, sizeof(nlmsghdr) + 4, buf.size() - 3}) {
    std::vector<char> part(buf.begin(), buf.begin() + static_cast<long>(cut));
    CHECK_THROWS_AS(tc::decode_filter_dump(part.data(), part.size()), Error);
  }
  // An attribute whose length runs past its nest.
  std::vector<char> bad = buf;
  size_t opts = sizeof(nlmsghdr) + sizeof(tcmsg) + 12 + 8;  // after KIND ("flower\0" padded) and CHAIN
  uint16_t huge = 0xfff0;
  std::memcpy(bad.data() + opts, &huge, 2);
  CHECK_THROWS_WITH(tc::decode_filter(bad.data(), bad.size()), Catch::Contains("malformed netlink attribute"));
}

namespace {
std::vector<char> corpus(const std::string& name) {
  std::string path = std::string(OCSLAB_TEST_SOURCE_DIR) + "/tests/fuzz/corpus/forwarding_tc_dump/" + name;
  FILE* f = std::fopen(path.c_str(), "rb");
  REQUIRE(f);
  std::vector<char> out(1 << 16);
  out.resize(std::fread(out.data(), 1, out.size(), f));
  std::fclose(f);
  return out;
}
}  // namespace

// Bytes the guest kernel (Debian 6.1) sent for `TcNetlink::raw_filter_dump` (ingress chain 0):
// the decoder must read the kernel's own form, including the per-priority headers, the
// statistics and attributes the request never carried.
TEST_CASE("real dump bytes from the guest kernel decode into the installed rules") {
  auto d = corpus("guest-6.1-three-ocslab-counted.bin");
  auto all = tc::decode_filter_dump(d.data(), d.size());
  REQUIRE(all.size() == 3);
  for (const auto& f : all) {
    INFO(f.prio << ": " << f.problem);
    CHECK(f.problem == "");
    CHECK(f.tagged());
    CHECK(f.handle == 1);
  }
  CHECK(all[0].prio == 0x4f00);
  CHECK(all[0].dst == "10.0.0.0/8");
  CHECK(all[0].set_eth_dst == "02:00:00:00:00:01");
  CHECK(all[0].packets == 0);
  CHECK(all[1].prio == 0x4f01);  // installed with the tc command (and the cookie)
  CHECK(all[1].dst == "192.168.77.9/32");
  CHECK(all[1].set_eth_dst == "02:11:22:33:44:55");
  CHECK(all[1].packets == 3);     // three pings went through it
  CHECK(all[1].bytes == 3 * 84);  // at ingress the count starts after the Ethernet header: 84-byte IP packets
  CHECK(all[2].prio == 0x4f02);
  CHECK(all[2].set_eth_dst == "02:00:00:00:00:02");
  CHECK(all[1].redirect_ifindex != all[2].redirect_ifindex);

  auto mixed = corpus("guest-6.1-ocslab-tc-and-foreign.bin");
  auto m = tc::decode_filter_dump(mixed.data(), mixed.size());
  int foreign = 0;
  for (const auto& f : m) foreign += !f.tagged();
  CHECK(foreign == 2);  // prio 100 (outside the range) and prio 20230 (no cookie)
}
