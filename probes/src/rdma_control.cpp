#include "ocslab/probes/rdma_control.h"
#include "ocslab/common/secret.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cerrno>

#include "ocslab/verbs/verbs.h"

namespace ocslab::probes {

namespace {

using Clock = BoundedLineReader::Clock;  // NOLINT

std::optional<uint32_t> parse_u24(std::string_view s) {
  if (s.empty() || s.size() > 8) return std::nullopt;
  uint32_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + static_cast<uint32_t>(c - '0');
  }
  if (v > 0xffffff) return std::nullopt;
  return v;
}

int ms_until(Clock::time_point t) {
  auto ms = std::chrono::ceil<std::chrono::milliseconds>(t - Clock::now()).count();
  return static_cast<int>(std::clamp<long long>(ms, 0, 60'000));
}

}  // namespace

std::string QpInfo::line() const { return fmt::format("QP {} {} {}\n", qpn, psn, verbs::gid_hex(gid)); }

std::optional<QpInfo> parse_qp_line(std::string_view line) {
  if (line.substr(0, 3) != "QP ") return std::nullopt;
  line.remove_prefix(3);
  std::string_view f[3];
  for (int i = 0; i < 3; ++i) {
    auto sp = line.find(' ');
    if ((sp == std::string_view::npos) != (i == 2)) return std::nullopt;
    f[i] = line.substr(0, sp);
    if (i < 2) line.remove_prefix(sp + 1);
  }
  auto qpn = parse_u24(f[0]), psn = parse_u24(f[1]);
  QpInfo q;
  if (!qpn || !psn || !verbs::parse_gid(std::string(f[2]), q.gid)) return std::nullopt;
  q.qpn = *qpn;
  q.psn = *psn;
  return q;
}

bool valid_control_secret(std::string_view secret) {
  return secret.size() >= 32 && secret.size() <= 256 &&
         secret.find_first_not_of("0123456789abcdefABCDEF") == std::string_view::npos;
}

std::string auth_line(const std::string& secret) { return "AUTH " + secret + "\n"; }

bool auth_line_matches(std::string_view line, const std::string& secret) {
  if (line.substr(0, 5) != "AUTH ") return false;
  return constant_time_equal(line.substr(5), secret);
}

std::pair<std::string, std::string> split_control_address(const std::string& address) {
  auto colon = address.rfind(':');
  if (colon == std::string::npos) throw Error("RDMA probe: control address '" + address + "': expected ADDRESS:PORT");
  return {address.substr(0, colon), address.substr(colon + 1)};
}

bool is_wildcard_host(std::string_view host) {
  return host.empty() || host == "0.0.0.0" || host == "::" || host == "[::]" || host == "*";
}

// -- one connection ---------------------------------------------------------------------------

RdmaControlConnection::RdmaControlConnection(int fd, BoundedLineReader reader, std::chrono::milliseconds deadline)
    : fd_(fd), reader_(std::move(reader)), deadline_(deadline) {
  timeval tv{1, 0};  // a reply is one short line: a peer that does not read it is not waited for
  ::setsockopt(fd_, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  int one = 1;
  ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

RdmaControlConnection::~RdmaControlConnection() { ::close(fd_); }

void RdmaControlConnection::send(const std::string& line) {
  if (::send(fd_, line.data(), line.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(line.size()))
    throw SystemError("RDMA probe control connection to " + peer() + ": send", errno);
}

BoundedLineReader::Status RdmaControlConnection::poll_qp(QpInfo& qp) {
  std::string line;
  auto st = reader_.poll_line(line);
  if (st == BoundedLineReader::Status::kPending) {
    if (reader_.partial() == 0) return st;
    if (!line_due_) line_due_ = Clock::now() + deadline_;
    if (Clock::now() >= *line_due_)
      throw LineError(fmt::format("{}: no complete line within {} ms; dropped", peer(), deadline_.count()));
    return st;
  }
  line_due_.reset();
  if (st == BoundedLineReader::Status::kLine) {
    auto q = parse_qp_line(line);
    if (!q) throw LineError(peer() + ": sent a line that is not a QP line");
    qp = *q;
  }
  return st;
}

QpInfo RdmaControlConnection::read_qp(Clock::time_point deadline, int cancel_fd) {
  auto line = reader_.read_line(deadline, cancel_fd);
  if (!line) throw LineError(peer() + ": closed the control connection");
  auto q = parse_qp_line(*line);
  if (!q) throw LineError(peer() + ": sent a line that is not a QP line");
  return *q;
}

// -- the server -------------------------------------------------------------------------------

RdmaControlServer::RdmaControlServer(RdmaControlServerOptions options) : options_(std::move(options)) {
  const std::string& where = options_.listen;
  if (!valid_control_secret(options_.secret))
    throw Error("RDMA probe: listen on " + where +
                ": a control secret is required (32 to 256 hex digits; the runner passes one per run)");
  auto [host, port] = split_control_address(where);
  auto port_number = parse_u24(port);
  if (!port_number || *port_number > 65535)
    throw Error("RDMA probe: listen address '" + where + "': '" + port + "' is not a port number");
  if (is_wildcard_host(host) && !options_.any_address)
    throw Error("RDMA probe: listen address '" + where +
                "' is every address of the host; give the management address (or allow it explicitly)");
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(*port_number));
  if (host == "::" || host == "[::]") throw Error("RDMA probe: listen address '" + where + "': IPv4 only");
  if (!is_wildcard_host(host) && inet_pton(AF_INET, host.c_str(), &a.sin_addr) != 1) {
    // A name resolved here: the management address the client connects to. One that resolves
    // to loopback on this host (Debian maps its own name to 127.0.1.1) would be unreachable from
    // the client: refused, naming it.
    addrinfo hints{}, *res = nullptr;
    hints.ai_family = AF_INET;
    hints.ai_socktype = SOCK_STREAM;
    if (getaddrinfo(host.c_str(), nullptr, &hints, &res) != 0 || !res)
      throw Error("RDMA probe: listen address '" + where + "': '" + host + "' does not resolve on this host");
    a.sin_addr = reinterpret_cast<const sockaddr_in*>(res->ai_addr)->sin_addr;
    freeaddrinfo(res);
    if ((ntohl(a.sin_addr.s_addr) >> 24) == 127)
      throw Error("RDMA probe: listen address '" + where + "': '" + host +
                  "' resolves to loopback on this host; give the host's management IP (spec: hosts[].mgmt)");
  }
  listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (listen_fd_ < 0) throw SystemError("RDMA probe: socket for " + where, errno);
  int one = 1;
  ::setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  socklen_t len = sizeof(a);
  if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 || ::listen(listen_fd_, 16) != 0 ||
      ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    int err = errno;
    ::close(listen_fd_);
    throw SystemError("RDMA probe: listen on " + where, err);
  }
  port_ = ntohs(a.sin_port);
}

RdmaControlServer::~RdmaControlServer() {
  for (auto& p : pending_) ::close(p.fd);
  if (listen_fd_ >= 0) ::close(listen_fd_);
}

void RdmaControlServer::drop(size_t i, const std::string& why) {
  // What the peer sent is not logged: before authentication it may be anything, after it the
  // secret was part of it.
  spdlog::warn("RDMA probe control: {}", why);
  // Counted before the close: whoever sees the connection closed also sees it counted.
  ++dropped_;
  ::close(pending_[i].fd);
  pending_.erase(pending_.begin() + static_cast<std::ptrdiff_t>(i));
}

void RdmaControlServer::accept_all() {
  for (;;) {
    int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) return;  // EAGAIN: none left (or a transient error: the next poll retries)
    std::string peer = socket_peer_name(fd);
    if (pending_.size() >= options_.max_pending) {
      if (auto i = oldest_silent()) {
        drop(*i, pending_[*i].reader.peer() + ": dropped for a newer connection (silent, too many unpaired)");
      } else {
        spdlog::warn("RDMA probe control: {}: closed at once ({} connections are pairing)", peer, pending_.size());
        ++dropped_;
        ::close(fd);
        continue;
      }
    }
    pending_.push_back(Pending{fd, BoundedLineReader(fd, peer, options_.max_line), Clock::now() + options_.deadline});
  }
}

std::optional<size_t> RdmaControlServer::oldest_silent() const {
  for (size_t i = 0; i < pending_.size(); ++i) {
    const Pending& p = pending_[i];
    if (p.authenticated || p.reader.partial() > 0) continue;
    char c;
    ssize_t n = ::recv(p.fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return i;  // nothing sent yet
  }
  return std::nullopt;
}

std::optional<RdmaControlServer::Peer> RdmaControlServer::wait_for_peer(std::chrono::milliseconds timeout,
                                                                        int cancel_fd) {
  const auto end = Clock::now() + timeout;
  std::vector<pollfd> fds;
  for (;;) {
    auto now = Clock::now();
    for (size_t i = pending_.size(); i-- > 0;) {
      if (pending_[i].due <= now)
        drop(i, fmt::format("{}: did not authenticate and send its QP within {} ms; dropped", pending_[i].reader.peer(),
                            options_.deadline.count()));
    }
    auto wake = end;
    for (const auto& p : pending_) wake = std::min(wake, p.due);
    fds.assign({{listen_fd_, POLLIN, 0}, {cancel_fd, POLLIN, 0}});
    for (const auto& p : pending_) fds.push_back({p.fd, POLLIN, 0});
    int r = ::poll(fds.data(), fds.size(), ms_until(wake));
    if (r < 0 && errno != EINTR) throw SystemError("RDMA probe control: poll", errno);
    if (cancel_fd >= 0 && (fds[1].revents & POLLIN)) return std::nullopt;
    // Connections first, from the newest: dropping one does not move the ones not yet visited.
    for (size_t k = fds.size(); k-- > 2;) {
      if (!fds[k].revents) continue;
      size_t i = k - 2;
      Pending& p = pending_[i];
      try {
        std::string line;
        for (;;) {
          auto st = p.reader.poll_line(line);
          if (st == BoundedLineReader::Status::kPending) break;
          if (st == BoundedLineReader::Status::kEof) {
            drop(i, p.reader.peer() + ": closed before pairing");
            break;
          }
          if (!p.authenticated) {
            if (!auth_line_matches(line, options_.secret)) {
              drop(i, p.reader.peer() + ": did not present the run's secret; dropped");
              break;
            }
            p.authenticated = true;
            continue;
          }
          auto qp = parse_qp_line(line);
          if (!qp) {
            drop(i, p.reader.peer() + ": sent a line that is not a QP line; dropped");
            break;
          }
          auto c = std::make_unique<RdmaControlConnection>(p.fd, std::move(p.reader), options_.deadline);
          pending_.erase(pending_.begin() + static_cast<std::ptrdiff_t>(i));
          return Peer{std::move(c), *qp};
        }
      } catch (const LineError& e) {
        drop(i, e.what());
      }
    }
    if (fds[0].revents & POLLIN) accept_all();
    if (Clock::now() >= end) return std::nullopt;
  }
}

}  // namespace ocslab::probes
