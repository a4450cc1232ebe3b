#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "ocslab/ocsctl/errors.h"
#include "ocslab/ocsctl/stream.h"

namespace ocslab::ocs {

namespace {

// Rounds up: a read must never give up before its deadline has really passed.
int poll_ms(Deadline deadline) {
  auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return left < 0 ? 0 : static_cast<int>(std::min<long long>(left, 1 << 30));
}

class TcpStream final : public Stream {
 public:
  TcpStream(int fd, std::string what) : fd_(fd), what_(std::move(what)) {}
  ~TcpStream() override { close(); }

  void write(std::string_view data) override {
    while (!data.empty()) {
      ssize_t n = ::send(fd_, data.data(), data.size(), MSG_NOSIGNAL);
      if (n < 0) {
        if (errno == EINTR) continue;
        if (errno == EAGAIN) {
          pollfd p{fd_, POLLOUT, 0};
          ::poll(&p, 1, 1000);
          continue;
        }
        throw ConnectionError("write to " + what_ + " failed: " + std::strerror(errno));
      }
      data.remove_prefix(static_cast<size_t>(n));
    }
  }

  std::string read_some(Deadline deadline) override {
    if (fd_ < 0) throw ConnectionError(what_ + " is closed");
    for (;;) {
      pollfd p{fd_, POLLIN, 0};
      int r = ::poll(&p, 1, poll_ms(deadline));
      if (r < 0) {
        if (errno == EINTR) continue;
        throw ConnectionError("poll on " + what_ + " failed: " + std::strerror(errno));
      }
      if (r == 0) return {};
      char buf[16384];
      ssize_t n = ::recv(fd_, buf, sizeof(buf), 0);
      if (n < 0) {
        if (errno == EINTR || errno == EAGAIN) continue;
        throw ConnectionError("read from " + what_ + " failed: " + std::strerror(errno));
      }
      if (n == 0) throw ConnectionError("connection closed by " + what_);
      return std::string(buf, static_cast<size_t>(n));
    }
  }

  void close() override {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

  std::string describe() const override { return what_; }

 private:
  int fd_;
  std::string what_;
};

}  // namespace

std::unique_ptr<Stream> tcp_connect(const std::string& host, int port,
                                    std::chrono::milliseconds connect_timeout) {
  const std::string what = "tcp " + host + ":" + std::to_string(port);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  int rc = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &res);
  if (rc != 0) throw ConnectionError("cannot resolve " + what + ": " + gai_strerror(rc));
  std::unique_ptr<addrinfo, decltype(&freeaddrinfo)> guard(res, freeaddrinfo);
  Deadline deadline = Clock::now() + connect_timeout;
  std::string last_error = "no address";
  for (addrinfo* ai = res; ai; ai = ai->ai_next) {
    int fd = ::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, ai->ai_protocol);
    if (fd < 0) {
      last_error = std::strerror(errno);
      continue;
    }
    int err = 0;
    if (::connect(fd, ai->ai_addr, ai->ai_addrlen) < 0) {
      err = errno;
      if (err == EINPROGRESS) {
        pollfd p{fd, POLLOUT, 0};
        int r = ::poll(&p, 1, poll_ms(deadline));
        if (r == 0) {
          err = ETIMEDOUT;
        } else {
          socklen_t len = sizeof(err);
          ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
        }
      }
    }
    if (err != 0) {
      last_error = std::strerror(err);
      ::close(fd);
      continue;
    }
    int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    ::setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
    return std::make_unique<TcpStream>(fd, what);
  }
  throw ConnectionError("cannot connect to " + what + ": " + last_error);
}

}  // namespace ocslab::ocs
