// The RDMA probe's control connection reads lines from any host on the management network (the
// server, before the secret is checked) and from the server (the client): every line parses to
// a QP that prints back to a line that parses to the same QP, or is refused; the secret check
// accepts only "AUTH <secret>" exactly. Never a crash, never a read past the line.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "ocslab/probes/rdma_control.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string secret(64, 'a');
  std::string_view text(reinterpret_cast<const char*>(data), size);
  // The server splits what arrives into lines at '\n', as BoundedLineReader does.
  while (!text.empty()) {
    auto nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    if (auto q = ocslab::probes::parse_qp_line(line)) {
      std::string printed = q->line();
      if (printed.empty() || printed.back() != '\n') __builtin_trap();
      auto again = ocslab::probes::parse_qp_line(std::string_view(printed).substr(0, printed.size() - 1));
      if (!again || again->qpn != q->qpn || again->psn != q->psn || q->qpn > 0xffffff || q->psn > 0xffffff ||
          std::memcmp(again->gid.raw, q->gid.raw, sizeof(q->gid.raw)) != 0)
        __builtin_trap();
    }
    if (ocslab::probes::auth_line_matches(line, secret) && line != "AUTH " + secret) __builtin_trap();
    if (nl == std::string_view::npos) break;
    text.remove_prefix(nl + 1);
  }
  return 0;
}
