#include "ocslab/workloads/rendezvous.h"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string_view>
#include <thread>

#include "ocslab/common/error.h"
#include "ocslab/common/secret.h"

namespace ocslab::workloads {

namespace {

using Clock = std::chrono::steady_clock;

int remaining_ms(Clock::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return left < 0 ? 0 : static_cast<int>(left);
}

// Waits for fd to become readable/writable before deadline; throws naming `who`.
void wait_fd(int fd, short events, Clock::time_point deadline, const std::string& who) {
  for (;;) {
    pollfd p{fd, events, 0};
    int r = ::poll(&p, 1, remaining_ms(deadline));
    if (r > 0) return;
    if (r == 0) throw RendezvousPeerError("rendezvous: timed out waiting for " + who);
    if (errno != EINTR) throw SystemError("rendezvous: poll for " + who, errno);
  }
}

void write_all(int fd, const void* data, size_t n, Clock::time_point deadline, const std::string& who) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    wait_fd(fd, POLLOUT, deadline, who);
    ssize_t w = ::send(fd, p, n, MSG_NOSIGNAL);
    if (w < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      throw RendezvousPeerError(fmt::format("rendezvous: send to {}: {}", who, std::strerror(errno)));
    }
    p += w;
    n -= static_cast<size_t>(w);
  }
}

void read_all(int fd, void* data, size_t n, Clock::time_point deadline, const std::string& who) {
  char* p = static_cast<char*>(data);
  while (n > 0) {
    wait_fd(fd, POLLIN, deadline, who);
    ssize_t r = ::recv(fd, p, n, 0);
    if (r == 0) throw RendezvousPeerError("rendezvous: " + who + " closed the connection (did it fail? see its output)");
    if (r < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      throw RendezvousPeerError(fmt::format("rendezvous: receive from {}: {}", who, std::strerror(errno)));
    }
    p += r;
    n -= static_cast<size_t>(r);
  }
}

void send_frame(int fd, const std::string& s, Clock::time_point deadline, const std::string& who) {
  uint32_t len = htonl(static_cast<uint32_t>(s.size()));
  write_all(fd, &len, sizeof(len), deadline, who);
  write_all(fd, s.data(), s.size(), deadline, who);
}

// One frame of at most `limit` bytes, all of it before `deadline` (absolute: bytes arriving
// slowly do not extend it). The buffer grows with what arrived, not with what the length
// prefix promised.
std::string recv_frame(int fd, Clock::time_point deadline, const std::string& who, uint32_t limit) {
  char prefix[4];
  read_all(fd, prefix, sizeof(prefix), deadline, who);
  auto len = frame_length(std::string_view(prefix, sizeof(prefix)), limit);
  if (!len) {
    uint32_t n = 0;
    std::memcpy(&n, prefix, sizeof(n));
    throw RendezvousPeerError(fmt::format("rendezvous: {} sent a frame of {} bytes, more than the {} allowed (not an ocslab rank?)",
                            who, ntohl(n), limit));
  }
  std::string s;
  constexpr size_t kStep = 64 * 1024;
  while (s.size() < *len) {
    size_t at = s.size();
    s.resize(at + std::min<size_t>(kStep, *len - at));
    read_all(fd, s.data() + at, s.size() - at, deadline, who);
  }
  return s;
}

addrinfo* resolve(const std::string& host, int port, bool passive) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  if (passive) hints.ai_flags = AI_PASSIVE;
  addrinfo* res = nullptr;
  std::string p = std::to_string(port);
  int rc = ::getaddrinfo(passive ? nullptr : host.c_str(), p.c_str(), &hints, &res);
  if (rc != 0) throw Error(fmt::format("rendezvous: cannot resolve {}:{}: {}", host, port, gai_strerror(rc)));
  return res;
}

