#include "ocslab/common/config.h"

#include <fmt/format.h>
#include <yaml-cpp/eventhandler.h>

#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

namespace ocslab {

namespace {
std::string where(const std::string& origin, const YAML::Mark& mark) {
  if (mark.is_null()) return origin + ": ";
  return origin + ":" + std::to_string(mark.line + 1) + ":" + std::to_string(mark.column + 1) + ": ";
}
}  // namespace

namespace {

// Whether text holds SCHEME://USER:PASSWORD@HOST: the authority's user part has a ':'.
bool url_with_password(const std::string& text) {
  for (size_t sep = text.find("://"); sep != std::string::npos; sep = text.find("://", sep + 3)) {
    size_t start = sep;
    while (start > 0 && (std::isalnum(static_cast<unsigned char>(text[start - 1])) || text[start - 1] == '+' ||
                         text[start - 1] == '-' || text[start - 1] == '.')) {
      --start;
    }
    if (start == sep) continue;  // no scheme before "://"
    const size_t end = text.find_first_of("/?# \t\n", sep + 3);
    const std::string authority = text.substr(sep + 3, end == std::string::npos ? std::string::npos : end - sep - 3);
    const size_t at = authority.rfind('@');
    if (at != std::string::npos && authority.substr(0, at).find(':') != std::string::npos) return true;
  }
  return false;
}

// Checks made on the parser's events, before yaml-cpp builds its nodes: a key repeated in a
// mapping (yaml-cpp keeps the first and drops the other without a word, so an edit to the second
// would change nothing) and a URL with a password in it (ocslab keeps copies of its input files
// with its results: the spec's text goes into run.json). Aliases are events, not copies, so
// this stays linear in the text.
class ParseChecks : public YAML::EventHandler {
 public:
  explicit ParseChecks(const std::string& origin) : origin_(origin) {}
  void OnDocumentStart(const YAML::Mark&) override {}
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark& m, YAML::anchor_t) override { node(m, nullptr); }
  void OnAlias(const YAML::Mark& m, YAML::anchor_t) override { node(m, nullptr); }
  void OnScalar(const YAML::Mark& m, const std::string&, YAML::anchor_t, const std::string& value) override {
    if (url_with_password(value)) {
      // The value is never echoed: it holds the secret.
      throw ConfigError(where(origin_, m) +
                        "a URL with a password in it (SCHEME://USER:PASSWORD@HOST); files ocslab reads are copied "
                        "into results and logs: give a switch's password in $OCSLAB_OCS_PASSWORD or a credentials "
                        "file (mode 0600), an SSH login a key");
    }
    node(m, &value);
  }
  void OnSequenceStart(const YAML::Mark& m, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {
    node(m, nullptr);
    frames_.push_back(Frame{false, true, {}});
  }
  void OnSequenceEnd() override { frames_.pop_back(); }
  void OnMapStart(const YAML::Mark& m, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {
    node(m, nullptr);
    frames_.push_back(Frame{true, true, {}});
  }
  void OnMapEnd() override { frames_.pop_back(); }

 private:
  struct Frame {
    bool map;
    bool at_key;  // a mapping's next node is a key (else the value of the last key)
    std::map<std::string, YAML::Mark> keys;
  };
  // A node inside the innermost collection; scalar is its text when it is a scalar.
  void node(const YAML::Mark& m, const std::string* scalar) {
    if (frames_.empty() || !frames_.back().map) return;
    Frame& f = frames_.back();
    const bool key = f.at_key;
    f.at_key = !f.at_key;
    if (!key || !scalar) return;
    auto [first, fresh] = f.keys.emplace(*scalar, m);
    if (!fresh) {
      throw ConfigError(where(origin_, m) +
                        fmt::format("duplicate key '{}' (first at line {}, column {}): YAML keeps only one of them",
                                    *scalar, first->second.line + 1, first->second.column + 1));
    }
  }
  std::string origin_;
  std::vector<Frame> frames_;
};

}  // namespace

YamlDoc load_yaml_string(const std::string& text, const std::string& origin) {
  try {
    YamlDoc doc{origin, YAML::Load(text)};
    std::istringstream in(text);
    YAML::Parser parser(in);
    ParseChecks checks(origin);
    parser.HandleNextDocument(checks);  // the first document: the one YAML::Load returns
    return doc;
  } catch (const YAML::Exception& e) {
    throw ConfigError(where(origin, e.mark) + "YAML syntax error: " + e.msg);
  }
}

YamlDoc load_yaml_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw ConfigError(path + ": cannot open file");
  std::stringstream ss;
  ss << in.rdbuf();
  return load_yaml_string(ss.str(), path);
}

ConfigError config_error(const YamlDoc& doc, const YAML::Node& node, const std::string& message) {
  return ConfigError(where(doc.origin, node.IsDefined() ? node.Mark() : YAML::Mark::null_mark()) + message);
}

const YAML::Node require(const YamlDoc& doc, const YAML::Node& map, const std::string& key) {
  if (!map.IsMap()) throw config_error(doc, map, "expected a mapping with key '" + key + "'");
  YAML::Node n = map[key];
  if (!n.IsDefined() || n.IsNull()) throw config_error(doc, map, "missing key '" + key + "'");
  return n;
}

long long as_int(const YamlDoc& doc, const YAML::Node& node) {
  if (!node.IsScalar()) throw config_error(doc, node, "expected an integer");
  try {
    return node.as<long long>();
  } catch (const YAML::Exception&) {
    throw config_error(doc, node, "expected an integer, got '" + node.Scalar() + "'");
  }
}

int int_in(const YamlDoc& doc, const YAML::Node& node, long long min, long long max, const char* what) {
  long long v = as_int(doc, node);
  if (v < min || v > max) {
    throw config_error(doc, node,
                       std::string(what) + " must be in [" + std::to_string(min) + ", " + std::to_string(max) +
                           "], got " + std::to_string(v));
  }
  return static_cast<int>(v);
}

std::pair<std::string, int> as_host_port(const YamlDoc& doc, const YAML::Node& node, const std::string& what) {
  std::string text = as_string(doc, node);
  auto colon = text.rfind(':');
  if (colon == std::string::npos || colon == 0)
    throw config_error(doc, node, what + " '" + text + "' is not HOST:PORT");
  int port = -1;
  try {
    size_t used = 0;
    port = std::stoi(text.substr(colon + 1), &used);
    if (used != text.size() - colon - 1) port = -1;
  } catch (const std::exception&) {
    port = -1;
  }
  if (port < 0 || port > 65535) throw config_error(doc, node, what + " '" + text + "': port must be 0..65535");
  return {text.substr(0, colon), port};
}

std::vector<std::string> as_strings(const YamlDoc& doc, const YAML::Node& node, const std::string& what) {
  if (node.IsScalar()) return {as_string(doc, node)};
  if (!node.IsSequence()) throw config_error(doc, node, what + " must be a list");
  std::vector<std::string> out;
  for (const auto& x : node) out.push_back(as_string(doc, x));
  return out;
}

std::string beside_file(const YamlDoc& doc, const std::string& path) {
  std::filesystem::path p(path);
  if (p.is_relative() && !doc.origin.empty()) p = std::filesystem::path(doc.origin).parent_path() / p;
  return p.string();
}

std::string resolve_path(const YamlDoc& doc, const std::string& path) {
  if (path.empty()) return path;
  std::string p = path;
  if (p.rfind("~/", 0) == 0) {
    const char* home = std::getenv("HOME");
    p = std::string(home ? home : "") + p.substr(1);
  }
  return std::filesystem::weakly_canonical(beside_file(doc, p)).string();
}

std::string as_string(const YamlDoc& doc, const YAML::Node& node) {
  if (!node.IsScalar()) throw config_error(doc, node, "expected a string");
  return node.Scalar();
}

void only_keys(const YamlDoc& doc, const YAML::Node& map, std::initializer_list<const char*> keys) {
  if (!map.IsMap()) throw config_error(doc, map, "expected a mapping");
  for (const auto& kv : map) {
    std::string k = kv.first.Scalar();
    bool ok = false;
    std::string known;
    for (const char* key : keys) {
      ok = ok || k == key;
      known += (known.empty() ? "" : ", ") + std::string(key);
    }
    if (!ok) throw config_error(doc, kv.first, "unknown key '" + k + "' (known: " + known + ")");
  }
}

bool as_bool(const YamlDoc& doc, const YAML::Node& n) {
  try {
    return n.as<bool>();
  } catch (const YAML::Exception&) {
    throw config_error(doc, n, "expected true or false");
  }
}

double as_double(const YamlDoc& doc, const YAML::Node& n) {
  try {
    return n.as<double>();
  } catch (const YAML::Exception&) {
    throw config_error(doc, n, "expected a number");
  }
}

}  // namespace ocslab
