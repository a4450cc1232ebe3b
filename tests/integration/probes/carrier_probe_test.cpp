// The carrier probe against the real kernel: a TAP device in a namespace of the test's own whose
// carrier this process drives with TUNSETCARRIER, timed against the probe's samples (the
// announced carrier and the polled live bit); a veth pair for socket overruns. Needs root
// (namespaces, /dev/net/tun).
#include <fcntl.h>
#include <libmnl/libmnl.h>
#include <linux/if_tun.h>
#include <linux/rtnetlink.h>
#include <net/if.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <future>
#include <iostream>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "ocslab/common/clock.h"
#include "ocslab/common/error.h"
#include "ocslab/common/netlink_socket.h"
#include "ocslab/probes/carrier_probe.h"
#include "ocslab/probes/carrier_tracker.h"
#include "ocslab/testing/sample_collector.h"
#include "ocslab/testing/sshd_fixture.h"

using namespace ocslab;
using namespace ocslab::probes;
using namespace std::chrono_literals;

namespace {

// `ip netns add ocslab-t-carrier-<tag>-<pid>`, deleted on destruction, also when a test fails.
class Netns {
 public:
  explicit Netns(const std::string& tag) : name_("ocslab-t-carrier-" + tag + "-" + std::to_string(::getpid())) {
    testing::run_command("ip netns add " + name_);
  }
  ~Netns() { std::system(("ip netns del " + name_ + " >/dev/null 2>&1").c_str()); }
  Netns(const Netns&) = delete;
  Netns& operator=(const Netns&) = delete;
  const std::string& name() const { return name_; }
  std::string ip(const std::string& args) const { return testing::run_command("ip -n " + name_ + " " + args); }

 private:
  std::string name_;
};

// A TAP created inside ns (from a thread that entered it, so the device never exists in the
// initial namespace), not persistent: closing the fd removes it.
class Tap {
 public:
  Tap(const Netns& ns, const std::string& name) : name_(name) {
    std::string error;
    std::thread([&] {
      int nsfd = ::open(("/run/netns/" + ns.name()).c_str(), O_RDONLY | O_CLOEXEC);
      if (nsfd < 0 || ::setns(nsfd, CLONE_NEWNET) < 0) {
        error = "setns " + ns.name() + ": " + std::strerror(errno);
        if (nsfd >= 0) ::close(nsfd);
        return;
      }
      ::close(nsfd);
      fd_ = ::open("/dev/net/tun", O_RDWR | O_CLOEXEC);
      if (fd_ < 0) {
        error = std::string("open /dev/net/tun: ") + std::strerror(errno);
        return;
      }
      ifreq ifr{};
      ifr.ifr_flags = IFF_TAP | IFF_NO_PI;
      std::strncpy(ifr.ifr_name, name_.c_str(), IFNAMSIZ - 1);
      if (::ioctl(fd_, TUNSETIFF, &ifr) < 0) error = "TUNSETIFF " + name_ + ": " + std::strerror(errno);
    }).join();
    if (!error.empty()) {
      if (fd_ >= 0) ::close(fd_);
      FAIL(error);
    }
    ns.ip("link set dev " + name_ + " up");
  }
  ~Tap() {
    if (fd_ >= 0) ::close(fd_);
  }
  Tap(const Tap&) = delete;
  Tap& operator=(const Tap&) = delete;

  // Sets the carrier and returns the script's timestamps taken right before and after the ioctl.
  std::pair<Timestamp, Timestamp> set_carrier(bool on) {
    int v = on ? 1 : 0;
    Timestamp before = now();
    int rc = ::ioctl(fd_, TUNSETCARRIER, &v);
    Timestamp after = now();
    REQUIRE(rc == 0);
    return {before, after};
  }

