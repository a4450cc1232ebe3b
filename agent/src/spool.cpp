#include "ocslab/agent/spool.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "ocslab/agent/protocol.h"
#include "ocslab/common/error.h"
#include "ocslab/common/log.h"
#include "ocslab/common/safe_fs.h"

namespace ocslab::agent {

namespace {
constexpr uint64_t kIndexStride = 256;
}

Spool::Spool(std::string path, SpoolOptions options) : path_(std::move(path)), options_(options) {
  // A new file: never one that is there already, nor a symlink planted at its name.
  fd_ = open_no_follow(path_, O_WRONLY | O_CREAT | O_EXCL | O_APPEND, 0644, "spool");
}

Spool::~Spool() {
  try {
    finish();
  } catch (const Error&) {
    // A destructor cannot report; finish() is called explicitly on every clean stop path.
  }
}

void Spool::append(uint64_t seq, std::string_view line) {
  std::lock_guard lock(mutex_);
  if (fd_ < 0) throw Error("spool " + path_ + " is finished; sample " + std::to_string(seq) + " not stored");
  if (seq != last_seq_ + 1) {
    throw Error("spool " + path_ + ": sample " + std::to_string(seq) + " after " + std::to_string(last_seq_));
  }
  last_seq_ = seq;
  if (!error_.empty()) {
    ++dropped_;  // failed: counted, not kept
    return;
  }
  if (pending_lines_ == 0) oldest_pending_ = std::chrono::steady_clock::now();
  if ((seq - 1) % kIndexStride == 0) index_.emplace_back(seq, written_ + pending_.size());
  pending_.append(line);
  ++pending_lines_;
  if (pending_lines_ >= options_.batch_lines) flush_locked();
}

void Spool::flush() {
  std::lock_guard lock(mutex_);
  flush_locked();
}

void Spool::flush_if_due() {
  std::lock_guard lock(mutex_);
  if (pending_lines_ > 0 && std::chrono::steady_clock::now() - oldest_pending_ >= options_.flush_interval) {
    flush_locked();
  }
}

void Spool::flush_locked() {
  if (fd_ < 0 || pending_.empty() || !error_.empty()) return;
  size_t done = 0;
  while (done < pending_.size()) {
    ssize_t n = ::write(fd_, pending_.data() + done, pending_.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      int e = errno;
      // Whole lines written before the failure stay readable; a torn last one is never served.
      size_t whole =
          static_cast<size_t>(std::count(pending_.begin(), pending_.begin() + static_cast<ptrdiff_t>(done), '\n'));
      written_ += done;
      fail_locked(e, pending_lines_ - whole);
      return;
    }
    done += static_cast<size_t>(n);
  }
  written_ += pending_.size();
  pending_.clear();
  pending_lines_ = 0;
}

void Spool::fail_locked(int err, size_t unwritten_lines) {
  stored_seq_ = last_seq_ - unwritten_lines;
  dropped_ += unwritten_lines;
  error_ = SystemError("write spool " + path_, err).what();
  // Memory stays bounded: nothing is buffered from here on (a retry per append would also cost
  // a failing system call per sample).
  std::string().swap(pending_);
  pending_lines_ = 0;
  spdlog::error(
      "{}: the spool stops appending; samples up to seq {} stay fetchable, later ones are dropped "
      "(the live stream still gets them)",
      error_, stored_seq_);
}

void Spool::finish() {
  std::lock_guard lock(mutex_);
  if (fd_ < 0) return;
  flush_locked();
  int rc = ::fsync(fd_);
  int e = errno;
  ::close(fd_);
  fd_ = -1;
  if (rc != 0) throw SystemError("fsync spool " + path_, e);
}

size_t Spool::read(uint64_t from, uint64_t to, const std::function<void(std::string_view)>& fn) {
  uint64_t offset = 0, end = 0;
  {
    std::lock_guard lock(mutex_);
    flush_locked();
    end = written_;
    auto it = std::upper_bound(index_.begin(), index_.end(), std::make_pair(from, UINT64_MAX));
    if (it != index_.begin()) offset = std::prev(it)->second;
  }
  if (from > to) return 0;
  int fd = open_no_follow(path_, O_RDONLY, 0, "spool");
  size_t count = 0;
  std::string buf;
  std::string chunk(1 << 16, '\0');
  bool done = false;
  while (offset < end && !done) {
    size_t want = static_cast<size_t>(std::min<uint64_t>(chunk.size(), end - offset));
    ssize_t n = ::pread(fd, chunk.data(), want, static_cast<off_t>(offset));
    if (n < 0) {
      if (errno == EINTR) continue;
      int e = errno;
      ::close(fd);
      throw SystemError("read spool " + path_, e);
    }
    if (n == 0) break;
    offset += static_cast<uint64_t>(n);
    buf.append(chunk.data(), static_cast<size_t>(n));
    size_t start = 0;
    for (size_t nl; (nl = buf.find('\n', start)) != std::string::npos; start = nl + 1) {
      std::string_view line(buf.data() + start, nl - start);
      auto seq = sample_line_seq(line);
      if (!seq || *seq < from) continue;
      if (*seq > to) {
        done = true;
        break;
      }
      fn(line);
      ++count;
    }
    buf.erase(0, start);
  }
  ::close(fd);
  // A line without its newline at the end (an agent killed mid-write) is not returned.
  return count;
}

uint64_t Spool::last_seq() const {
  std::lock_guard lock(mutex_);
  return last_seq_;
}

uint64_t Spool::size_bytes() const {
  std::lock_guard lock(mutex_);
  return written_ + pending_.size();
}

std::string Spool::error() const {
  std::lock_guard lock(mutex_);
  return error_;
}

uint64_t Spool::dropped() const {
  std::lock_guard lock(mutex_);
  return dropped_;
}

uint64_t Spool::stored_seq() const {
  std::lock_guard lock(mutex_);
  return error_.empty() ? last_seq_ : stored_seq_;
}

size_t Spool::pending_bytes() const {
  std::lock_guard lock(mutex_);
  return pending_.size();
}

}  // namespace ocslab::agent
