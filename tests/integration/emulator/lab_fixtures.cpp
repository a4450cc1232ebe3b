#include "lab_fixtures.h"

// glibc's <net/if.h> before <linux/if.h>, which adds IFF_LOWER_UP without redefinitions.
#include <net/if.h>

#include <arpa/inet.h>
#include <fcntl.h>
#include <libmnl/libmnl.h>
#include <linux/if.h>
#include <linux/rtnetlink.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "ocslab/common/clock.h"
#include "ocslab/common/netlink_socket.h"
#include "ocslab/testing/sshd_fixture.h"
#include "ocslab/testing/wait.h"

namespace ocslab::emu::test {

int shell_status(const std::string& cmd) {
  int rc = std::system((cmd + " >/dev/null 2>&1").c_str());
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

TestNetns::TestNetns(const std::string& tag) : name_("ocslab-t-" + tag + "-" + std::to_string(::getpid())) {
  testing::run_command("ip netns add " + name_);
  testing::run_command("ip -n " + name_ + " link set lo up");
}

TestNetns::~TestNetns() { shell_status("ip netns del " + name_); }

int TestNetns::exec_status(const std::string& cmd) const { return shell_status("ip netns exec " + name_ + " " + cmd); }

namespace {
nlohmann::json link_stats(const std::string& ns, const std::string& ifname) {
  auto j = nlohmann::json::parse(testing::run_command("ip -n " + ns + " -s -j link show dev " + ifname));
  return j.at(0).at("stats64");
}
}  // namespace

uint64_t TestNetns::rx_packets(const std::string& ifname) const {
  return link_stats(name_, ifname).at("rx").at("packets").get<uint64_t>();
}
uint64_t TestNetns::tx_packets(const std::string& ifname) const {
  return link_stats(name_, ifname).at("tx").at("packets").get<uint64_t>();
}

int free_udp_port() {
  UdpSocket s(0);
  return s.port();
}

UdpSocket::UdpSocket(int port) {
  fd_ = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd_ < 0) throw std::runtime_error("socket: " + std::string(std::strerror(errno)));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<uint16_t>(port));
  if (::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)) < 0) {
    int err = errno;
    ::close(fd_);
    throw std::runtime_error("bind UDP 127.0.0.1:" + std::to_string(port) + ": " + std::strerror(err));
  }
  socklen_t len = sizeof(a);
  ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
  port_ = ntohs(a.sin_port);
}

UdpSocket::~UdpSocket() { ::close(fd_); }

void UdpSocket::send_to(int port, const std::string& payload) const {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<uint16_t>(port));
  if (::sendto(fd_, payload.data(), payload.size(), 0, reinterpret_cast<sockaddr*>(&a), sizeof(a)) !=
      static_cast<ssize_t>(payload.size())) {
    throw std::runtime_error("sendto 127.0.0.1:" + std::to_string(port) + ": " + std::strerror(errno));
  }
}

std::optional<std::string> UdpSocket::receive(int timeout_ms) const {
  pollfd p{fd_, POLLIN, 0};
  if (::poll(&p, 1, timeout_ms) <= 0) return std::nullopt;
  std::string buf(70000, '\0');
  ssize_t n = ::recv(fd_, buf.data(), buf.size(), 0);
  if (n < 0) return std::nullopt;
  buf.resize(static_cast<size_t>(n));
  return buf;
}

int UdpSocket::drain(int quiet_ms) const {
  int n = 0;
  while (receive(quiet_ms)) ++n;
  return n;
}

CarrierWatcher::CarrierWatcher(const std::string& netns, const std::string& ifname) : ifname_(ifname) {
  thread_ = std::thread([this, netns] { run(netns); });
  testing::poll_until([this] { return ready_.load() != 0; }, std::chrono::seconds(5), std::chrono::milliseconds(1));
  if (ready_.load() != 1) {
    stop_ = true;
    thread_.join();
    throw std::runtime_error("carrier watcher in " + netns + " did not start: " + error_);
  }
}

CarrierWatcher::~CarrierWatcher() {
  stop_ = true;
  thread_.join();
}

namespace {
struct LinkInfo {
  const char* name = nullptr;
};
int link_attr(const nlattr* attr, void* data) {
  if (mnl_attr_get_type(attr) == IFLA_IFNAME && mnl_attr_validate(attr, MNL_TYPE_NUL_STRING) >= 0) {
    static_cast<LinkInfo*>(data)->name = mnl_attr_get_str(attr);
  }
  return MNL_CB_OK;
}
}  // namespace