 private:
  std::string name_;
  int fd_ = -1;
};

// Thread-safe sink that tests can wait on.
using Collector = ocslab::testing::SampleCollector;

bool is_transition(const Sample& s) { return s.signal == "carrier" || s.signal == "carrier_inferred"; }

// The samples of one subject that `keep` selects, in order.
std::vector<Sample> samples_of(const std::vector<Sample>& all, const std::string& subject,
                               bool (*keep)(const Sample&)) {
  std::vector<Sample> v;
  for (const auto& s : all) {
    if (s.subject == subject && keep(s)) v.push_back(s);
  }
  return v;
}

std::vector<Sample> transitions(const std::vector<Sample>& all, const std::string& subject) {
  return samples_of(all, subject, is_transition);
}

size_t count_transitions(const std::vector<Sample>& all, const std::string& subject) {
  return transitions(all, subject).size();
}

double ms(int64_t ns) { return static_cast<double>(ns) / 1e6; }

// SCHED_FIFO priority of both the probe's receiver and the reference listener: on this shared
// machine (other sessions' QEMU guests keep both cores busy) a normal thread may wake many
// milliseconds after its message arrived.
constexpr int kRtPriority = 10;

// An independent listener on its own socket and real-time thread: when it reads a message is
// when the kernel announced it, give or take a wakeup. It tells the probe's own latency apart
// from the kernel's (linkwatch runs in a kworker that takes the RTNL lock; both can wait behind
// other tenants), so the probe is held to 5 ms where the kernel announced at once and to the
// reference where the kernel was late.
class ReferenceListener {
 public:
  ReferenceListener(const std::string& netns, const std::string& ifname) : ifname_(ifname) {
    wake_ = ::eventfd(0, EFD_CLOEXEC);
    REQUIRE(wake_ >= 0);
    std::promise<std::string> ready;
    auto ready_f = ready.get_future();
    thread_ = std::thread([this, netns, &ready] { run(netns, ready); });
    std::string error = ready_f.get();
    if (!error.empty()) {
      thread_.join();
      ::close(wake_);
      FAIL("reference listener: " << error);
    }
  }
  ~ReferenceListener() {
    uint64_t one = 1;
    if (::write(wake_, &one, sizeof(one)) != sizeof(one)) std::abort();
    thread_.join();
    ::close(wake_);
  }
  ReferenceListener(const ReferenceListener&) = delete;
  ReferenceListener& operator=(const ReferenceListener&) = delete;

  // Realtime ns of each message about the interface.
  std::vector<int64_t> times() const {
    std::lock_guard lock(mu_);
    return times_;
  }

 private:
  void run(const std::string& netns, std::promise<std::string>& ready) {
    std::unique_ptr<NetlinkSocket> nl;
    try {
      sched_param p{};
      p.sched_priority = kRtPriority;
      if (int err = ::pthread_setschedparam(::pthread_self(), SCHED_FIFO, &p)) {
        throw std::runtime_error(std::string("SCHED_FIFO: ") + std::strerror(err));
      }
      int nsfd = ::open(("/run/netns/" + netns).c_str(), O_RDONLY | O_CLOEXEC);
      if (nsfd < 0 || ::setns(nsfd, CLONE_NEWNET) < 0) throw std::runtime_error("setns " + netns);
      ::close(nsfd);
      nl = std::make_unique<NetlinkSocket>(NETLINK_ROUTE, RTMGRP_LINK);
    } catch (const std::exception& e) {
      ready.set_value(e.what());
      return;
    }
    ready.set_value("");
    std::vector<char> buf(size_t{64} * 1024);
    for (;;) {
      pollfd fds[2] = {{nl->fd(), POLLIN, 0}, {wake_, POLLIN, 0}};
      if (::poll(fds, 2, -1) < 0 || fds[1].revents) return;
      ssize_t n = nl->recv(buf, -1);
      int64_t t = realtime_ns();
      for (const nlmsghdr* nlh : netlink_messages(buf.data(), static_cast<size_t>(n))) {
        auto link = parse_link_message(nlh);
        if (!link || link->ifname != ifname_) continue;
        std::lock_guard lock(mu_);
        times_.push_back(t);
      }
    }
  }

