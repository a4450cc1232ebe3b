#include "ocslab/common/file.h"

#include "ocslab/common/durable_file.h"

#include <fcntl.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>

#include "ocslab/common/error.h"

namespace ocslab {

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("cannot read " + path + ": " + std::strerror(errno));
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) throw Error("cannot read " + path + ": read error");
  return text;
}

std::string read_file_or_empty(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return "";
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

namespace {

// Closes the descriptor on every way out.
struct Fd {
  int fd;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

std::string user_name(uid_t uid) {
  struct passwd pw {};
  struct passwd* found = nullptr;
  char buf[1024];
  if (::getpwuid_r(uid, &pw, buf, sizeof buf, &found) == 0 && found) return fmt::format("uid {}, {}", uid, pw.pw_name);
  return fmt::format("uid {}", uid);
}

// Why st is not a private file of this user, or "" when it is.
std::string not_private(const struct stat& st, const std::string& path) {
  const uid_t me = ::geteuid();
  if (st.st_uid != me && st.st_uid != 0) {
    return fmt::format("is owned by another user ({}), not by this user ({}) or root", user_name(st.st_uid),
                       user_name(me));
  }
  if (st.st_mode & (S_IRWXG | S_IRWXO)) {
    return fmt::format("gives group or others access (mode {:04o}); run: chmod 600 {}", st.st_mode & 07777, path);
  }
  return "";
}

}  // namespace

std::optional<std::string> read_checked_file(const std::string& path, const std::string& what, size_t max_bytes,
                                             FileAccess access) {
  const std::string name = what.empty() ? path : what + " '" + path + "'";
  // O_NONBLOCK: a FIFO put in the file's place must not hang the open; it is refused below.
  Fd f{::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK)};
  if (f.fd < 0 && errno == ENOENT) return std::nullopt;
  if (f.fd < 0 && errno == ELOOP) throw Error(name + " is a symbolic link; refused (name the file itself)");
  if (f.fd < 0) throw SystemError("cannot open " + name, errno);
  struct stat st {};
  if (::fstat(f.fd, &st) != 0) throw SystemError("cannot stat " + name, errno);
  if (!S_ISREG(st.st_mode)) throw Error(name + " is not a regular file; refused");
  if (access == FileAccess::kOwnerOnly) {
    if (std::string why = not_private(st, path); !why.empty()) throw Error(name + " " + why);
  }
  std::string text;
  char buf[8192];
  for (;;) {
    ssize_t n = ::read(f.fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw SystemError("cannot read " + name, errno);
    if (n == 0) break;
    text.append(buf, static_cast<size_t>(n));
    if (text.size() > max_bytes) throw Error(fmt::format("{} is larger than {} bytes; refused", name, max_bytes));
  }
  return text;
}

void write_private_file(const std::string& path, std::string_view text) {
  write_file_atomic(path, [&](DurableFile& f) { f.append(text); }, 0600);
}

}  // namespace ocslab
