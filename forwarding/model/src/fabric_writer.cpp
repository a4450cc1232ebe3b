// Writing a fabric back as YAML, for fabrics derived from a wiring and the OCS's circuits
// (wiring.h). yaml-cpp's emitter does the quoting, so names the loader accepted read back.
#include <yaml-cpp/yaml.h>

#include <sstream>

#include "ocslab/common/error.h"
#include "ocslab/forwarding/fabric.h"

namespace ocslab::forwarding {

std::string to_yaml(const Fabric& fabric, const std::string& comment) {
  YAML::Emitter e;
  e << YAML::BeginMap << YAML::Key << "hosts" << YAML::Value << YAML::BeginSeq;
  for (const auto& h : fabric.hosts) {
    e << YAML::BeginMap << YAML::Key << "name" << YAML::Value << h.name;
    e << YAML::Key << "ports" << YAML::Value << YAML::BeginSeq;
    for (const auto& p : h.ports) {
      e << YAML::BeginMap << YAML::Key << "name" << YAML::Value << p.name;
      e << YAML::Key << "if1" << YAML::Value << YAML::Flow << YAML::BeginMap;
      e << YAML::Key << "name" << YAML::Value << p.if1.name;
      e << YAML::Key << "ip" << YAML::Value << format_ipv4(p.if1.ip.addr) + "/" + std::to_string(p.if1.ip.prefix_len);
      e << YAML::Key << "mac" << YAML::Value << YAML::DoubleQuoted << p.if1.mac;
      if (!p.if1.rdma.empty()) e << YAML::Key << "rdma" << YAML::Value << p.if1.rdma;
      e << YAML::EndMap;
      if (p.if2) {
        e << YAML::Key << "if2" << YAML::Value << YAML::Flow << YAML::BeginMap;
        e << YAML::Key << "name" << YAML::Value << p.if2->name;
        e << YAML::Key << "mac" << YAML::Value << YAML::DoubleQuoted << p.if2->mac << YAML::EndMap;
      }
      e << YAML::EndMap;
    }
    e << YAML::EndSeq << YAML::EndMap;
  }
  e << YAML::EndSeq;
  e << YAML::Key << "circuits" << YAML::Value << YAML::BeginSeq;
  for (const auto& c : fabric.circuits) e << YAML::DoubleQuoted << to_string(c.a) + " <-> " + to_string(c.b);
  e << YAML::EndSeq << YAML::EndMap;
  if (!e.good()) throw Error("cannot write the fabric as YAML: " + e.GetLastError());

  std::ostringstream out;
  std::istringstream lines(comment);
  for (std::string line; std::getline(lines, line);) out << (line.empty() ? "#" : "# " + line) << "\n";
  out << e.c_str() << "\n";
  return out.str();
}

}  // namespace ocslab::forwarding