  std::string ifname_;
  int wake_ = -1;
  mutable std::mutex mu_;
  std::vector<int64_t> times_;
  std::thread thread_;
};

// Runs this thread, and every thread it starts while this lives, on one CPU; the old set comes
// back on destruction (for this thread; the ones started meanwhile keep the one CPU). The probe's
// receiver and the reference listener then share a CPU, so whatever holds that CPU off delays
// both alike: a hypervisor's steal of that virtual CPU (CI's 2-core VM showed 12-18 ms with the
// other listener on the other CPU unaffected), a kernel path that does not preempt. Their
// difference is then the probe's own latency, which is what the 5 ms / 1 ms bounds are about.
class OneCpu {
 public:
  OneCpu() {
    REQUIRE(::sched_getaffinity(0, sizeof(old_), &old_) == 0);
    cpu_ = ::sched_getcpu();
    REQUIRE(cpu_ >= 0);
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpu_, &one);
    REQUIRE(::sched_setaffinity(0, sizeof(one), &one) == 0);
  }
  ~OneCpu() { ::sched_setaffinity(0, sizeof(old_), &old_); }
  OneCpu(const OneCpu&) = delete;
  OneCpu& operator=(const OneCpu&) = delete;
  int cpu() const { return cpu_; }

 private:
  cpu_set_t old_{};
  int cpu_ = -1;
};

// The reference time nearest to t (the same message, seen by the other listener).
int64_t nearest(const std::vector<int64_t>& times, int64_t t) {
  int64_t best = times.at(0);
  for (int64_t x : times) {
    if (std::llabs(x - t) < std::llabs(best - t)) best = x;
  }
  return best;
}

// One scripted change and what the probe must show for it.
struct Step {
  bool on;
  std::pair<Timestamp, Timestamp> when;
  bool expect_inferred;
};

}  // namespace

