// Where a phase workload's job stopped (docs/experiments.md, "Where the job stopped"): when
// ranks fail, the one that stopped first (NCCLX-style: the earliest divergence; the others stop
// because they lost it), when, how, and the step it was in. A pure function of the controller's
// events and the ranks' ends, so it can be tested on any machine.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
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
  int step = -1;           // the step it was in: its last request's, or the step after the last
                           // one whose ops it all finished when that is later (-1: none known)
  int64_t stopped_ns = 0;  // its controller connection closing, else its end
  std::string how;         // "was killed by a signal", "exited with status 2", "disconnected"
  size_t failed = 0;       // ranks that failed, this one included
  std::string verdict;     // one line
  std::vector<std::string> evidence;
};

// Nothing when no rank failed (every end has status 0 and no rank disconnected). ends: every
// rank's (may be empty: a job launcher's ranks; the controller's disconnects then say who
// stopped). step_of: the step of a request's (group, seq), -1 when unknown. t0_ns: what "+x s"
// counts from (the ranks' start). row_steps: per rank, the step its op rows place it in (the first
// step whose ops it had not all finished; rows_step_of); a rank that finished the last step of
// its ops and was then stopped before asking for the next step's first op was in that next step,
// which its last request alone would not show. Absent: no rows known for the rank.
std::optional<JobLocalisation> localise_job(const std::vector<phase::ControllerEvent>& events,
                                            const std::vector<RankEnd>& ends,
                                            const std::function<int(const std::string&, int64_t)>& step_of,
                                            int64_t t0_ns, const std::map<int, int>& row_steps = {});

// Per rank with rows: the first step whose ops it had not all finished, given per rank the
// number of ops of a step it takes part in (ops_per_step[rank]) and (rank, step) of each op row.
// A rank with no rows, or that takes part in no op, is absent.
std::map<int, int> rows_step_of(const std::vector<std::pair<int, int>>& rank_step_rows,
                                const std::vector<int>& ops_per_step);

}  // namespace ocslab::runner