void set_nodelay(int fd) {
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

// Rank 0's listening socket on bind_host:port. "0.0.0.0" / "::" / "*" are the wildcard (only
// when asked for); anything else is resolved and must be an address of this machine.
int listen_on(const std::string& bind_host, int port, int backlog, bool& loopback) {
  const bool any = bind_host == "0.0.0.0" || bind_host == "::" || bind_host == "*";
  addrinfo* res = resolve(bind_host, port, any);
  // The wildcard: prefer IPv6 any (also accepts IPv4 on Linux), else whatever came first. A
  // name: its first address, the one the other ranks' connect() tries first too.
  addrinfo* pick = res;
  if (any) {
    for (addrinfo* a = res; a; a = a->ai_next) {
      if (a->ai_family == AF_INET6) pick = a;
    }
  }
  loopback = (pick->ai_family == AF_INET &&
              (ntohl(reinterpret_cast<const sockaddr_in*>(pick->ai_addr)->sin_addr.s_addr) >> 24) == 127) ||
             (pick->ai_family == AF_INET6 &&
              IN6_IS_ADDR_LOOPBACK(&reinterpret_cast<const sockaddr_in6*>(pick->ai_addr)->sin6_addr));
  int fd = ::socket(pick->ai_family, pick->ai_socktype | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    int e = errno;
    ::freeaddrinfo(res);
    throw SystemError("rendezvous: socket", e);
  }
  int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (any && pick->ai_family == AF_INET6) {
    int zero = 0;
    ::setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));
  }
  int rc = ::bind(fd, pick->ai_addr, pick->ai_addrlen);
  int err = errno;
  ::freeaddrinfo(res);
  if (rc != 0) {
    ::close(fd);
    if (err == EADDRNOTAVAIL) {
      throw Error(fmt::format("rendezvous: rank 0 cannot listen on {}:{}: {} is not an address of this machine "
                              "(the rendezvous address must name rank 0's host; --rendezvous-listen ADDR binds "
                              "another)",
                              bind_host, port, bind_host));
    }
    throw SystemError(fmt::format("rendezvous: rank 0 cannot listen on {}:{}", bind_host, port), err);
  }
  ::listen(fd, backlog);
  return fd;
}

std::string peer_address(const sockaddr_storage& from) {
  char ip[INET6_ADDRSTRLEN] = "?";
  if (from.ss_family == AF_INET) {
    ::inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(&from)->sin_addr, ip, sizeof(ip));
  } else if (from.ss_family == AF_INET6) {
    ::inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(&from)->sin6_addr, ip, sizeof(ip));
  }
  std::string_view shown = ip;
  if (shown.rfind("::ffff:", 0) == 0) shown.remove_prefix(7);  // an IPv4 peer on the dual-stack socket
  return std::string(shown);
}

}  // namespace

std::optional<uint32_t> frame_length(std::string_view prefix, uint32_t limit) {
  if (prefix.size() != 4) return std::nullopt;
  uint32_t len = 0;
  std::memcpy(&len, prefix.data(), sizeof(len));
  len = ntohl(len);
  if (len > limit) return std::nullopt;
  return len;
}

std::optional<RendezvousHello> parse_rendezvous_hello(std::string_view frame) {
  auto number = [&](std::string_view key, int& out) {
    if (frame.substr(0, key.size()) != key) return false;
    frame.remove_prefix(key.size());
    size_t digits = 0;
    while (digits < frame.size() && digits < 8 && frame[digits] >= '0' && frame[digits] <= '9') ++digits;
    if (digits == 0) return false;
    out = 0;
    for (size_t i = 0; i < digits; ++i) out = out * 10 + (frame[i] - '0');
    frame.remove_prefix(digits);
    return true;
  };
  RendezvousHello h;
  if (!number("ocslab-collbench 1 rank=", h.rank) || !number(" nranks=", h.nranks)) return std::nullopt;
  constexpr std::string_view kAuth = " auth=";
  if (frame.substr(0, kAuth.size()) == kAuth) {
    frame.remove_prefix(kAuth.size());
    size_t n = 0;
    while (n < frame.size() && n <= kMaxTokenChars &&
           ((frame[n] >= '0' && frame[n] <= '9') || (frame[n] >= 'a' && frame[n] <= 'f')))
      ++n;
    if (n == 0 || n > kMaxTokenChars) return std::nullopt;
    h.auth = std::string(frame.substr(0, n));
    frame.remove_prefix(n);
  }
  constexpr std::string_view kTag = " tag=";
  if (frame.substr(0, kTag.size()) != kTag) return std::nullopt;
  frame.remove_prefix(kTag.size());
  if (frame.empty() || frame.find_first_of(std::string_view("\n\0", 2)) != std::string_view::npos) return std::nullopt;
  h.tag = std::string(frame);
  return h;
}

