#include "ocslab/forwarding/if2_link.h"

#include <arpa/inet.h>
#include <libmnl/libmnl.h>
#include <linux/if.h>
#include <linux/if_link.h>
#include <linux/rtnetlink.h>

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "ocslab/common/error.h"
#include "ocslab/forwarding/kernel_error.h"
#include "ocslab/forwarding/tc_messages.h"
#include "rtnl_util.h"

namespace ocslab::forwarding {

const char* to_string(LinkChange c) {
  switch (c) {
    case LinkChange::unchanged:
      return "unchanged";
    case LinkChange::created:
      return "created";
    case LinkChange::updated:
      return "updated";
    case LinkChange::deleted:
      return "deleted";
    case LinkChange::absent:
      return "absent";
  }
  return "?";
}

namespace {

constexpr size_t kBuf = 1024;

struct Msg {
  std::vector<char> buf = std::vector<char>(kBuf, 0);
  struct nlmsghdr* nlh;
  struct ifinfomsg* ifi;
  Msg(uint16_t type, uint16_t flags) {
    nlh = mnl_nlmsg_put_header(buf.data());
    nlh->nlmsg_type = type;
    nlh->nlmsg_flags = static_cast<uint16_t>(NLM_F_REQUEST | flags);
    ifi = static_cast<struct ifinfomsg*>(mnl_nlmsg_put_extra_header(nlh, sizeof(struct ifinfomsg)));
    ifi->ifi_family = AF_UNSPEC;
  }
};

void put_macvlan_info(struct nlmsghdr* nlh) {
  auto* li = mnl_attr_nest_start(nlh, IFLA_LINKINFO);
  mnl_attr_put_strz(nlh, IFLA_INFO_KIND, "macvlan");
  auto* data = mnl_attr_nest_start(nlh, IFLA_INFO_DATA);
  mnl_attr_put_u32(nlh, IFLA_MACVLAN_MODE, MACVLAN_MODE_PRIVATE);
  mnl_attr_nest_end(nlh, data);
  mnl_attr_nest_end(nlh, li);
}

std::string mac_text(const uint8_t* p, size_t n) {
  std::string s;
  for (size_t i = 0; i < n; ++i) s += fmt::format("{}{:02x}", i ? ":" : "", p[i]);
  return s;
}

void read_link(const struct nlmsghdr* nlh, void* ctx) {
  if (nlh->nlmsg_type != RTM_NEWLINK) return;
  auto* out = static_cast<std::optional<LinkState>*>(ctx);
  const auto* ifi = static_cast<const struct ifinfomsg*>(mnl_nlmsg_get_payload(nlh));
  LinkState s;
  s.index = ifi->ifi_index;
  s.up = ifi->ifi_flags & IFF_UP;
  rtnl::for_each_attr(nlh, sizeof(*ifi), [&](const struct nlattr* a) {
    switch (mnl_attr_get_type(a)) {
      case IFLA_LINK:
        if (mnl_attr_get_payload_len(a) >= 4) s.parent = static_cast<int>(mnl_attr_get_u32(a));
        break;
      case IFLA_ADDRESS:
        s.mac = mac_text(static_cast<const uint8_t*>(mnl_attr_get_payload(a)), mnl_attr_get_payload_len(a));
        break;
      case IFLA_LINKINFO: {
        // The nest's attributes, walked by hand for the same reason as for_each_attr.
        const char* p = static_cast<const char*>(mnl_attr_get_payload(a));
        const char* end = p + mnl_attr_get_payload_len(a);
        while (p + sizeof(struct nlattr) <= end) {
          const auto* in = reinterpret_cast<const struct nlattr*>(p);
          if (in->nla_len < sizeof(struct nlattr) || p + in->nla_len > end) break;
          if (mnl_attr_get_type(in) == IFLA_INFO_KIND) {
            s.kind =
                std::string(static_cast<const char*>(mnl_attr_get_payload(in)),
                            strnlen(static_cast<const char*>(mnl_attr_get_payload(in)), mnl_attr_get_payload_len(in)));
          } else if (mnl_attr_get_type(in) == IFLA_INFO_DATA) {
            const char* q = static_cast<const char*>(mnl_attr_get_payload(in));
            const char* qend = q + mnl_attr_get_payload_len(in);
            while (q + sizeof(struct nlattr) <= qend) {
              const auto* d = reinterpret_cast<const struct nlattr*>(q);
              if (d->nla_len < sizeof(struct nlattr) || q + d->nla_len > qend) break;
              if (mnl_attr_get_type(d) == IFLA_MACVLAN_MODE && mnl_attr_get_payload_len(d) >= 4) {
                s.macvlan_mode = mnl_attr_get_u32(d);
              }
              q += MNL_ALIGN(d->nla_len);
            }
          }
          p += MNL_ALIGN(in->nla_len);
        }
        break;
      }
      default:
        break;
    }
  });
  *out = s;
}

}  // namespace

If2Links::If2Links() : sock_(NETLINK_ROUTE) {}

std::optional<LinkState> If2Links::get(const std::string& name) {
  Msg m(RTM_GETLINK, 0);
  mnl_attr_put_strz(m.nlh, IFLA_IFNAME, name.c_str());
  std::optional<LinkState> out;
  try {
    rtnl::request_ack(sock_, m.nlh, "get link " + name, read_link, &out);
  } catch (const KernelError& e) {
    if (e.err() == ENODEV) return std::nullopt;
    throw;
  }
  return out;
}

LinkState If2Links::check_ours(const MacvlanSpec& spec, const LinkState& s, int parent_index, const char* doing) {
  if (s.kind != "macvlan" || s.parent != parent_index) {
    std::string over = "no parent";
    if (s.parent) {
      over = fmt::format("parent ifindex {}", s.parent);
    }
    throw Error(fmt::format("if2 {}: refusing to {} the existing interface '{}': it is {} ({}), not a macvlan of {}",
                            spec.name, doing, spec.name,
                            s.kind.empty() ? "a device without a link kind" : "a " + s.kind, over, spec.parent));
  }
  return s;
}

LinkChange If2Links::ensure_macvlan(const MacvlanSpec& spec) {
  auto norm = normalize_mac(spec.mac);
  if (!norm) throw Error("if2 " + spec.name + ": '" + spec.mac + "' is not a MAC address");
  std::string mac = *norm;
  auto parent = get(spec.parent);
  if (!parent) throw Error("if2 " + spec.name + ": parent device '" + spec.parent + "' does not exist");
  auto mac_raw = tc::mac_bytes(mac, "if2 " + spec.name);
  auto existing = get(spec.name);
  if (existing) {
    check_ours(spec, *existing, parent->index, "reconfigure");
    if (existing->mac == mac && existing->macvlan_mode == MACVLAN_MODE_PRIVATE && existing->up) {
      return LinkChange::unchanged;
    }
    Msg m(RTM_NEWLINK, 0);
    m.ifi->ifi_index = existing->index;
    m.ifi->ifi_flags = IFF_UP;
    m.ifi->ifi_change = IFF_UP;
    mnl_attr_put(m.nlh, IFLA_ADDRESS, mac_raw.size(), mac_raw.data());
    put_macvlan_info(m.nlh);
    rtnl::request_ack(sock_, m.nlh, "if2 " + spec.name + ": update macvlan");
    return LinkChange::updated;
  }
  {
    Msg m(RTM_NEWLINK, NLM_F_CREATE | NLM_F_EXCL);
    mnl_attr_put_strz(m.nlh, IFLA_IFNAME, spec.name.c_str());
    mnl_attr_put_u32(m.nlh, IFLA_LINK, static_cast<uint32_t>(parent->index));
    mnl_attr_put(m.nlh, IFLA_ADDRESS, mac_raw.size(), mac_raw.data());
    put_macvlan_info(m.nlh);
    rtnl::request_ack(sock_, m.nlh, "if2 " + spec.name + ": create macvlan over " + spec.parent);
  }
  auto made = get(spec.name);
  if (!made) throw Error("if2 " + spec.name + ": created but not found afterwards");
  {
    // Before the link goes up: no IPv6 link-local address either (if2 carries no IP at all).
    Msg m(RTM_NEWLINK, 0);
    m.ifi->ifi_index = made->index;
    auto* af = mnl_attr_nest_start(m.nlh, IFLA_AF_SPEC);
    auto* in6 = mnl_attr_nest_start(m.nlh, AF_INET6);
    mnl_attr_put_u8(m.nlh, IFLA_INET6_ADDR_GEN_MODE, IN6_ADDR_GEN_MODE_NONE);
    mnl_attr_nest_end(m.nlh, in6);
    mnl_attr_nest_end(m.nlh, af);
    try {
      rtnl::request_ack(sock_, m.nlh, "if2 " + spec.name + ": IPv6 address generation off");
    } catch (const KernelError& e) {
      if (e.err() != EAFNOSUPPORT && e.err() != EOPNOTSUPP) throw;  // a kernel without IPv6 makes none anyway
    }
  }
  Msg up(RTM_NEWLINK, 0);
  up.ifi->ifi_index = made->index;
  up.ifi->ifi_flags = IFF_UP;
  up.ifi->ifi_change = IFF_UP;
  rtnl::request_ack(sock_, up.nlh, "if2 " + spec.name + ": link up");
  return LinkChange::created;
}

LinkChange If2Links::delete_macvlan(const MacvlanSpec& spec) {
  auto existing = get(spec.name);
  if (!existing) return LinkChange::absent;
  auto parent = get(spec.parent);
  check_ours(spec, *existing, parent ? parent->index : -1, "delete");
  Msg m(RTM_DELLINK, 0);
  m.ifi->ifi_index = existing->index;
  rtnl::request_ack(sock_, m.nlh, "if2 " + spec.name + ": delete macvlan");
  return LinkChange::deleted;
}

}  // namespace ocslab::forwarding
