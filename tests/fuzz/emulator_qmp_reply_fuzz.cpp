// libFuzzer target for what the emulator reads from QEMU's QMP socket (QmpReader and
// classify_qmp_reply, the link driver's reader): any byte stream, fed in splits chosen by its
// first byte, must give JSON messages sorted into event, return, error or other, or an Error
// (a line that is not JSON or too long); never a crash, a json exception or a buffer past the
// line bound.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "ocslab/common/error.h"
#include "ocslab/emulator/qmp_reader.h"

using namespace ocslab::emu;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  std::string_view in(reinterpret_cast<const char*>(data) + 1, size - 1);
  // A small bound, so the overflow is reached too.
  QmpReader reader(data[0] % 2 ? kMaxQmpLine : 256);
  size_t step = 1 + data[0] % 19;
  try {
    for (size_t off = 0; off < in.size(); off += step) {
      reader.feed(in.substr(off, step));
      while (auto m = reader.next()) {
        QmpReply r = classify_qmp_reply(*m);
        if (r.kind == QmpReply::Kind::kEvent && !r.text.empty()) __builtin_trap();
        if (r.empty_return && r.kind != QmpReply::Kind::kReturn) __builtin_trap();
        if (r.kind == QmpReply::Kind::kError && r.text.find(": ") == std::string::npos) __builtin_trap();
      }
      step = 1 + (step * 3 + data[0]) % 37;
    }
  } catch (const ocslab::Error&) {
  }
  return 0;
}
