// The emulator's ground-truth timeline: every command received and acknowledged, every
// switching start/end, light on/off per port and link down/up per NIC, as Samples. Written to
// a CSV file as it happens and fanned out to live subscribers, so experiments can compare
// what hosts measured with what really happened.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "ocslab/common/csv_writer.h"
#include "ocslab/common/sample.h"

namespace ocslab::emu {

class GroundTruth {
 public:
  // host: the name samples carry (the switch's name in the lab file).
  explicit GroundTruth(std::string host);

  // Starts writing every later sample to path (tidy Sample columns plus mono_ns).
  void write_csv(const std::string& path);

  using Subscriber = std::function<void(const Sample&)>;
  // Returns an id for unsubscribe. Subscribers run on the recording thread: keep them short.
  int subscribe(Subscriber fn);
  void unsubscribe(int id);

  // Stamps t_ns/mono_ns now when s.t_ns == 0, fills host, then records.
  void record(Sample s);
  void record(const std::string& source, const std::string& subject, const std::string& signal, double value,
              const std::string& unit);

  // Samples recorded so far (kept in memory for tests and short runs; bounded).
  std::vector<Sample> samples() const;
  const std::string& host() const { return host_; }

 private:
  std::string host_;
  mutable std::mutex mutex_;
  std::unique_ptr<CsvWriter> csv_;
  std::vector<std::pair<int, Subscriber>> subscribers_;
  int next_id_ = 1;
  std::vector<Sample> kept_;
};

// Column order of the ground-truth CSV: the tidy Sample columns, then mono_ns.
const std::vector<std::string>& ground_truth_columns();

}  // namespace ocslab::emu
