// Private to libocs: copying into strings that are reused from request to request, and the
// ASCII upper-casing the protocol codecs share (protocol keywords are ASCII; no locale).
#pragma once

#include <string>
#include <string_view>

namespace ocslab::ocs {

// out = s for a string whose capacity is kept across round trips (parser fields, request
// buffers, timing records). clear() + append() takes libstdc++'s short append path, while
// assign() goes through the general _M_replace, several times dearer for the few bytes these
// hold; on the per-request path that difference was a visible share of libocs' overhead.
// s must not point into out.
inline void assign_reusing(std::string& out, std::string_view s) {
  out.clear();
  out.append(s.data(), s.size());
}

// out = s in ASCII upper case, reusing out's capacity.
inline void upper_into(std::string_view s, std::string& out) {
  if (std::string_view(out) == s) return;  // out is upper case, so s is too (COMPLD, reply after reply)
  assign_reusing(out, s);
  for (char& c : out) {
    if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
  }
}

inline std::string upper(std::string_view s) {
  std::string out;
  upper_into(s, out);
  return out;
}

}  // namespace ocslab::ocs
