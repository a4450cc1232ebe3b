#include "ocslab/forwarding/tc_netlink.h"

#include <libmnl/libmnl.h>
#include <linux/netlink.h>
#include <linux/pkt_sched.h>
#include <linux/rtnetlink.h>
#include <poll.h>
#include <sys/socket.h>

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <set>

#include "ocslab/common/error.h"
#include "ocslab/common/netlink_ack.h"
#include "rtnl_util.h"

namespace ocslab::forwarding {

using netlink::extack_message;
using rtnl::for_each_attr;
using netlink::kernel_text;

namespace {

// Up to this many bytes of requests per sendmsg. The kernel handles one send's messages in
// order within the call and queues one ack per message: the receive buffer must hold them.
constexpr size_t kChunkBytes = 32 * 1024;
constexpr int kReplyTimeoutMs = 30000;

std::string describe(const FilterRule& r) {
  return fmt::format("filter dev {} prio {} dst {} -> eth dst {} redirect {}", r.dev, r.prio, r.dst, r.set_eth_dst,
                     r.redirect_dev);
}

}  // namespace

TcNetlink::TcNetlink() : sock_(NETLINK_ROUTE) {
  int one = 1;
  // Acks of refused requests carry only the header, not the whole request back.
  ::setsockopt(sock_.fd(), SOL_NETLINK, NETLINK_CAP_ACK, &one, sizeof(one));
  // Room for the acks of a whole chunk; FORCE needs CAP_NET_ADMIN, which programming tc needs
  // anyway, and falls back to the plain (capped) size without it.
  int size = 4 << 20;
  if (::setsockopt(sock_.fd(), SOL_SOCKET, SO_RCVBUFFORCE, &size, sizeof(size)) < 0) {
    ::setsockopt(sock_.fd(), SOL_SOCKET, SO_RCVBUF, &size, sizeof(size));
  }
}

std::map<std::string, int> TcNetlink::link_indexes() {
  std::vector<char> req;
  tc::put_get_links(req, sock_.next_seq());
  std::vector<char> reply = dump(std::move(req));
  std::map<std::string, int> out;
  int len = static_cast<int>(reply.size());
  for (auto* nlh = reinterpret_cast<const struct nlmsghdr*>(reply.data()); mnl_nlmsg_ok(nlh, len);
       nlh = mnl_nlmsg_next(nlh, &len)) {
    if (nlh->nlmsg_type != RTM_NEWLINK) continue;
    const auto* ifi = static_cast<const struct ifinfomsg*>(mnl_nlmsg_get_payload(nlh));
    for_each_attr(nlh, sizeof(*ifi), [&](const struct nlattr* a) {
      if (mnl_attr_get_type(a) == IFLA_IFNAME) out[mnl_attr_get_str(a)] = ifi->ifi_index;
    });
  }
  return out;
}

int TcNetlink::ifindex(const std::string& dev) {
  auto links = link_indexes();
  auto it = links.find(dev);
  if (it == links.end()) throw Error("tc: no network device '" + dev + "' in this namespace");
  return it->second;
}

std::vector<char> TcNetlink::dump(std::vector<char> request) {
  auto* req = reinterpret_cast<struct nlmsghdr*>(request.data());
  uint32_t seq = req->nlmsg_seq;
  sock_.send(req);
  std::vector<char> out;
  std::vector<char> buf(64 * 1024);
  for (;;) {
    ssize_t n = sock_.recv(buf, kReplyTimeoutMs);
    if (n == 0) throw Error("tc: no reply to a netlink dump within 30 s");
    int len = static_cast<int>(n);
    for (auto* nlh = reinterpret_cast<const struct nlmsghdr*>(buf.data()); mnl_nlmsg_ok(nlh, len);
         nlh = mnl_nlmsg_next(nlh, &len)) {
      if (nlh->nlmsg_seq != seq) continue;
      if (nlh->nlmsg_type == NLMSG_DONE) return out;
      if (nlh->nlmsg_type == NLMSG_ERROR) {
        int err = netlink::ack_error(nlh);
        if (err == 0) return out;
        std::string ext = extack_message(nlh);
        throw KernelError("tc: dump refused: " + kernel_text(err, ext), err, ext);
      }
      const char* p = reinterpret_cast<const char*>(nlh);
      out.insert(out.end(), p, p + MNL_ALIGN(nlh->nlmsg_len));
    }
  }
}

std::vector<TcNetlink::Outcome> TcNetlink::transact(const std::vector<char>& messages, uint32_t first_seq,
                                                    size_t count) {
  std::vector<Outcome> outcome(count);
  // Each ack is matched to its message by sequence number. The numbers need not be contiguous
  // from first_seq: a caller may dump (taking a number of the same socket) between building two
  // messages, as delete_filters does per device.
  std::map<uint32_t, size_t> index_of;
  for (size_t off = 0; off < messages.size();) {
    struct nlmsghdr h;
    std::memcpy(&h, messages.data() + off, sizeof(h));
    index_of.emplace(h.nlmsg_seq, index_of.size());
    off += MNL_ALIGN(h.nlmsg_len);
  }
  if (index_of.size() != count || (count && !index_of.count(first_seq)))
    throw Error(fmt::format("tc: internal error: {} messages with distinct sequence numbers, {} expected",
                            index_of.size(), count));
  std::vector<char> buf(64 * 1024);
  size_t off = 0;
  while (off < messages.size()) {
    // One chunk: whole messages up to kChunkBytes (at least one).
    size_t end = off;
    std::set<uint32_t> waiting;
    while (end < messages.size()) {
      struct nlmsghdr h;
      std::memcpy(&h, messages.data() + end, sizeof(h));
      if (end > off && end + h.nlmsg_len - off > kChunkBytes) break;
      waiting.insert(h.nlmsg_seq);
      end += MNL_ALIGN(h.nlmsg_len);
    }
    ssize_t sent = ::send(sock_.fd(), messages.data() + off, end - off, 0);
    if (sent < 0) throw SystemError("tc: netlink send", errno);
    if (static_cast<size_t>(sent) != end - off) throw Error("tc: short netlink send");
    while (!waiting.empty()) {
      ssize_t n = sock_.recv(buf, kReplyTimeoutMs);
      if (n == 0) throw Error(fmt::format("tc: {} netlink ack(s) missing after 30 s", waiting.size()));
      int len = static_cast<int>(n);
      for (auto* nlh = reinterpret_cast<const struct nlmsghdr*>(buf.data()); mnl_nlmsg_ok(nlh, len);
           nlh = mnl_nlmsg_next(nlh, &len)) {
        if (nlh->nlmsg_type != NLMSG_ERROR || !waiting.count(nlh->nlmsg_seq)) continue;
        size_t i = index_of.at(nlh->nlmsg_seq);  // waiting holds only this call's numbers
        outcome[i].err = netlink::ack_error(nlh);
        if (outcome[i].err) outcome[i].extack = extack_message(nlh);
        waiting.erase(nlh->nlmsg_seq);
      }
    }
    off = end;
  }
  return outcome;
}

namespace {

// The index of the first refused request of a batch; outcomes.size() when none was refused.
size_t first_failed(const auto& outcomes) {  // a batch's outcomes (TcNetlink::Outcome is private)
  for (size_t i = 0; i < outcomes.size(); ++i) {
    if (outcomes[i].err) return i;
  }
  return outcomes.size();
}

}  // namespace

void TcNetlink::single(std::vector<char> request, const std::string& what) {
  uint32_t seq = reinterpret_cast<struct nlmsghdr*>(request.data())->nlmsg_seq;
  auto out = transact(request, seq, 1);
  if (out[0].err)
    throw KernelError("tc: " + what + ": " + kernel_text(out[0].err, out[0].extack), out[0].err, out[0].extack);
}

bool TcNetlink::has_clsact(const std::string& dev) {
  int idx = ifindex(dev);
  std::vector<char> req;
  tc::put_get_qdiscs(req, sock_.next_seq());
  std::vector<char> reply = dump(std::move(req));
  int len = static_cast<int>(reply.size());
  for (auto* nlh = reinterpret_cast<const struct nlmsghdr*>(reply.data()); mnl_nlmsg_ok(nlh, len);
       nlh = mnl_nlmsg_next(nlh, &len)) {
    if (nlh->nlmsg_type != RTM_NEWQDISC) continue;
    const auto* t = static_cast<const struct tcmsg*>(mnl_nlmsg_get_payload(nlh));
    if (t->tcm_ifindex != idx || t->tcm_parent != TC_H_CLSACT) continue;
    bool clsact = false;
    for_each_attr(nlh, sizeof(*t), [&](const struct nlattr* a) {
      if (mnl_attr_get_type(a) == TCA_KIND && std::string(mnl_attr_get_str(a)) == "clsact") clsact = true;
    });
    if (clsact) return true;
  }
  return false;
}

void TcNetlink::add_clsact(const std::string& dev) {
  std::vector<char> req;
  tc::put_new_clsact(req, sock_.next_seq(), ifindex(dev));
  single(std::move(req), "add clsact on " + dev);
}

void TcNetlink::delete_clsact(const std::string& dev) {
  std::vector<std::string> foreign;
  for (uint32_t parent : {tc::kIngressParent, tc::kEgressParent}) {
    for (const auto& f : dump_filters(dev, parent)) {
      if (!f.tagged()) {
        foreign.push_back(fmt::format("{} chain {} prio {} handle 0x{:x} ({})",
                                      parent == tc::kIngressParent ? "ingress" : "egress", f.chain, f.prio, f.handle,
                                      f.kind));
      }
    }
  }
  if (!foreign.empty()) {
    std::string list;
    for (size_t i = 0; i < foreign.size() && i < 5; ++i) list += (i ? ", " : "") + foreign[i];
    if (foreign.size() > 5) list += fmt::format(" and {} more", foreign.size() - 5);
    throw Error(fmt::format("tc: refusing to delete the clsact of {}: it holds {} filter(s) that are not ocslab's: {}",
                            dev, foreign.size(), list));
  }
  std::vector<char> req;
  tc::put_del_clsact(req, sock_.next_seq(), ifindex(dev));
  single(std::move(req), "delete clsact on " + dev);
}

std::vector<tc::DecodedFilter> TcNetlink::dump_filters(const std::string& dev, uint32_t parent) {
  std::vector<char> req;
  tc::put_get_filters(req, sock_.next_seq(), ifindex(dev), parent, std::nullopt);
  std::vector<char> reply = dump(std::move(req));
  return tc::decode_filter_dump(reply.data(), reply.size());
}

std::vector<char> TcNetlink::raw_filter_dump(const std::string& dev) {
  std::vector<char> req;
  tc::put_get_filters(req, sock_.next_seq(), ifindex(dev), tc::kIngressParent, kTcChain);
  return dump(std::move(req));
}

std::vector<InstalledFilter> TcNetlink::list_owned(const std::string& dev) {
  auto links = link_indexes();
  auto it = links.find(dev);
  if (it == links.end()) throw Error("tc: no network device '" + dev + "' in this namespace");
  std::map<int, std::string> names;
  for (const auto& [name, idx] : links) names[idx] = name;
  std::vector<char> req;
  tc::put_get_filters(req, sock_.next_seq(), it->second, tc::kIngressParent, kTcChain);
  std::vector<char> reply = dump(std::move(req));
  std::vector<InstalledFilter> out;
  for (auto& f : tc::decode_filter_dump(reply.data(), reply.size())) {
    if (!f.tagged()) continue;
    InstalledFilter i;
    i.rule.dev = dev;
    i.rule.chain = f.chain;
    i.rule.prio = f.prio;
    i.rule.dst = f.dst;
    i.rule.set_eth_dst = f.set_eth_dst;
    i.rule.cookie = f.cookies.front();
    if (f.redirect_ifindex) {
      auto n = names.find(f.redirect_ifindex);
      if (n != names.end()) {
        i.rule.redirect_dev = n->second;
      } else {
        f.problem +=
            (f.problem.empty() ? "" : "; ") + fmt::format("redirect ifindex {} has no device", f.redirect_ifindex);
      }
    }
    i.packets = f.packets;
    i.bytes = f.bytes;
    i.handle = f.handle;
    i.problem = f.problem;
    out.push_back(std::move(i));
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.rule.prio < b.rule.prio; });
  return out;
}

