#include "ocslab/ocsctl/credentials.h"

#include <sys/stat.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "ocslab/common/error.h"

namespace ocslab::ocs {

std::string default_credentials_path() {
  if (const char* p = std::getenv(kCredentialsEnv); p && *p) return p;
  const char* home = std::getenv("HOME");
  return std::string(home ? home : "") + "/.config/ocslab/credentials";
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
    auto hash = line.find('#');
    if (hash != std::string::npos) line.erase(hash);
    std::istringstream ls(line);
    std::string hostport, user, password, extra;
    if (!(ls >> hostport)) continue;
    if (!(ls >> user >> password) || (ls >> extra)) {
      // Never echo the line: it holds a password.
      throw Error(path + ":" + std::to_string(lineno) + ": expected '<host>[:<port>] <user> <password>'");
    }
    std::string host = hostport;
    int port = 0;
    if (auto colon = hostport.rfind(':'); colon != std::string::npos) {
      host = hostport.substr(0, colon);
      try {
        port = std::stoi(hostport.substr(colon + 1));
      } catch (const std::exception&) {
        throw Error(path + ":" + std::to_string(lineno) + ": bad port in '" + hostport + "'");
      }
    }
    if (host == url.host && (port == 0 || port == url.port) && user == url.user) return password;
  }
  return std::nullopt;
}

std::optional<std::string> resolve_password(const SwitchUrl& url, const std::string& path) {
  if (const char* p = std::getenv(kPasswordEnv); p) return std::string(p);
  return lookup_password(url, path);
}

}  // namespace ocslab::ocs
