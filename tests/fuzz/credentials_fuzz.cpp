// Credentials files are user input read through the public lookup API (a file path: the
// input is written to a 0600 file in a private folder). Any bytes must give a password, no
// match, or an ocslab::Error naming file:line that never echoes a password. Properties:
//  - a first line "<host>[:<port>] <user> <password>" with a plain host name and no '#'
//    (comment and IPv6 handling are the parser's business, so such lines are left out of
//    the oracle) is found for its own host, port and user, and gives its password;
//  - a password found is non-empty, holds no whitespace and is text of the file;
//  - the first match wins: lines appended after the file (even malformed) change nothing;
//  - an error names the file and a line that exists, and holds no word of that line after
//    its first (the user and the password).
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "ocslab/common/error.h"
#include "ocslab/ocsctl/credentials.h"

namespace ocs = ocslab::ocs;

namespace {

const std::string& path() {
  static const std::string p = [] {
    std::string d = std::filesystem::temp_directory_path().string() + "/credentials-fuzz-" + std::to_string(::getpid());
    std::filesystem::create_directories(d);
    ::chmod(d.c_str(), 0700);
    return d + "/credentials";
  }();
  return p;
}

void write_file(const std::string& text) {
  int fd = ::open(path().c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) __builtin_trap();
  ::fchmod(fd, 0600);
  size_t done = 0;
  while (done < text.size()) {
    ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n <= 0) __builtin_trap();
    done += static_cast<size_t>(n);
  }
  ::close(fd);
}

// What lookup_password gives: a password, nothing, or the error's message.
struct Outcome {
  std::optional<std::string> password;
  std::optional<std::string> error;
};

Outcome lookup(const ocs::SwitchUrl& url, const std::string& text) {
  write_file(text);
  Outcome o;
  try {
    o.password = ocs::lookup_password(url, path());
  } catch (const ocslab::Error& e) {
    o.error = e.what();
  }
  return o;
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  size_t start = 0;
  for (;;) {
    size_t nl = text.find('\n', start);
    out.push_back(text.substr(start, nl == std::string::npos ? std::string::npos : nl - start));
    if (nl == std::string::npos) break;
    start = nl + 1;
  }
  if (out.size() > 1 && out.back().empty()) out.pop_back();  // a final newline ends the last line
  return out;
}

std::vector<std::string> words_of(const std::string& line) {
  std::vector<std::string> out;
  std::string w;
  for (char c : line) {
    if (std::isspace(static_cast<unsigned char>(c))) {
      if (!w.empty()) out.push_back(w);
      w.clear();
    } else {
      w += c;
    }
  }
  if (!w.empty()) out.push_back(w);
  return out;
}

bool has_space(const std::string& s) {
  for (char c : s) {
    if (std::isspace(static_cast<unsigned char>(c))) return true;
  }
  return false;
}

void check(const ocs::SwitchUrl& url, const std::string& text, const std::vector<std::string>& lines,
           const Outcome& o) {
  if (o.password) {
    if (o.password->empty() || has_space(*o.password) || text.find(*o.password) == std::string::npos) __builtin_trap();
    // First match wins: what comes after is never read.
    Outcome again = lookup(url, text + "\nappended-garbage\n");
    if (again.password != o.password || again.error) __builtin_trap();
  }
  if (o.error) {
    const std::string& m = *o.error;
    const std::string head = path() + ":";
    if (m.compare(0, head.size(), head) != 0) __builtin_trap();
    size_t pos = head.size();
    size_t lineno = 0;
    while (pos < m.size() && std::isdigit(static_cast<unsigned char>(m[pos])) && lineno < 1000000)
      lineno = lineno * 10 + static_cast<size_t>(m[pos++] - '0');
    if (lineno < 1 || lineno > lines.size() || pos >= m.size() || m[pos] != ':') __builtin_trap();
    // Never echo the line beyond its first word: it holds a password.
    const std::string rest = m.substr(pos);
    // The parser's own wording (credentials.cpp's messages): a word of the line that also
    // occurs there proves nothing.
    const std::string form =
        "expected '<host>[:<port>] <user> <password>' (got field(s); a password cannot contain blanks) "
        "empty host in bad port in (1..65535) unterminated '[' in host expected ':<port>' after ']' in "
        "IPv6 host must be in brackets: [";
    auto words = words_of(lines[lineno - 1]);
    // The host (the first word) may be quoted in the message, whole or up to a NUL byte (what()
    // ends there): a later word that only meets the message across the host's opening quote (a
    // password "'ab" and the message's "in 'ab...") is not an echo, so the host's text after each
    // quote is blanked out of the message before the search.
    std::string scrubbed = rest;
    if (!words.empty()) {
      for (size_t q = scrubbed.find('\''); q != std::string::npos; q = scrubbed.find('\'', q + 1)) {
        size_t n = 0;
        while (q + 1 + n < scrubbed.size() && n < words[0].size() && scrubbed[q + 1 + n] == words[0][n]) ++n;
        scrubbed.replace(q + 1, n, std::string(n, ' '));
      }
    }
    for (size_t i = 1; i < words.size(); ++i) {
      const std::string& w = words[i];
      if (w.size() < 3 || form.find(w) != std::string::npos || words[0].find(w) != std::string::npos) continue;
      if (scrubbed.find(w) != std::string::npos) __builtin_trap();
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 4096) return 0;  // longer files only make each run slower, not different
  std::string text(reinterpret_cast<const char*>(data), size);
  auto lines = lines_of(text);

  // A switch no line is likely to name, then one the first line names.
  ocs::SwitchUrl fixed;
  fixed.host = "ocs1.example";
  fixed.user = "admin";
  fixed.port = 3082;
  check(fixed, text, lines, lookup(fixed, text));

  auto words = words_of(lines.front());
  if (words.size() != 3 || lines.front().find('#') != std::string::npos) return 0;
  // Only plain host names and 1..65535 ports in the oracle: IPv6 and odd host forms are the
  // parser's own business.
  ocs::SwitchUrl own;
  own.user = words[1];
  own.host = words[0];
  own.port = 3082;
  if (auto colon = words[0].find(':'); colon != std::string::npos) {
    std::string port = words[0].substr(colon + 1);
    if (port.empty() || port.size() > 5 || port.find_first_not_of("0123456789") != std::string::npos) return 0;
    own.port = std::stoi(port);
    if (own.port < 1 || own.port > 65535) return 0;
    own.host = words[0].substr(0, colon);
  }
  const char* host_chars = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-_";
  if (own.host.empty() || own.host.find_first_not_of(host_chars) != std::string::npos) return 0;
  Outcome o = lookup(own, text);
  check(own, text, lines, o);
  if (o.password != words[2]) __builtin_trap();
  return 0;
}
