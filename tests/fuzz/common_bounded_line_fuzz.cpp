// libFuzzer target for BoundedLineReader (the agent's session reader and the RDMA and ping
// control servers): the input arrives over a real socket pair in writes chosen by its first
// byte and is read back with poll_line; every line must be shorter than max_line and hold no
// '\n', a longer one must be a LineError naming the peer, and end of input must be kEof.
#include <sys/socket.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "ocslab/common/bounded_line.h"

namespace {

struct Pair {
  int fd[2] = {-1, -1};
  Pair() {
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fd) != 0) __builtin_trap();
  }
  ~Pair() {
    for (int f : fd)
      if (f >= 0) ::close(f);
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // A socket pair's buffer holds far more than this: every write completes without a reader.
  if (size == 0 || size > 64 * 1024) return 0;
  const size_t max_line = 1 + data[0] % 100;
  std::string_view in(reinterpret_cast<const char*>(data) + 1, size - 1);
  Pair p;
  ocslab::BoundedLineReader r(p.fd[1], "fuzz peer", max_line);
  size_t step = 1 + data[0] % 11;
  std::string line;
  auto drain = [&]() -> bool {  // false: the reader refused the stream (the caller hangs up)
    try {
      for (;;) {
        auto st = r.poll_line(line);
        if (st == ocslab::BoundedLineReader::Status::kPending) return true;
        if (st == ocslab::BoundedLineReader::Status::kEof) return false;
        if (line.size() > max_line || line.find('\n') != std::string::npos) __builtin_trap();
      }
    } catch (const ocslab::LineError& e) {
      if (std::string_view(e.what()).find("fuzz peer") == std::string_view::npos) __builtin_trap();
      return false;
    }
  };
  for (size_t off = 0; off < in.size(); off += step) {
    auto piece = in.substr(off, step);
    if (::write(p.fd[0], piece.data(), piece.size()) != static_cast<ssize_t>(piece.size())) __builtin_trap();
    if (!drain()) return 0;
    if (r.partial() > max_line + 1) __builtin_trap();  // bounded between lines
    step = 1 + (step * 5 + data[0]) % 23;
  }
  ::close(p.fd[0]);
  p.fd[0] = -1;
  for (int i = 0; i < 3 && drain(); ++i) {
  }
  return 0;
}