void TcNetlink::add_filters(const std::vector<FilterRule>& rules) {
  if (rules.empty()) return;
  auto links = link_indexes();
  auto index_of = [&](const std::string& dev, const FilterRule& r) {
    auto it = links.find(dev);
    if (it == links.end()) throw Error("tc: " + describe(r) + ": no network device '" + dev + "' in this namespace");
    return it->second;
  };
  std::vector<char> msgs;
  std::vector<int> idx;
  uint32_t first = 0;
  for (size_t i = 0; i < rules.size(); ++i) {
    const auto& r = rules[i];
    if (r.chain != kTcChain || r.prio < kTcPrioFirst || r.prio > kTcPrioLast || r.cookie != kActionCookie) {
      throw Error(
          fmt::format("tc: {}: chain {} prio {} cookie '{}' is outside ocslab's tag (chain {}, prio {}..{}, "
                      "cookie {}); such a filter could never be found again",
                      describe(r), r.chain, r.prio, r.cookie, kTcChain, kTcPrioFirst, kTcPrioLast, kActionCookie));
    }
    uint32_t seq = sock_.next_seq();
    if (i == 0) first = seq;
    int dev = index_of(r.dev, r);
    idx.push_back(dev);
    tc::put_new_filter(msgs, seq, r, dev, index_of(r.redirect_dev, r));
  }
  auto out = transact(msgs, first, rules.size());
  size_t bad = first_failed(out);
  if (bad == out.size()) return;
  // Undo what this call added, so a refused batch leaves the device as it was.
  std::vector<char> undo;
  uint32_t ufirst = 0;
  size_t n = 0;
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i].err) continue;
    uint32_t seq = sock_.next_seq();
    if (n++ == 0) ufirst = seq;
    tc::put_del_filter(undo, seq, idx[i], rules[i].chain, rules[i].prio, tc::kFilterHandle);
  }
  std::string undo_note;
  if (n) {
    for (const auto& u : transact(undo, ufirst, n)) {
      if (u.err) undo_note = "; undoing the accepted rules also failed: " + kernel_text(u.err, u.extack);
    }
  }
  size_t refused = 0;
  for (const auto& o : out) refused += o.err != 0;
  std::string batch =
      rules.size() == 1 ? ""
      : n == 0          ? fmt::format(" ({} of {} rules refused)", refused, rules.size())
               : fmt::format(" ({} of {} rules refused, the {} accepted removed again)", refused, rules.size(), n);
  throw KernelError(fmt::format("tc: kernel refused {}{}: {}{}", describe(rules[bad]), batch,
                                kernel_text(out[bad].err, out[bad].extack), undo_note),
                    out[bad].err, out[bad].extack);
}

