#include "ocslab/emulator/data_plane.h"

// glibc's <net/if.h> must come before any <linux/if*.h> so the kernel headers skip their
// duplicate definitions.
#include <net/if.h>

#include <arpa/inet.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <linux/if_tun.h>
#include <linux/rtnetlink.h>
#include <netdb.h>
#include <netinet/in.h>
#include <spdlog/spdlog.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <set>

#include "ocslab/common/clock.h"  // monotonic_ns: CLOCK_MONOTONIC, the rate timer's clock
#include "ocslab/common/error.h"
#include "ocslab/common/netlink_socket.h"
#include "unique_fd.h"

namespace ocslab::emu {

namespace {

// 64 KiB holds the largest frame a TAP or QEMU hands over (QEMU reads datagrams into a
// 68 KiB buffer; an IPv4 UDP payload cannot exceed 65507 bytes), so jumbo frames pass whole.
constexpr size_t kFrameMax = 65536;
// Frames moved per system call: enough to amortise the syscall at line rate, small enough
// that one busy NIC cannot starve the others for long (epoll is level-triggered, so what is
// left is picked up on the next round).
constexpr unsigned kBatch = 32;
constexpr uint64_t kStopTag = ~uint64_t{0};
constexpr uint64_t kTimerTag = kStopTag - 1;  // a paused NIC's rate wait is over
constexpr uint64_t kWakeTag = kStopTag - 2;   // the rate changed
// A full-size frame on the fibre (1500-byte MTU: 1514 bytes as handed over, plus the overhead):
// how a capped NIC's batch is sized to what its bucket holds.
constexpr double kFrameCost = 1514 + kWireOverheadBytes;
// A paused NIC sleeps at least this long: shorter waits would cost a timer wake-up per frame
// at low rates; the bucket carries what accrues meanwhile, so the mean rate is unchanged.
constexpr int64_t kMinPauseNs = 50'000;
// The bucket holds at most 1 ms of the rate (at least a few full frames): a circuit that was
// idle may send that much at once, as a NIC's own queue would, and no more.
constexpr double kBurstNs = 1e6;
// While frames are waiting (the last read took all it asked for) the bucket keeps what accrued
// for up to 100 ms: the time the forwarding thread was descheduled or woke late is time the
// fibre would have carried the queue, so it is caught up on instead of lost. With the 1 ms cap
// alone, a capped circuit on the busy 2-core build machine carried about half its rate.
constexpr double kCatchUpNs = 100e6;
// Larger socket buffers absorb bursts while the forwarding thread is descheduled (the build
// machines have two cores shared with QEMU guests).
constexpr int kSocketBuffer = 4 << 20;

std::string endpoint_text(const UdpEndpoint& e) { return e.host + ":" + std::to_string(e.port); }

sockaddr_in resolve(const std::string& nic, const UdpEndpoint& e, const char* role) {
  if (e.port <= 0 || e.port > 65535) {
    throw Error(nic + ": bad UDP " + role + " port " + std::to_string(e.port) + " in " + endpoint_text(e));
  }
  addrinfo hints{};
  hints.ai_family = AF_INET;  // QEMU's socket netdev is IPv4 only
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* res = nullptr;
  int rc = ::getaddrinfo(e.host.c_str(), nullptr, &hints, &res);
  if (rc != 0 || !res) {
    throw Error(nic + ": cannot resolve UDP " + role + " host '" + e.host + "': " + ::gai_strerror(rc));
  }
  sockaddr_in sa{};
  std::memcpy(&sa, res->ai_addr, sizeof(sa));
  ::freeaddrinfo(res);
  sa.sin_port = htons(static_cast<uint16_t>(e.port));
  return sa;
}

void set_buffers(int fd) {
  // SO_*BUFFORCE lets root go past net.core.[rw]mem_max; fall back to the capped request.
  if (::setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &kSocketBuffer, sizeof(kSocketBuffer)) < 0) {
    ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &kSocketBuffer, sizeof(kSocketBuffer));
  }
  if (::setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &kSocketBuffer, sizeof(kSocketBuffer)) < 0) {
    ::setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &kSocketBuffer, sizeof(kSocketBuffer));
  }
}

