// Switch addressing by URL: tl1://user@host:3082, tl1+ssh://user@host, netconf://user@host:830,
// scpi://host:5025. A URL never carries a password (see credentials.h).
#pragma once

#include <string>
#include <string_view>

namespace ocslab::ocs {

enum class Protocol { kTl1, kTl1Ssh, kNetconf, kScpi };

struct SwitchUrl {
  Protocol protocol = Protocol::kTl1;
  std::string user;  // empty: protocol default (admin for TL1/NETCONF)
  std::string host;
  int port = 0;      // filled with the protocol default when the URL has none

  // Throws ocslab::Error naming the URL and what is wrong (unknown scheme, password in
  // URL, bad port, missing host).
  static SwitchUrl parse(std::string_view text);
  std::string to_string() const;  // canonical form, always with user and port
  static int default_port(Protocol p);
  static const char* scheme(Protocol p);
};

}  // namespace ocslab::ocs
