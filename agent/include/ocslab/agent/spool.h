// The agent's on-disk spool: every sample of a capture, with its sequence number, appended as
// one JSON line (exactly the "sample" message of the protocol), so a client whose session
// dropped can fetch what it missed. Durability (see docs/agent-protocol.md): lines reach the
// kernel in batches (every `batch_lines` samples or `flush_interval`, whichever comes first);
// finish() writes the rest and fsyncs. A clean stop loses nothing; a killed agent loses at most
// the last unflushed batch; a power cut, what the kernel had not written back.
// A write that fails (full disk, I/O error) puts the spool in a failed state for good: the
// pending batch and every later sample are dropped (counted, never buffered, so memory stays
// bounded), the failure is logged once and kept in error(), and what reached the file before it
// stays readable. Appends and flushes do not throw for it.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ocslab::agent {

struct SpoolOptions {
  size_t batch_lines = 64;
  std::chrono::milliseconds flush_interval{50};
};

class Spool {
 public:
  // Creates the spool file, which must be new: a file or a symlink already at `path` is refused
  // (never written through). Throws Error naming the path.
  explicit Spool(std::string path, SpoolOptions options = {});
  ~Spool();
  Spool(const Spool&) = delete;
  Spool& operator=(const Spool&) = delete;

  // line: a sample_line() with this seq, newline included. seq must grow by one per call
  // (throws ocslab::Error otherwise: a gap would be a lost sample). Thread-safe.
  // In the failed state the line is counted in dropped() and not kept.
  void append(uint64_t seq, std::string_view line);
  // Hands the pending batch to the kernel. A write failure enters the failed state (no throw).
  void flush();
  // Flushes when the batch is older than flush_interval (the agent's timer calls this).
  void flush_if_due();
  // Flushes, fsyncs and closes the writer; later appends throw. Idempotent. Throws SystemError
  // when fsync fails.
  void finish();

  // Calls fn with each line whose seq is in [from, to] (line without its newline), in order;
  // returns how many. Hands the pending batch to the kernel first (a failure there only enters
  // the failed state: what is on disk is still served); reads without blocking appends.
  size_t read(uint64_t from, uint64_t to, const std::function<void(std::string_view)>& fn);

  const std::string& path() const { return path_; }
  uint64_t last_seq() const;
  uint64_t size_bytes() const;  // bytes appended so far, flushed or not (dropped ones not)
  // The first write failure ("" while none): the spool stopped appending then.
  std::string error() const;
  // Samples not stored because of that failure (the batch that failed and every later one).
  uint64_t dropped() const;
  // The highest seq whose line can be in the file (all of them when nothing failed).
  uint64_t stored_seq() const;
  size_t pending_bytes() const;  // the batch held in memory, at most batch_lines lines

 private:
  void flush_locked();
  void fail_locked(int err, size_t unwritten_lines);

  std::string path_;
  SpoolOptions options_;
  mutable std::mutex mutex_;
  int fd_ = -1;
  std::string pending_;
  size_t pending_lines_ = 0;
  uint64_t written_ = 0;  // bytes already in the file
  uint64_t last_seq_ = 0;
  uint64_t stored_seq_ = 0;  // last seq handed to the kernel (or pending) before a failure
  std::string error_;        // the write failure; non-empty: failed state
  uint64_t dropped_ = 0;
  std::chrono::steady_clock::time_point oldest_pending_{};
  // (seq, file offset) of every kIndexStride-th line, so a fetch near the end does not scan the
  // whole capture.
  std::vector<std::pair<uint64_t, uint64_t>> index_;
};

}  // namespace ocslab::agent
