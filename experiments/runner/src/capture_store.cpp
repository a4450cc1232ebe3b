#include "ocslab/runner/capture_store.h"

#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <filesystem>
#include <fstream>
#include <string_view>
#include <utility>

#include "ocslab/common/csv_writer.h"
#include "ocslab/common/error.h"

namespace ocslab::runner {

namespace {

// A stream name becomes a file name: host names are checked by the spec, the rest are ours.
std::string file_name(const std::string& stream) {
  std::string out;
  for (char c : stream) out += (std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.') ? c : '_';
  return out.empty() || out[0] == '.' ? "_" + out : out;
}

}  // namespace

std::string csv_row(const std::vector<std::string>& fields) {
  std::string out;
  for (size_t i = 0; i < fields.size(); ++i) {
    if (i) out += ',';
    out += CsvWriter::escape(fields[i]);
  }
  out += '\n';
  return out;
}

std::string capture_row(const Sample& s, uint64_t seq) {
  auto f = sample_csv_fields(s);
  f.push_back(std::to_string(s.mono_ns));
  f.push_back(std::to_string(seq));
  return csv_row(f);
}

const std::vector<std::string>& capture_columns() {
  static const std::vector<std::string> cols = [] {
    auto c = sample_csv_columns();
    c.push_back("mono_ns");
    c.push_back("seq");
    return c;
  }();
  return cols;
}

CaptureStore::CaptureStore(std::string dir, std::chrono::milliseconds sync_every)
    : dir_(std::move(dir)), sync_every_(sync_every) {
  if (::mkdir(dir_.c_str(), 0755) != 0) {
    // An empty directory is taken (a mount point prepared for the capture); anything else is
    // an earlier capture or not ours.
    int err = errno;
    struct stat st{};
    std::error_code ec;
    bool empty_dir = err == EEXIST && ::lstat(dir_.c_str(), &st) == 0 && S_ISDIR(st.st_mode) &&
                     std::filesystem::is_empty(dir_, ec) && !ec;
    if (!empty_dir) throw SystemError("cannot create the capture folder " + dir_, err);
  }
  // The folder's own entry in the results folder, before any row is promised to be on disk.
  sync_directory(std::filesystem::path(dir_).parent_path().string());
  syncer_ = std::thread([this] { sync_loop(); });
}

CaptureStore::CaptureStore(Resume, std::string dir, std::chrono::milliseconds sync_every)
    : dir_(std::move(dir)), sync_every_(sync_every) {
  struct stat st{};
  if (::lstat(dir_.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    throw Error("no capture folder " + dir_ + " (a run folder of ocslab run keeps one)");
  }
  std::vector<std::string> files;
  for (const auto& e : std::filesystem::directory_iterator(dir_)) {
    if (e.is_regular_file() && !e.is_symlink() && e.path().extension() == ".csv") files.push_back(e.path().string());
  }
  std::sort(files.begin(), files.end());
  for (const auto& path : files) {
    // Read once, line by line (a capture can be gigabytes): rows, the last seq, and where the
    // last whole line ends; a last line the crash left half-written is cut off, so that rows
    // appended now start on a line of their own.
    CaptureStreamInfo info;
    info.name = std::filesystem::path(path).stem().string();
    info.path = path;
    uint64_t keep = 0;
    {
      std::ifstream in(path, std::ios::binary);
      if (!in) throw Error("cannot read " + path);
      std::string line;
      bool header = true;
      while (std::getline(in, line) && !in.eof()) {
        keep += line.size() + 1;
        if (header) {
          header = false;
          continue;
        }
        uint64_t seq = 0;
        for (char c : std::string_view(line).substr(line.rfind(',') + 1)) {
          if (c >= '0' && c <= '9') seq = seq * 10 + static_cast<uint64_t>(c - '0');
        }
        info.last_seq = std::max(info.last_seq, seq);
        ++info.rows;
      }
    }
    if (std::filesystem::file_size(path) > keep && ::truncate(path.c_str(), static_cast<off_t>(keep)) != 0) {
      throw SystemError("cannot cut the partial last line of " + path, errno);
    }
    auto stream = std::make_unique<Stream>(Stream{std::move(info), DurableFile::append_to(path)});
    if (keep == 0) stream->file.append(csv_row(capture_columns()));
    by_name_[stream->info.name] = stream.get();
    streams_.push_back(std::move(stream));
  }
  syncer_ = std::thread([this] { sync_loop(); });
}

std::unique_ptr<CaptureStore> CaptureStore::resume(const std::string& dir, std::chrono::milliseconds sync_every) {
  return std::unique_ptr<CaptureStore>(new CaptureStore(Resume{}, dir, sync_every));
}

CaptureStore::~CaptureStore() {
  try {
    close();
  } catch (...) {
  }
}

void CaptureStore::append(const std::string& stream, const Sample& s, uint64_t seq) {
  std::string line = capture_row(s, seq);
  std::lock_guard lock(mutex_);
  if (closed_) return;  // a session's late sample after the run closed: its agent's spool keeps it
  auto it = by_name_.find(stream);
  Stream* st = nullptr;
  if (it != by_name_.end()) {
    st = it->second;
  } else {
    auto taken = [&](const std::string& p) {
      return std::any_of(streams_.begin(), streams_.end(), [&](const auto& x) { return x->info.path == p; });
    };
    const std::string base = dir_ + "/" + file_name(stream);
    std::string path = base + ".csv";
    for (int n = 2; taken(path); ++n) path = base + "-" + std::to_string(n) + ".csv";
    CaptureStreamInfo info;
    info.name = stream;
    info.path = path;
    auto fresh = std::make_unique<Stream>(Stream{std::move(info), DurableFile::create(path)});
    fresh->file.append(csv_row(capture_columns()));
    st = fresh.get();
    new_entries_ = true;  // the folder is synced in the next sync(), with the file's first rows
    streams_.push_back(std::move(fresh));
    by_name_[stream] = st;
  }
  if (!st->info.error.empty()) {
    ++st->info.dropped;
    return;
  }
  try {
    st->file.append(line);
    ++st->info.rows;
    if (seq > st->info.last_seq) st->info.last_seq = seq;
  } catch (const Error& e) {
    st->info.error = e.what();
    ++st->info.dropped;
  }
}

void CaptureStore::sync() {
  // write(2) under the lock, fdatasync outside it: appends from the sessions' threads wait for
  // a copy into the page cache, never for the disk.
  std::vector<Stream*> todo;
  bool new_entries = false;
  {
    std::lock_guard lock(mutex_);
    new_entries = std::exchange(new_entries_, false);
    for (auto& st : streams_) {
      if (!st->info.error.empty()) continue;
      try {
        st->file.flush();
        todo.push_back(st.get());
      } catch (const Error& e) {
        st->info.error = e.what();
      }
    }
  }
  for (Stream* st : todo) {
    try {
      st->file.datasync();
    } catch (const Error& e) {
      std::lock_guard lock(mutex_);
      if (st->info.error.empty()) st->info.error = e.what();
    }
  }
  // A file's rows synced are not on disk after a power loss unless its name is: fsync of the
  // folder once per sync that follows a new file.
  if (new_entries) {
    try {
      sync_directory(dir_);
      dir_syncs_.fetch_add(1);
    } catch (const Error&) {
      std::lock_guard lock(mutex_);
      new_entries_ = true;  // tried again by the next sync; the files' own syncs went on
    }
  }
}

void CaptureStore::sync_loop() {
  std::unique_lock lock(mutex_);
  while (!closed_) {
    wake_.wait_for(lock, sync_every_);
    if (closed_) break;
    lock.unlock();
    sync();
    lock.lock();
  }
}

void CaptureStore::close() {
  {
    std::lock_guard lock(mutex_);
    if (closed_) return;
    closed_ = true;
  }
  wake_.notify_all();
  if (syncer_.joinable()) syncer_.join();
  std::lock_guard lock(mutex_);
  for (auto& st : streams_) {
    try {
      st->file.close();
    } catch (const Error& e) {
      if (st->info.error.empty()) st->info.error = e.what();
    }
  }
  if (std::exchange(new_entries_, false)) {
    try {
      sync_directory(dir_);
      dir_syncs_.fetch_add(1);
    } catch (const Error&) {
      // The files themselves are synced and closed; only a power loss now could lose a name.
    }
  }
}

std::vector<CaptureStreamInfo> CaptureStore::streams() const {
  std::lock_guard lock(mutex_);
  std::vector<CaptureStreamInfo> out;
  for (const auto& st : streams_) out.push_back(st->info);
  return out;
}

}  // namespace ocslab::runner