std::vector<std::string> unpack_all_gather(std::string_view packed, int nranks, const std::string& who) {
  std::vector<std::string> all(static_cast<size_t>(std::max(nranks, 0)));
  size_t pos = 0;
  for (auto& b : all) {
    uint32_t len = 0;
    if (pos + sizeof(len) > packed.size()) throw RendezvousPeerError("rendezvous: short all-gather reply from " + who);
    std::memcpy(&len, packed.data() + pos, sizeof(len));
    len = ntohl(len);
    pos += sizeof(len);
    if (len > packed.size() - pos) throw RendezvousPeerError("rendezvous: short all-gather reply from " + who);
    b = std::string(packed.substr(pos, len));
    pos += len;
  }
  if (pos != packed.size()) throw RendezvousPeerError("rendezvous: all-gather reply from " + who + " has bytes past its last rank");
  return all;
}

std::pair<std::string, int> split_host_port(const std::string& address) {
  auto colon = address.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == address.size()) {
    throw Error("bad rendezvous address '" + address + "' (want HOST:PORT)");
  }
  std::string host = address.substr(0, colon);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  int port = 0;
  try {
    size_t used = 0;
    port = std::stoi(address.substr(colon + 1), &used);
    if (used != address.size() - colon - 1) port = -1;
  } catch (const std::exception&) {
    port = -1;
  }
  if (port < 1 || port > 65535) throw Error("bad port in rendezvous address '" + address + "'");
  return {host, port};
}

Rendezvous::Rendezvous(int rank, int nranks, const std::string& address, const std::string& tag,
                       std::chrono::milliseconds timeout, RendezvousOptions options)
    : rank_(rank), nranks_(nranks), address_(address), timeout_(timeout) {
  if (nranks < 1 || rank < 0 || rank >= nranks) throw Error(fmt::format("rank {} outside 0..{}", rank, nranks - 1));
  auto [host, port] = split_host_port(address);
  const std::string& token = options.token;
  if (token.size() > kMaxTokenChars || token.find_first_not_of("0123456789abcdef") != std::string::npos) {
    throw Error(fmt::format("rendezvous token: want 1 to {} lowercase hex digits", kMaxTokenChars));
  }
  auto deadline = Clock::now() + timeout;
  if (nranks == 1) return;
  if (rank == 0) {
    listen_for_ranks(options.listen.empty() ? host : options.listen, port);
    accept_ranks(port, tag, options, deadline);
    return;
  }
  std::string hello =
      token.empty() ? fmt::format("ocslab-collbench 1 rank={} nranks={} tag={}", rank, nranks, tag)
                    : fmt::format("ocslab-collbench 1 rank={} nranks={} auth={} tag={}", rank, nranks, token, tag);
  join(host, port, hello, deadline);
}

void Rendezvous::listen_for_ranks(const std::string& bind_host, int port) {
  bool loopback = false;
  listen_fd_ = listen_on(bind_host, port, nranks_, loopback);
  if (loopback && bind_host != "localhost" && bind_host.rfind("127.", 0) != 0 && bind_host != "::1") {
    notes_.push_back(
        fmt::format("{} is a loopback address on this host: ranks on other hosts cannot reach port {} "
                    "(give rank 0's IP in --rendezvous, or --rendezvous-listen)",
                    bind_host, port));
  }
}