void CarrierWatcher::run(std::string netns) {
  try {
    // setns() moves only this thread: the rest of the test keeps the initial namespace.
    int ns = ::open(("/run/netns/" + netns).c_str(), O_RDONLY | O_CLOEXEC);
    if (ns < 0 || ::setns(ns, CLONE_NEWNET) < 0) {
      int err = errno;
      if (ns >= 0) ::close(ns);
      throw std::runtime_error("setns " + netns + ": " + std::strerror(err));
    }
    ::close(ns);
    NetlinkSocket nl(NETLINK_ROUTE, RTMGRP_LINK);
    ready_ = 1;
    std::vector<char> buf(MNL_SOCKET_BUFFER_SIZE * 4);
    while (!stop_) {
      ssize_t n = nl.recv(buf, 20);
      if (n <= 0) continue;
      int64_t t = monotonic_ns();  // stamped before any parsing (docs/protocols.md#linux-carrier-rtnetlink)
      int len = static_cast<int>(n);
      for (auto* nlh = reinterpret_cast<const nlmsghdr*>(buf.data()); mnl_nlmsg_ok(nlh, len);
           nlh = mnl_nlmsg_next(nlh, &len)) {
        if (nlh->nlmsg_type != RTM_NEWLINK) continue;
        const auto* ifi = static_cast<const ifinfomsg*>(mnl_nlmsg_get_payload(nlh));
        LinkInfo info;
        mnl_attr_parse(nlh, sizeof(*ifi), link_attr, &info);
        if (!info.name || ifname_ != info.name) continue;
        std::lock_guard lock(mutex_);
        events_.push_back({t, (ifi->ifi_flags & IFF_LOWER_UP) != 0});
      }
    }
  } catch (const std::exception& e) {
    error_ = e.what();
    ready_ = -1;
  }
}

std::vector<CarrierEvent> CarrierWatcher::events() const {
  std::lock_guard lock(mutex_);
  return events_;
}

std::optional<CarrierEvent> CarrierWatcher::wait_for_edge(bool up, int64_t since_mono_ns, int timeout_ms) const {
  std::optional<CarrierEvent> found;
  testing::poll_until(
      [&] {
        std::lock_guard lock(mutex_);
        for (const auto& e : events_) {
          if (e.mono_ns >= since_mono_ns && e.lower_up == up) found = e;
          if (found) return true;
        }
        return false;
      },
      std::chrono::milliseconds(timeout_ms), std::chrono::milliseconds(1));
  return found;
}

QemuProcess::QemuProcess(const std::vector<std::string>& args, std::string log_path) : log_path_(std::move(log_path)) {
  std::vector<std::string> argv_s = {"qemu-system-x86_64"};
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : argv_s) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_ = ::fork();
  if (pid_ < 0) throw std::runtime_error("fork: " + std::string(std::strerror(errno)));
  if (pid_ == 0) {
    int devnull = ::open("/dev/null", O_RDWR);
    int log = ::open(log_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ::dup2(devnull, 0);
    ::dup2(log, 1);
    ::dup2(log, 2);
    ::execvp(argv[0], argv.data());
    ::_exit(127);
  }
}

QemuProcess::~QemuProcess() {
  if (pid_ > 0) {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }
}

void QemuProcess::wait_for_socket(const std::string& path, int timeout_ms) const {
  int64_t end = monotonic_ns() + int64_t{timeout_ms} * 1'000'000;
  while (monotonic_ns() < end) {
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      std::ifstream in(log_path_);
      std::string log((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      throw std::runtime_error("qemu-system-x86_64 exited with status " + std::to_string(status) +
                               " (127: not installed; scripts/install-deps installs qemu-system-x86): " + log);
    }
    int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::strncpy(a.sun_path, path.c_str(), sizeof(a.sun_path) - 1);
    bool ready = false;
    // connect() succeeds as soon as the socket listens, which QEMU does before it creates the
    // netdevs; the greeting comes only from the main loop, after all of them exist.
    if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0) {
      pollfd p{fd, POLLIN, 0};
      char buf[512];
      ssize_t n = ::poll(&p, 1, 1000) == 1 ? ::recv(fd, buf, sizeof(buf), 0) : 0;
      ready = n > 0 && std::string(buf, static_cast<size_t>(n)).find("\"QMP\"") != std::string::npos;
    }
    ::close(fd);
    // This probe held QEMU's single QMP slot; QEMU accepts the next client once it sees it close.
    if (ready) return;
    // load-safe: the retry interval of a bounded wait for QEMU's QMP slot.
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // retry interval of this bounded wait
  }
  throw std::runtime_error("QEMU's QMP socket " + path + " did not appear");
}

}  // namespace ocslab::emu::test