UniqueFd open_udp(const NicAttachment& a, sockaddr_in* peer) {
  sockaddr_in local = resolve(a.name, a.listen, "listen");
  *peer = resolve(a.name, a.peer, "peer");
  UniqueFd fd(::socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!fd.valid()) throw SystemError(a.name + ": cannot create UDP socket", errno);
  set_buffers(fd.get());
  // No SO_REUSEADDR: a second emulator (or a stale QEMU) on the same port must fail loudly
  // instead of silently sharing the frames.
  if (::bind(fd.get(), reinterpret_cast<const sockaddr*>(&local), sizeof(local)) < 0) {
    throw SystemError(a.name + ": cannot bind UDP " + endpoint_text(a.listen), errno);
  }
  return fd;
}

void move_to_netns(const NicAttachment& a, const std::string& ifname) {
  std::string path = "/run/netns/" + a.netns;
  UniqueFd ns(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!ns.valid()) throw SystemError(a.name + ": cannot open network namespace " + path, errno);
  unsigned index = ::if_nametoindex(ifname.c_str());
  if (index == 0) throw SystemError(a.name + ": TAP " + ifname + " vanished before the move", errno);

  std::vector<char> buf(MNL_SOCKET_BUFFER_SIZE);
  auto* nlh = mnl_nlmsg_put_header(buf.data());
  nlh->nlmsg_type = RTM_NEWLINK;
  nlh->nlmsg_flags = NLM_F_REQUEST;
  auto* ifi = static_cast<ifinfomsg*>(mnl_nlmsg_put_extra_header(nlh, sizeof(ifinfomsg)));
  ifi->ifi_family = AF_UNSPEC;
  ifi->ifi_index = static_cast<int>(index);
  mnl_attr_put_u32(nlh, IFLA_NET_NS_FD, static_cast<uint32_t>(ns.get()));
  try {
    NetlinkSocket nl(NETLINK_ROUTE);
    nl.request(nlh, [](const nlmsghdr*) {});
  } catch (const Error& e) {
    throw Error(a.name + ": cannot move TAP " + ifname + " into network namespace " + a.netns + ": " + e.what());
  }
}

UniqueFd open_tap(const NicAttachment& a) {
  // TUNSETIFF attaches to an existing persistent TAP of the same name instead of failing;
  // that device belongs to someone else, so refuse it up front.
  if (::if_nametoindex(a.tap_name.c_str()) != 0) {
    throw Error(a.name + ": cannot create TAP " + a.tap_name + ": an interface with that name already exists");
  }
  UniqueFd fd(::open("/dev/net/tun", O_RDWR | O_NONBLOCK | O_CLOEXEC));
  if (!fd.valid()) throw SystemError(a.name + ": cannot open /dev/net/tun for TAP " + a.tap_name, errno);
  ifreq ifr{};
  ifr.ifr_flags = IFF_TAP | IFF_NO_PI;
  std::strncpy(ifr.ifr_name, a.tap_name.c_str(), IFNAMSIZ - 1);
  if (::ioctl(fd.get(), TUNSETIFF, &ifr) < 0) {
    throw SystemError(a.name + ": cannot create TAP " + a.tap_name, errno);
  }
  // Not persistent: closing fd removes the device wherever it lives, which is how stop()
  // and every failure path clean up.
  if (!a.netns.empty()) move_to_netns(a, ifr.ifr_name);
  return fd;
}

