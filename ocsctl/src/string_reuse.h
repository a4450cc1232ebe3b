// Private to libocs: copying into strings that are reused from request to request.
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

}  // namespace ocslab::ocs
