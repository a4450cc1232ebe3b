#include "ocslab/analysis/timeline.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <functional>
#include <optional>

#include "ocslab/common/error.h"

namespace ocslab::analysis {

StringTable::StringTable() { intern(""); }

uint32_t StringTable::intern(std::string_view s) {
  auto it = ids_.find(s);
  if (it != ids_.end()) return it->second;
  auto id = static_cast<uint32_t>(strings_.size());
  strings_.emplace_back(s);
  ids_.emplace(std::string(s), id);
  return id;
}

std::optional<uint32_t> StringTable::find(std::string_view s) const {
  auto it = ids_.find(s);
  if (it == ids_.end()) return std::nullopt;
  return it->second;
}

std::optional<Timeline::Heartbeats> Timeline::heartbeats_of(const std::string& run, const std::string& host) const {
  auto r = strings.find(run);
  auto h = strings.find(host);
  if (!r || !h) return std::nullopt;
  auto it = heartbeats.find(heartbeat_key(*r, *h));
  if (it == heartbeats.end()) return std::nullopt;
  return it->second;
}

std::optional<int64_t> Timeline::capture_lost_at(const std::string& run, const std::string& host) const {
  auto own = heartbeats_of(run, host);
  auto r = strings.find(run);
  if (!own || !r) return std::nullopt;
  int64_t run_end = 0;
  for (const auto& [key, hb] : heartbeats)
    if ((key >> 32) == *r) run_end = std::max(run_end, hb.last_ns);
  constexpr int64_t kMinSlackNs = 100'000'000;
  const int64_t slack = std::max(kMinSlackNs, 2 * own->gap_ns);
  if (run_end - own->last_ns <= slack) return std::nullopt;
  return own->last_ns;
}

std::string_view interface_of(std::string_view subject) {
  auto at = subject.find('@');
  if (at != std::string_view::npos) subject = subject.substr(0, at);
  auto slash = subject.rfind('/');
  if (slash != std::string_view::npos) subject = subject.substr(slash + 1);
  return subject;
}

std::string_view peer_of(std::string_view subject) {
  auto at = subject.find('@');
  if (at == std::string_view::npos) return {};
  std::string_view label = subject.substr(at + 1);
  return label.substr(0, label.find(':'));  // a queue-pair matrix's PEER:tTrR: the peer
}

bool classify(std::string_view source, std::string_view signal, Kind& kind) {
  // Dispatch on the signal's length first: the bulk of a timeline (rdma `completion`, counters)
  // is rejected by one comparison.
  switch (signal.size()) {
    case 3:
      if (signal == "ack" && source == "ocs") return kind = Kind::kAck, true;
      if (signal == "gid" && source == "gid") return kind = Kind::kGidInitial, true;
      return false;
    case 4:
      if (signal != "link") return false;
      if (source == "emulator") return kind = Kind::kLinkEmulator, true;
      if (source == "firmware") return kind = Kind::kLinkFirmware, true;
      return false;
    case 5:
      if (signal != "light") return false;
      if (source == "emulator") return kind = Kind::kLightEmulator, true;
      if (source == "ocs_power") return kind = Kind::kLightOcsPower, true;
      return false;
    case 7:
      if (signal == "carrier") return source == "carrier" && (kind = Kind::kCarrier, true);
      if (signal == "command") return source == "ocs" && (kind = Kind::kCommand, true);
      if (signal == "stalled") return source == "rdma" && (kind = Kind::kStalled, true);
      if (signal == "resumed") return source == "rdma" && (kind = Kind::kResumed, true);
      return false;
    case 9:
      if (signal == "gid_added") return source == "gid" && (kind = Kind::kGidSet, true);
      return false;
    case 11:
      // The live carrier bit the probe polls (docs/probes-carrier.md): when the driver changed
      // the carrier, give or take a poll interval, however late linkwatch announced it.
      if (signal == "carrier_bit") return source == "carrier" && (kind = Kind::kCarrierBit, true);
      if (source != "gid") return false;
      if (signal == "gid_changed") return kind = Kind::kGidSet, true;
      if (signal == "gid_removed") return kind = Kind::kGidRemoved, true;
      if (signal == "neigh_added") return kind = Kind::kNeighChange, true;
      return false;
    case 12:
      if (signal == "rx_power_dbm" && source == "rx_power") return kind = Kind::kRxPower, true;
      return false;
    case 13:
      if ((signal == "neigh_removed" || signal == "neigh_changed") && source == "gid")
        return kind = Kind::kNeighChange, true;
      return false;
    case 16:
      // A flap the kernel coalesced (its down and up reported as one change, e.g. by linkwatch's
      // 1 s rate limit): value 0, stamped with the up that follows; a carrier-down edge whose
      // real time is at or before its stamp.
      if (signal == "carrier_inferred") return source == "carrier" && (kind = Kind::kCarrier, true);
      return false;
    case 20:
      // A flap shorter than the poll interval, proven by the counters, stamped with the poll
      // that revealed it.
      if (signal == "carrier_bit_inferred") return source == "carrier" && (kind = Kind::kCarrierBit, true);
      return false;
    default:
      return false;
  }
}

namespace {

constexpr size_t kReleaseEvery = size_t{64} << 20;

class Parser {
 public:
  Parser(std::string_view text, const std::string& name, std::function<void(size_t)> consumed)
      : begin_(text.data()),
        p_(text.data()),
        end_(text.data() + text.size()),
        name_(name),
        consumed_(std::move(consumed)) {}

