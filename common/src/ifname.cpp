#include "ocslab/common/ifname.h"

#include <fmt/format.h>
#include <net/if.h>

#include <cctype>

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

std::string spec_ifname_problem(std::string_view name) {
  if (auto why = ifname_problem(name); !why.empty()) return why;
  for (char c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && std::string_view("_-.=,@+%").find(c) == std::string_view::npos)
      return fmt::format("'{}' is not allowed: letters, digits and _-.=,@+% only", c);
  }
  return {};
}

std::string host_address_problem(std::string_view name) {
  if (name.empty()) return "empty";
  if (name.size() > 253) return "longer than 253 bytes";
  if (name.front() == '-') return "it starts with '-'";
  for (char c : name) {
    auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u >= 0x7f) return "control characters and non-ASCII bytes are not allowed";
    if (!std::isalnum(u) && c != '.' && c != '-' && c != ':')
      return fmt::format("'{}' is not allowed: letters, digits, '.', '-' and ':' only", c);
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
