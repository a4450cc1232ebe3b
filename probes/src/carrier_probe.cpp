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
    std::vector<LinkMessage> links;  // kDump; kPoll: the polled links that changed
  };
  // A watched interface as the poller last saw it: device, bit and counters; none before the
  // first poll and after the device went away.
  struct Polled {
    std::string name;
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
  void poll_round(std::vector<char>& buf);
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
  bool poll_failing = false;              // the last round failed (logged once until one succeeds); poller only
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

// One RTM_GETLINK dump of this namespace's links, and the watched ones that changed since the
// last round handed to the worker. A dump, not a request per ifindex: since Linux 6.8
// (facd15dfd691, "synchronize link-watch when carrier is queried") a request for one device
// first runs that device's pending linkwatch event, i.e. sends the announcement at once, so
// polling that way would take away the very delay `carrier` records (for every other reader of
// linkwatch too: operstate, the NETDEV_CHANGE notifiers of the RDMA stack). A dump reads the
// bit and counters without touching linkwatch. Each datagram is stamped with the time right
// after the call that made the kernel fill it (sendmsg for the first, the previous recvmsg for
// the next), so no stamp is before the state it shows. Changed readings only: most rounds
// change nothing, and waking the worker for each would cost more than the poll.
void CarrierProbe::State::poll_round(std::vector<char>& buf) {
  alignas(nlmsghdr) char req[64];
  auto* nlh = mnl_nlmsg_put_header(req);
  nlh->nlmsg_type = RTM_GETLINK;
  nlh->nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
  nlh->nlmsg_seq = polls->next_seq();
  auto* ifi = static_cast<ifinfomsg*>(mnl_nlmsg_put_extra_header(nlh, sizeof(ifinfomsg)));
  ifi->ifi_family = AF_UNSPEC;
#ifdef RTEXT_FILTER_SKIP_STATS
  // Only the bit and the counters are read: spare the kernel the drivers' statistics.
  mnl_attr_put_u32(nlh, IFLA_EXT_MASK, RTEXT_FILTER_SKIP_STATS);
#endif
  auto fail = [&](const std::string& why) {
    if (!poll_failing) spdlog::warn("carrier probe: polling the carrier bit failed ({}); retrying every poll", why);
    poll_failing = true;
  };
  Timestamp filled;
  try {
    polls->send(nlh);
    filled = now();
  } catch (const SystemError& e) {
    fail(e.what());
    return;
  }
  std::vector<bool> seen(polled.size(), false);
  bool done = false;
  // Bounded: a reply to an earlier round that timed out may be ahead of this one's.
  for (int datagrams = 0; datagrams < 64 && !done; ++datagrams) {
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
    const Timestamp at = filled;
    filled = now();  // the kernel fills the next part of the dump inside this recvmsg
    for (const nlmsghdr* m : netlink_messages(buf.data(), static_cast<size_t>(n))) {
      if (m->nlmsg_seq != nlh->nlmsg_seq) continue;
      if (m->nlmsg_type == NLMSG_DONE) {
        done = true;
        break;
      }
      if (m->nlmsg_type == NLMSG_ERROR) {
        fail(netlink::kernel_text(netlink::ack_error(m), netlink::extack_message(m)));
        return;
      }
      auto link = parse_link_message(m);
      if (!link) continue;
      for (size_t k = 0; k < polled.size(); ++k) {
        Polled& p = polled[k];
        if (p.name != link->ifname) continue;
        seen[k] = true;
        auto reading = std::make_tuple(link->ifindex, link->carrier, link->carrier_changes, link->carrier_up_count,
                                       link->carrier_down_count);
        if (p.last == reading) break;
        p.last = reading;
        push({Kind::kPoll, at, {}, {std::move(*link)}});
        break;
      }
    }
  }
  if (!done) {
    fail("the dump did not end within 64 datagrams");
    return;
  }
  poll_failing = false;
  for (size_t k = 0; k < polled.size(); ++k) {
    if (seen[k] || !polled[k].last) continue;
    // Gone: the tracker starts afresh with whatever device next has the name.
    LinkMessage gone;
    gone.deleted = true;
    gone.ifname = polled[k].name;
    polled[k].last.reset();
    push({Kind::kPoll, filled, {}, {gone}});
  }
}

// Polls the watched interfaces each interval_ms, on a fixed monotonic schedule; a round that
// runs late skips the slots it missed instead of polling in a burst.
void CarrierProbe::State::poll_loop(int interval_ms, int rt_priority) {
  raise_priority(rt_priority, "poller");
  const int64_t period = int64_t{interval_ms} * 1'000'000;
  std::vector<char> buf(kReceiveBufferBytes);
  int64_t next = monotonic_ns();
  for (;;) {
    poll_round(buf);
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
  if (poll_ms > 0) status.method += " + RTM_GETLINK dump every " + std::to_string(poll_ms) + " ms";

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
    for (const auto& name : options_.interfaces) s->polled.push_back({name, std::nullopt});
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
