#include "ocslab/agent/agent.h"

#include <fmt/chrono.h>
#include <fmt/format.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <condition_variable>
#include <deque>
#include <filesystem>

#include "ocslab/common/clock.h"
#include "ocslab/common/log.h"
#include "ocslab/common/safe_fs.h"
#include "ocslab/probes/clock_sync.h"

namespace ocslab::agent {

using nlohmann::json;

namespace {

// A client that stops reading must not grow the agent without bound: past this many queued
// lines its session is dropped (the samples stay in the spool for a later fetch).
constexpr size_t kMaxQueuedLines = 1 << 20;

std::string local_host_name() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof(buf) - 1) != 0) return "localhost";
  return buf;
}

// Writes all bytes; false when the peer is gone. send() with MSG_NOSIGNAL where out is a socket
// so a vanished peer is an error return, not SIGPIPE; write() for pipes (the binary ignores
// SIGPIPE when it serves).
bool write_all(int fd, const char* data, size_t size) {
  bool is_socket = true;
  while (size > 0) {
    ssize_t n = is_socket ? ::send(fd, data, size, MSG_NOSIGNAL) : ::write(fd, data, size);
    if (n < 0 && is_socket && errno == ENOTSOCK) {
      is_socket = false;
      continue;
    }
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN) {
        pollfd p{fd, POLLOUT, 0};
        ::poll(&p, 1, 100);
        continue;
      }
      return false;
    }
    data += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

// Writes what the kernel takes without blocking: the bytes written (0 when the pipe or socket
// is full), or -1 when the peer is gone. *unsupported: this fd cannot be written without
// blocking (RWF_NOWAIT on a pipe needs Linux 5.x or later, a terminal never), so the caller
// leaves the bytes to a thread that may block.
ssize_t write_nowait(int fd, const char* data, size_t size, bool* unsupported) {
  for (;;) {
    ssize_t n = ::send(fd, data, size, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n < 0 && errno == ENOTSOCK) {
      iovec v{const_cast<char*>(data), size};
      n = ::pwritev2(fd, &v, 1, -1, RWF_NOWAIT);
    }
    if (n >= 0) return n;
    if (errno == EINTR) continue;
    if (errno == EAGAIN) return 0;
    if (errno == EOPNOTSUPP || errno == EINVAL || errno == ESPIPE) {
      *unsupported = true;
      return 0;
    }
    return -1;
  }
}

}  // namespace

// One client connection: requests are read on the serving thread, everything sent (replies and
// samples, in order) goes through a queue drained by a writer thread, so a probe's sink never
// waits on the network.
class Session {
 public:
  Session(int in_fd, int out_fd) : in_fd_(in_fd), out_fd_(out_fd), writer_([this] { write_loop(); }) {}
  ~Session() {
    {
      std::lock_guard lock(mutex_);
      closing_ = true;
    }
    cv_.notify_all();
    drained_.notify_all();
    writer_.join();
  }

  void send(std::string line) {
    {
      std::lock_guard lock(mutex_);
      if (broken_) return;
      if (queue_.size() >= kMaxQueuedLines) {
        spdlog::warn("session: client is not reading ({} lines queued); dropping the session", queue_.size());
        broken_ = true;
        queue_.clear();
        return;
      }
      queue_.push_back({std::move(line), false, {}, 0, 0});
      queued_bytes_ += queue_.back().line.size();
      urgent_ = true;
    }
    cv_.notify_one();
  }

