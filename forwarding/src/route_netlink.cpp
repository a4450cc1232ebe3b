#include "ocslab/forwarding/route_netlink.h"

#include <arpa/inet.h>
#include <linux/neighbour.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <netlink/netlink.h>
#include <netlink/route/link.h>
#include <netlink/route/neighbour.h>
#include <netlink/route/nexthop.h>
#include <netlink/route/route.h>
#include <poll.h>
#include <sys/socket.h>

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <memory>

#include "ocslab/common/netlink_ack.h"

namespace ocslab::forwarding {

bool KernelNeighbour::permanent() const { return (state & NUD_PERMANENT) != 0; }

// Named, not anonymous: RouteNetlink::Pending (declared in the header) holds a MsgPtr.
namespace route_netlink_detail {
struct MsgFree {
  void operator()(nl_msg* m) const { nlmsg_free(m); }
};
using MsgPtr = std::unique_ptr<nl_msg, MsgFree>;
}  // namespace route_netlink_detail
using route_netlink_detail::MsgPtr;

namespace {

struct CacheFree {
  void operator()(nl_cache* c) const { nl_cache_free(c); }
};
struct AddrFree {
  void operator()(nl_addr* a) const { nl_addr_put(a); }
};
struct RouteFree {
  void operator()(rtnl_route* r) const { rtnl_route_put(r); }
};
struct NeighFree {
  void operator()(rtnl_neigh* n) const { rtnl_neigh_put(n); }
};
using CachePtr = std::unique_ptr<nl_cache, CacheFree>;
using AddrPtr = std::unique_ptr<nl_addr, AddrFree>;

nl_sock* open_socket(const char* what) {
  nl_sock* sk = nl_socket_alloc();
  if (!sk) throw Error(std::string("cannot allocate a netlink socket for ") + what);
  int rc = nl_connect(sk, NETLINK_ROUTE);
  if (rc < 0) {
    nl_socket_free(sk);
    throw Error(fmt::format("cannot open a NETLINK_ROUTE socket for {}: {}", what, nl_geterror(rc)));
  }
  return sk;
}

AddrPtr parse_addr(const std::string& text, int family, const std::string& rule) {
  nl_addr* a = nullptr;
  int rc = nl_addr_parse(text.c_str(), family, &a);
  if (rc < 0 || !a) throw Error(fmt::format("{}: bad address '{}': {}", rule, text, nl_geterror(rc)));
  return AddrPtr(a);
}

std::string ipv4_text(nl_addr* a) {
  if (!a || nl_addr_get_family(a) != AF_INET || nl_addr_get_len(a) != 4) return "";
  char buf[INET_ADDRSTRLEN] = {};
  ::inet_ntop(AF_INET, nl_addr_get_binary_addr(a), buf, sizeof(buf));
  return buf;
}

std::string mac_text(nl_addr* a) {
  if (!a || nl_addr_get_len(a) != 6) return "";
  auto* b = static_cast<const unsigned char*>(nl_addr_get_binary_addr(a));
  return fmt::format("{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}", b[0], b[1], b[2], b[3], b[4], b[5]);
}

}  // namespace

struct RouteNetlink::Pending {
  MsgPtr msg;
  std::string rule;  // the request as the ip command, for error messages
  uint32_t seq = 0;
  int error = 0;
  std::string extack;
  bool acked = false;
};

RouteNetlink::RouteNetlink() {
  dump_ = open_socket("dumps");
  try {
    req_ = open_socket("requests");
  } catch (...) {
    nl_socket_free(dump_);
    throw;
  }
  int fd = nl_socket_get_fd(req_);
  int one = 1;
  // Error acks carry only the failed request's header (not the whole request) and the
  // kernel's extended message; a big receive buffer holds a whole window of acks.
  ::setsockopt(fd, SOL_NETLINK, NETLINK_CAP_ACK, &one, sizeof(one));
  ::setsockopt(fd, SOL_NETLINK, NETLINK_EXT_ACK, &one, sizeof(one));
  int size = 8 << 20;
  if (::setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &size, sizeof(size)) < 0)
    ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, sizeof(size));
  refresh_links();
}

RouteNetlink::~RouteNetlink() {
  nl_socket_free(req_);
  nl_socket_free(dump_);
}