// Rank 0, while the ranks join: a connection whose hello has not arrived whole yet. Every
// pending connection is read as its bytes come (one poll over all of them), so a stranger that
// sends nothing, or a byte at a time, holds up no rank that sends its hello at once.
struct Rendezvous::PendingHello {
  int fd = -1;
  std::string peer_ip;
  Clock::time_point deadline;  // hello_timeout after the accept with a token, else the rendezvous'
  std::string bytes;           // what arrived so far: the 4-byte length, then the hello
  std::optional<uint32_t> length;  // the hello's length, once its prefix arrived and was checked
};

void Rendezvous::accept_ranks(int port, const std::string& tag, const RendezvousOptions& options,
                              std::chrono::steady_clock::time_point deadline) {
  peers_.assign(static_cast<size_t>(nranks_), -1);
  std::vector<PendingHello> pending;
  try {
    for (int joined = 1; joined < nranks_;) {
      std::vector<pollfd> fds{{listen_fd_, POLLIN, 0}};
      Clock::time_point wake = deadline;
      for (const auto& p : pending) {
        fds.push_back({p.fd, POLLIN, 0});
        wake = std::min(wake, p.deadline);
      }
      int r = ::poll(fds.data(), fds.size(), remaining_ms(wake));
      if (r < 0 && errno != EINTR) throw SystemError("rendezvous: poll", errno);
      if (r == 0 && Clock::now() >= deadline) {
        throw RendezvousPeerError(fmt::format("rendezvous: timed out waiting for {} more rank(s) to join on port {} "
                                              "({} of {} joined)",
                                              nranks_ - joined, port, joined, nranks_));
      }
      // The pending hellos first (fds[1..] are pending[0..] as polled), newest last.
      for (size_t i = pending.size(); i-- > 0;) {
        const bool readable = r > 0 && (fds[i + 1].revents & (POLLIN | POLLHUP | POLLERR));
        std::optional<bool> done = read_hello(pending[i], readable, tag, options);
        if (!done) continue;
        if (*done) ++joined;
        pending.erase(pending.begin() + static_cast<std::ptrdiff_t>(i));
      }
      if (r > 0 && (fds[0].revents & POLLIN)) accept_one(pending, options, deadline);
    }
  } catch (...) {
    for (const auto& p : pending) ::close(p.fd);
    for (int fd : peers_) {
      if (fd >= 0) ::close(fd);
    }
    ::close(listen_fd_);
    listen_fd_ = -1;
    throw;
  }
  // Strangers still sending when the last rank joined: nothing more to wait for.
  for (const auto& p : pending) {
    ::close(p.fd);
    notes_.push_back(fmt::format("dropped a connection from {}: no hello before every rank had joined", p.peer_ip));
  }
}

void Rendezvous::accept_one(std::vector<PendingHello>& pending, const RendezvousOptions& options,
                            std::chrono::steady_clock::time_point deadline) {
  sockaddr_storage from{};
  socklen_t len = sizeof(from);
  int fd = ::accept4(listen_fd_, reinterpret_cast<sockaddr*>(&from), &len, SOCK_CLOEXEC | SOCK_NONBLOCK);
  if (fd < 0) {
    if (errno == EINTR || errno == ECONNABORTED || errno == EAGAIN) return;
    throw SystemError("rendezvous: accept", errno);
  }
  std::string peer_ip = peer_address(from);
  // A bound on what strangers can hold: beyond it a new connection is closed at once, and
  // every connection already waiting (a real rank's among them) keeps its place.
  if (pending.size() >= kMaxPendingHellos) {
    ::close(fd);
    notes_.push_back(fmt::format("dropped a connection from {}: {} connections are already sending their hellos",
                                 peer_ip, kMaxPendingHellos));
    return;
  }
  set_nodelay(fd);
  // With a token a stranger cannot end the rendezvous: whatever it sends (nothing, too
  // much, too slowly, a wrong token) costs at most hello_timeout, then it is dropped.
  const auto hello_deadline =
      options.token.empty() ? deadline : std::min(deadline, Clock::now() + options.hello_timeout);
  pending.push_back({fd, peer_ip, hello_deadline, {}, std::nullopt});
}