  // A live sample: it goes out with the others that arrive within kSampleDelay, in one write,
  // and wakes the writer only when it starts a batch. At 1 kHz a write and a writer wake-up
  // per sample were most of what the agent cost; a sample's timestamps are taken by its
  // probe, so the delay moves only when the client sees it. Replies are never held back.
  void send_sample(std::string_view line) {
    bool first, wake;
    {
      std::unique_lock lock(mutex_);
      if (broken_) return;
      if (queue_.size() >= kMaxQueuedLines || queued_bytes_ >= kMaxQueuedBytes) {
        spdlog::warn("session: client is not reading ({} bytes queued); dropping the session", queued_bytes_);
        broken_ = true;
        queue_.clear();
        return;
      }
      first = queue_.empty();
      if (first) first_queued_ = std::chrono::steady_clock::now();
      // Consecutive samples share one queued string: no allocation per sample once it has grown.
      if (queue_.empty() || queue_.back().clock || !queue_.back().samples) {
        queue_.push_back({{}, false, {}, 0, 0, true});
      }
      queue_.back().line += line;
      queued_bytes_ += line.size();
      // A batch that reaches kFlushBytes goes out without waiting for its deadline.
      wake = first || (queued_bytes_ >= kFlushBytes && queued_bytes_ - line.size() < kFlushBytes);
      if (!wake && !writing_ && !urgent_ && !nowait_unsupported_ &&
          std::chrono::steady_clock::now() - first_queued_ >= kSampleDelay) {
        // The batch is due and the writer thread has not taken it: it is waiting for a CPU
        // (measured: 20-110 ms run-queue waits on a loaded machine, the sustained-rate p99).
        // This thread is running anyway, so it writes the batch itself, without blocking.
        write_due_batch(lock);
        return;
      }
    }
    if (wake) cv_.notify_one();
  }

  // A line replayed from the spool (without its newline): in order with the replies, without
  // the live batching delay. Blocks while kReplayWindowBytes are queued, so the spool is read
  // only as fast as the client takes it and a replay of any length holds that much at most.
  // False when the session is broken (the replay should stop).
  bool send_replay(std::string_view line) {
    {
      std::unique_lock lock(mutex_);
      // Bounded waits, so a session ended by shutdown_sessions() stops its replay too.
      while (!drained_.wait_for(lock, std::chrono::milliseconds(100),
                                [this] { return broken_ || closing_ || queued_bytes_ < kReplayWindowBytes; })) {
        if (ending) return false;
      }
      if (broken_ || closing_) return false;
      if (queue_.empty() || queue_.back().clock || !queue_.back().samples) {
        queue_.push_back({{}, false, {}, 0, 0, true});
      }
      queue_.back().line += line;
      queue_.back().line += '\n';
      queued_bytes_ += line.size() + 1;
      urgent_ = true;
    }
    cv_.notify_one();
    return true;
  }

  // The reply's t3 is stamped by the writer right before the bytes go out.
  void send_clock(const json& id, int64_t t1, int64_t t2) {
    {
      std::lock_guard lock(mutex_);
      if (broken_) return;
      queue_.push_back({{}, true, id, t1, t2});
      urgent_ = true;
    }
    cv_.notify_one();
  }

  // Called under Agent::mutex_ with each live sample.
  void offer(uint64_t seq, const std::string& line) {
    if (!subscribed) return;
    if (paused) {
      held.push_back(line);
    } else if (seq > high_water) {
      high_water = seq;
      send_sample(line);
    }
  }

  bool broken() const {
    std::lock_guard lock(mutex_);
    return broken_;
  }
  void end() { ending = true; }

  int in_fd() const { return in_fd_; }

  // Guarded by Agent::mutex_.
  bool subscribed = false;
  bool paused = false;      // a fetch is replaying the spool: live samples wait in held
  uint64_t high_water = 0;  // highest seq sent live
  std::vector<std::string> held;
  std::atomic<bool> ending{false};

 private:
  struct Item {
    std::string line;  // a reply, or consecutive sample lines (samples)
    bool clock;
    json id;
    int64_t t1, t2;
    bool samples = false;
  };

  void write_loop() {
    std::unique_lock lock(mutex_);
    std::deque<Item> batch;
    for (;;) {
      // writing_: a probe thread is writing a due batch (send_sample); the bytes stay in order.
      cv_.wait(lock, [this] { return !writing_ && (closing_ || !queue_.empty()); });
      if (queue_.empty()) return;  // closing and drained
      if (!urgent_ && !closing_ && queued_bytes_ < kFlushBytes &&
          std::chrono::steady_clock::now() < first_queued_ + kSampleDelay) {
        // Only samples so far: let the batch fill for kSampleDelay (a reply cuts it short).
        // Then look again: a probe thread may have written this batch meanwhile.
        auto due = first_queued_ + kSampleDelay;
        cv_.wait_until(lock, due, [this] {
          return closing_ || urgent_ || writing_ || queue_.empty() || queued_bytes_ >= kFlushBytes;
        });
        continue;
      }
      batch.clear();
      batch.swap(queue_);
      queued_bytes_ = 0;
      urgent_ = false;
      writing_ = true;
      lock.unlock();
      drained_.notify_all();
      std::string out;
      for (auto& item : batch) {
        if (item.clock) {
          // Everything queued before it goes out first, so t3 is as close to the send as it gets.
          if (!out.empty() && !write_all(out_fd_, out.data(), out.size())) break;
          out.clear();
          json r = {{"type", "clock"}, {"id", item.id}, {"ok", true}, {"t1", item.t1}, {"t2", item.t2}};
          r["t3"] = realtime_ns();
          out = to_line(r);
        } else {
          out += item.line;
        }
      }
      bool ok = write_all(out_fd_, out.data(), out.size());
      lock.lock();
      writing_ = false;
      if (!ok) {
        broken_ = true;
        queue_.clear();
        drained_.notify_all();
        return;
      }
    }
  }