void RouteNetlink::refresh_links() {
  nl_cache* c = nullptr;
  int rc = rtnl_link_alloc_cache(dump_, AF_UNSPEC, &c);
  if (rc < 0) throw Error(fmt::format("cannot list network devices over netlink: {}", nl_geterror(rc)));
  CachePtr cache(c);
  by_name_.clear();
  by_index_.clear();
  for (nl_object* o = nl_cache_get_first(c); o; o = nl_cache_get_next(o)) {
    auto* l = reinterpret_cast<rtnl_link*>(o);
    by_name_[rtnl_link_get_name(l)] = rtnl_link_get_ifindex(l);
    by_index_[rtnl_link_get_ifindex(l)] = rtnl_link_get_name(l);
  }
}

int RouteNetlink::ifindex(const std::string& dev) {
  auto it = by_name_.find(dev);
  if (it == by_name_.end()) {
    refresh_links();
    it = by_name_.find(dev);
    if (it == by_name_.end()) throw Error(fmt::format("no network device '{}' in this namespace", dev));
  }
  return it->second;
}

std::string RouteNetlink::ifname(int index) {
  auto it = by_index_.find(index);
  if (it == by_index_.end()) {
    refresh_links();
    it = by_index_.find(index);
    if (it == by_index_.end()) return fmt::format("if{}", index);
  }
  return it->second;
}

std::vector<KernelRoute> RouteNetlink::list_routes() {
  refresh_links();
  nl_cache* c = nullptr;
  int rc = rtnl_route_alloc_cache(dump_, AF_INET, 0, &c);
  if (rc < 0) throw Error(fmt::format("cannot list IPv4 routes over netlink: {}", nl_geterror(rc)));
  CachePtr cache(c);
  std::vector<KernelRoute> out;
  for (nl_object* o = nl_cache_get_first(c); o; o = nl_cache_get_next(o)) {
    auto* r = reinterpret_cast<rtnl_route*>(o);
    if (rtnl_route_get_table(r) != RT_TABLE_MAIN || rtnl_route_get_type(r) != RTN_UNICAST) continue;
    KernelRoute k;
    nl_addr* dst = rtnl_route_get_dst(r);
    k.prefix_len = dst ? static_cast<int>(nl_addr_get_prefixlen(dst)) : 0;
    std::string addr = dst && nl_addr_get_len(dst) == 4 ? ipv4_text(dst) : "0.0.0.0";
    k.rule.dst = fmt::format("{}/{}", addr, k.prefix_len);
    k.rule.src = ipv4_text(rtnl_route_get_pref_src(r));
    k.rule.protocol = rtnl_route_get_protocol(r);
    k.priority = static_cast<int>(rtnl_route_get_priority(r));
    if (rtnl_route_get_nnexthops(r) >= 1) k.rule.dev = ifname(rtnl_route_nh_get_ifindex(rtnl_route_nexthop_n(r, 0)));
    out.push_back(std::move(k));
  }
  return out;
}

std::vector<KernelNeighbour> RouteNetlink::list_neighbours() {
  refresh_links();
  nl_cache* c = nullptr;
  int rc = rtnl_neigh_alloc_cache(dump_, &c);
  if (rc < 0) throw Error(fmt::format("cannot list neighbours over netlink: {}", nl_geterror(rc)));
  CachePtr cache(c);
  std::vector<KernelNeighbour> out;
  for (nl_object* o = nl_cache_get_first(c); o; o = nl_cache_get_next(o)) {
    auto* n = reinterpret_cast<rtnl_neigh*>(o);
    if (rtnl_neigh_get_family(n) != AF_INET) continue;
    KernelNeighbour k;
    k.rule.dst = ipv4_text(rtnl_neigh_get_dst(n));
    k.rule.lladdr = mac_text(rtnl_neigh_get_lladdr(n));
    k.rule.dev = ifname(rtnl_neigh_get_ifindex(n));
    k.state = static_cast<uint16_t>(rtnl_neigh_get_state(n));
    out.push_back(std::move(k));
  }
  return out;
}