void validate(const std::vector<NicAttachment>& nics, int total_ports) {
  if (total_ports <= 0) throw Error("data plane: the switch has no ports (" + std::to_string(total_ports) + ")");
  std::set<std::string> names, taps;
  std::set<ocs::Port> tx, rx;
  auto in_range = [&](ocs::Port p) { return p >= 1 && p <= total_ports; };
  for (const auto& n : nics) {
    if (n.name.empty()) throw Error("data plane: a NIC attachment has no name");
    const std::string& who = n.name;
    if (!names.insert(n.name).second) throw Error(who + ": NIC name used twice");
    if (!in_range(n.tx_port)) {
      throw Error(who + ": tx port " + std::to_string(n.tx_port) + " is outside 1.." + std::to_string(total_ports));
    }
    if (!in_range(n.rx_port)) {
      throw Error(who + ": rx port " + std::to_string(n.rx_port) + " is outside 1.." + std::to_string(total_ports));
    }
    if (n.tx_port == n.rx_port) throw Error(who + ": tx and rx port are both " + std::to_string(n.tx_port));
    if (!tx.insert(n.tx_port).second) {
      throw Error(who + ": tx port " + std::to_string(n.tx_port) + " is already another NIC's tx port");
    }
    if (!rx.insert(n.rx_port).second) {
      throw Error(who + ": rx port " + std::to_string(n.rx_port) + " is already another NIC's rx port");
    }
    if (n.kind == NicAttachment::Kind::kTap) {
      if (n.tap_name.empty() || n.tap_name.size() >= IFNAMSIZ) {
        throw Error(who + ": TAP name '" + n.tap_name + "' must have 1.." + std::to_string(IFNAMSIZ - 1) +
                    " characters");
      }
      if (!taps.insert(n.tap_name).second) throw Error(who + ": TAP name " + n.tap_name + " used twice");
    } else {
      if (n.listen.port <= 0 || n.listen.port > 65535 || n.peer.port <= 0 || n.peer.port > 65535) {
        throw Error(who + ": UDP attachment needs listen and peer ports in 1..65535 (listen " +
                    endpoint_text(n.listen) + ", peer " + endpoint_text(n.peer) + ")");
      }
    }
  }
}

}  // namespace

struct NicState {
  UniqueFd fd;
  bool udp = false;
  sockaddr_in peer{};
  bool registered = false;  // in the epoll set (false once its fd failed)
  std::atomic<bool> link_up{true};
  std::atomic<uint64_t> rx_frames{0}, rx_bytes{0}, tx_frames{0}, tx_bytes{0};
  std::atomic<uint64_t> dropped_dark{0}, dropped_link_down{0}, tx_errors{0}, rate_waits{0};
  // The rate's token bucket of the circuit this NIC transmits into (forwarding thread only):
  // bytes it may still send (negative: owed for a batch that went over), when last refilled,
  // and while paused (its fd out of the epoll set's interest) when it may read again.
  double tokens = 0;
  int64_t refilled_ns = 0;
  bool backlogged = false;  // the last read filled its batch: more frames are likely waiting
  bool paused = false;
  int64_t due_ns = 0;
};

struct DataPlane::Impl {
  Impl(const std::vector<NicAttachment>& nics, int total)
      : total_ports(total),
        path(static_cast<size_t>(total) + 1),
        egress_nic(static_cast<size_t>(total) + 1, -1),
        nic(nics.size()) {
    for (auto& p : path) p.store(0, std::memory_order_relaxed);
    for (size_t i = 0; i < nics.size(); ++i) egress_nic[static_cast<size_t>(nics[i].rx_port)] = static_cast<int>(i);
  }

  void run();
  void service(size_t x);
  // rate: bytes per ns of every lit circuit, 0 uncapped.
  void forward(size_t x, unsigned count, double rate);
  void refill(NicState& s, int64_t now, double rate) const;
  void pause(size_t x, int64_t now, double rate);
  void resume(size_t x);
  void resume_due(bool all);
  void arm_timer();
  // Each returns how many of the batch's frames the NIC accepted, adding their bytes to *bytes.
  unsigned deliver_udp(NicState& d, unsigned count, uint64_t* bytes);
  unsigned deliver_tap(NicState& d, unsigned count, uint64_t* bytes);
  void unregister(size_t x, const char* what, int err);

  const std::vector<NicAttachment>* attachments = nullptr;
  int total_ports;
  // Written by set_path/set_nic_link on any thread, read per batch by the forwarding thread:
  // plain atomics keep the switch model from ever waiting on frames, and vice versa.
  std::vector<std::atomic<int>> path;  // ingress port -> lit egress port, 0 = dark
  std::vector<int> egress_nic;         // egress port -> NIC wired to it, -1 = none (immutable)
  std::vector<NicState> nic;
  UniqueFd epoll, stop_event, timer, wake;
  std::thread thread;
  std::atomic<double> rate_gbps{0};  // set_rate_gbps; read per batch by the forwarding thread