TEST_CASE("carrier probe records every TAP carrier transition, the coalesced flap from the counters") {
  OneCpu pinned;  // before any thread of the case starts
  std::cout << "probe receiver and reference listener on CPU " << pinned.cpu() << "\n";
  Netns ns("tap");
  Tap tap(ns, "ctap0");
  Collector got;
  ReferenceListener reference(ns.name(), "ctap0");
  CarrierProbe probe(
      {.interfaces = {"ctap0"}, .netns = ns.name(), .host = "testhost", .receiver_rt_priority = kRtPriority});
  ProbeStatus st = probe.start(got.sink());
  REQUIRE(st.available);
  CHECK(st.method.find("rtnetlink") != std::string::npos);

  // The initial dump: the TAP is up with carrier (TUNSETIFF attached a queue).
  REQUIRE(got.wait([](const auto& v) { return count_transitions(v, "ctap0") >= 1; }, 2s));
  {
    auto t = transitions(got.samples(), "ctap0");
    CHECK(t[0].signal == "carrier");
    CHECK(t[0].value == 1);
    CHECK(t[0].host == "testhost");
    CHECK(t[0].source == "carrier");
    CHECK(t[0].unit == "bool");
  }
  // Linkwatch runs non-urgent events (a carrier loss on a TAP) at most once a second; waiting
  // out that window makes the first down below go out at once.
  // load-safe: a lower bound: past linkwatch's 1 s window; a late wake only lengthens it.
  std::this_thread::sleep_for(1100ms);  // kept: kernel pacing, not an observable event

  std::vector<Step> steps;
  // Slow transitions, each more than a second after the previous linkwatch run.
  for (int i = 0; i < 2; ++i) {
    steps.push_back({false, tap.set_carrier(false), false});
    // load-safe: a lower bound: past linkwatch's 1 s window; a late wake only lengthens it.
    std::this_thread::sleep_for(1100ms);  // kept: past linkwatch's one-second window
    steps.push_back({true, tap.set_carrier(true), false});
    // load-safe: a lower bound: past linkwatch's 1 s window; a late wake only lengthens it.
    std::this_thread::sleep_for(1100ms);  // kept: past linkwatch's one-second window
  }
  // A down that starts a linkwatch window (reported at once), the up that follows (urgent: the
  // qdisc is deactivated, so reported at once too), then an off-on flap inside that window:
  // the off is held back until the window ends, the on is no longer urgent (the qdisc never
  // went down), and the kernel sends one message showing "up" with both counters advanced.
  steps.push_back({false, tap.set_carrier(false), false});
  // load-bound: fast transitions must fall inside linkwatch's 1 s window; a long preemption moves them out.
  std::this_thread::sleep_for(150ms);  // kept: fast transitions inside linkwatch's window are the point
  steps.push_back({true, tap.set_carrier(true), false});
  // load-bound: as above, inside linkwatch's window.
  std::this_thread::sleep_for(150ms);  // kept: as above
  steps.push_back({false, tap.set_carrier(false), true});
  // load-bound: as above, inside linkwatch's window.
  std::this_thread::sleep_for(30ms);  // kept: as above
  steps.push_back({true, tap.set_carrier(true), true});

  size_t expected = 1 + steps.size();
  REQUIRE(got.wait([&](const auto& v) { return count_transitions(v, "ctap0") >= expected; }, 3s));
  // load-safe: time for transitions that must not come; a slow machine can only hide a fault, not fail the case.
  std::this_thread::sleep_for(1200ms);  // nothing more may come: no invented transitions
  auto t = transitions(got.samples(), "ctap0");
  // The whole record, relative to the first scripted change, for the CI log.
  for (const auto& s : got.samples()) {
    std::cout << "  " << ms(s.t_ns - steps[0].when.first.realtime_ns) << " ms  " << s.subject << " " << s.signal
              << " = " << s.value << " " << s.unit << "\n";
  }
  for (const auto& step : steps) {
    std::cout << "  script " << ms(step.when.first.realtime_ns - steps[0].when.first.realtime_ns) << " ms  carrier "
              << (step.on ? "on" : "off") << "\n";
  }
  REQUIRE(t.size() == expected);

  for (size_t i = 0; i < steps.size(); ++i) {
    const Step& step = steps[i];
    const Sample& s = t[i + 1];
    INFO("step " << i << (step.on ? " on" : " off"));
    CHECK(s.value == (step.on ? 1 : 0));
    int64_t delta = s.t_ns - step.when.first.realtime_ns;
    int64_t ioctl_ns = step.when.second.realtime_ns - step.when.first.realtime_ns;
    if (!step.expect_inferred) {
      CHECK(s.signal == "carrier");
      int64_t kernel = nearest(reference.times(), s.t_ns) - step.when.first.realtime_ns;
      std::cout << "carrier " << (step.on ? "up  " : "down") << " recorded " << ms(delta)
                << " ms after the ioctl began (ioctl took " << ms(ioctl_ns) << " ms; reference listener " << ms(kernel)
                << " ms)\n";
      CHECK(s.t_ns >= step.when.first.realtime_ns);
      // The probe's own latency, behind an independent real-time listener, stays within the 5 ms
      // the probe is allowed (ahead of it is fine: that listener's wakeup varies too). Typically
      // well under 0.1 ms; 1.07 ms was seen once on a 2-core machine busy with a compiler.
      CHECK(delta - kernel <= 5'000'000);
      if (kernel <= 4'000'000) {
        CHECK(delta <= 5'000'000);
      } else {
        // Not hidden: counted in the log so a slow kernel path shows up in CI figures.
        std::cout << "  the kernel itself announced this transition " << ms(kernel)
                  << " ms late (linkwatch kworker / RTNL lock waiting behind other load)\n";
      }
    } else {
      // The window opened when linkwatch handled the down before it: that down's message.
      const int64_t window_open = t[steps.size() - 4 + 1].t_ns;
      int64_t kernel = nearest(reference.times(), s.t_ns);
      // The off is only ever seen through the counters; the on arrives in the same message.
      bool last = i + 1 == steps.size();
      CHECK(s.signal == (last ? "carrier" : "carrier_inferred"));
      std::cout << "flap " << (step.on ? "on " : "off") << " recorded " << ms(delta)
                << " ms after the ioctl (coalesced by linkwatch, " << (last ? "shown" : "inferred") << "), "
                << ms(s.t_ns - window_open) << " ms after linkwatch's window opened\n";
      CHECK(s.t_ns >= step.when.first.realtime_ns);
      CHECK(s.t_ns - kernel <= 1'000'000);
      // Held back until linkwatch's one-second window ends (jiffies: a few ms either way), then
      // sent by the kworker, which the other transitions show may wait behind other load.
      CHECK(s.t_ns - window_open >= 990'000'000);
      CHECK(s.t_ns - window_open <= 1'050'000'000);
    }
  }
  // Both flap samples are stamped with the one message that revealed them.
  CHECK(t[t.size() - 2].t_ns == t.back().t_ns);

  // Each transition sample is one transition: values alternate from the baseline on.
  for (size_t i = 1; i < t.size(); ++i) CHECK(t[i].value != t[i - 1].value);

  // The counters moved by exactly the script's 4 ups and 4 downs.
  std::optional<double> first_up, first_down;
  double last_up = -1, last_down = -1;
  for (const auto& s : got.samples()) {
    if (s.subject != "ctap0") continue;
    if (s.signal == "carrier_up_count") {
      if (!first_up) first_up = s.value;
      last_up = s.value;
    }
    if (s.signal == "carrier_down_count") {
      if (!first_down) first_down = s.value;
      last_down = s.value;
    }
  }
  REQUIRE(first_up);
  REQUIRE(first_down);
  CHECK(last_up - *first_up == 4);
  CHECK(last_down - *first_down == 4);

  auto begin = now();
  probe.stop();
  double stop_ms = elapsed_ms(begin, now());
  std::cout << "stop() took " << stop_ms << " ms\n";
  CHECK(stop_ms < 100);
  probe.stop();  // idempotent
}

TEST_CASE("carrier probe: a missing interface or namespace makes it unavailable with a reason") {
  Netns ns("missing");
  Collector got;
  {
    CarrierProbe probe({.interfaces = {"nosuch0"}, .netns = ns.name(), .host = "h"});
    ProbeStatus st = probe.start(got.sink());
    CHECK_FALSE(st.available);
    INFO(st.reason);
    CHECK(st.reason.find("nosuch0") != std::string::npos);
    CHECK(st.reason.find(ns.name()) != std::string::npos);
    CHECK_THROWS_AS(probe.start(got.sink()), Error);  // misuse, even when unavailable
    probe.stop();
  }
  {
    // lo exists in every namespace: only the missing one is named.
    CarrierProbe probe({.interfaces = {"lo", "nosuch1"}, .netns = ns.name(), .host = "h"});
    ProbeStatus st = probe.start(got.sink());
    CHECK_FALSE(st.available);
    CHECK(st.reason.find("nosuch1") != std::string::npos);
    CHECK(st.reason.find("lo,") == std::string::npos);
  }
  {
    std::string gone = ns.name() + "-gone";
    CarrierProbe probe({.interfaces = {"lo"}, .netns = gone, .host = "h"});
    ProbeStatus st = probe.start(got.sink());
    CHECK_FALSE(st.available);
    INFO(st.reason);
    CHECK(st.reason.find(gone) != std::string::npos);
  }
  CHECK(got.samples().empty());
}

TEST_CASE("carrier probe: stop() wakes an idle probe at once") {
  Netns ns("stop");
  Collector got;
  CarrierProbe probe({.interfaces = {"lo"}, .netns = ns.name(), .host = "h"});
  REQUIRE(probe.start(got.sink()).available);
  REQUIRE(got.wait([](const auto& v) { return count_transitions(v, "lo") >= 1; }, 2s));
  // load-bound: assumes the probe's threads are asleep in poll after 50 ms; the case then measures their idle CPU.
  std::this_thread::sleep_for(50ms);  // the threads are asleep in poll / wait now
  auto begin = now();
  probe.stop();
  double stop_ms = elapsed_ms(begin, now());
  std::cout << "idle stop() took " << stop_ms << " ms\n";
  CHECK(stop_ms < 100);
}

namespace {

// Sets `ifname` administratively up/down `times` times in a row over rtnetlink, from a thread
// inside the namespace, as fast as the kernel acknowledges.
void toggle_admin(const Netns& ns, const std::string& ifname, int times) {
  std::string error;
  std::thread([&] {
    try {
      int nsfd = ::open(("/run/netns/" + ns.name()).c_str(), O_RDONLY | O_CLOEXEC);
      if (nsfd < 0 || ::setns(nsfd, CLONE_NEWNET) < 0) throw std::runtime_error("setns " + ns.name());
      ::close(nsfd);
      unsigned index = ::if_nametoindex(ifname.c_str());
      if (index == 0) throw std::runtime_error("no " + ifname + " in " + ns.name());
      NetlinkSocket nl(NETLINK_ROUTE);
      std::vector<char> buf(MNL_SOCKET_BUFFER_SIZE);
      for (int i = 0; i < times; ++i) {
        auto* nlh = mnl_nlmsg_put_header(buf.data());
        nlh->nlmsg_type = RTM_NEWLINK;
        nlh->nlmsg_flags = NLM_F_REQUEST;
        auto* ifi = static_cast<ifinfomsg*>(mnl_nlmsg_put_extra_header(nlh, sizeof(ifinfomsg)));
        ifi->ifi_family = AF_UNSPEC;
        ifi->ifi_index = static_cast<int>(index);
        ifi->ifi_change = IFF_UP;
        ifi->ifi_flags = i % 2 == 0 ? 0 : IFF_UP;  // down first, ends up when times is even
        nl.request(nlh, [](const nlmsghdr*) {});
      }
    } catch (const std::exception& e) {
      error = e.what();
    }
  }).join();
  if (!error.empty()) FAIL(error);
}

}  // namespace

TEST_CASE("carrier probe: after socket overruns the counters account for every transition") {
  Netns ns("overrun");
  ns.ip("link add cva type veth peer name cvb");
  ns.ip("link set dev cva up");
  ns.ip("link set dev cvb up");
  Collector got;
  // The smallest receive buffer the kernel allows holds a couple of RTM_NEWLINKs; the burst
  // below sends hundreds (for cva's carrier and for cvb itself), far faster than a normal
  // thread drains them.
  CarrierProbe probe({.interfaces = {"cva"}, .netns = ns.name(), .host = "h", .receive_buffer_bytes = 1});
  REQUIRE(probe.start(got.sink()).available);
  REQUIRE(got.wait([](const auto& v) { return count_transitions(v, "cva") >= 1; }, 2s));
  const double up0 = transitions(got.samples(), "cva")[0].value;
  CHECK(up0 == 1);

  for (int burst = 0; burst < 20 && probe.overruns() == 0; ++burst) toggle_admin(ns, "cvb", 200);
  std::cout << "overruns after the bursts: " << probe.overruns() << "\n";
  REQUIRE(probe.overruns() > 0);

  // Settle on a known final state (up) and let the probe catch up.
  // load-bound: assumes the bursts' backlog drained within 300 ms before the final toggle.
  std::this_thread::sleep_for(300ms);  // kept: the bursts' backlog drains before the final toggle
  toggle_admin(ns, "cvb", 2);          // down, up
  // load-safe: a lower bound: past linkwatch's window, so the final up has been sent; a late wake only lengthens it.
  std::this_thread::sleep_for(1500ms);  // kept: past linkwatch's window, so the final up has been sent
  probe.stop();

  auto all = got.samples();
  auto t = transitions(all, "cva");
  std::optional<double> first_up, first_down;
  double last_up = 0, last_down = 0;
  size_t overrun_samples = 0;
  for (const auto& s : all) {
    if (s.signal == "netlink_overruns") ++overrun_samples;
    if (s.subject != "cva") continue;
    if (s.signal == "carrier_up_count") {
      if (!first_up) first_up = s.value;
      last_up = s.value;
    }
    if (s.signal == "carrier_down_count") {
      if (!first_down) first_down = s.value;
      last_down = s.value;
    }
  }
  REQUIRE(first_up);
  REQUIRE(first_down);
  double counted = (last_up - *first_up) + (last_down - *first_down);
  size_t inferred = 0;
  for (const auto& s : t) inferred += s.signal == "carrier_inferred";
  std::cout << "transitions by the counters: " << counted << ", samples: " << t.size() - 1 << " (" << inferred
            << " inferred), overrun samples: " << overrun_samples << "\n";
  CHECK(overrun_samples == probe.overruns());
  CHECK(counted > 0);
  // Every transition the kernel counted is a sample, shown or inferred, in alternating order.
  CHECK(static_cast<double>(t.size() - 1) == counted);
  for (size_t i = 1; i < t.size(); ++i) CHECK(t[i].value != t[i - 1].value);
  CHECK(t.back().value == 1);
  CHECK(inferred > 0);
}

namespace {

bool is_bit_transition(const Sample& s) { return s.signal == "carrier_bit" || s.signal == "carrier_bit_inferred"; }

std::vector<Sample> bit_transitions(const std::vector<Sample>& all, const std::string& subject) {
  return samples_of(all, subject, is_bit_transition);
}

// Dumps the namespace's links (RTM_GETLINK, NLM_F_DUMP, as the probe's poller does) on a socket
// of its own inside the namespace, and says when the answer came: a poll started then would see
// the state the script set before it. It is the reference for the poller: whatever held the
// kernel up (a lock held by other tenants) holds this request up alike. A dump, not a
// request for the one link: since Linux 6.8 that request first sends the device's pending
// linkwatch announcement, which would hide the delay the case is about.
class LinkReader {
 public:
  LinkReader(const Netns& ns, std::string ifname) : ifname_(std::move(ifname)) {
    std::string error;
    std::thread([&] {
      try {
        int nsfd = ::open(("/run/netns/" + ns.name()).c_str(), O_RDONLY | O_CLOEXEC);
        if (nsfd < 0 || ::setns(nsfd, CLONE_NEWNET) < 0) throw std::runtime_error("setns " + ns.name());
        ::close(nsfd);
        nl_ = std::make_unique<NetlinkSocket>(NETLINK_ROUTE);  // keeps the namespace it was made in
      } catch (const std::exception& e) {
        error = e.what();
      }
    }).join();
    if (!error.empty()) FAIL(error);
  }

  // Realtime ns right after the kernel answered.
  int64_t read_done() {
    std::vector<char> buf(MNL_SOCKET_BUFFER_SIZE);
    auto* nlh = mnl_nlmsg_put_header(buf.data());
    nlh->nlmsg_type = RTM_GETLINK;
    nlh->nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
    auto* ifi = static_cast<ifinfomsg*>(mnl_nlmsg_put_extra_header(nlh, sizeof(ifinfomsg)));
    ifi->ifi_family = AF_UNSPEC;
    bool seen = false;
    nl_->request(nlh, [&](const nlmsghdr* m) {
      auto link = parse_link_message(m);
      seen = seen || (link && link->ifname == ifname_);
    });
    int64_t t = realtime_ns();
    REQUIRE(seen);
    return t;
  }

 private:
  std::string ifname_;
  std::unique_ptr<NetlinkSocket> nl_;
};

}  // namespace

// Issue 45, item 5: outages shorter and closer together than linkwatch's one-second window. A
// TAP's carrier-down is a non-urgent linkwatch event, so its announcements (`carrier`) come at
// most once a second and coalesce; the polled live bit (`carrier_bit`) shows every edge within a
// poll interval. (A veth cannot show this: a change on a stacked device is urgent, announced at
// once.)
TEST_CASE("carrier probe: the polled carrier bit shows each outage that linkwatch holds back") {
  OneCpu pinned;  // the poller and the reference reads share a CPU (see OneCpu)
  Netns ns("bit");
  Tap tap(ns, "cbit0");
  Collector got;
  constexpr int kPollMs = 5;
  CarrierProbe probe({.interfaces = {"cbit0"},
                      .netns = ns.name(),
                      .host = "h",
                      .receiver_rt_priority = kRtPriority,
                      .poll_interval_ms = kPollMs});
  ProbeStatus st = probe.start(got.sink());
  REQUIRE(st.available);
  CHECK(st.method.find("RTM_GETLINK dump every 5 ms") != std::string::npos);
  // The first poll is the bit's baseline: up.
  REQUIRE(got.wait([](const auto& v) { return !bit_transitions(v, "cbit0").empty(); }, 2s));
  CHECK(bit_transitions(got.samples(), "cbit0")[0].signal == "carrier_bit");
  CHECK(bit_transitions(got.samples(), "cbit0")[0].value == 1);
  CHECK(bit_transitions(got.samples(), "cbit0")[0].source == "carrier");
  LinkReader reader(ns, "cbit0");

  struct Change {
    bool on;
    std::pair<Timestamp, Timestamp> when;  // around the ioctl
    int64_t reference = 0;                 // the reader's answer after it
  };
  std::vector<Change> script;
  const int outage_ms[] = {100, 300, 150, 250, 120, 280, 200, 180};
  for (int ms_dark : outage_ms) {
    script.push_back({false, tap.set_carrier(false), 0});
    script.back().reference = reader.read_done();
    // load-safe: pacing of the script: a late wake only lengthens the outage, and every bound below is from the
    // script's own timestamps.
    std::this_thread::sleep_for(std::chrono::milliseconds(ms_dark));
    script.push_back({true, tap.set_carrier(true), 0});
    script.back().reference = reader.read_done();
    // load-safe: pacing of the script, as above.
    std::this_thread::sleep_for(200ms);
  }
  const size_t n = script.size();
  // Every transition is counted by the kernel: the bit's samples come within a poll, the
  // announcement's (shown or inferred) by the end of linkwatch's last window.
  REQUIRE(got.wait([&](const auto& v) { return bit_transitions(v, "cbit0").size() >= 1 + n; }, 5s));
  REQUIRE(got.wait([&](const auto& v) { return transitions(v, "cbit0").size() >= 1 + n; }, 5s));
  // load-safe: time for transitions that must not come; a slow machine can only hide a fault, not fail the case.
  std::this_thread::sleep_for(300ms);
  probe.stop();

  const auto all = got.samples();
  const int64_t t0 = script[0].when.first.realtime_ns;
  for (const auto& s : all) {
    if (s.subject == "cbit0" && (is_transition(s) || is_bit_transition(s)))
      std::cout << "  " << ms(s.t_ns - t0) << " ms  " << s.signal << " = " << s.value << "\n";
  }
  auto bits = bit_transitions(all, "cbit0");
  REQUIRE(bits.size() == 1 + n);
  // One down and one up per outage, in the script's order, each within a poll interval of the
  // moment the kernel could first have shown it (the reference read) plus scheduling slack: the
  // poller runs SCHED_FIFO on the script's CPU, so 20 ms covers its wakeup and a short wait in
  // the kernel (a lock held by another tenant) that started after the reference read.
  constexpr int64_t kSlackNs = 20'000'000;
  size_t inferred = 0;
  double worst = 0;
  for (size_t i = 0; i < n; ++i) {
    const Change& c = script[i];
    const Sample& s = bits[i + 1];
    INFO("change " << i << (c.on ? " on" : " off"));
    CHECK(s.value == (c.on ? 1 : 0));
    CHECK(s.t_ns >= c.when.first.realtime_ns);  // never before the change
    CHECK(s.t_ns <= c.reference + int64_t{kPollMs} * 1'000'000 + kSlackNs);
    inferred += s.signal == "carrier_bit_inferred";
    worst = std::max(worst, ms(s.t_ns - c.when.first.realtime_ns));
    std::cout << "carrier_bit " << (c.on ? "up  " : "down") << " " << ms(s.t_ns - c.when.first.realtime_ns)
              << " ms after the ioctl began (reference read " << ms(c.reference - c.when.first.realtime_ns) << " ms)\n";
  }
  std::cout << "carrier_bit: " << n << " edges, worst " << worst << " ms after the ioctl, " << inferred
            << " inferred\n";

  // The announcement: every transition accounted for (the counters), but the downs come through
  // linkwatch's non-urgent path, at most once a second, so the script's eight downs, a few
  // hundred ms apart, cannot all be announced as they happen. This also checks that the polls do
  // not hasten the announcement (a request for the one link would, since Linux 6.8).
  auto announced = transitions(all, "cbit0");
  REQUIRE(announced.size() == 1 + n);
  for (size_t i = 1; i < announced.size(); ++i) CHECK(announced[i].value != announced[i - 1].value);
  std::vector<int64_t> shown_downs;
  for (size_t i = 1; i < announced.size(); ++i)
    if (announced[i].signal == "carrier" && announced[i].value == 0) shown_downs.push_back(announced[i].t_ns);
  std::cout << "carrier: " << shown_downs.size() << " of " << n / 2 << " downs announced as they were shown, the rest "
            << "inferred from the counters later\n";
  // What the kernel guarantees: two announced downs are a linkwatch window apart (jiffies: a
  // few ms either way).
  for (size_t i = 1; i < shown_downs.size(); ++i) CHECK(shown_downs[i] - shown_downs[i - 1] >= 990'000'000);
  // Hence fewer shown downs than outages while the script's downs span under 4 s (it takes
  // about 3 s; a machine slow enough to stretch it can only hide the coalescing).
  const int64_t downs_span = script[n - 2].when.first.realtime_ns - t0;
  if (downs_span < 4'000'000'000) {
    CHECK(shown_downs.size() < n / 2);
  } else {
    std::cout << "the script's downs spanned " << ms(downs_span) << " ms: too slow to assert coalescing\n";
  }
}