void RouteNetlink::apply(const std::vector<RouteRequest>& requests) {
  std::vector<Pending> batch;
  batch.reserve(requests.size());
  for (const auto& q : requests) {
    const RouteRule& r = q.rule;
    std::string text = q.op == ChangeOp::remove ? render_delete(r) : render(r);
    int index = 0;
    if (q.op == ChangeOp::remove) {
      auto it = by_name_.find(r.dev);
      if (it == by_name_.end()) continue;  // the kernel dropped the route with its device
      index = it->second;
    } else {
      try {
        index = ifindex(r.dev);
      } catch (const Error& e) {
        throw Error(fmt::format("{}: {}", text, e.what()));
      }
    }
    std::unique_ptr<rtnl_route, RouteFree> route(rtnl_route_alloc());
    if (!route) throw Error("out of memory building " + text);
    AddrPtr dst = parse_addr(r.dst, AF_INET, text);
    rtnl_route_set_family(route.get(), AF_INET);
    rtnl_route_set_table(route.get(), RT_TABLE_MAIN);
    rtnl_route_set_dst(route.get(), dst.get());
    // Always ours, whatever the rule says: a route of another protocol is never counted as
    // ocslab's, so rollback and clear would leave it behind; removals touch only ours too.
    rtnl_route_set_protocol(route.get(), static_cast<uint8_t>(kRouteProtocol));
    rtnl_route_set_type(route.get(), RTN_UNICAST);
    rtnl_nexthop* nh = rtnl_route_nh_alloc();
    if (!nh) throw Error("out of memory building " + text);
    rtnl_route_nh_set_ifindex(nh, index);
    rtnl_route_add_nexthop(route.get(), nh);  // the route owns nh from here
    nl_msg* m = nullptr;
    int rc;
    if (q.op == ChangeOp::remove) {
      rtnl_route_set_scope(route.get(), RT_SCOPE_NOWHERE);  // any scope; protocol and device must match
      rc = rtnl_route_build_del_request(route.get(), 0, &m);
    } else {
      rtnl_route_set_scope(route.get(), RT_SCOPE_LINK);  // no gateway: as `ip route` sets it
      if (!r.src.empty()) {
        AddrPtr src = parse_addr(r.src, AF_INET, text);
        rtnl_route_set_pref_src(route.get(), src.get());
      }
      int flags = NLM_F_CREATE | (q.op == ChangeOp::add ? NLM_F_EXCL : NLM_F_REPLACE);
      rc = rtnl_route_build_add_request(route.get(), flags, &m);
    }
    if (rc < 0 || !m) throw Error(fmt::format("cannot build the netlink request for {}: {}", text, nl_geterror(rc)));
    batch.push_back(Pending{MsgPtr(m), std::move(text), 0, 0, {}, false});
  }
  send_and_ack(batch);
}

void RouteNetlink::apply(const std::vector<NeighbourRequest>& requests) {
  std::vector<Pending> batch;
  batch.reserve(requests.size());
  for (const auto& q : requests) {
    const NeighbourRule& n = q.rule;
    std::string text = q.op == ChangeOp::remove ? render_delete(n) : render(n);
    int index = 0;
    if (q.op == ChangeOp::remove) {
      auto it = by_name_.find(n.dev);
      if (it == by_name_.end()) continue;  // gone with its device
      index = it->second;
    } else {
      try {
        index = ifindex(n.dev);
      } catch (const Error& e) {
        throw Error(fmt::format("{}: {}", text, e.what()));
      }
    }
    std::unique_ptr<rtnl_neigh, NeighFree> neigh(rtnl_neigh_alloc());
    if (!neigh) throw Error("out of memory building " + text);
    AddrPtr dst = parse_addr(n.dst, AF_INET, text);
    rtnl_neigh_set_family(neigh.get(), AF_INET);
    rtnl_neigh_set_dst(neigh.get(), dst.get());
    rtnl_neigh_set_ifindex(neigh.get(), index);
    nl_msg* m = nullptr;
    int rc;
    if (q.op == ChangeOp::remove) {
      rc = rtnl_neigh_build_delete_request(neigh.get(), 0, &m);
    } else {
      AddrPtr ll = parse_addr(n.lladdr, AF_LLC, text);
      rtnl_neigh_set_lladdr(neigh.get(), ll.get());
      rtnl_neigh_set_state(neigh.get(), NUD_PERMANENT);
      int flags = NLM_F_CREATE | (q.op == ChangeOp::add ? NLM_F_EXCL : NLM_F_REPLACE);
      rc = rtnl_neigh_build_add_request(neigh.get(), flags, &m);
    }
    if (rc < 0 || !m) throw Error(fmt::format("cannot build the netlink request for {}: {}", text, nl_geterror(rc)));
    batch.push_back(Pending{MsgPtr(m), std::move(text), 0, 0, {}, false});
  }
  send_and_ack(batch);
}

