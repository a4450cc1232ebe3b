#include "ocslab/emulator/ground_truth.h"

#include "ocslab/common/clock.h"

namespace ocslab::emu {

namespace {
constexpr size_t kKeepMax = 1'000'000;
}

const std::vector<std::string>& ground_truth_columns() {
  static const std::vector<std::string> cols = [] {
    auto c = sample_csv_columns();
    c.push_back("mono_ns");
    return c;
  }();
  return cols;
}

GroundTruth::GroundTruth(std::string host) : host_(std::move(host)) {}

void GroundTruth::write_csv(const std::string& path) {
  std::lock_guard lock(mutex_);
  csv_ = std::make_unique<CsvWriter>(path);
  csv_->header(ground_truth_columns());
  csv_->flush();
}

int GroundTruth::subscribe(Subscriber fn) {
  std::lock_guard lock(mutex_);
  subscribers_.emplace_back(next_id_, std::move(fn));
  return next_id_++;
}

void GroundTruth::unsubscribe(int id) {
  std::lock_guard lock(mutex_);
  std::erase_if(subscribers_, [id](const auto& p) { return p.first == id; });
}

void GroundTruth::record(Sample s) {
  if (s.t_ns == 0) {
    Timestamp t = now();
    s.t_ns = t.realtime_ns;
    s.mono_ns = t.monotonic_ns;
  }
  if (s.host.empty()) s.host = host_;
  std::lock_guard lock(mutex_);
  if (csv_) {
    auto fields = sample_csv_fields(s);
    fields.push_back(std::to_string(s.mono_ns));
    csv_->row(fields);
    csv_->flush();  // a crash or kill must not lose what already happened
  }
  if (kept_.size() < kKeepMax) kept_.push_back(s);
  for (const auto& [id, fn] : subscribers_) fn(s);
}

void GroundTruth::record(const std::string& source, const std::string& subject, const std::string& signal,
                         double value, const std::string& unit) {
  Sample s;
  s.source = source;
  s.subject = subject;
  s.signal = signal;
  s.value = value;
  s.unit = unit;
  record(std::move(s));
}

std::vector<Sample> GroundTruth::samples() const {
  std::lock_guard lock(mutex_);
  return kept_;
}

}  // namespace ocslab::emu
