// Bounds how many SSH handshakes the runner has in flight at once, like Ansible's forks. sshd
// refuses unauthenticated connections beyond its MaxStartups (default 10:30:100: from 10 on it
// drops 30 % of new ones, rising to all at 100), and on a small runner machine a hundred
// simultaneous key exchanges only queue for the CPU. Every session a SessionPool opens
// (connect, a mid-run resume, the reconnect at stop, spool.delete) takes a ticket for its
// handshake and gives it back once the channel is open, so the next host starts as soon as one
// is done. Admission is first come, first served.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <mutex>

namespace ocslab::runner {

// Below sshd's default MaxStartups (10:30:100), so a pool of any size is never refused by a
// stock sshd it shares with nobody.
inline constexpr int kDefaultConnectConcurrency = 8;

class HandshakeGate {
 public:
  // limit >= 1; throws Error otherwise.
  explicit HandshakeGate(int limit);
  HandshakeGate(const HandshakeGate&) = delete;
  HandshakeGate& operator=(const HandshakeGate&) = delete;

  // Held for one handshake; gives its slot back when destroyed (or moved from and destroyed).
  class Ticket {
   public:
    Ticket() = default;
    Ticket(Ticket&& o) noexcept : gate_(o.gate_) { o.gate_ = nullptr; }
    Ticket& operator=(Ticket&& o) noexcept;
    Ticket(const Ticket&) = delete;
    Ticket& operator=(const Ticket&) = delete;
    ~Ticket() { release(); }
    void release();

   private:
    friend class HandshakeGate;
    explicit Ticket(HandshakeGate* g) : gate_(g) {}
    HandshakeGate* gate_ = nullptr;
  };

  // Blocks until fewer than limit() handshakes are in flight and every caller that came
  // earlier has entered.
  Ticket enter();

  int limit() const { return limit_; }
  int in_flight() const;
  int waiting() const;     // callers blocked in enter()
  int peak() const;        // most handshakes in flight at once so far
  uint64_t entered() const;  // tickets handed out so far

 private:
  void leave();

  const int limit_;
  mutable std::mutex mutex_;
  std::condition_variable cv_;
  uint64_t next_ = 0;  // number of the next caller to arrive
  uint64_t done_ = 0;  // tickets given back
  uint64_t admitted_ = 0;
  int peak_ = 0;
};

}  // namespace ocslab::runner
