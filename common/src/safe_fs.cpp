#include "ocslab/common/safe_fs.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>

#include "ocslab/common/error.h"

namespace ocslab {

namespace {

std::string describe_uid(uid_t uid) {
  passwd pw{};
  passwd* found = nullptr;
  char buf[1024];
  if (::getpwuid_r(uid, &pw, buf, sizeof(buf), &found) == 0 && found) return fmt::format("uid {} ({})", uid, pw.pw_name);
  return fmt::format("uid {}", uid);
}

// Why `path`, which a no-follow open refused with errno `err`, cannot be used; empty when it is
// not a symlink (the caller reports errno then).
std::string symlink_refusal(const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0 || !S_ISLNK(st.st_mode)) return "";
  std::error_code ec;
  auto target = std::filesystem::read_symlink(path, ec);
  return fmt::format("{} is a symlink{}; refusing to follow it", path, ec ? "" : " (to " + target.string() + ")");
}

}  // namespace

void ensure_own_dir(const std::string& path, DirPolicy policy) {
  if (path.empty()) throw Error("empty folder name");
  std::filesystem::path p(path);
  std::error_code ec;
  if (p.has_parent_path() && p.parent_path() != p.root_path()) std::filesystem::create_directories(p.parent_path(), ec);
  if (::mkdir(path.c_str(), 0700) != 0 && errno != EEXIST) throw SystemError("cannot create folder " + path, errno);
  int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    int e = errno;
    std::string why = symlink_refusal(path);
    if (!why.empty()) throw Error(why);
    if (e == ENOTDIR) throw Error(path + " is not a folder; refusing to use it");
    throw SystemError("cannot open folder " + path, e);
  }
  struct stat st {};
  int rc = ::fstat(fd, &st);
  int e = errno;
  ::close(fd);
  if (rc != 0) throw SystemError("fstat " + path, e);
  if (!S_ISDIR(st.st_mode)) throw Error(path + " is not a folder; refusing to use it");
  if (st.st_uid != ::geteuid()) {
    throw Error(fmt::format("{} is owned by {}, not by this user ({}); refusing to use it (remove it, or choose "
                            "another folder)",
                            path, describe_uid(st.st_uid), describe_uid(::geteuid())));
  }
  unsigned mode = st.st_mode & 07777;
  if (policy == DirPolicy::kPrivate && mode != 0700) {
    throw Error(fmt::format("{} has mode {:04o}, not 0700 (only its owner may use it); refusing to use it", path, mode));
  }
  if (policy == DirPolicy::kOwned && (mode & 022) != 0) {
    throw Error(fmt::format("{} has mode {:04o}: others may write into it; refusing to use it", path, mode));
  }
}

int open_no_follow(const std::string& path, int flags, mode_t mode, const std::string& what) {
  // O_NONBLOCK: a FIFO planted at the name must not block the open; cleared again below.
  int fd = ::open(path.c_str(), flags | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK, mode);
  if (fd < 0) {
    int e = errno;
    std::string why = symlink_refusal(path);
    if (!why.empty()) throw Error(what + ": " + why);
    if (e == EEXIST && (flags & O_EXCL)) throw Error(what + ": " + path + " already exists; refusing to overwrite it");
    struct stat st {};
    if (::lstat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) {  // a FIFO without a reader: ENXIO
      throw Error(what + ": " + path + " is not a regular file; refusing to use it");
    }
    throw SystemError("cannot open " + what + " " + path, e);
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw Error(what + ": " + path + " is not a regular file; refusing to use it");
  }
  if ((flags & O_NONBLOCK) == 0) ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  return fd;
}

}  // namespace ocslab