  Timeline run() {
    Timeline t;
    t.path = name_;
    if (!next_record()) throw ConfigError(fmt::format("{}:1: empty file, no header", name_));
    std::vector<std::string> header(fields_.begin(), fields_.end());
    ncols_ = header.size();
    auto col = [&](const char* n, bool required) -> int {
      for (size_t i = 0; i < header.size(); ++i)
        if (header[i] == n) return static_cast<int>(i);
      if (required) {
        std::string all;
        for (const auto& h : header) all += (all.empty() ? "" : ",") + h;
        throw ConfigError(fmt::format("{}:{}: missing column '{}' (header: {})", name_, record_line_, n, all));
      }
      return -1;
    };
    const int c_t = col("t_ns", true), c_host = col("host", true), c_source = col("source", true),
              c_subject = col("subject", true), c_signal = col("signal", true), c_value = col("value", true);
    const int c_run = col("run", false), c_iter = col("iteration", false), c_unit = col("unit", false);
    t.has_run = c_run >= 0;
    t.has_iteration = c_iter >= 0;

    size_t next_release = kReleaseEvery;
    while (next_record()) {
      ++t.rows;
      if (consumed_ && static_cast<size_t>(p_ - begin_) >= next_release) {
        consumed_(static_cast<size_t>(p_ - begin_));
        next_release += kReleaseEvery;
      }
      Kind kind;
      if (!classify(fields_[c_source], fields_[c_signal], kind)) {
        if (fields_[c_source] == "heartbeat" && fields_[c_signal] == "heartbeat") {
          const int64_t t_ns = number<int64_t>(fields_[c_t], "t_ns");
          const uint32_t run = c_run >= 0 ? t.strings.intern(fields_[c_run]) : 0;
          auto [it, fresh] = t.heartbeats.try_emplace(Timeline::heartbeat_key(run, t.strings.intern(fields_[c_host])),
                                                      Timeline::Heartbeats{t_ns, 0});
          Timeline::Heartbeats& hb = it->second;
          if (!fresh && t_ns > hb.last_ns) {
            hb.gap_ns = t_ns - hb.last_ns;
            hb.last_ns = t_ns;
          }
        }
        continue;
      }
      Event e;
      e.kind = kind;
      e.line = static_cast<uint32_t>(record_line_);
      e.t_ns = number<int64_t>(fields_[c_t], "t_ns");
      std::string_view v = fields_[c_value];
      e.value = number<double>(v, "value");
      e.host = t.strings.intern(fields_[c_host]);
      std::string_view subject = fields_[c_subject];
      e.subject = t.strings.intern(kind == Kind::kCommand || kind == Kind::kAck ? subject : interface_of(subject));
      if (kind == Kind::kStalled || kind == Kind::kResumed) e.peer = t.strings.intern(peer_of(subject));
      if (is_gid_kind(kind)) {
        auto slash = subject.rfind('/');
        e.table = t.strings.intern(slash == std::string_view::npos ? std::string_view() : subject.substr(0, slash));
        if (c_unit >= 0) e.detail = t.strings.intern(fields_[c_unit]);
      }
      if (c_run >= 0) e.run = t.strings.intern(fields_[c_run]);
      if (c_iter >= 0) e.iteration = number<int32_t>(fields_[c_iter], "iteration");
      t.events.push_back(e);
    }
    return t;
  }

 private:
  template <class T>
  T number(std::string_view s, const char* column) const {
    T v{};
    const char* b = s.data();
    const char* e = s.data() + s.size();
    auto r = std::from_chars(b, e, v);
    if (s.empty() || r.ec != std::errc() || r.ptr != e)
      throw ConfigError(fmt::format("{}:{}: bad number '{}' in column {}", name_, record_line_, s, column));
    return v;
  }

