#include "ocslab/probes/carrier_probe.h"

#include <fcntl.h>
#include <libmnl/libmnl.h>
#include <linux/if_link.h>
#include <linux/rtnetlink.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <optional>
#include <thread>
#include <tuple>

#include "ocslab/common/clock.h"
#include "ocslab/common/error.h"
#include "ocslab/common/log.h"
#include "ocslab/common/netlink_ack.h"
#include "ocslab/common/netlink_socket.h"
#include "ocslab/probes/carrier_tracker.h"

namespace ocslab::probes {

namespace {

// Room for the largest RTM_NEWLINK (a NIC with many VFs reports several KiB); one datagram
// per recvmsg, so a short buffer would truncate, not split.
constexpr size_t kReceiveBufferBytes = size_t{64} * 1024;

std::string where_text(const std::string& netns) {
  return netns.empty() ? "this process's network namespace" : "network namespace " + netns;
}

// setns() moves only the calling thread, so the rest of the process keeps its namespace; the
// sockets opened afterwards stay bound to the namespace for their whole life.
void enter_netns(const std::string& netns) {
  std::string path = "/run/netns/" + netns;
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw SystemError("network namespace " + netns + ": cannot open " + path, errno);
  int rc = ::setns(fd, CLONE_NEWNET);
  int err = errno;
  ::close(fd);
  if (rc < 0) throw SystemError("network namespace " + netns + ": cannot enter it (setns)", err);
}

// SCHED_FIFO for the calling thread (a probe thread that sleeps all but microseconds per event).
void raise_priority(int rt_priority, const char* thread) {
  if (rt_priority <= 0) return;
  sched_param p{};
  p.sched_priority = rt_priority;
  if (int err = ::pthread_setschedparam(::pthread_self(), SCHED_FIFO, &p); err != 0) {
    spdlog::warn("carrier probe: cannot run the {} at SCHED_FIFO {} ({}); timestamps may lag on a busy host", thread,
                 rt_priority, std::strerror(err));
  }
}

std::vector<LinkMessage> dump_links(NetlinkSocket& nl) {
  std::vector<char> buf(MNL_SOCKET_BUFFER_SIZE);
  auto* nlh = mnl_nlmsg_put_header(buf.data());
  nlh->nlmsg_type = RTM_GETLINK;
  nlh->nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
  auto* ifi = static_cast<ifinfomsg*>(mnl_nlmsg_put_extra_header(nlh, sizeof(ifinfomsg)));
  ifi->ifi_family = AF_UNSPEC;
  std::vector<LinkMessage> links;
  nl.request(nlh, [&](const nlmsghdr* m) {
    if (auto link = parse_link_message(m)) links.push_back(std::move(*link));
  });
  return links;
}

}  // namespace

struct CarrierProbe::State {
  enum class Kind { kMessages, kOverrun, kDump, kPoll };
  struct Item {
    Kind kind;
    Timestamp at;
    std::vector<char> bytes;         // kMessages: one datagram as received
    std::vector<LinkMessage> links;  // kDump; kPoll: the one polled link
  };
  // A watched interface as the poller asks for it: by ifindex while that is known to be it, by
  // name after the kernel said the ifindex is gone (a device replaced under the same name).
  struct Polled {
    std::string name;
    int ifindex = 0;
    bool failing = false;  // the last poll failed (logged once until one succeeds)
    // What the last reply handed to the worker showed: device, bit and counters.
    using Reading = std::tuple<int, bool, std::optional<uint32_t>, std::optional<uint32_t>, std::optional<uint32_t>>;
    std::optional<Reading> last;
  };

  State(std::string host, std::vector<std::string> interfaces)
      : tracker(host, interfaces), bit_tracker(std::move(host), std::move(interfaces), CarrierFeed::kPolled) {}
  ~State() {
    if (wake_fd >= 0) ::close(wake_fd);
  }

  void receive_loop(const std::string& netns, int rcvbuf, int rt_priority, bool open_poll);
  void poll_loop(int interval_ms, int rt_priority);
  void poll_one(Polled& p, std::vector<char>& buf);
  void work_loop();
  void push(Item item) {
    std::lock_guard lock(mu);
    queue.push_back(std::move(item));
    cv.notify_all();
  }
  void emit(const std::vector<Sample>& out) {
    for (const auto& s : out) {
      try {
        sink(s);
      } catch (const std::exception& e) {
        spdlog::error("carrier probe: the sample sink failed on {} {} ({}); sample dropped", s.subject, s.signal,
                      e.what());
      }
    }
  }

