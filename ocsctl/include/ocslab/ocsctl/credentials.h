// Where switch passwords come from, and to which switch each may go: the environment variable
// OCSLAB_OCS_PASSWORD bound to a host, or a credentials file keyed by host that only its owner
// can read (mode 0600). Never the command line, never logs.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ocslab/ocsctl/switch_url.h"

namespace ocslab::ocs {

inline constexpr const char* kPasswordEnv = "OCSLAB_OCS_PASSWORD";
// The switch(es) OCSLAB_OCS_PASSWORD is for: HOST[:PORT][,HOST[:PORT]...], an IPv6 host in
// brackets. Without it the variable applies only to a switch on loopback (is_loopback_host).
inline constexpr const char* kPasswordHostEnv = "OCSLAB_OCS_PASSWORD_HOST";
inline constexpr const char* kCredentialsEnv = "OCSLAB_OCS_CREDENTIALS";

// Default file: $OCSLAB_OCS_CREDENTIALS, else ~/.config/ocslab/credentials.
std::string default_credentials_path();

// A switch a password is bound to: a host as in the switch URL (an IPv6 address without its
// brackets) and a port, 0 for any.
struct HostBinding {
  std::string host;
  int port = 0;
  bool matches(const SwitchUrl& url) const { return host == url.host && (port == 0 || port == url.port); }
};

// "host", "host:port", "[v6]" or "[v6]:port". Throws ocslab::Error starting with `where`
// and quoting text (a host, never a secret) for a malformed one.
HostBinding parse_host_binding(std::string_view text, const std::string& where);

// 127.0.0.0/8, ::1 or "localhost": a switch on this machine (the emulator, the virtual lab, an
// SSH tunnel's local end). A password sent there does not cross a network.
bool is_loopback_host(std::string_view host);

// One entry of a credentials file.
struct CredentialEntry {
  std::string host;  // as in the switch URL: an IPv6 address without its brackets
  int port = 0;      // 0: any port
  std::string user;
  std::string password;
};

// Credentials file format (docs/ocsctl.md), one entry per line, fields separated by blanks:
//   <host>[:<port>] <user> <password> [# comment]
// A line whose first non-blank character is '#' is a comment, and so is everything after the
// three fields when it starts with '#'; a '#' inside a field (a password) is part of it.
// An IPv6 host is written in brackets: [fe80::1] or [fe80::1]:3082. Passwords cannot contain
// blanks. Returns nullopt for a blank or comment line; throws ocslab::Error starting with
// `where` (file:line) for a malformed one, never echoing the line (it holds a password).
std::optional<CredentialEntry> parse_credentials_line(std::string_view line, const std::string& where);

// The first line matching host (and port, when the line names one) and user wins. The file
// is opened without following a symbolic link and checked on the open descriptor: it must be
// a regular file owned by this user or root with no access for group or others. Throws
// ocslab::Error naming the file and what is wrong (symbolic link, owner, mode with the chmod
// to run, or file:line of a malformed line). Returns nullopt when nothing matches or the file
// does not exist.
std::optional<std::string> lookup_password(const SwitchUrl& url, const std::string& path);

// The one place every tool gets a switch password from. SCPI has no login: nullopt. Else
// $OCSLAB_OCS_PASSWORD when it is bound to url (its host is named in
// $OCSLAB_OCS_PASSWORD_HOST, or that is unset and url's host is on loopback), then the file.
// When the variable is set, is not bound to url and the file has no entry either, throws
// ocslab::Error naming url's host and both variables: the password of one switch is never
// sent to another.
std::optional<std::string> resolve_password(const SwitchUrl& url, const std::string& path);

}  // namespace ocslab::ocs
