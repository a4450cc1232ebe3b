#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <functional>
#include <queue>

#include "ocslab/common/csv_reader.h"
#include "ocslab/common/durable_file.h"
#include "ocslab/runner/capture_store.h"
#include "ocslab/runner/merge.h"

namespace ocslab::runner {

namespace fs = std::filesystem;

int iteration_of(int64_t t_ns, const std::vector<int64_t>& issued_ns, int64_t guard_ns) {
  // issued_ns ascending; the number of issue times with issued - guard <= t.
  auto it = std::upper_bound(issued_ns.begin(), issued_ns.end(), t_ns,
                             [guard_ns](int64_t t, int64_t issued) { return t < issued - guard_ns; });
  return static_cast<int>(it - issued_ns.begin());
}

namespace {

// A CSV of samples read row by row, columns found by name in its header.
class SampleCsv {
 public:
  explicit SampleCsv(std::string path) : path_(std::move(path)), in_(path_) {
    if (!in_) throw Error("cannot read " + path_);
    std::string line;
    if (!std::getline(in_, line)) return;  // empty: no rows
    header_ = split_csv_line(line);
    t_ = col("t_ns");
    host_ = col("host", true);
    source_ = col("source");
    subject_ = col("subject");
    signal_ = col("signal");
    value_ = col("value");
    unit_ = col("unit");
    mono_ = col("mono_ns", true);
    seq_ = col("seq", true);
  }

  // The next whole row; false at the end. A row with fewer fields than the header is a line a
  // writer was cut off in: skipped.
  bool next(Sample& s, uint64_t& seq) {
    std::string line;
    while (std::getline(in_, line)) {
      ++lineno_;
      if (line.empty()) continue;
      auto f = split_csv_line(line);
      if (f.size() < header_.size()) continue;
      try {
        s.t_ns = std::stoll(f[t_]);
        s.value = f[value_].empty() ? 0 : std::stod(f[value_]);
        s.mono_ns = mono_ == kNone || f[mono_].empty() ? 0 : std::stoll(f[mono_]);
        seq = seq_ == kNone || f[seq_].empty() ? 0 : std::stoull(f[seq_]);
      } catch (const std::exception&) {
        throw Error(fmt::format("{}:{}: bad number in '{}'", path_, lineno_ + 1, line));
      }
      s.host = host_ == kNone ? std::string() : f[host_];
      s.source = f[source_];
      s.subject = f[subject_];
      s.signal = f[signal_];
      s.unit = f[unit_];
      return true;
    }
    return false;
  }
  const std::vector<std::string>& header() const { return header_; }