void RouteNetlink::send_and_ack(std::vector<Pending>& batch) {
  int fd = nl_socket_get_fd(req_);
  std::vector<char> out;
  std::vector<char> in(1 << 16);
  size_t w = window == 0 ? 1 : window;
  for (size_t first = 0; first < batch.size(); first += w) {
    size_t last = std::min(batch.size(), first + w);
    // One send carries the whole window: the kernel handles the requests one after the
    // other, answering each with an ack (or an error) and going on after a failure.
    out.clear();
    std::map<uint32_t, size_t> by_seq;
    for (size_t i = first; i < last; ++i) {
      nlmsghdr* h = nlmsg_hdr(batch[i].msg.get());
      h->nlmsg_flags |= NLM_F_REQUEST | NLM_F_ACK;
      h->nlmsg_seq = batch[i].seq = seq_++;
      h->nlmsg_pid = 0;
      by_seq[h->nlmsg_seq] = i;
      size_t at = out.size();
      out.resize(at + NLMSG_ALIGN(h->nlmsg_len), 0);
      std::memcpy(out.data() + at, h, h->nlmsg_len);
    }
    ssize_t sent = ::send(fd, out.data(), out.size(), 0);
    if (sent < 0)
      throw SystemError(fmt::format("netlink send of {} requests (first: {})", last - first, batch[first].rule), errno);
    size_t waiting = last - first;
    while (waiting > 0) {
      pollfd p{fd, POLLIN, 0};
      int pr = ::poll(&p, 1, 10000);
      if (pr < 0 && errno == EINTR) continue;
      if (pr <= 0)
        throw Error(fmt::format("no netlink ack within 10 s for {} of {} requests (first: {})", waiting, last - first,
                                batch[first].rule));
      ssize_t got = ::recv(fd, in.data(), in.size(), 0);
      if (got < 0) {
        if (errno == EINTR) continue;
        throw SystemError(fmt::format("netlink receive of acks (first request: {})", batch[first].rule), errno);
      }
      // Walk the datagram's messages by hand: NLMSG_OK mixes signed and unsigned lengths.
      size_t len = static_cast<size_t>(got);
      for (size_t off = 0; off + sizeof(nlmsghdr) <= len;) {
        auto* h = reinterpret_cast<nlmsghdr*>(in.data() + off);
        if (h->nlmsg_len < sizeof(nlmsghdr) || off + h->nlmsg_len > len) break;
        off += NLMSG_ALIGN(h->nlmsg_len);
        if (h->nlmsg_type != NLMSG_ERROR || h->nlmsg_len < NLMSG_LENGTH(sizeof(nlmsgerr))) continue;
        auto it = by_seq.find(h->nlmsg_seq);
        if (it == by_seq.end() || batch[it->second].acked) continue;
        Pending& p = batch[it->second];
        p.acked = true;
        p.error = netlink::ack_error(h);
        if (p.error) p.extack = netlink::extack_message(h);
        --waiting;
      }
    }
  }
  size_t failed = 0;
  const Pending* first_failure = nullptr;
  for (const auto& p : batch)
    if (p.error) {
      ++failed;
      if (!first_failure) first_failure = &p;
    }
  if (first_failure) {
    std::string msg = fmt::format("kernel refused '{}': {}", first_failure->rule, std::strerror(first_failure->error));
    if (!first_failure->extack.empty()) msg += " (kernel: " + first_failure->extack + ")";
    if (failed > 1) msg += fmt::format("; {} more request(s) of this batch failed", failed - 1);
    throw KernelError(msg, first_failure->error, first_failure->extack);
  }
}

}  // namespace ocslab::forwarding
