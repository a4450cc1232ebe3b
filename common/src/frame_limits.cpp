#include "ocslab/common/frame_limits.h"

namespace ocslab {

bool LineAssembler::feed(std::string_view bytes) {
  if (overflow_) return false;
  if (pos_ > 0 && pos_ == buf_.size()) {  // everything returned: start over instead of growing
    buf_.clear();
    pos_ = 0;
  }
  buf_.append(bytes);
  // Every complete line must fit, and so must the tail that has no '\n' yet.
  size_t start = pos_;
  for (size_t nl = buf_.find('\n', start); nl != std::string::npos; nl = buf_.find('\n', start)) {
    if (nl - start > max_line_) {
      overflow_ = true;
      return false;
    }
    start = nl + 1;
  }
  if (buf_.size() - start > max_line_) {
    overflow_ = true;
    return false;
  }
  return true;
}

std::optional<std::string> LineAssembler::next_line() {
  if (overflow_) return std::nullopt;
  size_t nl = buf_.find('\n', pos_);
  if (nl == std::string::npos) return std::nullopt;
  std::string line = buf_.substr(pos_, nl - pos_);
  pos_ = nl + 1;
  if (!line.empty() && line.back() == '\r') line.pop_back();
  if (pos_ == buf_.size()) {
    buf_.clear();
    pos_ = 0;
  } else if (pos_ > max_line_) {  // keep the buffer from creeping: drop what was returned
    buf_.erase(0, pos_);
    pos_ = 0;
  }
  return line;
}

}  // namespace ocslab
