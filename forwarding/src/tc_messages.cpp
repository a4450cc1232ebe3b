#include "ocslab/forwarding/tc_messages.h"

#include <arpa/inet.h>
#include <libmnl/libmnl.h>
#include <linux/gen_stats.h>
#include <linux/if_ether.h>
#include <linux/pkt_cls.h>
#include <linux/pkt_sched.h>
#include <linux/rtnetlink.h>
#include <linux/tc_act/tc_mirred.h>
#include <linux/tc_act/tc_pedit.h>

#include <fmt/format.h>

#include <cstring>
#include <map>

#include "ocslab/common/error.h"

namespace ocslab::forwarding::tc {

namespace {

// The largest message we build: flower + two actions is about 400 bytes.
constexpr size_t kMaxMessage = 2048;

// Starts a message at the end of `out`; finish() trims it to its real length.
class MessageBuilder {
 public:
  MessageBuilder(std::vector<char>& out, uint16_t type, uint16_t flags, uint32_t seq) : out_(out), start_(out.size()) {
    out_.resize(start_ + kMaxMessage);
    std::memset(out_.data() + start_, 0, kMaxMessage);
    nlh_ = mnl_nlmsg_put_header(out_.data() + start_);
    nlh_->nlmsg_type = type;
    nlh_->nlmsg_flags = static_cast<uint16_t>(NLM_F_REQUEST | flags);
    nlh_->nlmsg_seq = seq;
  }
  struct nlmsghdr* nlh() {
    return nlh_;
  }
  template <typename T>
  T* extra() {
    return static_cast<T*>(mnl_nlmsg_put_extra_header(nlh_, sizeof(T)));
  }
  void put(uint16_t type, const void* data, size_t len) {
    if (!mnl_attr_put_check(nlh_, kMaxMessage, type, len, data)) throw Error("netlink message too long");
  }
  void put_u16(uint16_t type, uint16_t v) { put(type, &v, sizeof(v)); }
  void put_u32(uint16_t type, uint32_t v) { put(type, &v, sizeof(v)); }
  void put_strz(uint16_t type, const std::string& s) { put(type, s.c_str(), s.size() + 1); }
  struct nlattr* nest(uint16_t type) {
    struct nlattr* n = mnl_attr_nest_start_check(nlh_, kMaxMessage, type);
    if (!n) throw Error("netlink message too long");
    return n;
  }
  void end(struct nlattr* n) { mnl_attr_nest_end(nlh_, n); }
  void finish() { out_.resize(start_ + nlh_->nlmsg_len); }

