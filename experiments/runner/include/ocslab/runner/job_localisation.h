// Where a phase workload's job stopped (docs/experiments.md, "Where the job stopped"): when
// ranks fail, the one that stopped first (NCCLX-style: the earliest divergence; the others stop
// because they lost it), when, how, and the step it was in. A pure function of the controller's
// events and the ranks' ends, so it can be tested on any machine.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "ocslab/phase/controller_core.h"

namespace ocslab::runner {

// How one rank ended, as its launcher saw it (ssh: its own session).
struct RankEnd {
  int rank = -1;
  std::string host;
  int exit_status = 0;   // < 0: killed by a signal
  std::string message;   // its last words (the program's error), "" without
  int64_t ended_ns = 0;  // when the runner saw it end (runner clock, ns since the epoch)
};

struct JobLocalisation {
  int rank = -1;  // the rank that stopped first
  std::string host;
  int step = -1;           // the step it was in: its last request's (-1: none known)
  int64_t stopped_ns = 0;  // its controller connection closing, else its end
  std::string how;         // "was killed by a signal", "exited with status 2", "disconnected"
  size_t failed = 0;       // ranks that failed, this one included
  std::string verdict;     // one line
  std::vector<std::string> evidence;
};

// Nothing when no rank failed (every end has status 0 and no rank disconnected). ends: every
// rank's (may be empty: a job launcher's ranks; the controller's disconnects then say who
// stopped). step_of: the step of a request's (group, seq), -1 when unknown. t0_ns: what "+x s"
// counts from (the ranks' start).
std::optional<JobLocalisation> localise_job(const std::vector<phase::ControllerEvent>& events,
                                            const std::vector<RankEnd>& ends,
                                            const std::function<int(const std::string&, int64_t)>& step_of,
                                            int64_t t0_ns);

}  // namespace ocslab::runner