  // Splits the next non-empty record into fields_; false at the end of the text.
  bool next_record() {
    for (;;) {
      if (p_ >= end_) return false;
      record_line_ = line_;
      const char* nl = static_cast<const char*>(std::memchr(p_, '\n', static_cast<size_t>(end_ - p_)));
      const char* eol = nl ? nl : end_;
      const char* next = nl ? nl + 1 : end_;
      const char* last = eol;
      if (last > p_ && last[-1] == '\r') --last;
      if (last == p_) {  // blank line
        p_ = next;
        ++line_;
        continue;
      }
      if (std::memchr(p_, '"', static_cast<size_t>(last - p_)) == nullptr) {
        fields_.clear();
        const char* f = p_;
        for (;;) {
          const char* c = static_cast<const char*>(std::memchr(f, ',', static_cast<size_t>(last - f)));
          if (!c) {
            fields_.emplace_back(f, static_cast<size_t>(last - f));
            break;
          }
          fields_.emplace_back(f, static_cast<size_t>(c - f));
          f = c + 1;
        }
        p_ = next;
        ++line_;
      } else {
        quoted_record();
      }
      if (ncols_ != 0 && fields_.size() != ncols_)
        throw ConfigError(
            fmt::format("{}:{}: {} field(s), the header has {}", name_, record_line_, fields_.size(), ncols_));
      return true;
    }
  }

  // RFC 4180 as CsvWriter writes it: a field in double quotes may hold commas, line breaks and
  // doubled quotes.
  void quoted_record() {
    storage_.clear();
    storage_.emplace_back();
    for (;;) {
      std::string& cur = storage_.back();
      if (p_ < end_ && *p_ == '"') {
        ++p_;
        for (;;) {
          if (p_ >= end_) throw ConfigError(fmt::format("{}:{}: unterminated quoted field", name_, record_line_));
          char c = *p_++;
          if (c == '"') {
            if (p_ < end_ && *p_ == '"') {
              cur += '"';
              ++p_;
              continue;
            }
            break;
          }
          if (c == '\n') ++line_;
          cur += c;
        }
        if (p_ < end_ && *p_ == '\r' && (p_ + 1 == end_ || p_[1] == '\n')) ++p_;
        if (p_ < end_ && *p_ != ',' && *p_ != '\n')
          throw ConfigError(
              fmt::format("{}:{}: unexpected '{}' after a closing quote", name_, line_, std::string(1, *p_)));
      } else {
        while (p_ < end_ && *p_ != ',' && *p_ != '\n') {
          if (*p_ == '"') throw ConfigError(fmt::format("{}:{}: stray quote inside an unquoted field", name_, line_));
          cur += *p_++;
        }
        if (!cur.empty() && cur.back() == '\r' && (p_ == end_ || *p_ == '\n')) cur.pop_back();
      }
      if (p_ < end_ && *p_ == ',') {
        ++p_;
        storage_.emplace_back();
        continue;
      }
      if (p_ < end_) ++p_;  // the newline
      ++line_;
      break;
    }
    fields_.clear();
    for (const auto& s : storage_) fields_.emplace_back(s);
  }

  const char* begin_;
  const char* p_;
  const char* end_;
  const std::string& name_;
  std::function<void(size_t)> consumed_;
  size_t line_ = 1;
  size_t record_line_ = 1;
  size_t ncols_ = 0;
  std::vector<std::string_view> fields_;
  std::vector<std::string> storage_;
};

// A read-only private mapping of a whole file.
class MappedFile {
 public:
  explicit MappedFile(const std::string& path) {
    fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd_ < 0) throw ConfigError(fmt::format("{}: cannot open: {}", path, std::strerror(errno)));
    struct stat st {};
    if (::fstat(fd_, &st) != 0) throw SystemError("fstat " + path, errno);
    if (S_ISDIR(st.st_mode)) throw ConfigError(fmt::format("{}: is a folder, not a timeline file", path));
    size_ = static_cast<size_t>(st.st_size);
    if (size_ == 0) return;
    void* m = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd_, 0);
    if (m == MAP_FAILED) throw SystemError("mmap " + path, errno);
    data_ = static_cast<const char*>(m);
    ::madvise(m, size_, MADV_SEQUENTIAL);
  }
  ~MappedFile() {
    if (data_) ::munmap(const_cast<char*>(data_), size_);
    if (fd_ >= 0) ::close(fd_);
  }
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  std::string_view text() const { return {data_ ? data_ : "", size_}; }
  // Drops the pages before `offset` from this process (they stay in the page cache), so a
  // multi-gigabyte timeline does not count against the peak resident memory.
  void release_before(size_t offset) {
    size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
    size_t upto = offset / page * page;
    if (upto > released_) {
      ::madvise(const_cast<char*>(data_) + released_, upto - released_, MADV_DONTNEED);
      released_ = upto;
    }
  }

 private:
  int fd_ = -1;
  const char* data_ = nullptr;
  size_t size_ = 0;
  size_t released_ = 0;
};

}  // namespace

Timeline parse_timeline(std::string_view text, const std::string& name) { return Parser(text, name, nullptr).run(); }

Timeline read_timeline(const std::string& path) {
  MappedFile f(path);
  return Parser(f.text(), path, [&f](size_t off) { f.release_before(off); }).run();
}

}  // namespace ocslab::analysis