void TcNetlink::delete_filters(const std::vector<FilterRule>& rules) {
  if (rules.empty()) return;
  auto links = link_indexes();
  std::map<std::string, std::vector<tc::DecodedFilter>> installed;
  std::map<int, std::string> names;
  for (const auto& [name, i] : links) names[i] = name;
  std::vector<char> msgs;
  std::vector<FilterRule> restore;  // what each deleted filter was, to put it back on failure
  std::vector<int> idx;
  uint32_t first = 0;
  for (size_t i = 0; i < rules.size(); ++i) {
    const auto& r = rules[i];
    auto it = links.find(r.dev);
    if (it == links.end()) throw Error("tc: " + describe(r) + ": no network device '" + r.dev + "' in this namespace");
    if (!installed.count(r.dev)) installed[r.dev] = dump_filters(r.dev, tc::kIngressParent);
    const tc::DecodedFilter* found = nullptr;
    for (const auto& f : installed[r.dev]) {
      if (f.chain != r.chain || f.prio != r.prio) continue;
      if (!f.tagged()) {
        throw Error(
            fmt::format("tc: refusing to delete {}: prio {} on {} holds a {} filter (handle 0x{:x}) that is not "
                        "ocslab's",
                        describe(r), r.prio, r.dev, f.kind, f.handle));
      }
      found = &f;
    }
    if (!found) throw Error("tc: cannot delete " + describe(r) + ": no ocslab filter at that prio");
    uint32_t seq = sock_.next_seq();
    if (i == 0) first = seq;
    idx.push_back(it->second);
    tc::put_del_filter(msgs, seq, it->second, r.chain, r.prio, found->handle);
    FilterRule was = r;
    was.dst = found->dst;
    was.set_eth_dst = found->set_eth_dst;
    auto rn = names.find(found->redirect_ifindex);
    was.redirect_dev = rn == names.end() ? "" : rn->second;
    restore.push_back(was);
  }
  auto out = transact(msgs, first, rules.size());
  size_t bad = first_failed(out);
  if (bad == out.size()) return;
  std::vector<char> undo;
  uint32_t ufirst = 0;
  size_t n = 0;
  std::string undo_note;
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i].err) continue;
    auto rd = links.find(restore[i].redirect_dev);
    if (restore[i].dst.empty() || restore[i].set_eth_dst.empty() || rd == links.end()) {
      undo_note = "; " + describe(restore[i]) + " was not in ocslab's form and cannot be put back";
      continue;
    }
    uint32_t seq = sock_.next_seq();
    if (n++ == 0) ufirst = seq;
    tc::put_new_filter(undo, seq, restore[i], idx[i], rd->second);
  }
  if (n) {
    for (const auto& u : transact(undo, ufirst, n)) {
      if (u.err) undo_note += "; putting back the deleted rules also failed: " + kernel_text(u.err, u.extack);
    }
  }
  throw KernelError(fmt::format("tc: kernel refused to delete {}: {}{}", describe(rules[bad]),
                                kernel_text(out[bad].err, out[bad].extack), undo_note),
                    out[bad].err, out[bad].extack);
}

}  // namespace ocslab::forwarding