std::optional<bool> Rendezvous::read_hello(PendingHello& p, bool readable, const std::string& tag,
                                           const RendezvousOptions& options) {
  const std::string who = fmt::format("a rank connecting from {}", p.peer_ip);
  try {
    if (readable) {
      char buf[kMaxHelloFrame + 4];
      const size_t want = p.length ? 4 + *p.length - p.bytes.size() : 4 - p.bytes.size();
      ssize_t n = ::recv(p.fd, buf, std::min(want, sizeof(buf)), MSG_DONTWAIT);
      if (n == 0) throw RendezvousPeerError("rendezvous: " + who + " closed the connection (did it fail? see its output)");
      if (n < 0 && errno != EAGAIN && errno != EINTR)
        throw RendezvousPeerError(fmt::format("rendezvous: receive from {}: {}", who, std::strerror(errno)));
      if (n > 0) p.bytes.append(buf, static_cast<size_t>(n));
    }
    if (!p.length && p.bytes.size() == 4) {
      p.length = frame_length(p.bytes, kMaxHelloFrame);
      if (!p.length) {
        uint32_t announced = 0;
        std::memcpy(&announced, p.bytes.data(), sizeof(announced));
        throw RendezvousPeerError(
            fmt::format("rendezvous: {} sent a frame of {} bytes, more than the {} allowed (not an ocslab rank?)", who,
                        ntohl(announced), kMaxHelloFrame));
      }
    }
    if (!(p.length && p.bytes.size() == 4 + *p.length)) {
      if (Clock::now() < p.deadline) return std::nullopt;  // more to come
      throw RendezvousPeerError("rendezvous: timed out waiting for " + who);
    }
  } catch (const Error& e) {
    ::close(p.fd);
    if (options.token.empty()) throw;  // without a token a bad hello ends the rendezvous, as before
    notes_.push_back(fmt::format("dropped a connection from {}: {}", p.peer_ip, e.what()));
    return false;
  }
  return take_hello(p.fd, p.bytes.substr(4), p.peer_ip, tag, options);
}

bool Rendezvous::take_hello(int fd, const std::string& msg, const std::string& peer_ip, const std::string& tag,
                            const RendezvousOptions& options) {
  const std::string& token = options.token;
  const std::string who = fmt::format("a rank connecting from {}", peer_ip);
  // Replies are a few bytes on a fresh connection: they go out at once, within a short bound.
  const auto reply_deadline = Clock::now() + options.hello_timeout;
  auto hello_in = parse_rendezvous_hello(msg);
  if (!token.empty() && !(hello_in && constant_time_equal(hello_in->auth, token))) {
    if (hello_in) {  // a rank of another run, or one started without the token: say why
      try {
        send_frame(fd, "error: not authenticated: this rendezvous needs the run's token", reply_deadline, who);
      } catch (const Error&) {
      }
    }
    ::close(fd);
    notes_.push_back(fmt::format("dropped a connection from {}: {}", peer_ip,
                                 hello_in ? "wrong or missing token" : "not an ocslab-collbench hello"));
    return false;
  }
  std::string reply = refusal(hello_in, msg, peer_ip, tag, token);
  if (!reply.empty()) {
    try {
      send_frame(fd, reply, reply_deadline, who);
    } catch (const Error&) {
    }
    ::close(fd);
    throw Error("rendezvous: " + reply.substr(7));
  }
  send_frame(fd, "ok", reply_deadline, who);
  peers_[static_cast<size_t>(hello_in->rank)] = fd;
  return true;
}

