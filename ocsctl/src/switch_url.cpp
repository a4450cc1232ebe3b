#include "ocslab/ocsctl/switch_url.h"

#include <cctype>
#include <charconv>

#include "ocslab/common/error.h"

namespace ocslab::ocs {

int SwitchUrl::default_port(Protocol p) {
  switch (p) {
    case Protocol::kTl1: return 3082;
    case Protocol::kTl1Ssh: return 22;
    case Protocol::kNetconf: return 830;
    case Protocol::kScpi: return 5025;
  }
  return 0;
}

const char* SwitchUrl::scheme(Protocol p) {
  switch (p) {
    case Protocol::kTl1: return "tl1";
    case Protocol::kTl1Ssh: return "tl1+ssh";
    case Protocol::kNetconf: return "netconf";
    case Protocol::kScpi: return "scpi";
  }
  return "?";
}

SwitchUrl SwitchUrl::parse(std::string_view text) {
  const std::string where = "switch URL '" + std::string(text) + "'";
  size_t sep = text.find("://");
  if (sep == std::string_view::npos) {
    throw Error(where + ": expected SCHEME://[USER@]HOST[:PORT] with scheme tl1, tl1+ssh, netconf or scpi");
  }
  std::string_view scheme_text = text.substr(0, sep);
  SwitchUrl url;
  if (scheme_text == "tl1") url.protocol = Protocol::kTl1;
  else if (scheme_text == "tl1+ssh") url.protocol = Protocol::kTl1Ssh;
  else if (scheme_text == "netconf") url.protocol = Protocol::kNetconf;
  else if (scheme_text == "scpi") url.protocol = Protocol::kScpi;
  else throw Error(where + ": unknown scheme '" + std::string(scheme_text) + "' (use tl1, tl1+ssh, netconf or scpi)");

  std::string_view rest = text.substr(sep + 3);
  if (!rest.empty() && rest.back() == '/') rest.remove_suffix(1);
  if (rest.find('/') != std::string_view::npos || rest.find('?') != std::string_view::npos) {
    throw Error(where + ": paths and query strings are not supported");
  }
  size_t at = rest.rfind('@');
  if (at != std::string_view::npos) {
    std::string_view userinfo = rest.substr(0, at);
    if (userinfo.find(':') != std::string_view::npos) {
      throw Error("switch URL must not contain a password; set " + std::string("OCSLAB_OCS_PASSWORD") +
                  " or use a credentials file (mode 0600)");
    }
    if (userinfo.empty()) throw Error(where + ": empty user name before '@'");
    url.user = std::string(userinfo);
    rest = rest.substr(at + 1);
  }
  std::string_view hostport = rest;
  std::string_view port_text;
  if (!hostport.empty() && hostport.front() == '[') {  // [v6]:port
    size_t close = hostport.find(']');
    if (close == std::string_view::npos) throw Error(where + ": unterminated '[' in host");
    url.host = std::string(hostport.substr(1, close - 1));
    std::string_view after = hostport.substr(close + 1);
    if (!after.empty()) {
      if (after.front() != ':') throw Error(where + ": unexpected text after ']'");
      port_text = after.substr(1);
      if (port_text.empty()) throw Error(where + ": empty port after ':'");
    }
  } else {
    size_t colon = hostport.rfind(':');
    if (colon != std::string_view::npos) {
      port_text = hostport.substr(colon + 1);
      hostport = hostport.substr(0, colon);
      if (port_text.empty()) throw Error(where + ": empty port after ':'");
    }
    url.host = std::string(hostport);
  }
  if (url.host.empty()) throw Error(where + ": missing host");
  for (char c : url.host) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '_' || c == ':')) {
      throw Error(where + ": invalid character '" + std::string(1, c) + "' in host");
    }
  }
  if (!port_text.empty()) {
    int port = 0;
    auto [ptr, ec] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
    if (ec != std::errc() || ptr != port_text.data() + port_text.size() || port < 1 || port > 65535) {
      throw Error(where + ": bad port '" + std::string(port_text) + "' (1..65535)");
    }
    url.port = port;
  } else {
    url.port = default_port(url.protocol);
  }
  if (url.user.empty() && url.protocol != Protocol::kScpi) url.user = "admin";
  return url;
}

std::string SwitchUrl::to_string() const {
  std::string out = std::string(scheme(protocol)) + "://";
  if (!user.empty()) out += user + "@";
  out += host.find(':') != std::string::npos ? "[" + host + "]" : host;
  out += ":" + std::to_string(port);
  return out;
}

}  // namespace ocslab::ocs
