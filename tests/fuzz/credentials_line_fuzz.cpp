// Credentials files are written by hand: any line must parse to an entry whose fields hold no
// blank and whose port is 0 or 1..65535, or give an ocslab::Error naming the line that never
// quotes the password field. Each line is also a $OCSLAB_OCS_PASSWORD_HOST item (the host
// field's parser alone): a binding that parses has a host and a port 0..65535 and matches a
// switch URL with exactly that host and port, and no other host; is_loopback_host never
// throws and says yes only to what starts like a loopback name.
#include <cctype>
#include <cstddef>
#include <cstdint>
#include <string>

#include "ocslab/common/error.h"
#include "ocslab/ocsctl/credentials.h"

namespace {

bool has_blank(const std::string& s) {
  for (char c : s) {
    if (std::isspace(static_cast<unsigned char>(c))) return true;
  }
  return false;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(start, end - start);
    try {
      auto e = ocslab::ocs::parse_credentials_line(line, "f:1");
      if (e) {
        if (e->host.empty() || e->user.empty() || e->password.empty()) __builtin_trap();
        if (has_blank(e->host) || has_blank(e->user) || has_blank(e->password)) __builtin_trap();
        if (e->port < 0 || e->port > 65535) __builtin_trap();
      }
    } catch (const ocslab::Error& err) {
      std::string what = err.what();
      if (what.rfind("f:1: ", 0) != 0) __builtin_trap();
    }
    try {
      auto b = ocslab::ocs::parse_host_binding(line, "$X");
      if (b.host.empty() || b.port < 0 || b.port > 65535) __builtin_trap();
      ocslab::ocs::SwitchUrl url;
      url.host = b.host;
      url.port = b.port == 0 ? 3082 : b.port;
      if (!b.matches(url)) __builtin_trap();
      url.host += "x";
      if (b.matches(url)) __builtin_trap();
    } catch (const ocslab::Error& err) {
      std::string what = err.what();
      if (what.rfind("$X: ", 0) != 0) __builtin_trap();
    }
    if (ocslab::ocs::is_loopback_host(line) && line != "localhost" && line != "::1" && line.rfind("127.", 0) != 0)
      __builtin_trap();
    start = end + 1;
  }
  return 0;
}
