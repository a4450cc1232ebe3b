#include "ocslab/ocsctl/mapping.h"

#include <map>
#include <set>

#include "ocslab/common/config.h"

namespace ocslab::ocs {

namespace {

Circuit circuit_from_node(const YamlDoc& doc, const YAML::Node& node) {
  if (node.IsScalar()) {
    try {
      return parse_circuit(node.Scalar());
    } catch (const Error& e) {
      throw config_error(doc, node, e.what());
    }
  }
  if (node.IsMap()) {
    for (const auto& kv : node) {
      std::string key = kv.first.Scalar();
      if (key != "ingress" && key != "egress") {
        throw config_error(doc, kv.first, "unknown key '" + key + "' in circuit (use ingress, egress)");
      }
    }
    Circuit c{static_cast<Port>(as_int(doc, require(doc, node, "ingress"))),
              static_cast<Port>(as_int(doc, require(doc, node, "egress")))};
    if (c.ingress < 1 || c.egress < 1) throw config_error(doc, node, "ports are numbered from 1");
    return c;
  }
  throw config_error(doc, node, "expected a circuit as 'INGRESS-EGRESS' or {ingress: N, egress: M}");
}

std::vector<MappingEntry> parse_mapping_doc(const YamlDoc& doc) {
  if (!doc.root.IsMap()) throw config_error(doc, doc.root, "expected a mapping with key 'circuits'");
  for (const auto& kv : doc.root) {
    if (kv.first.Scalar() != "circuits") {
      throw config_error(doc, kv.first, "unknown key '" + kv.first.Scalar() + "' (expected 'circuits')");
    }
  }
  YAML::Node list = doc.root["circuits"];
  std::vector<MappingEntry> out;
  if (!list.IsDefined() || list.IsNull()) return out;  // empty mapping: clear
  if (!list.IsSequence()) throw config_error(doc, list, "'circuits' must be a list");
  PortUses uses;
  for (const auto& node : list) {
    Circuit c = circuit_from_node(doc, node);
    uses.add(doc, node, c.ingress, false);
    uses.add(doc, node, c.egress, true);
    if (c.ingress == c.egress) throw config_error(doc, node, "circuit connects port " + std::to_string(c.ingress) + " to itself");
    out.push_back({c, doc.origin + ":" + std::to_string(node.Mark().line + 1) + ":" +
                          std::to_string(node.Mark().column + 1)});
  }
  return out;
}

std::vector<Circuit> circuits_of(const std::vector<MappingEntry>& entries) {
  std::vector<Circuit> out;
  out.reserve(entries.size());
  for (const auto& e : entries) out.push_back(e.circuit);
  return out;
}

}  // namespace

std::vector<Circuit> parse_mapping_yaml(const std::string& text, const std::string& origin) {
  return circuits_of(parse_mapping_doc(load_yaml_string(text, origin)));
}

std::vector<Circuit> load_mapping_file(const std::string& path) {
  return circuits_of(parse_mapping_doc(load_yaml_file(path)));
}

std::vector<MappingEntry> load_mapping_entries(const std::string& path) {
  return parse_mapping_doc(load_yaml_file(path));
}

void PortUses::add(const YamlDoc& doc, const YAML::Node& node, Port port, bool egress, const std::string& what) {
  auto [first, fresh] = (egress ? egress_ : ingress_).emplace(port, node.Mark());
  if (!fresh) {
    throw config_error(doc, node,
                       (what.empty() ? "" : what + ": ") + "port " + std::to_string(port) + " used twice as " +
                           (egress ? "egress" : "ingress") + " (first at line " +
                           std::to_string(first->second.line + 1) + ")");
  }
}

void check_mapping(const std::vector<Circuit>& circuits) {
  auto used_twice = [](const char* role, Port p) {
    return Error(std::string(role) + " port " + std::to_string(p) + " used in two circuits");
  };
  // Every connect checks its circuits, usually one or a few: comparing with the earlier ones
  // beats building two std::sets. Both ways report the same (first) repeated port.
  constexpr size_t kSmall = 16;
  if (circuits.size() <= kSmall) {
    for (size_t i = 0; i < circuits.size(); ++i) {
      const Circuit& c = circuits[i];
      for (size_t j = 0; j < i; ++j) {
        if (circuits[j].ingress == c.ingress) throw used_twice("ingress", c.ingress);
      }
      for (size_t j = 0; j < i; ++j) {
        if (circuits[j].egress == c.egress) throw used_twice("egress", c.egress);
      }
    }
    return;
  }
  std::set<Port> in, out;
  for (const auto& c : circuits) {
    if (!in.insert(c.ingress).second) throw used_twice("ingress", c.ingress);
    if (!out.insert(c.egress).second) throw used_twice("egress", c.egress);
  }
}

MappingDiff diff_mapping(const std::vector<Circuit>& current, const std::vector<Circuit>& target,
                         ApplyMode mode, const PortSet& scope) {
  std::map<Port, Port> want_by_in, want_by_out;
  for (const auto& c : target) {
    want_by_in[c.ingress] = c.egress;
    want_by_out[c.egress] = c.ingress;
  }
  std::set<Circuit> have(current.begin(), current.end());
  MappingDiff diff;
  for (const auto& c : current) {
    auto in = want_by_in.find(c.ingress);
    auto out = want_by_out.find(c.egress);
    bool wanted = in != want_by_in.end() && in->second == c.egress;
    if (wanted) {
      diff.keep.push_back(c);
      continue;
    }
    bool conflicts = in != want_by_in.end() || out != want_by_out.end();
    bool in_scope = scope.empty() || (scope.contains(c.ingress) && scope.contains(c.egress));
    if (conflicts || (mode == ApplyMode::kReplace && in_scope)) diff.remove.push_back(c);
  }
  for (const auto& c : target) {
    if (!have.count(c)) diff.add.push_back(c);
  }
  return diff;
}

}  // namespace ocslab::ocs
