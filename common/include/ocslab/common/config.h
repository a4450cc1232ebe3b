// YAML configuration loading with positions: every error names file:line:col of the node
// that is wrong, so a user can fix a lab or mapping file without guessing.
#pragma once

#include <yaml-cpp/yaml.h>

#include <string>
#include <utility>
#include <vector>

#include "ocslab/common/error.h"

namespace ocslab {

struct YamlDoc {
  std::string origin;  // file path, or a label for in-memory text
  YAML::Node root;
};

// Throws ConfigError "path:line:col: ..." for unreadable files and YAML syntax errors.
YamlDoc load_yaml_file(const std::string& path);
YamlDoc load_yaml_string(const std::string& text, const std::string& origin);

// "origin:line:col: message" for the position of node (1-based line and column).
ConfigError config_error(const YamlDoc& doc, const YAML::Node& node, const std::string& message);

// Typed access that reports the node's position on a missing key or wrong type.
const YAML::Node require(const YamlDoc& doc, const YAML::Node& map, const std::string& key);
long long as_int(const YamlDoc& doc, const YAML::Node& node);
std::string as_string(const YamlDoc& doc, const YAML::Node& node);
bool as_bool(const YamlDoc& doc, const YAML::Node& node);
double as_double(const YamlDoc& doc, const YAML::Node& node);
// An integer in [min, max]; "WHAT must be in [min, max], got V" at the node otherwise.
int int_in(const YamlDoc& doc, const YAML::Node& node, long long min, long long max, const char* what);
// "HOST:PORT" (port 0..65535, HOST not empty): "WHAT 'TEXT' is not HOST:PORT" or "WHAT 'TEXT':
// port must be 0..65535" at the node otherwise.
std::pair<std::string, int> as_host_port(const YamlDoc& doc, const YAML::Node& node, const std::string& what);
// A string, or a list of strings; "WHAT must be a list" at the node otherwise.
std::vector<std::string> as_strings(const YamlDoc& doc, const YAML::Node& node, const std::string& what);

// Paths a file names are relative to the file's folder, so that a spec means the same from any
// working directory. beside_file joins a relative path to that folder as written (a document
// without an origin leaves it as it is); resolve_path also expands a leading `~/` to $HOME and
// makes the result canonical ("" stays "").
std::string beside_file(const YamlDoc& doc, const std::string& path);
std::string resolve_path(const YamlDoc& doc, const std::string& path);

// Throws "unknown key 'k' (known: ...)" at the first key of map not in keys.
void only_keys(const YamlDoc& doc, const YAML::Node& map, std::initializer_list<const char*> keys);

}  // namespace ocslab
