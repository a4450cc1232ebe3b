#include "ocslab/common/ifname.h"

#include <net/if.h>

#include "ocslab/common/error.h"

namespace ocslab {

std::string ifname_problem(std::string_view name) {
  if (name.empty()) return "empty";
  if (name.size() >= IFNAMSIZ) return "longer than " + std::to_string(IFNAMSIZ - 1) + " bytes";
  if (name == "." || name == "..") return "'.' and '..' are reserved";
  for (char c : name) {
    auto u = static_cast<unsigned char>(c);
    if (c == '/') return "'/' is not allowed";
    if (c == ':') return "':' is not allowed";
    if (c == ' ' || (u >= '\t' && u <= '\r')) return "whitespace is not allowed";
    if (u < 0x20 || u == 0x7f) return "control characters are not allowed";
  }
  return {};
}

void check_ifname(std::string_view name, std::string_view what) {
  std::string why = ifname_problem(name);
  if (!why.empty()) {
    throw Error(std::string(what) + ": '" + std::string(name) + "' is not an interface name (" + why + ")");
  }
}

}  // namespace ocslab
