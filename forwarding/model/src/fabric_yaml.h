// Private to libforwarding: the fabric file's YAML helpers, shared by the fabric loader
// (fabric.cpp) and the wiring loader (wiring.cpp), whose hosts use the same schema.
#pragma once

#include <string>
#include <vector>

#include "ocslab/common/config.h"
#include "ocslab/forwarding/fabric.h"

namespace ocslab::forwarding::detail {

// "origin:line:col" of n (1-based), or the origin alone when n has no position.
Where where_of(const YamlDoc& doc, const YAML::Node& n);
// "host:port" -> PortRef; errors point at n.
PortRef port_ref_of(const YamlDoc& doc, const YAML::Node& n, const std::string& text);
std::string trim(const std::string& s);
// Throws ConfigError "where: message" (the message alone when where is empty).
[[noreturn]] void fail(const Where& where, const std::string& message);
// " (where)" for naming a second place in a message, or "" when where is empty.
std::string at(const Where& where);
// The required top-level 'hosts' list (fabric file schema, docs/forwarding.md); not validated.
std::vector<Host> parse_hosts(const YamlDoc& doc);

}  // namespace ocslab::forwarding::detail
