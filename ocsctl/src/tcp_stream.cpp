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

// A blocking socket whose reads wait in recv() itself, bounded by SO_RCVTIMEO: one system
// call per read instead of poll() + recv(), which is most of what a driver round trip costs
// beyond the network. The timeout is only re-set when the time left is shorter than the one
// in force, so a read never waits past its deadline and steady traffic sets it once.
class TcpStream final : public Stream {
 public:
  TcpStream(int fd, std::string what) : fd_(fd), what_(std::move(what)) {
    int flags = ::fcntl(fd_, F_GETFL);
    ::fcntl(fd_, F_SETFL, flags & ~O_NONBLOCK);
    timeval tv{kSendTimeoutS, 0};  // a peer that stops reading must not hang a write forever
    ::setsockopt(fd_, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  }
  ~TcpStream() override { close(); }

  void write(std::string_view data) override {
    if (fd_ < 0) throw ConnectionError(what_ + " is closed");
    while (!data.empty()) {
      ssize_t n = ::send(fd_, data.data(), data.size(), MSG_NOSIGNAL);
      if (n < 0) {
        if (errno == EINTR) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) {
          throw ConnectionError("write to " + what_ + " stalled for " + std::to_string(kSendTimeoutS) + " s");
        }
        throw ConnectionError("write to " + what_ + " failed: " + std::strerror(errno));
      }
      data.remove_prefix(static_cast<size_t>(n));
    }
  }

  std::string read_some(Deadline deadline) override {
    std::string out;
    read_append(deadline, out);
    return out;
  }

  size_t read_append(Deadline deadline, std::string& out) override { return read_append(deadline, out, Clock::now()); }

  size_t read_append(Deadline deadline, std::string& out, Clock::time_point now) override {
    if (fd_ < 0) throw ConnectionError(what_ + " is closed");
    char buf[16384];
    for (bool first = true;; first = false) {
      // Every system call costs here: the caller's clock reading serves the first try.
      auto left = std::chrono::ceil<std::chrono::microseconds>(deadline - (first ? now : Clock::now()));
      int flags = 0;
      if (left.count() <= 0) {
        flags = MSG_DONTWAIT;  // deadline passed: take only what is already there
      } else if (rcv_timeout_.count() == 0 || rcv_timeout_ > left) {
        set_rcv_timeout(left);
      }
      ssize_t n = ::recv(fd_, buf, sizeof(buf), flags);
      if (n > 0) {
        out.append(buf, static_cast<size_t>(n));
        return static_cast<size_t>(n);
      }
      if (n == 0) throw ConnectionError("connection closed by " + what_);
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        if (flags == MSG_DONTWAIT) return 0;
        continue;  // SO_RCVTIMEO expired: recompute what is left
      }
      throw ConnectionError("read from " + what_ + " failed: " + std::strerror(errno));
    }
  }

  void close() override {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

  std::string describe() const override { return what_; }

 private:
  static constexpr int kSendTimeoutS = 30;

  // Long waits are rounded down to whole seconds so that the next call's deadline (usually
  // "now + the same reply timeout") is not shorter and needs no new setsockopt.
  // Out of line: it runs once per connection and reply timeout, not per request, and its
  // code need not sit between the lines every request runs.
  [[gnu::noinline, gnu::cold]] void set_rcv_timeout(std::chrono::microseconds left) {
    using namespace std::chrono;
    microseconds t = left > seconds(2) ? duration_cast<microseconds>(floor<seconds>(left)) : left;
    timeval tv{static_cast<time_t>(t.count() / 1000000), static_cast<suseconds_t>(t.count() % 1000000)};
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    rcv_timeout_ = t;
  }

  int fd_;
  std::string what_;
  std::chrono::microseconds rcv_timeout_{0};
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
