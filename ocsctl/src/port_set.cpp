#include "ocslab/ocsctl/port_set.h"

#include <charconv>

#include "ocslab/common/error.h"

namespace ocslab::ocs {

namespace {

Port parse_port(std::string_view text, std::string_view item) {
  Port p = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), p);
  if (text.empty() || ec != std::errc() || ptr != text.data() + text.size()) {
    throw Error("bad port '" + std::string(item) + "': expected a number" +
                (item.find('-') != std::string_view::npos ? " (ranges are written A..B)" : ""));
  }
  if (p < 1) throw Error("bad port '" + std::string(item) + "': ports are numbered from 1");
  return p;
}

}  // namespace

PortSet PortSet::parse(std::string_view text) {
  PortSet set;
  size_t i = 0;
  while (i < text.size()) {
    size_t j = text.find_first_of(", \t\n", i);
    if (j == std::string_view::npos) j = text.size();
    std::string_view item = text.substr(i, j - i);
    i = j + 1;
    if (item.empty()) continue;
    size_t dots = item.find("..");
    if (dots == std::string_view::npos) {
      set.insert(parse_port(item, item));
      continue;
    }
    Port a = parse_port(item.substr(0, dots), item);
    Port b = parse_port(item.substr(dots + 2), item);
    if (b < a) throw Error("bad port range '" + std::string(item) + "': end is below start");
    if (b - a > 100000) throw Error("bad port range '" + std::string(item) + "': too large");
    for (Port p = a; p <= b; ++p) set.insert(p);
  }
  return set;
}

std::string PortSet::to_string() const {
  std::string out;
  auto it = ports_.begin();
  while (it != ports_.end()) {
    Port start = *it, end = *it;
    auto next = std::next(it);
    while (next != ports_.end() && *next == end + 1) {
      end = *next;
      ++next;
    }
    if (!out.empty()) out += ',';
    out += std::to_string(start);
    if (end != start) out += ".." + std::to_string(end);
    it = next;
  }
  return out;
}

Circuit parse_circuit(std::string_view text) {
  size_t dash = text.find('-');
  if (dash == std::string_view::npos || text.find('-', dash + 1) != std::string_view::npos) {
    throw Error("bad circuit '" + std::string(text) + "': expected INGRESS-EGRESS, e.g. 1-33");
  }
  return Circuit{parse_port(text.substr(0, dash), text), parse_port(text.substr(dash + 1), text)};
}

}  // namespace ocslab::ocs
