#include "ocslab/common/durable_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "ocslab/common/error.h"

namespace ocslab {

namespace {

constexpr size_t kBufferBytes = 64 * 1024;

}  // namespace

DurableFile DurableFile::create(const std::string& path, mode_t mode) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
  if (fd < 0) throw SystemError("cannot create " + path, errno);
  return DurableFile(fd, path);
}

DurableFile DurableFile::append_to(const std::string& path) {
  int fd = ::open(path.c_str(), O_WRONLY | O_APPEND | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) throw SystemError("cannot append to " + path, errno);
  return DurableFile(fd, path);
}

DurableFile::DurableFile(DurableFile&& o) noexcept
    : fd_(o.fd_), path_(std::move(o.path_)), buf_(std::move(o.buf_)), written_(o.written_) {
  o.fd_ = -1;
}

DurableFile& DurableFile::operator=(DurableFile&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = o.fd_;
    path_ = std::move(o.path_);
    buf_ = std::move(o.buf_);
    written_ = o.written_;
    o.fd_ = -1;
  }
  return *this;
}

DurableFile::~DurableFile() {
  if (fd_ >= 0) ::close(fd_);
}

void DurableFile::fail(const char* what, int err) const {
  throw SystemError(std::string("cannot ") + what + " " + path_, err);
}

void DurableFile::append(std::string_view bytes) {
  buf_.append(bytes);
  if (buf_.size() >= kBufferBytes) flush();
}

void DurableFile::flush() {
  if (fd_ < 0) fail("write (closed)", EBADF);
  size_t off = 0;
  while (off < buf_.size()) {
    ssize_t n = ::write(fd_, buf_.data() + off, buf_.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      int err = n < 0 ? errno : EIO;
      // What reached the file stays counted; the rest of the buffer is dropped so that one
      // failed append does not grow the buffer without bound on a full disk.
      written_ += off;
      buf_.clear();
      fail("write", err);
    }
    off += static_cast<size_t>(n);
  }
  written_ += off;
  buf_.clear();
}

void DurableFile::sync() {
  flush();
  datasync();
}

void DurableFile::datasync() const {
  if (fd_ < 0 || ::fdatasync(fd_) != 0) fail("sync", fd_ < 0 ? EBADF : errno);
}

void DurableFile::close() {
  sync();
  int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) fail("close", errno);
}

void sync_directory(const std::string& dir) {
  int fd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) throw SystemError("cannot open directory " + dir, errno);
  int rc = ::fsync(fd);
  int err = errno;
  ::close(fd);
  if (rc != 0) throw SystemError("cannot sync directory " + dir, err);
}

void write_file_atomic(const std::string& path, const std::function<void(DurableFile&)>& fill, mode_t mode) {
  // Unique per process and call: two threads saving the same file never share a temporary.
  static std::atomic<unsigned> counter{0};
  const std::string tmp = path + ".tmp-" + std::to_string(::getpid()) + "-" + std::to_string(counter++);
  ::unlink(tmp.c_str());  // a stray one of an earlier process with this pid
  try {
    DurableFile f = DurableFile::create(tmp, mode);
    fill(f);
    f.close();
    if (::rename(tmp.c_str(), path.c_str()) != 0) throw SystemError("cannot rename " + tmp + " to " + path, errno);
  } catch (const SystemError& e) {
    ::unlink(tmp.c_str());
    // Named by the file the caller asked for, not the temporary one.
    throw SystemError("cannot write " + path, e.code());
  } catch (...) {
    ::unlink(tmp.c_str());
    throw;
  }
  sync_directory(std::filesystem::path(path).parent_path().string());
}

}  // namespace ocslab