std::string Rendezvous::refusal(const std::optional<RendezvousHello>& hello_in, const std::string& msg,
                                const std::string& peer_ip, const std::string& tag, const std::string& token) const {
  if (!hello_in) return "error: not an ocslab-collbench hello: '" + msg.substr(0, 80) + "'";
  int r = hello_in->rank, n = hello_in->nranks;
  if (token.empty() && !hello_in->auth.empty())
    return fmt::format("error: rank {} from {} carries a token, rank 0 runs without one", r, peer_ip);
  if (n != nranks_)
    return fmt::format("error: rank {} from {} says the world has {} ranks, rank 0 has {}", r, peer_ip, n, nranks_);
  if (r < 1 || r >= nranks_) return fmt::format("error: rank {} from {} is outside 1..{}", r, peer_ip, nranks_ - 1);
  if (peers_[static_cast<size_t>(r)] >= 0)
    return fmt::format("error: rank {} joined twice (again from {})", r, peer_ip);
  if (tag != hello_in->tag)
    return fmt::format("error: rank {} from {} runs '{}', rank 0 runs '{}'", r, peer_ip, hello_in->tag, tag);
  return "";
}

void Rendezvous::join(const std::string& host, int port, const std::string& hello,
                      std::chrono::steady_clock::time_point deadline) {
  // Connect, retrying while rank 0 is not listening yet.
  std::string who = "rank 0 at " + address_;
  int fd = -1;
  std::string last_error;
  while (fd < 0) {
    addrinfo* res = nullptr;
    try {
      res = resolve(host, port, false);
    } catch (const Error& e) {
      last_error = e.what();
    }
    for (addrinfo* a = res; a && fd < 0; a = a->ai_next) {
      int s = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, 0);
      if (s < 0) continue;
      if (::connect(s, a->ai_addr, a->ai_addrlen) == 0) {
        fd = s;
      } else {
        last_error = std::strerror(errno);
        ::close(s);
      }
    }
    if (res) ::freeaddrinfo(res);
    if (fd >= 0) break;
    if (Clock::now() >= deadline) {
      throw RendezvousPeerError(fmt::format("rendezvous: rank {} could not reach {} within {} ms: {}", rank_, who, timeout_.count(),
                              last_error));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  set_nodelay(fd);
  peers_.push_back(fd);
  send_frame(fd, hello, deadline, who);
  std::string reply = recv_frame(fd, deadline, who, kMaxHelloFrame);
  if (reply != "ok") {
    ::close(fd);
    peers_.clear();
    throw Error("rendezvous: " + who + " refused rank " + std::to_string(rank_) + ": " + reply);
  }
}

Rendezvous::~Rendezvous() {
  for (int fd : peers_) {
    if (fd >= 0) ::close(fd);
  }
  if (listen_fd_ >= 0) ::close(listen_fd_);
}

std::vector<std::string> Rendezvous::all_gather(const std::string& blob) {
  std::vector<std::string> all(static_cast<size_t>(nranks_));
  if (nranks_ == 1) {
    all[0] = blob;
    return all;
  }
  auto deadline = Clock::now() + timeout_;
  if (rank_ == 0) {
    all[0] = blob;
    for (int r = 1; r < nranks_; ++r) {
      all[static_cast<size_t>(r)] =
          recv_frame(peers_[static_cast<size_t>(r)], deadline, fmt::format("rank {}", r), kMaxFrame);
    }
    std::string packed;
    for (const auto& b : all) {
      uint32_t len = htonl(static_cast<uint32_t>(b.size()));
      packed.append(reinterpret_cast<const char*>(&len), sizeof(len));
      packed += b;
    }
    for (int r = 1; r < nranks_; ++r)
      send_frame(peers_[static_cast<size_t>(r)], packed, deadline, fmt::format("rank {}", r));
    return all;
  }
  std::string who = "rank 0 at " + address_;
  send_frame(peers_[0], blob, deadline, who);
  std::string packed = recv_frame(peers_[0], deadline, who, kMaxFrame);
  return unpack_all_gather(packed, nranks_, who);
}

}  // namespace ocslab::workloads
