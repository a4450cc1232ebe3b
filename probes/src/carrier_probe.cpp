#include "ocslab/probes/carrier_probe.h"

#include <fcntl.h>
#include <libmnl/libmnl.h>
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
#include <thread>

#include "ocslab/common/clock.h"
#include "ocslab/common/error.h"
#include "ocslab/common/log.h"
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
  enum class Kind { kMessages, kOverrun, kDump };
  struct Item {
    Kind kind;
    Timestamp at;
    std::vector<char> bytes;         // kMessages: one datagram as received
    std::vector<LinkMessage> links;  // kDump
  };

  State(std::string host, std::vector<std::string> interfaces) : tracker(std::move(host), std::move(interfaces)) {}
  ~State() {
    if (wake_fd >= 0) ::close(wake_fd);
  }

  void receive_loop(const std::string& netns, int rcvbuf, int rt_priority);
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
  std::unique_ptr<NetlinkSocket> events;  // RTMGRP_LINK; receiver thread only
  std::unique_ptr<NetlinkSocket> dump;    // dumps; start(), then the worker thread only
  int wake_fd = -1;                       // eventfd that stop() writes to end the receiver's poll
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
  std::thread worker;
};

void CarrierProbe::State::receive_loop(const std::string& netns, int rcvbuf, int rt_priority) {
  if (rt_priority > 0) {
    sched_param p{};
    p.sched_priority = rt_priority;
    if (int err = ::pthread_setschedparam(::pthread_self(), SCHED_FIFO, &p); err != 0) {
      spdlog::warn("carrier probe: cannot run the receiver at SCHED_FIFO {} ({}); timestamps may lag on a busy host",
                   rt_priority, std::strerror(err));
    }
  }
  try {
    if (!netns.empty()) enter_netns(netns);
    // Bound before the initial dump, so no event between the dump and the first read is lost.
    events = std::make_unique<NetlinkSocket>(NETLINK_ROUTE, RTMGRP_LINK);
    if (rcvbuf > 0 && ::setsockopt(events->fd(), SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof(rcvbuf)) < 0) {
      throw SystemError("SO_RCVBUF " + std::to_string(rcvbuf) + " on the rtnetlink socket", errno);
    }
    dump = std::make_unique<NetlinkSocket>(NETLINK_ROUTE);
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

  auto st = std::make_unique<State>(options_.host, options_.interfaces);
  st->sink = std::move(sink);
  st->wake_fd = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (st->wake_fd < 0) {
    status.reason = std::string("eventfd: ") + std::strerror(errno);
    return status;
  }
  State* s = st.get();
  s->receiver = std::thread([s, ns = options_.netns, rcvbuf = options_.receive_buffer_bytes,
                             prio = options_.receiver_rt_priority] { s->receive_loop(ns, rcvbuf, prio); });
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

  {
    std::lock_guard lock(s->mu);
    // The initial state goes first: the receiver has not read anything yet.
    s->queue.push_back({State::Kind::kDump, at, {}, std::move(links)});
    s->go = true;
    s->cv.notify_all();
  }
  s->worker = std::thread([s] { s->work_loop(); });
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
