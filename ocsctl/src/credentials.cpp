#include "ocslab/ocsctl/credentials.h"

#include <fmt/format.h>

#include <cctype>
#include <charconv>
#include <cstdlib>
#include <vector>

#include "ocslab/common/error.h"
#include "ocslab/common/file.h"
#include "ocslab/common/text.h"

namespace ocslab::ocs {

namespace {

// A credentials file holds a few lines; anything this large is not one.
constexpr size_t kMaxCredentialsFile = 1 << 20;

}  // namespace

std::string default_credentials_path() {
  if (const char* p = std::getenv(kCredentialsEnv); p && *p) return p;
  const char* home = std::getenv("HOME");
  return std::string(home ? home : "") + "/.config/ocslab/credentials";
}

HostBinding parse_host_binding(std::string_view hostport, const std::string& where) {
  HostBinding b;
  std::string_view port_text;
  bool has_port = false;
  if (!hostport.empty() && hostport.front() == '[') {  // [v6] or [v6]:port
    size_t close = hostport.find(']');
    if (close == std::string_view::npos)
      throw Error(where + ": unterminated '[' in host '" + std::string(hostport) + "'");
    b.host = std::string(hostport.substr(1, close - 1));
    std::string_view after = hostport.substr(close + 1);
    if (!after.empty()) {
      if (after.front() != ':') {
        throw Error(where + ": expected ':<port>' after ']' in '" + std::string(hostport) + "'");
      }
      port_text = after.substr(1);
      has_port = true;
    }
  } else {
    size_t colon = hostport.find(':');
    if (colon != std::string_view::npos && hostport.find(':', colon + 1) != std::string_view::npos) {
      throw Error(where + ": IPv6 host '" + std::string(hostport) + "' must be in brackets: [" + std::string(hostport) +
                  "] or [ADDRESS]:PORT");
    }
    b.host = std::string(hostport.substr(0, colon));
    if (colon != std::string_view::npos) {
      port_text = hostport.substr(colon + 1);
      has_port = true;
    }
  }
  if (b.host.empty()) throw Error(where + ": empty host in '" + std::string(hostport) + "'");
  if (has_port) {
    int port = 0;
    auto [ptr, ec] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
    if (port_text.empty() || ec != std::errc() || ptr != port_text.data() + port_text.size() || port < 1 ||
        port > 65535) {
      throw Error(where + ": bad port in '" + std::string(hostport) + "' (1..65535)");
    }
    b.port = port;
  }
  return b;
}

bool is_loopback_host(std::string_view host) {
  if (host == "localhost" || host == "::1") return true;
  // 127.0.0.0/8 as a dotted quad: four numbers 0..255, the first 127.
  if (host.substr(0, 4) != "127.") return false;
  int parts = 0;
  size_t i = 0;
  while (i <= host.size()) {
    size_t end = host.find('.', i);
    if (end == std::string_view::npos) end = host.size();
    std::string_view part = host.substr(i, end - i);
    int v = -1;
    auto [ptr, ec] = std::from_chars(part.data(), part.data() + part.size(), v);
    if (part.empty() || part.size() > 3 || ec != std::errc() || ptr != part.data() + part.size() || v > 255)
      return false;
    ++parts;
    i = end + 1;
  }
  return parts == 4;
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
  HostBinding b = parse_host_binding(fields[0], where);
  CredentialEntry e;
  e.host = std::move(b.host);
  e.port = b.port;
  e.user = std::string(fields[1]);
  e.password = std::string(fields[2]);
  return e;
}

std::optional<std::string> lookup_password(const SwitchUrl& url, const std::string& path) {
  auto text = read_checked_file(path, "credentials file", kMaxCredentialsFile, FileAccess::kOwnerOnly);
  if (!text) return std::nullopt;
  std::string_view rest = *text;
  int lineno = 0;
  while (!rest.empty()) {
    size_t nl = rest.find('\n');
    std::string_view line = rest.substr(0, nl);
    rest = nl == std::string_view::npos ? std::string_view{} : rest.substr(nl + 1);
    ++lineno;
    auto e = parse_credentials_line(line, path + ":" + std::to_string(lineno));
    if (e && HostBinding{e->host, e->port}.matches(url) && e->user == url.user) return e->password;
  }
  return std::nullopt;
}

namespace {

// Whether $OCSLAB_OCS_PASSWORD may go to url: the hosts $OCSLAB_OCS_PASSWORD_HOST names, or
// without it a switch on loopback.
bool env_password_bound_to(const SwitchUrl& url) {
  const char* hosts = std::getenv(kPasswordHostEnv);
  if (!hosts || !*hosts) return is_loopback_host(url.host);
  // Every item is parsed, so a malformed one is refused whichever switch is asked for.
  bool bound = false;
  std::string_view list = hosts;
  while (!list.empty()) {
    size_t comma = list.find(',');
    std::string_view item = trim_blanks(list.substr(0, comma));
    list = comma == std::string_view::npos ? std::string_view{} : list.substr(comma + 1);
    if (!item.empty() && parse_host_binding(item, std::string("$") + kPasswordHostEnv).matches(url)) bound = true;
  }
  return bound;
}

}  // namespace

std::optional<std::string> resolve_password(const SwitchUrl& url, const std::string& path) {
  if (url.protocol == Protocol::kScpi) return std::nullopt;  // no login: nothing to send
  const char* env = std::getenv(kPasswordEnv);
  if (env && env_password_bound_to(url)) return std::string(env);
  if (auto p = lookup_password(url, path)) return p;
  if (!env) return std::nullopt;
  const char* hosts = std::getenv(kPasswordHostEnv);
  const std::string bound = hosts && *hosts
                                ? fmt::format("it is bound to ${}='{}'", kPasswordHostEnv, hosts)
                                : fmt::format("without ${} it applies only to a switch on loopback", kPasswordHostEnv);
  throw Error(fmt::format(
      "${} is not for switch host '{}' ({}): {}; refusing to send it there. If it is this switch's password, set "
      "{}={}; else add a line for {} to the credentials file {} or unset {}",
      kPasswordEnv, url.host, url.to_string(), bound, kPasswordHostEnv,
      url.host.find(':') != std::string::npos ? "[" + url.host + "]" : url.host, url.host, path, kPasswordEnv));
}

}  // namespace ocslab::ocs
