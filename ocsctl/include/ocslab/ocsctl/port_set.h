// Port lists as users write them ("1..16,33..48", "5 7 9") and the set type behind the
// allow-list that keeps a driver off ports other lab users own.
#pragma once

#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "ocslab/ocsctl/types.h"

namespace ocslab::ocs {

class PortSet {
 public:
  PortSet() = default;
  explicit PortSet(std::set<Port> ports) : ports_(std::move(ports)) {}

  // Items separated by ',' or whitespace; each "N" or "A..B" (inclusive). Throws
  // ocslab::Error naming the bad item (ports are >= 1, ranges ascending).
  static PortSet parse(std::string_view text);

  bool contains(Port p) const { return ports_.count(p) != 0; }
  bool empty() const { return ports_.empty(); }
  size_t size() const { return ports_.size(); }
  std::vector<Port> to_vector() const { return {ports_.begin(), ports_.end()}; }
  void insert(Port p) { ports_.insert(p); }
  std::string to_string() const;  // compact "1..16,33..48"

 private:
  std::set<Port> ports_;
};

// Circuit "A-B" (ingress-egress). Throws ocslab::Error naming the text.
Circuit parse_circuit(std::string_view text);

}  // namespace ocslab::ocs