  SampleSink sink;
  CarrierTracker tracker;                 // worker thread only (and start() before the worker exists)
  CarrierTracker bit_tracker;             // the polled live bit; worker thread only
  std::unique_ptr<NetlinkSocket> events;  // RTMGRP_LINK; receiver thread only
  std::unique_ptr<NetlinkSocket> dump;    // dumps; start(), then the worker thread only
  std::unique_ptr<NetlinkSocket> polls;   // RTM_GETLINK of the live bit; poller thread only
  std::vector<Polled> polled;             // start(), then the poller thread only
  int wake_fd = -1;                       // eventfd that stop() writes to end the receiver's and poller's waits
  std::atomic<uint64_t> overruns{0};

  std::mutex mu;
  std::condition_variable cv;
  std::deque<Item> queue;
  int setup = 0;  // receiver: 0 opening sockets, 1 ready, -1 failed (setup_error says why)
  std::string setup_error;
  bool go = false;     // start() found every interface: the receiver may read events
  bool abort = false;  // start() gave up: the receiver returns without reading
  bool stopping = false;

  std::thread receiver;
  std::thread poller;
  std::thread worker;
};

void CarrierProbe::State::receive_loop(const std::string& netns, int rcvbuf, int rt_priority, bool open_poll) {
  raise_priority(rt_priority, "receiver");
  try {
    if (!netns.empty()) enter_netns(netns);
    // Bound before the initial dump, so no event between the dump and the first read is lost.
    events = std::make_unique<NetlinkSocket>(NETLINK_ROUTE, RTMGRP_LINK);
    if (rcvbuf > 0 && ::setsockopt(events->fd(), SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof(rcvbuf)) < 0) {
      throw SystemError("SO_RCVBUF " + std::to_string(rcvbuf) + " on the rtnetlink socket", errno);
    }
    dump = std::make_unique<NetlinkSocket>(NETLINK_ROUTE);
    // Opened here, inside the namespace: a socket keeps the namespace it was made in, so the
    // poller thread needs no setns of its own.
    if (open_poll) polls = std::make_unique<NetlinkSocket>(NETLINK_ROUTE);
  } catch (const std::exception& e) {
    std::lock_guard lock(mu);
    setup = -1;
    setup_error = e.what();
    cv.notify_all();
    return;
  }
  {
    std::unique_lock lock(mu);
    setup = 1;
    cv.notify_all();
    cv.wait(lock, [&] { return go || abort; });
    if (abort) return;
  }

  std::vector<char> buf(kReceiveBufferBytes);
  for (;;) {
    pollfd fds[2] = {{events->fd(), POLLIN, 0}, {wake_fd, POLLIN, 0}};
    if (::poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      spdlog::error("carrier probe: poll failed ({}); no more carrier events", std::strerror(errno));
      return;
    }
    if (fds[1].revents) return;
    if (fds[0].revents & POLLNVAL) {
      // Never expected (the socket lives as long as this loop), but looping on it at SCHED_FIFO
      // would starve a CPU.
      spdlog::error("carrier probe: the rtnetlink socket became invalid; no more carrier events");
      return;
    }
    if (!fds[0].revents) continue;
    ssize_t n = 0;
    try {
      n = events->recv(buf, -1);
    } catch (const SystemError& e) {
      Timestamp at = now();
      if (e.code() == ENOBUFS) {
        // The kernel dropped messages for this socket; the worker re-dumps and reconciles.
        push({Kind::kOverrun, at, {}, {}});
        continue;
      }
      if (e.code() == EINTR || e.code() == EAGAIN) continue;
      spdlog::error("carrier probe: {}; no more carrier events", e.what());
      return;
    }
    Timestamp at = now();  // first thing after recvmsg: the message's only timestamp
    push({Kind::kMessages, at, std::vector<char>(buf.begin(), buf.begin() + n), {}});
  }
}

// One RTM_GETLINK for p and its reply, stamped right after the request returns: rtnetlink
// answers inside sendmsg (under the RTNL lock), so by then the kernel has read the bit, and the
// stamp is never before the state it shows. Only a reply that differs from the last one goes to
// the worker: most polls change nothing, and waking the worker for each would cost more than the
// poll itself.
void CarrierProbe::State::poll_one(Polled& p, std::vector<char>& buf) {
  alignas(nlmsghdr) char req[256];  // header, ifinfomsg, a name and the filter mask
  auto* nlh = mnl_nlmsg_put_header(req);
  nlh->nlmsg_type = RTM_GETLINK;
  nlh->nlmsg_flags = NLM_F_REQUEST;
  nlh->nlmsg_seq = polls->next_seq();
  auto* ifi = static_cast<ifinfomsg*>(mnl_nlmsg_put_extra_header(nlh, sizeof(ifinfomsg)));
  ifi->ifi_family = AF_UNSPEC;
  ifi->ifi_index = p.ifindex;
  if (p.ifindex == 0) mnl_attr_put_strz(nlh, IFLA_IFNAME, p.name.c_str());
#ifdef RTEXT_FILTER_SKIP_STATS
  // Only the bit and the counters are read: spare the kernel the driver's statistics.
  mnl_attr_put_u32(nlh, IFLA_EXT_MASK, RTEXT_FILTER_SKIP_STATS);
#endif
  auto fail = [&](const std::string& why) {
    if (!p.failing)
      spdlog::warn("carrier probe: polling {}'s carrier bit failed ({}); retrying every poll", p.name, why);
    p.failing = true;
  };
  Timestamp at;
  try {
    polls->send(nlh);
    at = now();  // first thing after the request returns: the reply's only timestamp
  } catch (const SystemError& e) {
    fail(e.what());
    return;
  }
  // The reply is queued before sendmsg returns. A reply to an earlier request that timed out
  // may be ahead of it: read past it (a bounded number of datagrams).
  for (int datagrams = 0; datagrams < 8; ++datagrams) {
    ssize_t n = 0;
    try {
      n = polls->recv(buf, 1000);  // the timeout only guards against a kernel that answers nothing
    } catch (const SystemError& e) {
      fail(e.what());
      return;
    }
    if (n == 0) {
      fail("no reply within 1 s");
      return;
    }
    for (const nlmsghdr* m : netlink_messages(buf.data(), static_cast<size_t>(n))) {
      if (m->nlmsg_seq != nlh->nlmsg_seq) continue;
      if (m->nlmsg_type == NLMSG_ERROR) {
        int err = netlink::ack_error(m);
        if (err != ENODEV) {
          fail(netlink::kernel_text(err, netlink::extack_message(m)));
        } else if (p.ifindex != 0) {
          // The device is gone: the tracker starts afresh with whatever device next has the name.
          LinkMessage gone;
          gone.deleted = true;
          gone.ifname = p.name;
          push({Kind::kPoll, at, {}, {gone}});
          p.ifindex = 0;
          p.last.reset();
        }
        return;
      }
      auto link = parse_link_message(m);
      if (!link) continue;
      if (link->ifname != p.name) {
        p.ifindex = 0;  // the ifindex now names another device: ask by name from the next poll on
        return;
      }
      p.ifindex = link->ifindex;
      p.failing = false;
      auto seen = std::make_tuple(link->ifindex, link->carrier, link->carrier_changes, link->carrier_up_count,
                                  link->carrier_down_count);
      if (p.last == seen) return;
      p.last = seen;
      push({Kind::kPoll, at, {}, {std::move(*link)}});
      return;
    }
  }
  fail("no reply to the request among 8 datagrams");
}

// Polls every watched interface each interval_ms, on a fixed monotonic schedule; a round that
// runs late skips the slots it missed instead of polling in a burst.
void CarrierProbe::State::poll_loop(int interval_ms, int rt_priority) {
  raise_priority(rt_priority, "poller");
  const int64_t period = int64_t{interval_ms} * 1'000'000;
  std::vector<char> buf(kReceiveBufferBytes);
  int64_t next = monotonic_ns();
  for (;;) {
    for (auto& p : polled) poll_one(p, buf);
    next += period;
    int64_t t = monotonic_ns();
    if (next <= t) next += ((t - next) / period + 1) * period;
    int64_t wait = next - t;
    timespec ts{static_cast<time_t>(wait / 1'000'000'000), static_cast<long>(wait % 1'000'000'000)};
    pollfd fd{wake_fd, POLLIN, 0};
    int r = ::ppoll(&fd, 1, &ts, nullptr);
    if (r > 0) return;  // stop()
    if (r < 0 && errno != EINTR) {
      spdlog::error("carrier probe: ppoll failed ({}); no more carrier bit polls", std::strerror(errno));
      return;
    }
  }
}

void CarrierProbe::State::work_loop() {
  for (;;) {
    Item item;
    {
      std::unique_lock lock(mu);
      cv.wait(lock, [&] { return stopping || !queue.empty(); });
      // What was already received is still handed over when stopping: it happened before stop().
      if (queue.empty()) return;
      item = std::move(queue.front());
      queue.pop_front();
    }
    std::vector<Sample> out;
    switch (item.kind) {
      case Kind::kMessages:
        for (const nlmsghdr* nlh : netlink_messages(item.bytes.data(), item.bytes.size())) {
          if (auto link = parse_link_message(nlh)) tracker.on_link(*link, item.at, out);
        }
        break;
      case Kind::kDump:
        for (const auto& link : item.links) tracker.on_link(link, item.at, out);
        break;
      case Kind::kPoll:
        for (const auto& link : item.links) bit_tracker.on_link(link, item.at, out);
        break;
      case Kind::kOverrun: {
        tracker.on_overrun(item.at, out);
        overruns = tracker.overruns();
        try {
          auto links = dump_links(*dump);
          Timestamp at = now();
          for (const auto& link : links) tracker.on_link(link, at, out);
        } catch (const Error& e) {
          spdlog::error("carrier probe: re-dump after a netlink overrun failed: {}", e.what());
        }
        break;
      }
    }
    emit(out);
  }
}

std::string poll_interval_problem(long long poll_ms) {
  if (poll_ms == 0 || (poll_ms >= kMinPollMs && poll_ms <= kMaxPollMs)) return "";
  return "poll interval " + std::to_string(poll_ms) + " ms: must be 0 (no polling) or " + std::to_string(kMinPollMs) +
         ".." + std::to_string(kMaxPollMs) + " ms";
}

CarrierProbe::CarrierProbe(CarrierProbeOptions options) : options_(std::move(options)) {}

CarrierProbe::~CarrierProbe() { stop(); }

uint64_t CarrierProbe::overruns() const { return state_ ? state_->overruns.load() : overruns_after_stop_; }

ProbeStatus CarrierProbe::start(SampleSink sink) {
  if (started_) throw Error("carrier probe: started twice");
  started_ = true;
  ProbeStatus status;
  status.method = "rtnetlink (RTMGRP_LINK, libmnl)";
  const std::string where = where_text(options_.netns);
  if (options_.interfaces.empty()) {
    status.reason = "no interface to watch";
    return status;
  }
  const int poll_ms = options_.poll_interval_ms;
  if (auto why = poll_interval_problem(poll_ms); !why.empty()) {
    status.reason = why;
    return status;
  }
  if (poll_ms > 0) status.method += " + RTM_GETLINK every " + std::to_string(poll_ms) + " ms";

  auto st = std::make_unique<State>(options_.host, options_.interfaces);
  st->sink = std::move(sink);
  st->wake_fd = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (st->wake_fd < 0) {
    status.reason = std::string("eventfd: ") + std::strerror(errno);
    return status;
  }
  State* s = st.get();
  s->receiver =
      std::thread([s, ns = options_.netns, rcvbuf = options_.receive_buffer_bytes, prio = options_.receiver_rt_priority,
                   open_poll = poll_ms > 0] { s->receive_loop(ns, rcvbuf, prio, open_poll); });
  auto give_up = [&](std::string reason) {
    {
      std::lock_guard lock(s->mu);
      s->abort = true;
      s->cv.notify_all();
    }
    s->receiver.join();
    status.reason = std::move(reason);
    return status;
  };
  {
    std::unique_lock lock(s->mu);
    s->cv.wait(lock, [&] { return s->setup != 0; });
    if (s->setup < 0) {
      std::string why = s->setup_error;
      lock.unlock();
      return give_up(why);
    }
  }

  std::vector<LinkMessage> links;
  try {
    links = dump_links(*s->dump);
  } catch (const Error& e) {
    return give_up("cannot list the links of " + where + ": " + e.what());
  }
  Timestamp at = now();
  std::string missing;
  for (const auto& name : options_.interfaces) {
    bool found = false;
    for (const auto& l : links) found = found || l.ifname == name;
    if (!found) missing += (missing.empty() ? "" : ", ") + name;
  }
  if (!missing.empty()) return give_up("no interface " + missing + " in " + where);
  if (poll_ms > 0) {
    for (const auto& name : options_.interfaces) {
      for (const auto& l : links)
        if (l.ifname == name) s->polled.push_back({name, l.ifindex, false, std::nullopt});
    }
  }

  {
    std::lock_guard lock(s->mu);
    // The initial state goes first: the receiver has not read anything yet.
    s->queue.push_back({State::Kind::kDump, at, {}, std::move(links)});
    s->go = true;
    s->cv.notify_all();
  }
  s->worker = std::thread([s] { s->work_loop(); });
  if (poll_ms > 0) {
    s->poller = std::thread([s, poll_ms, prio = options_.receiver_rt_priority] { s->poll_loop(poll_ms, prio); });
  }
  state_ = std::move(st);
  status.available = true;
  return status;
}

void CarrierProbe::stop() {
  if (!state_) return;
  uint64_t one = 1;
  if (::write(state_->wake_fd, &one, sizeof(one)) < 0) {
    // An eventfd write fails only on counter overflow, which a single write cannot cause.
    spdlog::error("carrier probe: cannot wake the receiver ({})", std::strerror(errno));
  }
  state_->receiver.join();
  if (state_->poller.joinable()) state_->poller.join();
  {
    std::lock_guard lock(state_->mu);
    state_->stopping = true;
    state_->cv.notify_all();
  }
  state_->worker.join();
  overruns_after_stop_ = state_->overruns.load();
  state_.reset();
}

}  // namespace ocslab::probes