 private:
  static constexpr size_t kNone = static_cast<size_t>(-1);
  size_t col(const char* name, bool optional = false) const {
    auto it = std::find(header_.begin(), header_.end(), name);
    if (it != header_.end()) return static_cast<size_t>(it - header_.begin());
    if (optional) return kNone;
    throw Error(fmt::format("{}: no column '{}' in the header", path_, name));
  }
  std::string path_;
  std::ifstream in_;
  std::vector<std::string> header_;
  size_t lineno_ = 0;
  size_t t_ = 0, host_ = 0, source_ = 0, subject_ = 0, signal_ = 0, value_ = 0, unit_ = 0, mono_ = 0, seq_ = 0;
};

// Cuts every input into time-sorted runs of at most chunk_rows; returns their paths in input
// order (ties across runs are then broken by run index, which is input then row order).
std::vector<std::string> sorted_runs(const std::vector<CaptureInput>& inputs, const std::string& work_dir,
                                     size_t chunk_rows) {
  std::vector<std::string> runs;
  std::vector<std::pair<Sample, uint64_t>> chunk;
  auto write_run = [&] {
    if (chunk.empty()) return;
    std::stable_sort(chunk.begin(), chunk.end(), [](const auto& a, const auto& b) { return a.first.t_ns < b.first.t_ns; });
    std::string path = fmt::format("{}/run-{:06d}.csv", work_dir, runs.size());
    DurableFile f = DurableFile::create(path);
    f.append(csv_row(capture_columns()));
    for (const auto& [s, seq] : chunk) f.append(capture_row(s, seq));
    f.flush();  // read back at once and removed after: no need to reach the disk
    runs.push_back(path);
    chunk.clear();
  };
  for (const auto& in : inputs) {
    SampleCsv csv(in.path);
    Sample s;
    uint64_t seq = 0;
    while (csv.next(s, seq)) {
      if (in.fix) in.fix(s);
      chunk.emplace_back(s, seq);
      if (chunk.size() >= chunk_rows) write_run();
    }
    write_run();  // a run never spans two inputs: ties keep input order
  }
  return runs;
}

}  // namespace

void read_ground_truth(const std::string& path, int64_t from_ns, int64_t to_ns, const std::vector<HostEntry>& hosts,
                       const std::function<void(const Sample&)>& fn) {
  std::map<std::string, std::pair<std::string, std::string>> nic_names;  // "h1-eth1" -> (h1, eth1)
  for (const auto& h : hosts) {
    for (const auto& n : h.nics) nic_names[h.name + "-" + n.name] = {h.name, n.name};
  }
  SampleCsv csv(path);
  if (csv.header().empty()) return;
  Sample s;
  uint64_t seq = 0;
  while (csv.next(s, seq)) {
    if (s.t_ns < from_ns || s.t_ns > to_ns) continue;
    auto it = nic_names.find(s.subject);
    if (s.source == "emulator" && it != nic_names.end()) {
      s.host = it->second.first;
      s.subject = it->second.second;
    } else {
      s.host = "switch";
    }
    fn(s);
  }
}

namespace {

// At most this many runs are open at once: more are first merged in consecutive groups into
// longer runs (a 10-hour run at 8,400 samples/s is 4,600 runs of 65,536 rows).
constexpr size_t kFanIn = 256;

// Merges runs by time (ties: run index, then row order) and hands each sample to emit.
void merge_runs(const std::vector<std::string>& runs, const std::function<void(const Sample&, uint64_t)>& emit) {
  struct Head {
    Sample s;
    uint64_t seq;
    size_t run;
  };
  auto later = [](const Head& a, const Head& b) { return a.s.t_ns != b.s.t_ns ? a.s.t_ns > b.s.t_ns : a.run > b.run; };
  std::vector<std::unique_ptr<SampleCsv>> readers;
  std::priority_queue<Head, std::vector<Head>, decltype(later)> heads(later);
  for (size_t i = 0; i < runs.size(); ++i) {
    readers.push_back(std::make_unique<SampleCsv>(runs[i]));
    Head h{{}, 0, i};
    if (readers[i]->next(h.s, h.seq)) heads.push(std::move(h));
  }
  while (!heads.empty()) {
    Head h = heads.top();
    heads.pop();
    emit(h.s, h.seq);
    if (readers[h.run]->next(h.s, h.seq)) heads.push(std::move(h));
  }
}

}  // namespace

uint64_t merge_capture(const std::vector<CaptureInput>& inputs, const std::string& path, const std::string& run,
                       const std::function<int(int64_t)>& iteration, const std::string& work_dir, size_t chunk_rows) {
  fs::create_directories(work_dir);
  struct Cleanup {
    const std::string& dir;
    ~Cleanup() {
      std::error_code ec;
      fs::remove_all(dir, ec);
    }
  } cleanup{work_dir};
  auto runs = sorted_runs(inputs, work_dir, std::max<size_t>(chunk_rows, 1));
  // Consecutive groups merged into one run keep the global tie order (input, then row).
  for (size_t pass = 0; runs.size() > kFanIn; ++pass) {
    std::vector<std::string> longer;
    for (size_t g = 0; g < runs.size(); g += kFanIn) {
      std::vector<std::string> group(runs.begin() + static_cast<long>(g),
                                     runs.begin() + static_cast<long>(std::min(runs.size(), g + kFanIn)));
      std::string out_path = fmt::format("{}/pass{}-{:06d}.csv", work_dir, pass, longer.size());
      DurableFile out = DurableFile::create(out_path);
      out.append(csv_row(capture_columns()));
      merge_runs(group, [&](const Sample& s, uint64_t seq) { out.append(capture_row(s, seq)); });
      out.flush();
      for (const auto& r : group) fs::remove(r);
      longer.push_back(out_path);
    }
    runs = std::move(longer);
  }
  uint64_t rows = 0;
  write_file_atomic(path, [&](DurableFile& out) {
    auto cols = sample_csv_columns();
    cols.push_back("run");
    cols.push_back("iteration");
    out.append(csv_row(cols));
    merge_runs(runs, [&](const Sample& s, uint64_t) {
      auto f = sample_csv_fields(s);
      f.push_back(run);
      f.push_back(std::to_string(iteration(s.t_ns)));
      out.append(csv_row(f));
      ++rows;
    });
  });
  return rows;
}

}  // namespace ocslab::runner
