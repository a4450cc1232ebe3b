// GIDs come from peers (the RDMA probe's "QP <qpn> <psn> <gid>" line, the verbs workload's
// queue-pair announcements): a GID parses only from 32 hex digits, and what parses prints back as
// the same digits in lowercase.
#include <cctype>
#include <cstddef>
#include <cstdint>
#include <string>

#include "ocslab/verbs/verbs.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  ibv_gid g{};
  if (!ocslab::verbs::parse_gid(text, g)) return 0;
  std::string lower;
  for (char c : text) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (ocslab::verbs::gid_hex(g) != lower) __builtin_trap();
  (void)ocslab::verbs::gid_text(g);
  return 0;
}
