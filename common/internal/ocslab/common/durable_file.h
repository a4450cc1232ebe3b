// Files whose bytes must survive a crash of the writer: written through their descriptor, with
// an explicit point (sync) after which they are on disk, and whole-file replacement that a
// reader never sees half done. The runner's capture and results files use it.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

namespace ocslab {

class DurableFile {
 public:
  // Creates path for writing with mode (0644 unless told): O_EXCL (never an existing file,
  // never through a symlink). Throws Error naming the path.
  static DurableFile create(const std::string& path, mode_t mode = 0644);
  // Opens an existing regular file for appending (O_NOFOLLOW): writes go after its last byte.
  static DurableFile append_to(const std::string& path);

  DurableFile(DurableFile&& o) noexcept;
  DurableFile& operator=(DurableFile&& o) noexcept;
  DurableFile(const DurableFile&) = delete;
  DurableFile& operator=(const DurableFile&) = delete;
  ~DurableFile();  // closes; what was not synced may or may not be on disk

  // Buffers bytes; writes them out once the buffer passes 64 KiB. Throws Error naming the file
  // when a write fails (ENOSPC: a full disk); the bytes of that append are then not written.
  void append(std::string_view bytes);
  void flush();  // write(2) whatever is buffered
  void sync();   // flush, then fdatasync: everything appended so far is on disk
  // fdatasync alone: what earlier flushes wrote reaches the disk. Safe while another thread
  // appends (not while it closes).
  void datasync() const;
  void close();  // sync, then close(2); the file stays
  const std::string& path() const { return path_; }
  uint64_t size() const { return written_ + buf_.size(); }

 private:
  DurableFile(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}
  [[noreturn]] void fail(const char* what, int err) const;
  int fd_ = -1;
  std::string path_;
  std::string buf_;
  uint64_t written_ = 0;
};

// Replaces path as a whole: fill writes a new file next to it (path.tmp-PID-N, created with
// mode: 0600 for a file that holds a secret, readable by nobody else at any point), which is synced,
// renamed over path and the directory synced. A crash leaves the old file or the new one, and
// at worst a stray .tmp-PID file, never a truncated path. Throws Error naming the file; the
// temporary file is removed on failure.
void write_file_atomic(const std::string& path, const std::function<void(DurableFile&)>& fill, mode_t mode = 0644);

// fsync of a directory (a rename or a new file in it reaches the disk). Throws Error.
void sync_directory(const std::string& dir);

}  // namespace ocslab