  // Called by send_sample with the lock held and a due batch of samples only: takes the
  // queue, writes it without blocking, and hands what the kernel did not take (a full pipe)
  // back to the writer thread, first in line. Unlocks.
  void write_due_batch(std::unique_lock<std::mutex>& lock) {
    std::string out;
    for (auto& item : queue_) out += item.line;  // samples only: no reply is queued (!urgent_)
    queue_.clear();
    queued_bytes_ = 0;
    writing_ = true;
    lock.unlock();
    bool unsupported = false;
    ssize_t n = write_nowait(out_fd_, out.data(), out.size(), &unsupported);
    lock.lock();
    writing_ = false;
    if (unsupported) nowait_unsupported_ = true;
    if (n < 0) {
      broken_ = true;
      queue_.clear();
    } else if (static_cast<size_t>(n) < out.size()) {
      out.erase(0, static_cast<size_t>(n));
      queued_bytes_ += out.size();
      queue_.push_front({std::move(out), false, {}, 0, 0, true});
      urgent_ = true;  // the writer writes the rest now, blocking as it may
    }
    bool pending = !queue_.empty();
    lock.unlock();
    drained_.notify_all();
    if (pending) cv_.notify_one();
  }

  static constexpr auto kSampleDelay = std::chrono::milliseconds(10);
  static constexpr size_t kFlushBytes = 64 * 1024;  // a batch this big goes out at once
  static constexpr size_t kMaxQueuedBytes = 256 * 1024 * 1024;
  static constexpr size_t kReplayWindowBytes = 4 * 1024 * 1024;  // a replay waits above this

  int in_fd_, out_fd_;
  mutable std::mutex mutex_;
  std::condition_variable cv_;
  std::condition_variable drained_;  // the queue shrank (or the session broke): a replay may go on
  std::deque<Item> queue_;
  size_t queued_bytes_ = 0;
  bool urgent_ = false;              // a reply is queued: write now
  bool writing_ = false;             // a thread is writing to out_fd_ (the writer, or a probe thread)
  bool nowait_unsupported_ = false;  // out_fd_ takes no non-blocking write: the writer does all
  std::chrono::steady_clock::time_point first_queued_{};
  bool closing_ = false;
  bool broken_ = false;
  std::thread writer_;
};

Agent::Agent(AgentOptions options)
    : options_(std::move(options)),
      host_(options_.host.empty() ? local_host_name() : options_.host),
      registry_(options_.registry ? options_.registry : &builtin_registry()) {
  if (options_.spool_dir.empty()) throw Error("agent: no spool folder given");
  ensure_own_dir(options_.spool_dir, DirPolicy::kOwned);  // a symlink or someone else's folder refused
  flusher_ = std::thread([this] { flusher(); });
}

Agent::~Agent() {
  shutdown_sessions();
  stop_probes();
  stopping_ = true;
  flusher_.join();
}

