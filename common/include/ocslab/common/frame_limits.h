// Bounds on what a peer can make a network reader hold: a size limit per line and an absolute
// deadline (fixed when the line's first byte arrived, or when the connection was accepted for
// the first line, never moved by later bytes). LineAssembler is the socket-free half: feed it
// what recv() returned, take complete lines out; the caller owns the socket and the timer and
// drops the connection on overflow() or when partial() outlives the deadline.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace ocslab {

class LineAssembler {
 public:
  // max_line: the longest line accepted, without its '\n'.
  explicit LineAssembler(size_t max_line) : max_line_(max_line) {}

  // Appends received bytes. Returns false (and stays overflowed) once a line without its '\n'
  // grew past max_line: the caller must drop the connection. Never holds more than
  // max_line + one feed's bytes.
  bool feed(std::string_view bytes);
  // The next complete line without '\n' (a trailing '\r' removed), if one is buffered.
  std::optional<std::string> next_line();
  // Bytes of a line not yet complete are buffered (the line deadline applies).
  bool partial() const { return pos_ < buf_.size(); }
  bool overflow() const { return overflow_; }
  size_t max_line() const { return max_line_; }

 private:
  size_t max_line_;
  std::string buf_;
  size_t pos_ = 0;  // start of the first line not yet returned
  bool overflow_ = false;
};

}  // namespace ocslab
