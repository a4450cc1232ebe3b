// Bootstrap of a multi-process workload over TCP: rank 0 listens, every other rank connects
// (retrying until rank 0 is up), and small blobs (queue-pair numbers, an NCCL unique id, the
// measured records) are all-gathered through rank 0. Never carries collective data.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ocslab/common/error.h"

namespace ocslab::workloads {

// A peer of the rendezvous could not be reached, timed out, dropped the connection or sent
// what no rank sends (exit 4, docs/exit-codes.md); a bad address, rank or token, or a rank
// refused for another schedule, is a plain ocslab::Error (exit 2).
class RendezvousPeerError : public Error {
 public:
  using Error::Error;
};

// Who may join and where rank 0 listens (docs/workloads.md, "The rendezvous").
struct RendezvousOptions {
  // The run's secret (hex digits, at most kMaxTokenChars), the same on every rank. With a token,
  // rank 0 drops any connection whose hello does not carry it (answering a parsed hello with the
  // reason, nothing else) and goes on waiting for the real ranks; each connection must deliver
  // its hello within hello_timeout. Empty: no authentication, and a bad hello ends the rendezvous.
  std::string token;
  // Rank 0's bind address. Empty: the HOST of the rendezvous address itself, the address the
  // other ranks connect to, never all addresses. "0.0.0.0" or "::" listen everywhere when asked.
  std::string listen;
  std::chrono::milliseconds hello_timeout{5000};
};

inline constexpr size_t kMaxTokenChars = 128;

struct RendezvousHello;

class Rendezvous {
 public:
  // address "HOST:PORT" of rank 0 (rank 0 binds HOST:PORT, or options.listen). `tag` (the
  // schedule's name and size) must agree on every rank: a rank started with another schedule or
  // world size is refused with a message naming it. Throws ocslab::Error naming the address /
  // rank on failure or after `timeout`.
  Rendezvous(int rank, int nranks, const std::string& address, const std::string& tag,
             std::chrono::milliseconds timeout, RendezvousOptions options = {});
  ~Rendezvous();
  Rendezvous(const Rendezvous&) = delete;
  Rendezvous& operator=(const Rendezvous&) = delete;

  int rank() const { return rank_; }
  int nranks() const { return nranks_; }

  // Every rank passes its blob; every rank gets all blobs, indexed by rank.
  std::vector<std::string> all_gather(const std::string& blob);
  void barrier() { all_gather({}); }

  // Rank 0: what its stderr should show: one line per connection it dropped while waiting (who,
  // why), and a warning when a host name bound a loopback address (Debian's and Ubuntu's
  // /etc/hosts map the machine's own name to 127.0.1.1: other hosts' ranks cannot reach that).
  const std::vector<std::string>& notes() const { return notes_; }

 private:
  // The constructor's steps: rank 0 listens and accepts every other rank's hello; the others
  // join rank 0.
  void listen_for_ranks(const std::string& bind_host, int port);
  void accept_ranks(int port, const std::string& tag, const RendezvousOptions& options,
                    std::chrono::steady_clock::time_point deadline);
  struct PendingHello;
  // A new connection joins the pending ones (or is closed: kMaxPendingHellos are pending).
  void accept_one(std::vector<PendingHello>& pending, const RendezvousOptions& options,
                  std::chrono::steady_clock::time_point deadline);
  // Reads what a pending connection sent: nullopt while its hello is incomplete and its
  // deadline not reached, true when a rank joined, false when it was dropped (a stranger, with
  // a token); throws without a token, and for a rank that cannot join.
  std::optional<bool> read_hello(PendingHello& p, bool readable, const std::string& tag,
                                 const RendezvousOptions& options);
  // A whole hello: the rank joins (true), a stranger is dropped (false), or a rank that cannot
  // join (another world size, tag, a rank twice) ends the rendezvous (throws).
  bool take_hello(int fd, const std::string& msg, const std::string& peer_ip, const std::string& tag,
                  const RendezvousOptions& options);
  // Why rank 0 refuses a hello ("error: ..."); empty when it accepts it.
  std::string refusal(const std::optional<RendezvousHello>& hello, const std::string& msg, const std::string& peer_ip,
                      const std::string& tag, const std::string& token) const;
  void join(const std::string& host, int port, const std::string& hello,
            std::chrono::steady_clock::time_point deadline);

  int rank_, nranks_;
  std::string address_;
  std::chrono::milliseconds timeout_;
  int listen_fd_ = -1;
  std::vector<int> peers_;  // rank 0: fd per rank (index 0 unused); others: [0] = rank 0
  std::vector<std::string> notes_;
};

// Frames: a 4-byte big-endian length, then that many bytes. Before a peer is known (its
// hello, rank 0's reply) a frame is at most kMaxHelloFrame; later (all-gather blobs) at most
// kMaxFrame. Every frame must arrive whole before the rendezvous' or the all-gather's
// absolute deadline (`timeout` after it started), however slowly its bytes come.
inline constexpr uint32_t kMaxHelloFrame = 1024;
// Rank 0 reads every pending hello at once; beyond this many a new connection is closed.
inline constexpr size_t kMaxPendingHellos = 64;
inline constexpr uint32_t kMaxFrame = 256u << 20;

// The frame length from its 4-byte prefix, or nullopt when the prefix is not 4 bytes or the
// length exceeds limit.
std::optional<uint32_t> frame_length(std::string_view prefix, uint32_t limit);

// A rank's hello: "ocslab-collbench 1 rank=R nranks=N [auth=TOKEN ]tag=TAG" (TOKEN: 1 to
// kMaxTokenChars lowercase hex digits; TAG non-empty, no newline or NUL). nullopt for anything else.
struct RendezvousHello {
  int rank = -1;
  int nranks = -1;
  std::string auth;  // empty when the hello carries none
  std::string tag;
};
std::optional<RendezvousHello> parse_rendezvous_hello(std::string_view frame);

// Rank 0's all-gather reply: nranks length-prefixed blobs and nothing after them. Throws
// ocslab::Error naming `who` when it is short or has bytes left over.
std::vector<std::string> unpack_all_gather(std::string_view packed, int nranks, const std::string& who);

// Splits "HOST:PORT" ("[v6]:PORT" too); throws ocslab::Error naming the text.
std::pair<std::string, int> split_host_port(const std::string& address);

}  // namespace ocslab::workloads