void Agent::flusher() {
  // The spool's time bound on a batch: without this a slow probe's samples could sit in memory.
  auto next_retention = std::chrono::steady_clock::now() + options_.retention_interval;
  while (!stopping_) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    std::shared_ptr<Spool> spool;
    {
      std::lock_guard lock(mutex_);
      spool = spool_;
    }
    if (std::chrono::steady_clock::now() >= next_retention) {
      // Under control_ (try: a start or stop in progress only delays it), so a capture that is
      // starting cannot lose its new spool to a check that saw the previous one.
      std::unique_lock control(control_, std::try_to_lock);
      if (control.owns_lock()) {
        next_retention = std::chrono::steady_clock::now() + options_.retention_interval;
        std::string keep;
        {
          std::lock_guard lock(mutex_);
          if (spool_) keep = spool_->path();
        }
        // The current capture's spool is kept whether it runs or not: a runner may still fetch it.
        enforce_retention(keep);
      }
    }
    if (!spool) continue;
    try {
      spool->flush_if_due();
    } catch (const Error& e) {
      std::lock_guard lock(mutex_);
      if (spool_error_.empty()) {
        spool_error_ = e.what();
        spdlog::error("{}", e.what());
      }
    }
  }
}

void Agent::shutdown_sessions() {
  std::lock_guard lock(mutex_);
  for (Session* s : sessions_) s->end();
}

void Agent::on_sample(const Sample& sample) {
  std::lock_guard lock(mutex_);
  if (!spool_) return;
  uint64_t seq = ++last_seq_;
  // One buffer for every sample's line (under mutex_): the spool and the sessions copy the
  // bytes into their own batches.
  std::string& line = line_;
  line.clear();
  append_sample_line(line, seq, sample);
  try {
    spool_->append(seq, line);
  } catch (const Error& e) {
    // The live stream still gets the sample; status reports that the spool has a hole.
    if (spool_error_.empty()) {
      spool_error_ = e.what();
      spdlog::error("{}", e.what());
    }
  }
  for (Session* s : sessions_) s->offer(seq, line);
}

json Agent::start_probes(Session& s, const Request& r) {
  std::lock_guard control(control_);
  if (!probes_.empty()) {
    std::string names;
    for (const auto& n : running_) names += (names.empty() ? "" : ", ") + n;
    throw ProtocolError(fmt::format("probes already running (capture {}: {}); send probes.stop first", capture_, names),
                        r.id);
  }
  // The capture id names the spool file; it carries the client's run id when one was given.
  std::string capture = fmt::format("{:%Y%m%dT%H%M%S}-{}-{}", fmt::gmtime(std::time(nullptr)), ::getpid(), ++captures_);
  if (!r.run.empty()) capture += "." + r.run;
  std::string path = options_.spool_dir + "/" + spool_file_name(capture);
  auto spool = std::make_shared<Spool>(path, options_.spool);
  enforce_retention(path);
  {
    std::lock_guard lock(mutex_);
    if (spool_) {
      try {
        spool_->finish();
      } catch (const Error& e) {
        spdlog::error("{}", e.what());
      }
    }
    spool_ = spool;
    capture_ = capture;
    last_seq_ = 0;
    spool_error_.clear();
    // Sequence numbers restart with the capture: only the session that started it follows it
    // live; any other re-joins with spool.fetch.
    for (Session* other : sessions_) {
      other->subscribed = false;
      other->high_water = 0;
    }
    s.subscribed = true;
    s.high_water = 0;
  }
  json statuses = json::array();
  running_.clear();
  for (const auto& p : r.probes) {
    probes::ProbeStatus st;
    std::unique_ptr<probes::Probe> probe;
    try {
      probe = registry_->create(ProbeConfig::from(p, host_));
      if (!probe) {
        std::string known;
        for (const auto& n : registry_->names()) known += (known.empty() ? "" : ", ") + n;
        st.reason = fmt::format("unknown probe '{}' (this agent knows: {})", p.name, known);
      } else {
        st = probe->start([this](const Sample& x) { on_sample(x); });
      }
    } catch (const Error& e) {
      st = {false, "", e.what()};
    }
    if (st.available) {
      probes_.push_back(std::move(probe));
      running_.push_back(p.name);
    }
    statuses.push_back({{"name", p.name}, {"available", st.available}, {"method", st.method}, {"reason", st.reason}});
  }
  json reply = ok_reply(r.type, r.id);
  reply["capture"] = capture;
  reply["spool"] = path;
  reply["probes"] = std::move(statuses);
  return reply;
}

void Agent::stop_probes() {
  std::lock_guard control(control_);
  // Probe threads take mutex_ in their sink, so they are joined without holding it.
  for (auto& p : probes_) p->stop();
  probes_.clear();
  running_.clear();
  std::lock_guard lock(mutex_);
  if (spool_) {
    try {
      spool_->finish();
    } catch (const Error& e) {
      if (spool_error_.empty()) spool_error_ = e.what();
      spdlog::error("{}", e.what());
    }
  }
}

