// The RDMA probe's control connection: where the client and the server exchange queue-pair
// numbers over TCP on the management network. Kept apart from the verbs code so that it can be
// tested, and fuzzed, on a machine without an RDMA device.
//
// The conversation: the client connects and sends "AUTH <secret>\n" then "QP <qpn> <psn> <gid>\n";
// the server answers with its own QP line. Later QP lines on the same connection re-pair (after
// a QP error). The secret is the run's, handed to both probes over the SSH-authenticated agent
// sessions; the server compares it in constant time and closes a connection that does not
// present it first, answering nothing. Every line is at most kRdmaControlMaxLine bytes and must
// be complete by an absolute deadline (for a new connection: authentication and the first QP
// line together, counted from accept), or the connection is dropped.
#pragma once

#include <infiniband/verbs.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ocslab/common/bounded_line.h"

namespace ocslab::probes {

inline constexpr size_t kRdmaControlMaxLine = 4096;
inline constexpr std::chrono::milliseconds kRdmaControlDeadline{5000};

// One line "QP <qpn> <psn> <gid>": what a peer needs to pair its RC QP with ours. qpn and psn
// are 24-bit decimals, gid 32 hex digits.
struct QpInfo {
  uint32_t qpn = 0, psn = 0;
  ibv_gid gid{};
  std::string line() const;  // with its '\n'
};
// The line without its '\n'; nullopt for anything else (extra fields, signs, out of range).
std::optional<QpInfo> parse_qp_line(std::string_view line);

// A usable secret: 32 to 256 hex digits (the runner's are 64: 32 random bytes).
bool valid_control_secret(std::string_view secret);
std::string auth_line(const std::string& secret);  // "AUTH <secret>\n"
// Whether `line` (without '\n') is "AUTH <secret>" for this secret; constant time in the secret.
bool auth_line_matches(std::string_view line, const std::string& secret);

// "HOST:PORT" at its last ':' (throws Error naming it without one).
std::pair<std::string, std::string> split_control_address(const std::string& address);
// "", "0.0.0.0", "::", "[::]", "*": a listen host meaning every address.
bool is_wildcard_host(std::string_view host);

// One control connection (either side); closes its socket.
class RdmaControlConnection {
 public:
  // Takes the socket and the reader over it (with whatever it buffered); `deadline`: how long a
  // line may take from its first byte.
  RdmaControlConnection(int fd, BoundedLineReader reader, std::chrono::milliseconds deadline);
  ~RdmaControlConnection();
  RdmaControlConnection(const RdmaControlConnection&) = delete;
  RdmaControlConnection& operator=(const RdmaControlConnection&) = delete;

  int fd() const { return fd_; }
  const std::string& peer() const { return reader_.peer(); }
  size_t partial() const { return reader_.partial(); }  // bytes of an incomplete line
  // Throws SystemError when the line cannot be sent whole (without blocking past SO_SNDTIMEO).
  void send(const std::string& line);

  // Non-blocking (server, on POLLIN or while a line is incomplete): kLine with `qp` set; kPending
  // while a line is incomplete; kEof when the peer closed. Throws LineError for a line over the
  // limit, one not complete within the deadline of its first byte, or one that is not a QP line.
  BoundedLineReader::Status poll_qp(QpInfo& qp);

  // Blocking (client): the peer's next QP line by `deadline`; throws LineError on EOF, the
  // deadline, a bad line or `cancel_fd` readable.
  QpInfo read_qp(BoundedLineReader::Clock::time_point deadline, int cancel_fd);

 private:
  int fd_;
  BoundedLineReader reader_;
  std::chrono::milliseconds deadline_;
  std::optional<BoundedLineReader::Clock::time_point> line_due_;
};

struct RdmaControlServerOptions {
  std::string listen;        // ADDRESS:PORT; port 0 picks a free one (tests)
  bool any_address = false;  // allow a wildcard ADDRESS (every interface); refused otherwise
  std::string secret;        // valid_control_secret
  size_t max_line = kRdmaControlMaxLine;
  std::chrono::milliseconds deadline = kRdmaControlDeadline;
  // Connections not yet paired. When all are taken, the oldest silent one (nothing sent, not
  // authenticated) is dropped for a new one; one that has sent anything (the real peer sends its
  // secret at once) is never pushed out, and with no silent one the new connection is closed
  // (the real peer's probe connects again).
  size_t max_pending = 8;
};

// The server's listening socket and its connections that have not yet presented the secret
// and a QP line. Single-threaded: the probe's thread calls wait_for_peer while it is not paired.
class RdmaControlServer {
 public:
  // Binds and listens; throws Error naming the address (unresolvable, loopback for a name,
  // wildcard without any_address, in use) or a missing / malformed secret.
  explicit RdmaControlServer(RdmaControlServerOptions options);
  ~RdmaControlServer();
  RdmaControlServer(const RdmaControlServer&) = delete;
  RdmaControlServer& operator=(const RdmaControlServer&) = delete;

  struct Peer {
    std::unique_ptr<RdmaControlConnection> connection;
    QpInfo qp;  // its first QP line
  };
  // Accepts and reads until a connection has authenticated and sent a QP line, `timeout` has
  // passed, or `cancel_fd` (-1: none) is readable; drops the connections that send anything
  // else, too long a line, or not all of it within the deadline. Never blocks on one peer.
  std::optional<Peer> wait_for_peer(std::chrono::milliseconds timeout, int cancel_fd);

  uint16_t port() const { return port_; }
  size_t pending() const { return pending_.size(); }
  uint64_t dropped() const { return dropped_; }

 private:
  struct Pending {
    int fd;
    BoundedLineReader reader;
    BoundedLineReader::Clock::time_point due;
    bool authenticated = false;
  };
  void accept_all();
  void drop(size_t i, const std::string& why);
  // The oldest pending connection that has sent nothing and is not authenticated, if any.
  std::optional<size_t> oldest_silent() const;

  RdmaControlServerOptions options_;
  int listen_fd_ = -1;
  uint16_t port_ = 0;
  std::vector<Pending> pending_;
  std::atomic<uint64_t> dropped_{0};  // read by other threads (a status line, a test)
};

}  // namespace ocslab::probes
