// The run's samples on disk as they arrive (docs/experiments.md, "How a run is kept on disk"): one
// append-only CSV per stream under RESULTS/capture/ (a host's samples on the host's clock with
// the agent's sequence number, the switch commands, the switch's power monitor, forwarding, a
// virtual lab's ground truth), synced every second by a thread of its own. Memory is the
// streams' write buffers, whatever the run's length; timeline.csv is merged from these files
// at the end (merge_capture, merge.h).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "ocslab/common/durable_file.h"
#include "ocslab/common/sample.h"

namespace ocslab::runner {

// Columns of a capture file: the tidy Sample columns, then mono_ns and seq (the agent's
// sequence number of a host sample; 0 for the runner's own streams).
const std::vector<std::string>& capture_columns();
// One CSV line (RFC 4180 quoting, '\n' at the end); a capture file's row of a sample.
std::string csv_row(const std::vector<std::string>& fields);
std::string capture_row(const Sample& s, uint64_t seq);

struct CaptureStreamInfo {
  std::string name;   // host name, or control / switch_power / forwarding / ground_truth
  std::string path;
  uint64_t rows = 0;  // appended (written or buffered)
  uint64_t last_seq = 0;
  std::string error;  // the first write failure; later rows of the stream are counted as dropped
  uint64_t dropped = 0;
};

class CaptureStore {
 public:
  // Creates dir (or takes it when it is an empty directory, e.g. a mount point of its own) and
  // starts the sync thread. An existing file, symlink or non-empty folder is refused.
  explicit CaptureStore(std::string dir, std::chrono::milliseconds sync_every = std::chrono::seconds(1));
  // `ocslab recover`: the capture of a run that died. Every DIR/<stream>.csv is opened for
  // appending (never through a symlink); a last line cut short by the crash is cut off first,
  // and rows / last_seq are counted from what is on disk.
  static std::unique_ptr<CaptureStore> resume(const std::string& dir,
                                              std::chrono::milliseconds sync_every = std::chrono::seconds(1));
  ~CaptureStore();  // close(), errors ignored
  CaptureStore(const CaptureStore&) = delete;
  CaptureStore& operator=(const CaptureStore&) = delete;

  // Any thread. The stream's file is created on its first row. A stream whose file failed
  // (full disk) drops its rows from then on and counts them: the agents still hold a host's
  // samples in their spools. After close() rows are ignored.
  void append(const std::string& stream, const Sample& s, uint64_t seq = 0);
  // Everything appended so far reaches the disk (what the sync thread does every interval),
  // and the folder itself (fsync) when a file was created in it since the last sync.
  void sync();
  // Stops the sync thread, syncs and closes every file. Idempotent.
  void close();

  const std::string& dir() const { return dir_; }
  std::vector<CaptureStreamInfo> streams() const;  // in order of creation
  // How many times the folder was fsynced after new files (the test's view of the promise).
  uint64_t dir_syncs() const { return dir_syncs_.load(); }

 private:
  struct Stream {
    CaptureStreamInfo info;
    DurableFile file;
  };
  struct Resume {};
  CaptureStore(Resume, std::string dir, std::chrono::milliseconds sync_every);
  void sync_loop();

  std::string dir_;
  std::chrono::milliseconds sync_every_;
  mutable std::mutex mutex_;
  std::vector<std::unique_ptr<Stream>> streams_;
  std::map<std::string, Stream*> by_name_;
  bool closed_ = false;
  bool new_entries_ = false;  // a file was created since the folder's last fsync
  std::atomic<uint64_t> dir_syncs_{0};
  std::condition_variable wake_;
  std::thread syncer_;
};

}  // namespace ocslab::runner
