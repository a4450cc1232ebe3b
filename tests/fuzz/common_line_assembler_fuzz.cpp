// libFuzzer target for LineAssembler (the socket-free line splitter of the controller, the
// emulator and the probes' control servers): the input, fed in splits chosen by its first byte,
// must give lines without '\n' that are never longer than max_line, an overflow once a line
// outgrows it, and a buffer that never holds more than max_line plus one feed.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "ocslab/common/frame_limits.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const size_t max_line = 1 + data[0] % 64;
  std::string_view in(reinterpret_cast<const char*>(data) + 1, size - 1);
  ocslab::LineAssembler a(max_line);
  size_t step = 1 + data[0] % 13, consumed = 0, out = 0;
  for (size_t off = 0; off < in.size(); off += step) {
    auto piece = in.substr(off, step);
    bool ok = a.feed(piece);
    consumed += piece.size();
    if (!ok) {
      if (!a.overflow()) __builtin_trap();
      break;  // the caller drops the connection here
    }
    while (auto line = a.next_line()) {
      if (line->find('\n') != std::string::npos || line->size() > max_line) __builtin_trap();
      out += line->size() + 1;
    }
    if (out > consumed) __builtin_trap();  // never more lines than bytes fed
    step = 1 + (step * 7 + data[0]) % 29;
  }
  return 0;
}