  // Forwarding-thread scratch: one batch of frames, reused by recvmmsg and sendmmsg.
  std::vector<char> buffers = std::vector<char>(kFrameMax * kBatch);
  mmsghdr msgs[kBatch]{};
  iovec iovs[kBatch]{};
  unsigned lengths[kBatch]{};
};

DataPlane::DataPlane(std::vector<NicAttachment> nics, int total_ports) : nics_(std::move(nics)) {
  validate(nics_, total_ports);
  impl_ = std::make_unique<Impl>(nics_, total_ports);
  impl_->attachments = &nics_;
}

DataPlane::~DataPlane() { stop(); }

void DataPlane::start() {
  Impl& im = *impl_;
  if (im.thread.joinable()) throw Error("data plane: already started");
  try {
    for (size_t i = 0; i < nics_.size(); ++i) {
      NicState& s = im.nic[i];
      s.udp = nics_[i].kind == NicAttachment::Kind::kUdp;
      s.fd = s.udp ? open_udp(nics_[i], &s.peer) : open_tap(nics_[i]);
    }
    im.epoll.reset(::epoll_create1(EPOLL_CLOEXEC));
    if (!im.epoll.valid()) throw SystemError("data plane: epoll_create1", errno);
    im.stop_event.reset(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
    if (!im.stop_event.valid()) throw SystemError("data plane: eventfd", errno);
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = kStopTag;
    if (::epoll_ctl(im.epoll.get(), EPOLL_CTL_ADD, im.stop_event.get(), &ev) < 0) {
      throw SystemError("data plane: epoll_ctl(stop event)", errno);
    }
    im.timer.reset(::timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC));
    if (!im.timer.valid()) throw SystemError("data plane: timerfd_create", errno);
    im.wake.reset(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
    if (!im.wake.valid()) throw SystemError("data plane: eventfd", errno);
    ev.data.u64 = kTimerTag;
    if (::epoll_ctl(im.epoll.get(), EPOLL_CTL_ADD, im.timer.get(), &ev) < 0) {
      throw SystemError("data plane: epoll_ctl(rate timer)", errno);
    }
    ev.data.u64 = kWakeTag;
    if (::epoll_ctl(im.epoll.get(), EPOLL_CTL_ADD, im.wake.get(), &ev) < 0) {
      throw SystemError("data plane: epoll_ctl(rate wake)", errno);
    }
    for (size_t i = 0; i < nics_.size(); ++i) {
      ev.data.u64 = i;
      if (::epoll_ctl(im.epoll.get(), EPOLL_CTL_ADD, im.nic[i].fd.get(), &ev) < 0) {
        throw SystemError(nics_[i].name + ": epoll_ctl", errno);
      }
      im.nic[i].registered = true;
    }
    im.thread = std::thread([&im] { im.run(); });
  } catch (...) {
    for (auto& s : im.nic) {
      s.fd.reset();
      s.registered = false;
    }
    im.epoll.reset();
    im.stop_event.reset();
    im.timer.reset();
    im.wake.reset();
    throw;
  }
}

void DataPlane::stop() {
  if (!impl_) return;
  Impl& im = *impl_;
  if (im.thread.joinable()) {
    uint64_t one = 1;
    // An eventfd write only fails when the counter would overflow, which one write cannot do.
    [[maybe_unused]] ssize_t n = ::write(im.stop_event.get(), &one, sizeof(one));
    im.thread.join();
  }
  for (auto& s : im.nic) {
    s.fd.reset();  // removes non-persistent TAP devices
    s.registered = false;
    s.paused = false;
  }
  im.epoll.reset();
  im.stop_event.reset();
  im.timer.reset();
  im.wake.reset();
}

void DataPlane::set_path(ocs::Port ingress, std::optional<ocs::Port> egress) {
  Impl& im = *impl_;
  if (ingress < 1 || ingress > im.total_ports) {
    throw Error("data plane: ingress port " + std::to_string(ingress) + " is outside 1.." +
                std::to_string(im.total_ports));
  }
  if (egress && (*egress < 1 || *egress > im.total_ports)) {
    throw Error("data plane: egress port " + std::to_string(*egress) + " is outside 1.." +
                std::to_string(im.total_ports));
  }
  im.path[static_cast<size_t>(ingress)].store(egress.value_or(0), std::memory_order_release);
}

void DataPlane::set_nic_link(size_t nic, bool up) {
  if (nic >= nics_.size()) throw Error("data plane: no NIC #" + std::to_string(nic));
  impl_->nic[nic].link_up.store(up, std::memory_order_release);
}

void DataPlane::set_rate_gbps(double gbps) {
  if (gbps != 0 && !(gbps >= kMinLinkGbps && gbps <= kMaxLinkGbps)) {
    throw Error(
        fmt::format("data plane: link rate {} Gbit/s is outside {}..{} (0: no cap)", gbps, kMinLinkGbps, kMaxLinkGbps));
  }
  Impl& im = *impl_;
  im.rate_gbps.store(gbps, std::memory_order_release);
  if (im.thread.joinable()) {
    uint64_t one = 1;
    // As in stop(): one write cannot overflow the counter the thread drains.
    [[maybe_unused]] ssize_t n = ::write(im.wake.get(), &one, sizeof(one));
  }
}

double DataPlane::rate_gbps() const { return impl_->rate_gbps.load(std::memory_order_acquire); }

NicCounters DataPlane::counters(size_t nic) const {
  if (nic >= nics_.size()) throw Error("data plane: no NIC #" + std::to_string(nic));
  const NicState& s = impl_->nic[nic];
  auto r = [](const std::atomic<uint64_t>& a) { return a.load(std::memory_order_relaxed); };
  return NicCounters{r(s.rx_frames),    r(s.rx_bytes),          r(s.tx_frames), r(s.tx_bytes),
                     r(s.dropped_dark), r(s.dropped_link_down), r(s.tx_errors), r(s.rate_waits)};
}

int DataPlane::tap_fd(size_t nic) const {
  if (nic >= nics_.size()) throw Error("data plane: no NIC #" + std::to_string(nic));
  const NicState& s = impl_->nic[nic];
  return s.udp ? -1 : s.fd.get();
}

void DataPlane::Impl::run() {
  for (unsigned i = 0; i < kBatch; ++i) {
    iovs[i].iov_base = buffers.data() + i * kFrameMax;
    iovs[i].iov_len = kFrameMax;
  }
  epoll_event events[64];
  for (;;) {
    int n = ::epoll_wait(epoll.get(), events, 64, -1);
    if (n < 0) {
      if (errno == EINTR) continue;
      spdlog::error("data plane: epoll_wait failed, forwarding stops: {}", std::strerror(errno));
      return;
    }
    for (int i = 0; i < n; ++i) {
      if (events[i].data.u64 == kStopTag) return;
    }
    for (int i = 0; i < n; ++i) {
      const uint64_t tag = events[i].data.u64;
      if (tag == kTimerTag || tag == kWakeTag) {
        uint64_t count = 0;
        // Drains the expiry count / wake-ups; EAGAIN (nothing pending) is harmless.
        [[maybe_unused]] ssize_t r = ::read(tag == kTimerTag ? timer.get() : wake.get(), &count, sizeof(count));
        resume_due(tag == kWakeTag);
      } else {
        service(static_cast<size_t>(tag));
      }
    }
  }
}

void DataPlane::Impl::refill(NicState& s, int64_t now, double rate) const {
  const double burst = std::max(rate * kBurstNs, 4 * kFrameCost);
  // A NIC that never sent (or sent while uncapped long ago) starts with a full bucket.
  const double accrued = s.refilled_ns == 0 ? burst : static_cast<double>(now - s.refilled_ns) * rate;
  s.tokens = std::min(s.backlogged ? std::max(burst, rate * kCatchUpNs) : burst, s.tokens + accrued);
  s.refilled_ns = now;
}

void DataPlane::Impl::pause(size_t x, int64_t now, double rate) {
  NicState& s = nic[x];
  // Until the debt is paid: the frames wait in the NIC's own queue meanwhile.
  const double wait_ns = std::max(static_cast<double>(kMinPauseNs), -s.tokens / rate);
  s.due_ns = now + static_cast<int64_t>(std::ceil(wait_ns));
  s.paused = true;
  s.rate_waits.fetch_add(1, std::memory_order_relaxed);
  epoll_event ev{};
  ev.events = 0;  // stays in the set, reports nothing until resume()
  ev.data.u64 = x;
  if (::epoll_ctl(epoll.get(), EPOLL_CTL_MOD, s.fd.get(), &ev) < 0) {
    unregister(x, "epoll_ctl (rate pause)", errno);
    return;
  }
  arm_timer();
}

void DataPlane::Impl::resume(size_t x) {
  NicState& s = nic[x];
  s.paused = false;
  if (!s.registered) return;
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = x;
  if (::epoll_ctl(epoll.get(), EPOLL_CTL_MOD, s.fd.get(), &ev) < 0) unregister(x, "epoll_ctl (rate resume)", errno);
}

void DataPlane::Impl::resume_due(bool all) {
  const int64_t now = monotonic_ns();
  for (size_t x = 0; x < nic.size(); ++x) {
    if (nic[x].paused && (all || nic[x].due_ns <= now)) resume(x);
  }
  arm_timer();
}

void DataPlane::Impl::arm_timer() {
  int64_t due = 0;
  for (const auto& s : nic) {
    if (s.paused && (due == 0 || s.due_ns < due)) due = s.due_ns;
  }
  itimerspec spec{};  // all zero: disarmed
  if (due > 0) {
    spec.it_value.tv_sec = due / 1'000'000'000;
    spec.it_value.tv_nsec = due % 1'000'000'000;
  }
  if (::timerfd_settime(timer.get(), TFD_TIMER_ABSTIME, &spec, nullptr) < 0) {
    spdlog::error("data plane: timerfd_settime failed ({}); paused NICs resume on the next rate change",
                  std::strerror(errno));
  }
}

void DataPlane::Impl::unregister(size_t x, const char* what, int err) {
  // A TAP whose namespace was deleted under us reports errors forever; drop it from the set
  // instead of spinning, and say so.
  spdlog::error("{}: {} failed ({}); this NIC is detached from the data plane", (*attachments)[x].name, what,
                std::strerror(err));
  ::epoll_ctl(epoll.get(), EPOLL_CTL_DEL, nic[x].fd.get(), nullptr);
  nic[x].registered = false;
}

void DataPlane::Impl::service(size_t x) {
  NicState& s = nic[x];
  if (!s.registered || s.paused) return;
  // Gbit/s -> bytes per ns: 1 Gbit/s is 0.125 B/ns.
  const double rate = rate_gbps.load(std::memory_order_acquire) / 8;
  unsigned limit = kBatch;
  int64_t now = 0;
  if (rate > 0) {
    now = monotonic_ns();
    refill(s, now, rate);
    if (s.tokens <= 0) {
      pause(x, now, rate);
      return;
    }
    // As many full-size frames as the bucket holds (at least one): a capped circuit's burst
    // stays near the bucket's size instead of a whole batch of jumbo frames.
    limit = static_cast<unsigned>(std::clamp(s.tokens / kFrameCost, 1.0, static_cast<double>(kBatch)));
  }
  if (s.udp) {
    for (unsigned i = 0; i < limit; ++i) {
      iovs[i].iov_len = kFrameMax;
      msgs[i].msg_hdr = msghdr{};
      msgs[i].msg_hdr.msg_iov = &iovs[i];
      msgs[i].msg_hdr.msg_iovlen = 1;
    }
    int n = ::recvmmsg(s.fd.get(), msgs, limit, MSG_DONTWAIT, nullptr);
    if (n < 0) {
      if (errno != EAGAIN && errno != EINTR && errno != ECONNREFUSED) unregister(x, "recvmmsg", errno);
      s.backlogged = false;
      return;
    }
    for (int i = 0; i < n; ++i) lengths[i] = msgs[i].msg_len;
    s.backlogged = static_cast<unsigned>(n) == limit;
    if (n > 0) forward(x, static_cast<unsigned>(n), rate);
  } else {
    unsigned count = 0;
    while (count < limit) {
      ssize_t r = ::read(s.fd.get(), buffers.data() + count * kFrameMax, kFrameMax);
      if (r < 0) {
        if (errno == EINTR) continue;
        if (errno != EAGAIN) unregister(x, "TAP read", errno);
        break;
      }
      if (r == 0) break;
      lengths[count++] = static_cast<unsigned>(r);
    }
    s.backlogged = count == limit;
    if (count > 0) forward(x, count, rate);
  }
  if (rate > 0 && s.registered && s.tokens < 0) pause(x, now, rate);
}

void DataPlane::Impl::forward(size_t x, unsigned count, double rate) {
  NicState& src = nic[x];
  uint64_t bytes = 0;
  for (unsigned i = 0; i < count; ++i) bytes += lengths[i];
  src.rx_frames.fetch_add(count, std::memory_order_relaxed);
  src.rx_bytes.fetch_add(bytes, std::memory_order_relaxed);
  // State is read once per batch: a batch spans microseconds, far below any switching time.
  if (!src.link_up.load(std::memory_order_acquire)) {
    src.dropped_link_down.fetch_add(count, std::memory_order_relaxed);
    return;
  }
  int egress = path[static_cast<size_t>((*attachments)[x].tx_port)].load(std::memory_order_acquire);
  int d = egress > 0 ? egress_nic[static_cast<size_t>(egress)] : -1;
  if (d < 0) {
    // Dark, switching, or lit into a fibre no NIC listens on: the light goes nowhere.
    src.dropped_dark.fetch_add(count, std::memory_order_relaxed);
    return;
  }
  NicState& dst = nic[static_cast<size_t>(d)];
  if (!dst.link_up.load(std::memory_order_acquire)) {
    dst.dropped_link_down.fetch_add(count, std::memory_order_relaxed);
    return;
  }
  if (!dst.registered) {
    dst.tx_errors.fetch_add(count, std::memory_order_relaxed);
    return;
  }
  // The batch entered a lit circuit: it is charged to the circuit's rate whether or not the
  // receiving NIC then takes every frame (its full queue is past the fibre).
  if (rate > 0) src.tokens -= static_cast<double>(bytes + uint64_t{count} * kWireOverheadBytes);
  uint64_t sent_bytes = 0;
  unsigned sent = dst.udp ? deliver_udp(dst, count, &sent_bytes) : deliver_tap(dst, count, &sent_bytes);
  dst.tx_frames.fetch_add(sent, std::memory_order_relaxed);
  dst.tx_bytes.fetch_add(sent_bytes, std::memory_order_relaxed);
  if (sent < count) dst.tx_errors.fetch_add(count - sent, std::memory_order_relaxed);
}

unsigned DataPlane::Impl::deliver_udp(NicState& d, unsigned count, uint64_t* bytes) {
  for (unsigned i = 0; i < count; ++i) {
    iovs[i].iov_len = lengths[i];
    msgs[i].msg_hdr = msghdr{};
    msgs[i].msg_hdr.msg_name = &d.peer;
    msgs[i].msg_hdr.msg_namelen = sizeof(d.peer);
    msgs[i].msg_hdr.msg_iov = &iovs[i];
    msgs[i].msg_hdr.msg_iovlen = 1;
  }
  unsigned sent = 0;
  while (sent < count) {
    int n = ::sendmmsg(d.fd.get(), msgs + sent, count - sent, MSG_DONTWAIT);
    if (n < 0) {
      if (errno == EINTR) continue;
      // A full socket buffer or an unreachable guest loses the rest of the batch, as a real
      // fibre into a busy NIC would; the tx_errors counter shows it.
      break;
    }
    sent += static_cast<unsigned>(n);
  }
  for (unsigned i = 0; i < sent; ++i) *bytes += lengths[i];
  // Restore the receive layout of the shared iovecs.
  for (unsigned i = 0; i < count; ++i) iovs[i].iov_len = kFrameMax;
  return sent;
}

unsigned DataPlane::Impl::deliver_tap(NicState& d, unsigned count, uint64_t* bytes) {
  unsigned sent = 0;
  for (unsigned i = 0; i < count; ++i) {
    ssize_t r = ::write(d.fd.get(), buffers.data() + i * kFrameMax, lengths[i]);
    if (r < 0 && errno == EINTR) r = ::write(d.fd.get(), buffers.data() + i * kFrameMax, lengths[i]);
    // EIO: the TAP is administratively down in its namespace; the frame is lost like on a
    // real NIC that is not up.
    if (r == static_cast<ssize_t>(lengths[i])) {
      ++sent;
      *bytes += lengths[i];
    }
  }
  return sent;
}

}  // namespace ocslab::emu