 private:
  std::vector<char>& out_;
  size_t start_;
  struct nlmsghdr* nlh_;
};

std::string rule_name(const FilterRule& r) { return fmt::format("filter dev {} prio {} dst {}", r.dev, r.prio, r.dst); }

std::vector<uint8_t> hex_bytes(const std::string& hex, const std::string& what) {
  auto nibble = [&](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    throw Error(fmt::format("{}: cookie '{}' is not hex", what, hex));
  };
  if (hex.empty() || hex.size() % 2 || hex.size() / 2 > TC_COOKIE_MAX_SIZE) {
    throw Error(fmt::format("{}: cookie '{}' must be 1..{} bytes of hex", what, hex, TC_COOKIE_MAX_SIZE));
  }
  std::vector<uint8_t> out;
  for (size_t i = 0; i < hex.size(); i += 2)
    out.push_back(static_cast<uint8_t>(nibble(hex[i]) << 4 | nibble(hex[i + 1])));
  return out;
}

std::string to_hex(const uint8_t* p, size_t n) {
  std::string s;
  for (size_t i = 0; i < n; ++i) s += fmt::format("{:02x}", p[i]);
  return s;
}

void put_tcmsg(MessageBuilder& b, int ifindex, uint32_t handle, uint32_t parent, uint32_t info) {
  auto* t = b.extra<struct tcmsg>();
  t->tcm_family = AF_UNSPEC;
  t->tcm_ifindex = ifindex;
  t->tcm_handle = handle;
  t->tcm_parent = parent;
  t->tcm_info = info;
}

uint32_t filter_info(uint16_t prio) { return TC_H_MAKE(static_cast<uint32_t>(prio) << 16, htons(ETH_P_IP)); }

}  // namespace

std::vector<uint8_t> mac_bytes(const std::string& mac, const std::string& what) {
  auto norm = normalize_mac(mac);
  if (!norm) throw Error(fmt::format("{}: '{}' is not a MAC address", what, mac));
  std::vector<uint8_t> out;
  for (size_t i = 0; i < 6; ++i) out.push_back(static_cast<uint8_t>(std::stoul(norm->substr(i * 3, 2), nullptr, 16)));
  return out;
}

std::vector<PeditKey> eth_dst_keys(const std::vector<uint8_t>& m) {
  PeditKey k0, k1;
  k0.off = 0;
  std::memcpy(&k0.val, m.data(), 4);  // bytes 0..3 of the frame
  k0.mask = 0;                        // new = (old & mask) ^ val: replace all four bytes
  k1.off = 4;
  const uint8_t v1[4] = {m[4], m[5], 0, 0};
  std::memcpy(&k1.val, v1, 4);
  k1.mask = htonl(0x0000FFFFu);  // keep bytes 6-7: the start of the source MAC
  return {k0, k1};
}

void put_new_filter(std::vector<char>& out, uint32_t seq, const FilterRule& rule, int ifindex, int redirect_ifindex) {
  std::string what = rule_name(rule);
  auto prefix = parse_ipv4_prefix(rule.dst);
  if (!prefix) throw Error(fmt::format("{}: dst '{}' is not an IPv4 prefix", what, rule.dst));
  auto mac = mac_bytes(rule.set_eth_dst, what);
  auto cookie = hex_bytes(rule.cookie, what);

  MessageBuilder b(out, RTM_NEWTFILTER, NLM_F_ACK | NLM_F_CREATE | NLM_F_EXCL, seq);
  put_tcmsg(b, ifindex, kFilterHandle, kIngressParent, filter_info(rule.prio));
  b.put_strz(TCA_KIND, "flower");
  b.put_u32(TCA_CHAIN, rule.chain);
  auto* opts = b.nest(TCA_OPTIONS);
  uint32_t mask = prefix->prefix_len == 0 ? 0 : htonl(~0u << (32 - prefix->prefix_len));
  uint32_t addr = htonl(prefix->addr) & mask;
  b.put_u32(TCA_FLOWER_KEY_IPV4_DST, addr);
  b.put_u32(TCA_FLOWER_KEY_IPV4_DST_MASK, mask);

  auto* acts = b.nest(TCA_FLOWER_ACT);
  // Action 1: pedit ex munge eth dst set MAC pipe.
  auto* a1 = b.nest(1);
  b.put_strz(TCA_ACT_KIND, "pedit");
  auto* p = b.nest(TCA_ACT_OPTIONS);
  auto keys = eth_dst_keys(mac);
  std::vector<char> sel(sizeof(struct tc_pedit_sel) + keys.size() * sizeof(struct tc_pedit_key), 0);
  struct tc_pedit_sel s;
  std::memset(&s, 0, sizeof(s));
  s.action = TC_ACT_PIPE;
  s.nkeys = static_cast<unsigned char>(keys.size());
  std::memcpy(sel.data(), &s, sizeof(s));
  for (size_t i = 0; i < keys.size(); ++i) {
    struct tc_pedit_key k;
    std::memset(&k, 0, sizeof(k));
    k.off = keys[i].off;
    k.val = keys[i].val;
    k.mask = keys[i].mask;
    std::memcpy(sel.data() + sizeof(s) + i * sizeof(k), &k, sizeof(k));
  }
  b.put(TCA_PEDIT_PARMS_EX, sel.data(), sel.size());
  auto* kex = b.nest(TCA_PEDIT_KEYS_EX);
  for (size_t i = 0; i < keys.size(); ++i) {
    auto* k = b.nest(TCA_PEDIT_KEY_EX);
    b.put_u16(TCA_PEDIT_KEY_EX_HTYPE, TCA_PEDIT_KEY_EX_HDR_TYPE_ETH);
    b.put_u16(TCA_PEDIT_KEY_EX_CMD, TCA_PEDIT_KEY_EX_CMD_SET);
    b.end(k);
  }
  b.end(kex);
  b.end(p);
  b.put(TCA_ACT_COOKIE, cookie.data(), cookie.size());
  b.end(a1);
  // Action 2: mirred egress redirect dev OUT (the frame is consumed: STOLEN).
  auto* a2 = b.nest(2);
  b.put_strz(TCA_ACT_KIND, "mirred");
  auto* m = b.nest(TCA_ACT_OPTIONS);
  struct tc_mirred mp;
  std::memset(&mp, 0, sizeof(mp));
  mp.action = TC_ACT_STOLEN;
  mp.eaction = TCA_EGRESS_REDIR;
  mp.ifindex = static_cast<uint32_t>(redirect_ifindex);
  b.put(TCA_MIRRED_PARMS, &mp, sizeof(mp));
  b.end(m);
  b.put(TCA_ACT_COOKIE, cookie.data(), cookie.size());
  b.end(a2);
  b.end(acts);

  b.put_u32(TCA_FLOWER_FLAGS, TCA_CLS_FLAGS_SKIP_HW);
  b.put_u16(TCA_FLOWER_KEY_ETH_TYPE, htons(ETH_P_IP));
  b.end(opts);
  b.finish();
}

void put_del_filter(std::vector<char>& out, uint32_t seq, int ifindex, uint32_t chain, uint16_t prio, uint32_t handle) {
  MessageBuilder b(out, RTM_DELTFILTER, NLM_F_ACK, seq);
  put_tcmsg(b, ifindex, handle, kIngressParent, filter_info(prio));
  b.put_strz(TCA_KIND, "flower");
  b.put_u32(TCA_CHAIN, chain);
  b.finish();
}

void put_get_filters(std::vector<char>& out, uint32_t seq, int ifindex, uint32_t parent,
                     std::optional<uint32_t> chain) {
  MessageBuilder b(out, RTM_GETTFILTER, NLM_F_DUMP, seq);
  put_tcmsg(b, ifindex, 0, parent, 0);
  if (chain) b.put_u32(TCA_CHAIN, *chain);
  b.finish();
}

void put_new_clsact(std::vector<char>& out, uint32_t seq, int ifindex) {
  MessageBuilder b(out, RTM_NEWQDISC, NLM_F_ACK | NLM_F_CREATE | NLM_F_EXCL, seq);
  put_tcmsg(b, ifindex, kClsactHandle, TC_H_CLSACT, 0);
  b.put_strz(TCA_KIND, "clsact");
  b.finish();
}

void put_del_clsact(std::vector<char>& out, uint32_t seq, int ifindex) {
  MessageBuilder b(out, RTM_DELQDISC, NLM_F_ACK, seq);
  put_tcmsg(b, ifindex, kClsactHandle, TC_H_CLSACT, 0);
  b.put_strz(TCA_KIND, "clsact");
  b.finish();
}

void put_get_qdiscs(std::vector<char>& out, uint32_t seq) {
  MessageBuilder b(out, RTM_GETQDISC, NLM_F_DUMP, seq);
  put_tcmsg(b, 0, 0, 0, 0);
  b.finish();
}

void put_get_links(std::vector<char>& out, uint32_t seq) {
  MessageBuilder b(out, RTM_GETLINK, NLM_F_DUMP, seq);
  auto* i = b.extra<struct ifinfomsg>();
  i->ifi_family = AF_UNSPEC;
  b.finish();
}

// ---- decoding ------------------------------------------------------------------------------

namespace {

struct Span {
  const uint8_t* p = nullptr;
  size_t len = 0;
};

// Attributes in appearance order; throws Error on a length that leaves its container.
std::vector<std::pair<uint16_t, Span>> attrs(Span s, const char* where) {
  std::vector<std::pair<uint16_t, Span>> out;
  size_t off = 0;
  while (off + sizeof(struct nlattr) <= s.len) {
    struct nlattr a;
    std::memcpy(&a, s.p + off, sizeof(a));
    if (a.nla_len < sizeof(struct nlattr) || a.nla_len > s.len - off) {
      throw Error(fmt::format("malformed netlink attribute in {} (length {} at offset {})", where, a.nla_len, off));
    }
    out.push_back({static_cast<uint16_t>(a.nla_type & NLA_TYPE_MASK),
                   Span{s.p + off + sizeof(struct nlattr), a.nla_len - sizeof(struct nlattr)}});
    off += MNL_ALIGN(a.nla_len);
  }
  return out;
}

std::map<uint16_t, Span> table(Span s, const char* where) {
  std::map<uint16_t, Span> t;
  for (auto& [type, v] : attrs(s, where)) t[type] = v;
  return t;
}

template <typename T>
T get(const Span& s, const char* what) {
  if (s.len < sizeof(T)) throw Error(fmt::format("netlink attribute {} too short ({} bytes)", what, s.len));
  T v;
  std::memcpy(&v, s.p, sizeof(T));
  return v;
}

std::string get_str(const Span& s) {
  size_t n = 0;
  while (n < s.len && s.p[n]) ++n;
  return std::string(reinterpret_cast<const char*>(s.p), n);
}

void add_problem(DecodedFilter& f, const std::string& what) { f.problem += (f.problem.empty() ? "" : "; ") + what; }

int prefix_len_of(uint32_t mask_be) {
  uint32_t m = ntohl(mask_be);
  int n = 0;
  while (n < 32 && (m & (0x80000000u >> n))) ++n;
  if (n < 32 && (m << n) != 0) return -1;  // not contiguous
  return n;
}

void decode_pedit(DecodedFilter& f, const std::map<uint16_t, Span>& o) {
  auto parms = o.find(TCA_PEDIT_PARMS_EX);
  if (parms == o.end()) return add_problem(f, "pedit without extended parameters");
  struct tc_pedit_sel sel = get<struct tc_pedit_sel>(parms->second, "TCA_PEDIT_PARMS_EX");
  size_t have = (parms->second.len - sizeof(sel)) / sizeof(struct tc_pedit_key);
  if (sel.nkeys > have) throw Error(fmt::format("pedit says {} keys but carries {}", sel.nkeys, have));
  if (sel.action != TC_ACT_PIPE) add_problem(f, fmt::format("pedit control {} is not pipe", sel.action));
  if (sel.nkeys != 2) return add_problem(f, fmt::format("pedit has {} keys, not 2", sel.nkeys));
  struct tc_pedit_key k[2];
  std::memcpy(k, parms->second.p + sizeof(sel), sizeof(k));
  uint8_t mac[6];
  std::memcpy(mac, &k[0].val, 4);
  std::memcpy(mac + 4, &k[1].val, 2);
  auto want = eth_dst_keys(std::vector<uint8_t>(mac, mac + 6));
  for (int i = 0; i < 2; ++i) {
    if (k[i].off != want[i].off || k[i].val != want[i].val || k[i].mask != want[i].mask || k[i].at || k[i].offmask ||
        k[i].shift) {
      return add_problem(f, fmt::format("pedit key {} is not part of 'eth dst set'", i));
    }
  }
  auto kex = o.find(TCA_PEDIT_KEYS_EX);
  if (kex == o.end()) return add_problem(f, "pedit without extended keys");
  int n = 0;
  for (auto& [type, v] : attrs(kex->second, "TCA_PEDIT_KEYS_EX")) {
    if (type != TCA_PEDIT_KEY_EX) continue;
    auto t = table(v, "TCA_PEDIT_KEY_EX");
    uint16_t htype = t.count(TCA_PEDIT_KEY_EX_HTYPE) ? get<uint16_t>(t[TCA_PEDIT_KEY_EX_HTYPE], "HTYPE") : 0xFFFF;
    uint16_t cmd = t.count(TCA_PEDIT_KEY_EX_CMD) ? get<uint16_t>(t[TCA_PEDIT_KEY_EX_CMD], "CMD") : 0xFFFF;
    if (htype != TCA_PEDIT_KEY_EX_HDR_TYPE_ETH || cmd != TCA_PEDIT_KEY_EX_CMD_SET) {
      return add_problem(f, fmt::format("pedit key {} has header type {} command {}, not eth set", n, htype, cmd));
    }
    ++n;
  }
  if (n != 2) return add_problem(f, fmt::format("pedit has {} extended keys, not 2", n));
  f.set_eth_dst =
      fmt::format("{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}", mac[0], mac[1], mac[2], mac[3], mac[4], mac[5]);
}

void decode_mirred(DecodedFilter& f, const std::map<uint16_t, Span>& o) {
  auto parms = o.find(TCA_MIRRED_PARMS);
  if (parms == o.end()) return add_problem(f, "mirred without parameters");
  auto m = get<struct tc_mirred>(parms->second, "TCA_MIRRED_PARMS");
  if (m.eaction != TCA_EGRESS_REDIR)
    return add_problem(f, fmt::format("mirred action {} is not egress redirect", m.eaction));
  if (m.action != TC_ACT_STOLEN) add_problem(f, fmt::format("mirred control {} is not stolen", m.action));
  f.redirect_ifindex = static_cast<int>(m.ifindex);
}

void decode_actions(DecodedFilter& f, Span s) {
  for (auto& [order, v] : attrs(s, "TCA_FLOWER_ACT")) {
    (void)order;
    auto a = table(v, "action");
    std::string kind = a.count(TCA_ACT_KIND) ? get_str(a[TCA_ACT_KIND]) : "";
    f.actions.push_back(kind);
    f.cookies.push_back(a.count(TCA_ACT_COOKIE) ? to_hex(a[TCA_ACT_COOKIE].p, a[TCA_ACT_COOKIE].len) : "");
    if (f.actions.size() == 1 && a.count(TCA_ACT_STATS)) {
      auto st = table(a[TCA_ACT_STATS], "TCA_ACT_STATS");
      if (st.count(TCA_STATS_BASIC)) {
        auto b = get<struct gnet_stats_basic>(st[TCA_STATS_BASIC], "TCA_STATS_BASIC");
        f.bytes = b.bytes;
        f.packets = b.packets;
      }
      if (st.count(TCA_STATS_PKT64)) f.packets = get<uint64_t>(st[TCA_STATS_PKT64], "TCA_STATS_PKT64");
    }
    std::map<uint16_t, Span> opts;
    if (a.count(TCA_ACT_OPTIONS)) opts = table(a[TCA_ACT_OPTIONS], "TCA_ACT_OPTIONS");
    size_t i = f.actions.size();
    if (i == 1 && kind == "pedit") {
      decode_pedit(f, opts);
    } else if (i == 2 && kind == "mirred") {
      decode_mirred(f, opts);
    } else {
      add_problem(f, fmt::format("action {} is '{}', not {}", i, kind,
                                 i == 1   ? "pedit"
                                 : i == 2 ? "mirred"
                                          : "absent"));
    }
  }
  if (f.actions.size() < 2) add_problem(f, fmt::format("{} action(s), not pedit + mirred", f.actions.size()));
}

void decode_flower(DecodedFilter& f, Span s) {
  auto t = attrs(s, "TCA_OPTIONS");
  std::optional<uint32_t> dst, mask;
  for (auto& [type, v] : t) {
    switch (type) {
      case TCA_FLOWER_KEY_ETH_TYPE:
        if (ntohs(get<uint16_t>(v, "TCA_FLOWER_KEY_ETH_TYPE")) != ETH_P_IP)
          add_problem(f, "flower eth_type is not IPv4");
        break;
      case TCA_FLOWER_KEY_IPV4_DST:
        dst = get<uint32_t>(v, "TCA_FLOWER_KEY_IPV4_DST");
        break;
      case TCA_FLOWER_KEY_IPV4_DST_MASK:
        mask = get<uint32_t>(v, "TCA_FLOWER_KEY_IPV4_DST_MASK");
        break;
      case TCA_FLOWER_FLAGS:
        f.skip_hw = get<uint32_t>(v, "TCA_FLOWER_FLAGS") & TCA_CLS_FLAGS_SKIP_HW;
        break;
      case TCA_FLOWER_ACT:
        decode_actions(f, v);
        break;
      case TCA_FLOWER_IN_HW_COUNT:
        break;
      default:
        add_problem(f, fmt::format("flower matches more than dst_ip (attribute {})", type));
    }
  }
  if (!dst) return add_problem(f, "flower has no IPv4 destination");
  int len = prefix_len_of(mask.value_or(0xFFFFFFFFu));
  if (len < 0) return add_problem(f, "flower dst_ip mask is not a prefix");
  f.dst = format_ipv4(ntohl(*dst)) + "/" + std::to_string(len);
  if (!f.skip_hw) add_problem(f, "flower without skip_hw");
}

}  // namespace

bool DecodedFilter::tagged() const {
  if (parent != kIngressParent || chain != kTcChain || prio < kTcPrioFirst || prio > kTcPrioLast) return false;
  if (cookies.empty()) return false;
  for (const auto& c : cookies) {
    if (c != kActionCookie) return false;
  }
  return true;
}

std::optional<DecodedFilter> decode_filter(const void* msg, size_t len) {
  if (len < sizeof(struct nlmsghdr)) throw Error(fmt::format("netlink message of {} bytes is truncated", len));
  struct nlmsghdr h;
  std::memcpy(&h, msg, sizeof(h));
  if (h.nlmsg_len > len || h.nlmsg_len < sizeof(h)) {
    throw Error(fmt::format("netlink message length {} does not fit the {} bytes read", h.nlmsg_len, len));
  }
  if (h.nlmsg_type != RTM_NEWTFILTER) return std::nullopt;
  const auto* p = static_cast<const uint8_t*>(msg);
  size_t payload = h.nlmsg_len - sizeof(h);
  if (payload < sizeof(struct tcmsg)) throw Error("filter message without its tcmsg header");
  struct tcmsg t;
  std::memcpy(&t, p + sizeof(h), sizeof(t));
  if (t.tcm_handle == 0) return std::nullopt;  // the per-priority header of a dump
  DecodedFilter f;
  f.ifindex = t.tcm_ifindex;
  f.parent = t.tcm_parent;
  f.handle = t.tcm_handle;
  f.prio = static_cast<uint16_t>(TC_H_MAJ(t.tcm_info) >> 16);
  f.protocol = ntohs(static_cast<uint16_t>(TC_H_MIN(t.tcm_info)));
  Span rest{p + sizeof(h) + MNL_ALIGN(sizeof(t)), payload > MNL_ALIGN(sizeof(t)) ? payload - MNL_ALIGN(sizeof(t)) : 0};
  auto top = table(rest, "filter message");
  if (top.count(TCA_KIND)) f.kind = get_str(top[TCA_KIND]);
  if (top.count(TCA_CHAIN)) f.chain = get<uint32_t>(top[TCA_CHAIN], "TCA_CHAIN");
  if (f.kind != "flower") {
    add_problem(f, "kind '" + f.kind + "' is not flower");
  } else if (!top.count(TCA_OPTIONS)) {
    add_problem(f, "flower without options");
  } else {
    decode_flower(f, top[TCA_OPTIONS]);
  }
  if (f.protocol != ETH_P_IP) add_problem(f, fmt::format("protocol 0x{:04x} is not ip", f.protocol));
  return f;
}

std::vector<DecodedFilter> decode_filter_dump(const void* data, size_t len) {
  std::vector<DecodedFilter> out;
  const auto* p = static_cast<const uint8_t*>(data);
  size_t off = 0;
  while (off + sizeof(struct nlmsghdr) <= len) {
    struct nlmsghdr h;
    std::memcpy(&h, p + off, sizeof(h));
    if (h.nlmsg_len < sizeof(h) || h.nlmsg_len > len - off) {
      throw Error(
          fmt::format("netlink message length {} at offset {} leaves the {} bytes read", h.nlmsg_len, off, len));
    }
    if (h.nlmsg_type == NLMSG_DONE) return out;
    if (auto f = decode_filter(p + off, h.nlmsg_len)) out.push_back(std::move(*f));
    off += MNL_ALIGN(h.nlmsg_len);
  }
  if (off < len) throw Error(fmt::format("{} stray bytes after the last netlink message", len - off));
  return out;
}

}  // namespace ocslab::forwarding::tc
