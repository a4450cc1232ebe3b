// Where switch passwords come from: the environment variable OCSLAB_OCS_PASSWORD, or a
// credentials file readable only by its owner (mode 0600). Never the command line, never logs.
#pragma once

#include <optional>
#include <string>

#include "ocslab/ocsctl/switch_url.h"

namespace ocslab::ocs {

inline constexpr const char* kPasswordEnv = "OCSLAB_OCS_PASSWORD";
inline constexpr const char* kCredentialsEnv = "OCSLAB_OCS_CREDENTIALS";

// Default file: $OCSLAB_OCS_CREDENTIALS, else ~/.config/ocslab/credentials.
std::string default_credentials_path();

// Credentials file format, one entry per line ('#' comments):
//   <host>[:<port>] <user> <password>
// The first line matching host (and port, when the line names one) and user wins.
// Throws ocslab::Error when the file exists but is group/world readable or malformed
// (file:line). Returns nullopt when nothing matches or the file does not exist.
std::optional<std::string> lookup_password(const SwitchUrl& url, const std::string& path);

// Environment variable first, then the file.
std::optional<std::string> resolve_password(const SwitchUrl& url, const std::string& path);

}  // namespace ocslab::ocs
