#include "ocslab/ocsctl/credentials.h"

#include <sys/stat.h>

#include <cctype>
#include <charconv>
#include <cstdlib>
#include <fstream>
#include <vector>

#include "ocslab/common/error.h"

namespace ocslab::ocs {

std::string default_credentials_path() {
  if (const char* p = std::getenv(kCredentialsEnv); p && *p) return p;
  const char* home = std::getenv("HOME");
  return std::string(home ? home : "") + "/.config/ocslab/credentials";
}

std::optional<CredentialEntry> parse_credentials_line(std::string_view line, const std::string& where) {
  // Blank-separated fields; '#' is only special where a field would start.
  std::vector<std::string_view> fields;
  size_t i = 0;
  while (i < line.size()) {
    if (std::isspace(static_cast<unsigned char>(line[i]))) {
      ++i;
      continue;
    }
    if (line[i] == '#' && (fields.empty() || fields.size() == 3)) break;  // the rest is a comment
    size_t end = i;
    while (end < line.size() && !std::isspace(static_cast<unsigned char>(line[end]))) ++end;
    fields.push_back(line.substr(i, end - i));
    i = end;
  }
  if (fields.empty()) return std::nullopt;
  // Never echo the line or a field after the host: they hold a password.
  if (fields.size() != 3) {
    throw Error(where + ": expected '<host>[:<port>] <user> <password>' (got " + std::to_string(fields.size()) +
                " field(s); a password cannot contain blanks)");
  }
  std::string_view hostport = fields[0];
  CredentialEntry e;
  std::string_view port_text;
  bool has_port = false;
  if (hostport.front() == '[') {  // [v6] or [v6]:port
    size_t close = hostport.find(']');
    if (close == std::string_view::npos)
      throw Error(where + ": unterminated '[' in host '" + std::string(hostport) + "'");
    e.host = std::string(hostport.substr(1, close - 1));
    std::string_view after = hostport.substr(close + 1);
    if (!after.empty()) {
      if (after.front() != ':') {
        throw Error(where + ": expected ':<port>' after ']' in '" + std::string(hostport) + "'");
      }
      port_text = after.substr(1);
      has_port = true;
    }
    if (e.host.empty()) throw Error(where + ": empty host in '" + std::string(hostport) + "'");
  } else {
    size_t colon = hostport.find(':');
    if (colon != std::string_view::npos && hostport.find(':', colon + 1) != std::string_view::npos) {
      throw Error(where + ": IPv6 host '" + std::string(hostport) + "' must be in brackets: [" + std::string(hostport) +
                  "] or [ADDRESS]:PORT");
    }
    e.host = std::string(hostport.substr(0, colon));
    if (colon != std::string_view::npos) {
      port_text = hostport.substr(colon + 1);
      has_port = true;
    }
    if (e.host.empty()) throw Error(where + ": empty host in '" + std::string(hostport) + "'");
  }
  if (has_port) {
    int port = 0;
    auto [ptr, ec] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
    if (port_text.empty() || ec != std::errc() || ptr != port_text.data() + port_text.size() || port < 1 ||
        port > 65535) {
      throw Error(where + ": bad port in '" + std::string(hostport) + "' (1..65535)");
    }
    e.port = port;
  }
  e.user = std::string(fields[1]);
  e.password = std::string(fields[2]);
  return e;
}

std::optional<std::string> lookup_password(const SwitchUrl& url, const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return std::nullopt;
  if (st.st_mode & (S_IRWXG | S_IRWXO)) {
    throw Error("credentials file '" + path + "' is readable by group or others; run: chmod 600 " + path);
  }
  std::ifstream in(path);
  if (!in) throw Error("cannot read credentials file '" + path + "'");
  std::string line;
  int lineno = 0;
  while (std::getline(in, line)) {
    ++lineno;
    auto e = parse_credentials_line(line, path + ":" + std::to_string(lineno));
    if (e && e->host == url.host && (e->port == 0 || e->port == url.port) && e->user == url.user) return e->password;
  }
  return std::nullopt;
}

std::optional<std::string> resolve_password(const SwitchUrl& url, const std::string& path) {
  if (const char* p = std::getenv(kPasswordEnv); p) return std::string(p);
  return lookup_password(url, path);
}

}  // namespace ocslab::ocs
