// Rank 0 and the other ranks parse each other's rendezvous frames: any byte stream, cut into
// frames the way recv_frame does (4-byte length, limit), must parse as a hello or an
// all-gather reply or be refused; never crash, hang or allocate past the frame.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "ocslab/common/error.h"
#include "ocslab/workloads/rendezvous.h"

using namespace ocslab::workloads;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  for (uint32_t limit : {kMaxHelloFrame, kMaxFrame}) {
    std::string_view rest = in;
    while (rest.size() >= 4) {
      auto len = frame_length(rest.substr(0, 4), limit);
      if (!len) break;  // recv_frame refuses it: the connection ends
      rest.remove_prefix(4);
      if (*len > rest.size()) break;  // the peer would still owe bytes: the deadline ends it
      auto frame = rest.substr(0, *len);
      rest.remove_prefix(*len);
      if (auto h = parse_rendezvous_hello(frame)) {
        if (h->tag.empty() || h->rank < 0 || h->nranks < 0) __builtin_trap();
        if (h->auth.size() > kMaxTokenChars || h->auth.find_first_not_of("0123456789abcdef") != std::string::npos)
          __builtin_trap();
      }
      for (int n : {0, 1, 2, 7}) {
        try {
          auto all = unpack_all_gather(frame, n, "fuzz");
          size_t total = 0;
          for (const auto& b : all) total += b.size() + 4;
          if (all.size() != static_cast<size_t>(n) || total != frame.size()) __builtin_trap();
        } catch (const ocslab::Error&) {
        }
      }
    }
  }
  return 0;
}
