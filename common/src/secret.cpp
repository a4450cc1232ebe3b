#include "ocslab/common/secret.h"

#include <fcntl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <fmt/format.h>
#include <vector>

#include "ocslab/common/error.h"

namespace ocslab {

std::string random_token(size_t bytes) {
  std::vector<unsigned char> raw(bytes);
  size_t got = 0;
  while (got < bytes) {
    ssize_t n = ::getrandom(raw.data() + got, bytes - got, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw SystemError("getrandom", errno);
    }
    got += static_cast<size_t>(n);
  }
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(2 * bytes);
  for (unsigned char c : raw) {
    out += kHex[c >> 4];
    out += kHex[c & 15];
  }
  return out;
}

std::string read_secret_file(const std::string& path, std::string_view what) {
  int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
  if (fd < 0) {
    int err = errno;
    if (err == ELOOP) throw Error(fmt::format("{} {}: is a symbolic link; refused (give the file itself)", what, path));
    throw SystemError(fmt::format("{} {}: open", what, path), err);
  }
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0) throw SystemError(fmt::format("{} {}: fstat", what, path), errno);
  if (!S_ISREG(st.st_mode)) throw Error(fmt::format("{} {}: not a regular file", what, path));
  if (st.st_uid != ::geteuid()) {
    throw Error(fmt::format("{} {}: owned by uid {}, not by this user (uid {}); refused", what, path, st.st_uid,
                            ::geteuid()));
  }
  if ((st.st_mode & 077) != 0) {
    throw Error(fmt::format("{} {}: mode {:04o} lets group or others read it; chmod 600 {}", what, path,
                            st.st_mode & 07777, path));
  }
  if (st.st_size > static_cast<off_t>(kMaxSecretBytes))
    throw Error(fmt::format("{} {}: {} bytes, more than a secret's {}", what, path, st.st_size, kMaxSecretBytes));
  std::string text;
  char buf[512];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n < 0) {
      if (errno == EINTR) continue;
      throw SystemError(fmt::format("{} {}: read", what, path), errno);
    }
    if (n == 0) break;
    text.append(buf, static_cast<size_t>(n));
    if (text.size() > kMaxSecretBytes)
      throw Error(fmt::format("{} {}: more than a secret's {} bytes", what, path, kMaxSecretBytes));
  }
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r' || text.back() == ' ' || text.back() == '\t'))
    text.pop_back();
  if (text.empty()) throw Error(fmt::format("{} {}: empty", what, path));
  return text;
}

void write_secret_file(const std::string& path, std::string_view secret) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) throw SystemError(fmt::format("create secret file {}", path), errno);
  std::string text(secret);
  text += '\n';
  size_t done = 0;
  while (done < text.size()) {
    ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int err = errno;
      ::close(fd);
      throw SystemError(fmt::format("write secret file {}", path), err);
    }
    done += static_cast<size_t>(n);
  }
  if (::close(fd) != 0) throw SystemError(fmt::format("close secret file {}", path), errno);
}

bool constant_time_equal(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  volatile unsigned char result = diff;  // keep the compiler from ending the loop early
  return result == 0;
}

}  // namespace ocslab
