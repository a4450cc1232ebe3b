#include "ocslab/probes/neigh_table.h"

#include <arpa/inet.h>
#include <linux/neighbour.h>
#include <linux/rtnetlink.h>
#include <sys/socket.h>

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <map>

#include "ocslab/common/netlink_socket.h"

namespace ocslab::probes {

namespace {

constexpr std::array<std::pair<uint16_t, const char*>, 8> kNudNames = {{{NUD_INCOMPLETE, "INCOMPLETE"},
                                                                        {NUD_REACHABLE, "REACHABLE"},
                                                                        {NUD_STALE, "STALE"},
                                                                        {NUD_DELAY, "DELAY"},
                                                                        {NUD_PROBE, "PROBE"},
                                                                        {NUD_FAILED, "FAILED"},
                                                                        {NUD_NOARP, "NOARP"},
                                                                        {NUD_PERMANENT, "PERMANENT"}}};

std::string lladdr_text(const uint8_t* p, size_t n) {
  std::string s;
  for (size_t i = 0; i < n && i < 32; ++i) s += fmt::format("{}{:02x}", i ? ":" : "", p[i]);
  return s;
}

}  // namespace

std::string nud_state_name(uint16_t state) {
  if (state == 0) return "NONE";
  std::string s;
  uint16_t known = 0;
  for (const auto& [bit, name] : kNudNames) {
    known |= bit;
    if (state & bit) s += (s.empty() ? "" : "|") + std::string(name);
  }
  if (state & ~known) s += (s.empty() ? "" : "|") + fmt::format("0x{:x}", state & ~known);
  return s;
}

std::optional<NeighEntry> parse_neigh_message(const void* data, size_t len, int ifindex) {
  // The header and the fixed part first, then attributes, each bounded by what the message
  // claims and by what was received.
  if (len < NLMSG_HDRLEN + sizeof(ndmsg)) return std::nullopt;
  nlmsghdr h{};
  std::memcpy(&h, data, sizeof(h));
  if (h.nlmsg_type != RTM_NEWNEIGH || h.nlmsg_len > len || h.nlmsg_len < NLMSG_HDRLEN + sizeof(ndmsg))
    return std::nullopt;
  const auto* bytes = static_cast<const uint8_t*>(data);
  ndmsg nd{};
  std::memcpy(&nd, bytes + NLMSG_HDRLEN, sizeof(nd));
  if (nd.ndm_ifindex != ifindex || (nd.ndm_family != AF_INET && nd.ndm_family != AF_INET6)) return std::nullopt;
  NeighEntry e;
  e.state = nd.ndm_state;
  bool have_dst = false;
  size_t off = NLMSG_HDRLEN + NLMSG_ALIGN(sizeof(ndmsg));
  const size_t end = h.nlmsg_len;
  while (off + sizeof(nlattr) <= end) {
    nlattr a{};
    std::memcpy(&a, bytes + off, sizeof(a));
    if (a.nla_len < sizeof(nlattr) || a.nla_len > end - off) break;
    const uint8_t* payload = bytes + off + NLA_HDRLEN;
    const size_t plen = a.nla_len - NLA_HDRLEN;
    const uint16_t type = a.nla_type & NLA_TYPE_MASK;
    if (type == NDA_DST) {
      const int family = nd.ndm_family;
      const size_t want = family == AF_INET ? 4 : 16;
      if (plen == want) {
        char buf[INET6_ADDRSTRLEN] = {};
        if (::inet_ntop(family, payload, buf, sizeof(buf))) {
          e.address = buf;
          have_dst = true;
        }
      }
    } else if (type == NDA_LLADDR) {
      e.lladdr = lladdr_text(payload, plen);
    }
    off += NLA_ALIGN(a.nla_len);
  }
  if (!have_dst) return std::nullopt;
  return e;
}

std::vector<NeighEntry> dump_neighbours(NetlinkSocket& sock, int ifindex) {
  std::vector<char> buf(MNL_SOCKET_BUFFER_SIZE);
  auto* nlh = mnl_nlmsg_put_header(buf.data());
  nlh->nlmsg_type = RTM_GETNEIGH;
  nlh->nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
  auto* nd = static_cast<ndmsg*>(mnl_nlmsg_put_extra_header(nlh, sizeof(ndmsg)));
  nd->ndm_family = AF_UNSPEC;
  std::vector<NeighEntry> out;
  sock.request(nlh, [&](const nlmsghdr* m) {
    if (auto e = parse_neigh_message(m, m->nlmsg_len, ifindex)) out.push_back(std::move(*e));
  });
  std::sort(out.begin(), out.end(), [](const NeighEntry& a, const NeighEntry& b) { return a.address < b.address; });
  return out;
}

std::vector<NeighChange> diff_neighbours(const std::vector<NeighEntry>& before, const std::vector<NeighEntry>& after) {
  std::map<std::string, const NeighEntry*> old;
  for (const auto& e : before) old[e.address] = &e;
  std::vector<NeighChange> out;
  for (const auto& e : after) {
    auto it = old.find(e.address);
    if (it == old.end()) {
      out.push_back({NeighChange::Kind::kAdded, e});
      continue;
    }
    if (!(*it->second == e)) out.push_back({NeighChange::Kind::kChanged, e});
    old.erase(it);
  }
  for (const auto& [address, e] : old) out.push_back({NeighChange::Kind::kRemoved, *e});
  return out;
}

}  // namespace ocslab::probes