void Agent::enforce_retention(const std::string& keep_path) {
  try {
    auto report = agent::enforce_retention(options_.spool_dir, options_.retention, keep_path, std::time(nullptr));
    if (report.deleted > 0) {
      spdlog::info("spool retention: deleted {} old spool(s), {} bytes, in {}", report.deleted, report.freed_bytes,
                   options_.spool_dir);
    }
    for (const auto& e : report.errors) spdlog::warn("spool retention: {}", e);
  } catch (const Error& e) {
    spdlog::warn("spool retention: {}", e.what());
  }
}

json Agent::delete_spool(const Request& r) {
  std::lock_guard control(control_);
  bool current = false;
  {
    std::lock_guard lock(mutex_);
    current = r.capture == capture_;
  }
  if (current && !probes_.empty()) {
    throw ProtocolError("capture " + r.capture + " is still running; send probes.stop first", r.id);
  }
  int64_t bytes = delete_spool_file(options_.spool_dir, r.capture);
  if (current) {
    std::lock_guard lock(mutex_);
    spool_.reset();  // nothing left to fetch from
  }
  spdlog::info("spool.delete: capture {}: {}", r.capture,
               bytes < 0 ? "no spool file" : std::to_string(bytes) + " bytes");
  json j = ok_reply(r.type, r.id);
  j["capture"] = r.capture;
  j["deleted"] = bytes >= 0;
  j["bytes"] = bytes < 0 ? 0 : bytes;
  return j;
}

json Agent::status() const {
  json j = json::object();
  {
    std::lock_guard lock(mutex_);
    j["capture"] = capture_.empty() ? json() : json(capture_);
    j["spool"] = spool_ ? json(spool_->path()) : json();
    j["spool_bytes"] = spool_ ? spool_->size_bytes() : 0;
    j["samples"] = last_seq_;
    j["last_seq"] = last_seq_;
    j["sessions"] = sessions_.size();
    // The spool's write failure (full disk) if it had one, else another failure of this capture.
    std::string error = spool_ ? spool_->error() : std::string();
    if (error.empty()) error = spool_error_;
    j["spool_error"] = error.empty() ? json() : json(error);
    j["spool_dropped"] = spool_ ? spool_->dropped() : 0;
  }
  // running_ changes only under control_; a racing start/stop shows the state before or after.
  std::vector<std::string> running;
  {
    std::lock_guard control(control_);
    running = running_;
  }
  j["running"] = running;
  j["host"] = host_;
  j["pid"] = ::getpid();
  return j;
}

void Agent::fetch(Session& s, const Request& r) {
  std::shared_ptr<Spool> spool;
  uint64_t last = 0;
  {
    std::lock_guard lock(mutex_);
    if (!spool_ && !capture_.empty()) {
      throw ProtocolError("the spool of capture " + capture_ + " was deleted (spool.delete): nothing to fetch", r.id);
    }
    if (!spool_) throw ProtocolError("no capture yet: nothing to fetch (send probes.start first)", r.id);
    spool = spool_;
    last = last_seq_;
  }
  // The page: [from_seq, to]. With max_count the reply says where the next one starts; a page
  // never reaches past what the spool stored (after a full disk the rest is not there to page
  // through).
  uint64_t to = last;
  bool more = false;
  if (r.max_count > 0 && r.from_seq <= last && last - r.from_seq >= r.max_count) {
    to = r.from_seq + r.max_count - 1;
    more = to < spool->stored_seq();
  }
  {
    std::lock_guard lock(mutex_);
    // Live samples go out only after the last page (follow): between pages they are in the
    // spool and the next page replays them, so none comes twice or out of order.
    if (more) s.subscribed = false;
    s.paused = true;
    s.held.clear();
    if (r.follow && !more) s.subscribed = true;
  }
  size_t count = 0;
  try {
    count = spool->read(r.from_seq, to, [&](std::string_view line) {
      if (!s.send_replay(line)) throw Error("spool.fetch: the session closed during the replay");
    });
  } catch (...) {
    std::lock_guard lock(mutex_);
    s.paused = false;
    throw;
  }
  bool following = false;
  {
    std::lock_guard lock(mutex_);
    s.high_water = std::max(s.high_water, more ? to : last);
    // Samples that arrived during the replay all have seq > last: they follow in order.
    for (auto& line : s.held) {
      auto seq = sample_line_seq(line);
      if (seq && *seq > s.high_water) {
        s.high_water = *seq;
        s.send(std::move(line));
      }
    }
    s.held.clear();
    s.paused = false;
    following = s.subscribed;
  }
  json reply = ok_reply(r.type, r.id);
  reply["from_seq"] = r.from_seq;
  reply["last_seq"] = last;
  reply["count"] = count;
  reply["next_seq"] = more ? to + 1 : std::max(last, r.from_seq - 1) + 1;
  reply["more"] = more;
  reply["following"] = following;
  s.send(to_line(reply));
}

