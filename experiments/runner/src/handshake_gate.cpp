#include "ocslab/runner/handshake_gate.h"

#include <algorithm>
#include <string>

#include "ocslab/common/error.h"

namespace ocslab::runner {

HandshakeGate::HandshakeGate(int limit) : limit_(limit) {
  if (limit < 1) throw Error("connect_concurrency must be at least 1, got " + std::to_string(limit));
}

HandshakeGate::Ticket& HandshakeGate::Ticket::operator=(Ticket&& o) noexcept {
  if (this != &o) {
    release();
    gate_ = o.gate_;
    o.gate_ = nullptr;
  }
  return *this;
}

void HandshakeGate::Ticket::release() {
  if (gate_) gate_->leave();
  gate_ = nullptr;
}

HandshakeGate::Ticket HandshakeGate::enter() {
  std::unique_lock lock(mutex_);
  const uint64_t mine = next_++;
  // In order of arrival: this caller's turn, and a free slot.
  cv_.wait(lock, [&] { return admitted_ == mine && admitted_ - done_ < static_cast<uint64_t>(limit_); });
  ++admitted_;
  peak_ = std::max(peak_, static_cast<int>(admitted_ - done_));
  lock.unlock();
  cv_.notify_all();  // the next in line may fit too
  return Ticket(this);
}

void HandshakeGate::leave() {
  {
    std::lock_guard lock(mutex_);
    ++done_;
  }
  cv_.notify_all();
}

int HandshakeGate::in_flight() const {
  std::lock_guard lock(mutex_);
  return static_cast<int>(admitted_ - done_);
}

int HandshakeGate::waiting() const {
  std::lock_guard lock(mutex_);
  return static_cast<int>(next_ - admitted_);
}

int HandshakeGate::peak() const {
  std::lock_guard lock(mutex_);
  return peak_;
}

uint64_t HandshakeGate::entered() const {
  std::lock_guard lock(mutex_);
  return admitted_;
}

}  // namespace ocslab::runner
