// What the emulator reads from QEMU's QMP socket (the link driver's `set_link`), without the
// socket: one JSON object per line, each line bounded, and a reply sorted into event, return,
// error or anything else, so a garbled or hostile stream is an Error, never a crash or an
// ever-growing buffer.
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "ocslab/common/frame_limits.h"

namespace ocslab::emu {

// QEMU's greeting and its answers to qmp_capabilities and set_link are under 1 KiB; events
// (a guest's NIC_RX_FILTER_CHANGED) a few hundred bytes.
inline constexpr size_t kMaxQmpLine = 64 * 1024;

class QmpReader {
 public:
  explicit QmpReader(size_t max_line = kMaxQmpLine) : lines_(max_line) {}
  // Received bytes. Throws Error once a line outgrows max_line.
  void feed(std::string_view bytes);
  // The next message (blank lines skipped), nullopt until a whole line is buffered. Throws Error
  // quoting (at most 200 bytes of) a line that is not JSON.
  std::optional<nlohmann::json> next();

 private:
  LineAssembler lines_;
};

struct QmpReply {
  enum class Kind { kEvent, kReturn, kError, kOther };
  Kind kind = Kind::kOther;
  // kReturn: the return value's JSON; kError: "CLASS: DESC" (either "?" / "" when absent or not
  // a string); kOther: the message's JSON.
  std::string text;
  bool empty_return = false;  // kReturn with {} (what qmp_capabilities and set_link answer)
};

QmpReply classify_qmp_reply(const nlohmann::json& message);

}  // namespace ocslab::emu
