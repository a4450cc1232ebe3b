// Where switch passwords come from: the environment variable OCSLAB_OCS_PASSWORD, or a
// credentials file readable only by its owner (mode 0600). Never the command line, never logs.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "ocslab/ocsctl/switch_url.h"

namespace ocslab::ocs {

inline constexpr const char* kPasswordEnv = "OCSLAB_OCS_PASSWORD";
inline constexpr const char* kCredentialsEnv = "OCSLAB_OCS_CREDENTIALS";

// Default file: $OCSLAB_OCS_CREDENTIALS, else ~/.config/ocslab/credentials.
std::string default_credentials_path();

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

// The first line matching host (and port, when the line names one) and user wins.
// Throws ocslab::Error when the file exists but is group/world readable or malformed
// (file:line). Returns nullopt when nothing matches or the file does not exist.
std::optional<std::string> lookup_password(const SwitchUrl& url, const std::string& path);

// Environment variable first, then the file.
std::optional<std::string> resolve_password(const SwitchUrl& url, const std::string& path);

}  // namespace ocslab::ocs
