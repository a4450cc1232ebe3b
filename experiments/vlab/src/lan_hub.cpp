#include "ocslab/vlab/lan_hub.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>

#include "ocslab/common/error.h"

namespace ocslab::vlab {

namespace {
sockaddr_in loopback(int port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<uint16_t>(port));
  return a;
}
}  // namespace

LanHub::LanHub(std::vector<HubPort> ports) : ports_(std::move(ports)) {}

LanHub::~LanHub() { stop(); }

void LanHub::start() {
  try {
    for (const auto& p : ports_) {
      int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
      if (fd < 0) throw SystemError("management LAN: socket", errno);
      fds_.push_back(fd);
      sockaddr_in a = loopback(p.hub_port);
      if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
        throw SystemError("management LAN: bind 127.0.0.1:" + std::to_string(p.hub_port), errno);
      }
    }
    wake_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (wake_fd_ < 0) throw SystemError("management LAN: eventfd", errno);
  } catch (...) {
    stop();
    throw;
  }
  thread_ = std::thread([this] { run(); });
}

void LanHub::stop() {
  if (thread_.joinable()) {
    stop_ = true;
    uint64_t one = 1;
    [[maybe_unused]] ssize_t n = ::write(wake_fd_, &one, sizeof(one));
    thread_.join();
  }
  for (int fd : fds_) ::close(fd);
  fds_.clear();
  if (wake_fd_ >= 0) ::close(wake_fd_);
  wake_fd_ = -1;
}

void LanHub::run() {
  std::vector<pollfd> pfds;
  for (int fd : fds_) pfds.push_back({fd, POLLIN, 0});
  pfds.push_back({wake_fd_, POLLIN, 0});
  char frame[65536];
  while (!stop_) {
    if (::poll(pfds.data(), pfds.size(), -1) < 0) continue;  // EINTR
    for (size_t i = 0; i < fds_.size(); ++i) {
      if (!(pfds[i].revents & POLLIN)) continue;
      for (;;) {
        ssize_t n = ::recv(fds_[i], frame, sizeof(frame), 0);
        if (n <= 0) break;
        ++frames_;
        // A hub: every other host gets the frame (a few hosts; no learning needed).
        for (size_t j = 0; j < fds_.size(); ++j) {
          if (j == i) continue;
          sockaddr_in to = loopback(ports_[j].qemu_port);
          ::sendto(fds_[j], frame, static_cast<size_t>(n), 0, reinterpret_cast<sockaddr*>(&to), sizeof(to));
        }
      }
    }
  }
}

}  // namespace ocslab::vlab
