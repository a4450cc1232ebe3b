// Lines read from a network peer, bounded: a line longer than its limit is an error, not a
// growing buffer, and a line that is not complete by an absolute deadline is an error too (a
// deadline for the whole line, not one that restarts on every byte, so a peer trickling one byte
// a second cannot hold the reader). Every error names the peer.
#pragma once

#include <chrono>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "ocslab/common/error.h"

namespace ocslab {

// A line was too long, did not arrive by its deadline, the read was cancelled, or recv failed.
class LineError : public Error {
 public:
  using Error::Error;
};

// "ADDRESS:PORT" of a connected socket's peer ("[v6]:PORT"; "unix socket", "?" when unknown).
std::string socket_peer_name(int fd);

class BoundedLineReader {
 public:
  using Clock = std::chrono::steady_clock;
  // fd stays owned by the caller. max_line counts the bytes before the '\n'.
  BoundedLineReader(int fd, std::string peer, size_t max_line);

  enum class Status { kLine, kPending, kEof };
  // Non-blocking: a line already buffered, or what one recv(MSG_DONTWAIT) adds. kLine sets
  // `line` (without '\n', a trailing '\r' kept); kEof: the peer closed (a partial line is
  // dropped). Throws LineError when the buffered line exceeds max_line or recv fails.
  Status poll_line(std::string& line);

  // Blocking until `deadline`: the next line, or nullopt when the peer closed first. Throws
  // LineError at the deadline, on a line over max_line, on a recv error, or as soon as
  // `cancel_fd` (an eventfd or pipe; -1: none) becomes readable.
  std::optional<std::string> read_line(Clock::time_point deadline, int cancel_fd = -1);

  // Bytes of an incomplete line buffered (0: between lines).
  size_t partial() const { return buffer_.size(); }
  const std::string& peer() const { return peer_; }
  size_t max_line() const { return max_line_; }

 private:
  bool take_line(std::string& line);
  int fd_;
  std::string peer_;
  size_t max_line_;
  std::string buffer_;
};

}  // namespace ocslab
