#include "ocslab/common/bounded_line.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace ocslab {

std::string socket_peer_name(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof(ss);
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return "?";
  char text[INET6_ADDRSTRLEN] = {0};
  if (ss.ss_family == AF_INET) {
    const auto* a = reinterpret_cast<const sockaddr_in*>(&ss);
    ::inet_ntop(AF_INET, &a->sin_addr, text, sizeof(text));
    return fmt::format("{}:{}", text, ntohs(a->sin_port));
  }
  if (ss.ss_family == AF_INET6) {
    const auto* a = reinterpret_cast<const sockaddr_in6*>(&ss);
    ::inet_ntop(AF_INET6, &a->sin6_addr, text, sizeof(text));
    return fmt::format("[{}]:{}", text, ntohs(a->sin6_port));
  }
  return ss.ss_family == AF_UNIX ? "unix socket" : "?";
}

BoundedLineReader::BoundedLineReader(int fd, std::string peer, size_t max_line)
    : fd_(fd), peer_(std::move(peer)), max_line_(std::max<size_t>(1, max_line)) {}

bool BoundedLineReader::take_line(std::string& line) {
  auto nl = buffer_.find('\n');
  if (nl == std::string::npos) {
    if (buffer_.size() > max_line_)
      throw LineError(fmt::format("{}: line longer than {} bytes; dropped", peer_, max_line_));
    return false;
  }
  if (nl > max_line_) throw LineError(fmt::format("{}: line longer than {} bytes; dropped", peer_, max_line_));
  line.assign(buffer_, 0, nl);
  buffer_.erase(0, nl + 1);
  return true;
}

BoundedLineReader::Status BoundedLineReader::poll_line(std::string& line) {
  if (take_line(line)) return Status::kLine;
  // Never more than one byte past the limit: the buffer stays within max_line + 1.
  char buf[4096];
  size_t want = std::min(sizeof(buf), max_line_ + 1 - buffer_.size());
  for (;;) {
    ssize_t n = ::recv(fd_, buf, want, MSG_DONTWAIT);
    if (n == 0) return Status::kEof;
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return Status::kPending;
      throw LineError(fmt::format("{}: recv: {}", peer_, std::strerror(errno)));
    }
    buffer_.append(buf, static_cast<size_t>(n));
    return take_line(line) ? Status::kLine : Status::kPending;
  }
}

std::optional<std::string> BoundedLineReader::read_line(Clock::time_point deadline, int cancel_fd) {
  std::string line;
  for (;;) {
    switch (poll_line(line)) {
      case Status::kLine:
        return line;
      case Status::kEof:
        return std::nullopt;
      case Status::kPending:
        break;
    }
    auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) throw LineError(fmt::format("{}: no complete line within the deadline; dropped", peer_));
    pollfd p[2] = {{fd_, POLLIN, 0}, {cancel_fd, POLLIN, 0}};
    int r = ::poll(p, cancel_fd >= 0 ? 2 : 1, static_cast<int>(std::min<long long>(left, 60'000)));
    if (r < 0 && errno != EINTR) throw LineError(fmt::format("{}: poll: {}", peer_, std::strerror(errno)));
    if (cancel_fd >= 0 && (p[1].revents & POLLIN)) throw LineError(fmt::format("{}: read cancelled", peer_));
  }
}

}  // namespace ocslab
