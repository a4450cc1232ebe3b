// File descriptors as an ocs::Stream, for tests and benchmarks that talk to an agent or a peer
// over a socketpair, a Unix socket or two pipes instead of SSH. Header only: it needs libocs's
// Stream and ConnectionError and nothing of ocslab_testing's.
#pragma once

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <string_view>

#include "ocslab/ocsctl/errors.h"
#include "ocslab/ocsctl/stream.h"

namespace ocslab::testing {

class FdStream final : public ocs::Stream {
 public:
  // A connected socket: read and written through one descriptor (send with MSG_NOSIGNAL).
  explicit FdStream(int socket_fd, std::string what = "socket") : FdStream(socket_fd, socket_fd, std::move(what)) {}
  // Reads from in_fd, writes to out_fd (two pipes); closes both.
  FdStream(int in_fd, int out_fd, std::string what = "fd stream") : in_(in_fd), out_(out_fd), what_(std::move(what)) {}
  ~FdStream() override { close(); }
  void write(std::string_view d) override {
    while (!d.empty()) {
      ssize_t n = in_ == out_ ? ::send(out_, d.data(), d.size(), MSG_NOSIGNAL) : ::write(out_, d.data(), d.size());
      if (n <= 0) throw ocs::ConnectionError(what_ + ": write failed");
      d.remove_prefix(static_cast<size_t>(n));
    }
  }
  std::string read_some(ocs::Deadline deadline) override {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - ocs::Clock::now()).count();
    pollfd p{in_, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(std::max<long long>(left, 0))) <= 0) return {};
    std::string buf(size_t{1} << 16, '\0');
    ssize_t n = ::read(in_, buf.data(), buf.size());
    if (n <= 0) throw ocs::ConnectionError(what_ + " closed");
    buf.resize(static_cast<size_t>(n));
    return buf;
  }
  void close() override {
    if (in_ >= 0 && in_ != out_) ::close(in_);
    if (out_ >= 0) ::close(out_);
    in_ = out_ = -1;
  }
  std::string describe() const override { return what_; }

 private:
  int in_, out_;
  std::string what_;
};

}  // namespace ocslab::testing