void Agent::handle(Session& s, const Request& r, int64_t t2) {
  switch (r.type) {
    case RequestType::kHello: {
      if (r.version != kProtocolVersion) {
        throw ProtocolError(
            fmt::format("unsupported protocol version {}; this agent speaks {}", r.version, kProtocolVersion), r.id);
      }
      json j = ok_reply(r.type, r.id);
      j["version"] = kProtocolVersion;
      j["host"] = host_;
      j["pid"] = ::getpid();
      j["probes"] = registry_->names();
      // How far this host's clock can be trusted, recorded next to the measured offsets.
      probes::ClockSyncState cs = probes::read_clock_sync_state();
      j["clock_sync"] = {{"readable", cs.readable},         {"synchronized", cs.synchronized},
                         {"max_error_us", cs.max_error_us}, {"est_error_us", cs.est_error_us},
                         {"daemons", cs.daemons},           {"text", cs.describe()}};
      s.send(to_line(j));
      break;
    }
    case RequestType::kClock:
      s.send_clock(r.id, r.t1, t2);
      break;
    case RequestType::kProbesStart:
      s.send(to_line(start_probes(s, r)));
      break;
    case RequestType::kProbesStop: {
      stop_probes();
      json j = ok_reply(r.type, r.id);
      std::lock_guard lock(mutex_);
      j["last_seq"] = last_seq_;
      j["capture"] = capture_;
      s.send(to_line(j));
      break;
    }
    case RequestType::kStatus: {
      json j = ok_reply(r.type, r.id);
      j.update(status());
      s.send(to_line(j));
      break;
    }
    case RequestType::kSpoolFetch:
      fetch(s, r);
      break;
    case RequestType::kSpoolDelete:
      s.send(to_line(delete_spool(r)));
      break;
    case RequestType::kBye:
      s.send(to_line(ok_reply(r.type, r.id)));
      s.end();
      break;
  }
}

void Agent::serve(int in_fd, int out_fd) {
  Session session(in_fd, out_fd);
  {
    std::lock_guard lock(mutex_);
    sessions_.push_back(&session);
  }
  LineReader reader;
  char buf[65536];
  while (!session.ending && !session.broken()) {
    pollfd p{in_fd, POLLIN, 0};
    // A bounded wait so end() and a broken writer are noticed without a wake-up fd.
    int rc = ::poll(&p, 1, 100);
    if (rc < 0 && errno != EINTR) break;
    if (rc <= 0) continue;
    ssize_t n = ::read(in_fd, buf, sizeof(buf));
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n <= 0) break;  // EOF: the client went away
    int64_t t2 = realtime_ns();
    reader.feed(std::string_view(buf, static_cast<size_t>(n)));
    while (auto line = reader.next()) {
      if (line->too_long) {
        session.send(to_line(error_reply(nullptr, fmt::format("line longer than {} bytes, ignored", kMaxLineBytes))));
        continue;
      }
      if (line->text.empty()) continue;
      Request request;
      try {
        request = parse_request(line->text);
        handle(session, request, t2);
      } catch (const ProtocolError& e) {
        session.send(to_line(error_reply(e.id(), e.what())));
      } catch (const Error& e) {
        // A failure of this request (spool unwritable, ...): reported, the session stays up.
        session.send(to_line(error_reply(request.id, e.what())));
      }
      if (session.ending) break;
    }
  }
  std::lock_guard lock(mutex_);
  std::erase(sessions_, &session);
}

}  // namespace ocslab::agent
