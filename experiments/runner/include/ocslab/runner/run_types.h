// What a run takes and what it gives back, shared by every layer of the runner: the run's
// options (RunOptions), the switch commands it recorded and its result (RunResult), apart from
// runner.h so that the pieces of an experiment type need not include the top-level API.
#pragma once

#include <atomic>
#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

#include "ocslab/runner/host_session.h"
#include "ocslab/runner/phase_figures.h"
#include "ocslab/runner/run_events.h"

namespace ocslab::runner {

struct RunOptions {
  std::string cache_dir;     // virtual labs; empty: vlab::default_cache_dir()
  std::string self_exe;      // the ocslab binary (starts `vlab supervise`); empty: /proc/self/exe
  std::string agent_binary;  // the ocslab-agent copied into a virtual lab; empty: next to self_exe
  std::string output_dir;    // the results folder itself; empty: <spec.output>/<name>-<time>
  const std::atomic<bool>* interrupted = nullptr;  // Ctrl-C: stop the schedule, keep what was captured
  std::ostream* progress = nullptr;                // a terminal: a live status line; nullptr: quiet
  std::ostream* log = nullptr;                     // one line per notable event (host lost, switch error); may be null
  std::string version;                             // ocslab's version, for meta.json
  RunEventSink events;                             // progress events (run_events.h); empty: none
};

struct ReconfigRecord {
  int iteration = 0;
  std::string mapping;
  int64_t issued_ns = 0, acked_ns = 0;  // runner clock
  bool ok = false;
  std::string error;
  size_t removed = 0, added = 0;  // circuits
};

struct RunResult {
  std::string folder;
  std::string run_id;
  bool interrupted = false;
  std::vector<ReconfigRecord> reconfigurations;
  std::vector<HostReport> hosts;
  size_t samples = 0;                 // rows in timeline.csv
  std::vector<std::string> problems;  // hosts lost, failed reconfigurations: also in meta.json
  std::vector<StepFigures> steps;     // phase-workload: per mode and step
};

}  // namespace ocslab::runner
