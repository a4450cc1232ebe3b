// What every experiment type shares once its target is resolved: the run's options, its log,
// Ctrl-C, the results folder, and the writers of the files every run leaves (timeline.csv, text
// files, meta.json's times). Pipeline: docs/architecture.md, "The experiment pipeline".
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "ocslab/common/error.h"
#include "ocslab/common/sample.h"
#include "ocslab/runner/experiment_spec.h"
#include "ocslab/runner/run_events.h"

namespace ocslab::runner {

struct RunOptions;
struct RunResult;

// A result file could not be written (a full disk): thrown by an experiment type once the
// hosts are left as it found them, so the pipeline still releases the target.
class ResultsNotWritten : public Error {
 public:
  using Error::Error;
};

class RunContext {
 public:
  explicit RunContext(const RunOptions& options) : opt_(options) {}
  // One line to spdlog and to the run's log stream ("ocslab run: ...").
  void log(const std::string& msg) const;
  std::function<void(const std::string&)> logger() const {
    return [this](const std::string& m) { log(m); };
  }
  bool interrupted() const;
  // One progress event to the run's event sink, if any (run_events.h).
  void event(const std::string& type, nlohmann::json fields) const;
  const RunOptions& options() const { return opt_; }

 private:
  const RunOptions& opt_;
};

// Makes the results folder (options.output_dir, else <spec.output>/<spec.name>-<local time>)
// and sets result.folder and result.run_id (the folder's name).
void open_results(const ExperimentSpec& spec, const RunContext& ctx, RunResult& result);

// timeline.csv: the Sample columns, then `run` and the iteration iteration(t_ns) gives each
// row. Replaced atomically (temporary file, fsync, rename): a crash leaves the old file or the
// new one. Throws Error naming the file when a write fails (full disk).
void write_timeline(const std::string& path, const std::vector<Sample>& samples, const std::string& run,
                    const std::function<int(int64_t)>& iteration);

// Writes text to path atomically, as write_timeline; throws Error naming the file when it cannot.
void write_text(const std::string& path, const std::string& text);

// "2026-11-26T03:14:43.123Z" (UTC, milliseconds), for meta.json.
std::string iso_time(int64_t realtime_ns);

}  // namespace ocslab::runner
