// A circuit mapping (the target state of some switch ports), its YAML form, and the
// minimal diff that moves a switch from its current circuits to a target mapping.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "ocslab/common/config.h"
#include "ocslab/ocsctl/port_set.h"
#include "ocslab/ocsctl/types.h"

namespace ocslab::ocs {

// Mapping file:
//   circuits:            # list of "ingress-egress" strings or {ingress: N, egress: M}
//     - 1-33
//     - {ingress: 2, egress: 34}
// Throws ConfigError "file:line:col: ..." for syntax errors, bad entries and any port used
// twice (as ingress or as egress).
std::vector<Circuit> load_mapping_file(const std::string& path);
std::vector<Circuit> parse_mapping_yaml(const std::string& text, const std::string& origin);

// The same file's circuits with where each is written ("file:line:col"), for tools that report
// problems with single circuits (ocslab-agent forwarding fabric). Same checks and errors.
struct MappingEntry {
  Circuit circuit;
  std::string where;
};
std::vector<MappingEntry> load_mapping_entries(const std::string& path);

// Each switch port at most once as ingress and once as egress, across the nodes of one file
// that name ports (a mapping file's circuits, an experiment spec's NICs): add() throws
// ConfigError at node, "WHAT: port P used twice as egress (first at line L)", on a second use.
class PortUses {
 public:
  void add(const YamlDoc& doc, const YAML::Node& node, Port port, bool egress, const std::string& what = "");

 private:
  std::map<Port, YAML::Mark> ingress_, egress_;
};

// Throws ocslab::Error when an ingress or an egress appears in two circuits.
void check_mapping(const std::vector<Circuit>& circuits);

enum class ApplyMode {
  kMerge,    // touch only the ports the target names
  kReplace,  // also remove every other circuit (on allowed ports when there is an allow-list)
};

struct MappingDiff {
  std::vector<Circuit> remove;  // circuits to delete (by their ingress)
  std::vector<Circuit> add;     // circuits to make
  std::vector<Circuit> keep;    // already in place
  bool empty() const { return remove.empty() && add.empty(); }
};

// Pure function: current circuits + target -> minimal diff. In kReplace mode, a current
// circuit not in target is removed only if `scope` is empty or contains both its ports.
MappingDiff diff_mapping(const std::vector<Circuit>& current, const std::vector<Circuit>& target,
                         ApplyMode mode, const PortSet& scope = {});

}  // namespace ocslab::ocs
