// The survival experiment's analysis (issue 45, docs/experiments.md "Reading the survival
// matrix"): RC queue pairs with several (timeout, retry_cnt) settings carry traffic through
// circuit outages of planned lengths; per outage and probe, what happened to the queue pair
// (survived, errored, stalled, untouched), next to what the InfiniBand timer arithmetic
// (qp_timers.h) and Soft-RoCE's rounding of it predict, and per setting the measured and the
// predicted boundary between surviving and erroring.
//
// Input, a timeline (timeline.csv) with these rows (the runner's `outages` type writes them):
//   switch ocs  outage-<MS>ms  command 1     one per outage (MS: the planned length, "2.5" allowed)
//   switch ocs  outage-<MS>ms  ack 1|0       the lab applied it (0: it did not)
//   <host> emulator <iface> light 0|1        the NIC's actual dark window (ground truth)
//   <host> rdma <dev>/<iface>@<peer>:t<TIMEOUT>r<RETRY>  stalled | resumed | qp_error |
//        qp_recreated | completion | setup_error   (rdma_probe.h); a subject without the
//        `:t..r..` suffix is not a survival probe and is ignored
#pragma once

#include <cstddef>
#include <cstdint>
#include <iosfwd>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ocslab::analysis {

// The kernel HZ assumed for Soft-RoCE's timer when none is given: Debian's kernels are built
// with CONFIG_HZ=250 (the virtual lab's guests run Debian's kernel).
constexpr int kDefaultSoftRoceHz = 250;

// The outage Soft-RoCE (rxe) survives, in ns; nullopt: any outage. rxe converts the ACK timeout
// to jiffies once (drivers/infiniband/sw/rxe/rxe_qp.c, rxe_qp_from_attr:
// `j = nsecs_to_jiffies(4096ULL << attr->timeout); qp_timeout_jiffies = j ? j : 1`), so T is
// rounded down to whole jiffies of the kernel's HZ, at least one jiffy, and its timer is a
// kernel timer of that many jiffies; the bound is then retry_cnt x that T, as in
// survivable_outage_ns. Unbounded for timeout 0 (no timer) and for retry_cnt 7, which rxe_comp.c
// never decrements (retry forever). HZ=250: timeout 12 (16.777216 ms) is 4 jiffies = 16 ms,
// timeout 10 (4.194304 ms) 1 jiffy = 4 ms, timeout 2 (16.384 us) 1 jiffy = 4 ms. Throws Error
// for timeout outside 0..31, retry_cnt outside 0..7 or hz outside 1..100000.
std::optional<int64_t> softroce_survivable_outage_ns(int timeout, int retry_cnt, int hz = kDefaultSoftRoceHz);

// A survival probe's subject: `<device>/<interface>@<peer>:t<timeout>r<retry_cnt>`.
struct SurvivalSubject {
  std::string device, interface, peer;
  int timeout = 0, retry_cnt = 0;
};
// nullopt when the subject has no `:t<digits>r<digits>` suffix (not a survival probe); throws
// Error when it has one out of range (timeout > 31, retry_cnt > 7).
std::optional<SurvivalSubject> parse_survival_subject(std::string_view subject);

enum class Outcome {
  kSurvived,    // stalled, then resumed, no qp_error in the outage's iteration
  kErrored,     // a qp_error in the iteration
  kStalled,     // stalled, never resumed, no qp_error
  kUntouched,   // no stall overlaps the outage: too short for the probe to notice
  kNotApplied,  // the lab acknowledged the outage with 0: not counted in the matrix
};
const char* outcome_name(Outcome o);  // "survived", "errored", "stalled", "untouched", "not_applied"

// One row of survival.csv: an outage (iteration) x host x survival probe.
struct SurvivalRow {
  std::string run;
  int iteration = 0;
  double outage_ms = 0;           // planned (the command's subject)
  std::optional<double> dark_ms;  // the NIC's light 0 -> 1 in this iteration
  std::string host, interface, peer, device;
  int timeout = 0, retry_cnt = 0;
  bool predicted_survive = false;  // survives_outage(timeout, retry_cnt, planned)
  bool softroce_survive = false;   // planned <= softroce_survivable_outage_ns
  Outcome outcome = Outcome::kUntouched;
  std::optional<double> error_after_ms;            // first qp_error - the NIC's light 0
  std::optional<double> resume_after_light_ms;     // survived: resumed - the NIC's light 1
  std::optional<double> recreated_after_light_ms;  // errored: first qp_recreated/resumed after the error - light 1
};

// Where a prediction stands against the measured boundary.
enum class Verdict {
  kAgrees,  // within [longest survived, shortest errored], widened by one grid step each side
  kDisagrees,
  kUndetermined,  // no length where every row survived, none where any errored
  kNotMonotone,   // a length errored below one where every row survived
};
const char* verdict_name(Verdict v);  // "agrees", "disagrees", "undetermined", "not monotone"

struct SurvivalPoint {
  double outage_ms = 0;
  size_t survived = 0, errored = 0, stalled = 0, untouched = 0;
  size_t total() const { return survived + errored + stalled + untouched; }
};

// One (timeout, retry_cnt): its counts per planned length of the grid (per queue pair: the rows
// of its two ends, host -> peer and peer -> host, count once, errored when either end errored,
// since an RC responder has no retransmission timer and is re-created with its requester), the
// measured boundary
// and the predicted ones (nullopt: unbounded).
struct SurvivalSetting {
  int timeout = 0, retry_cnt = 0;
  std::vector<SurvivalPoint> points;                // one per grid length, ascending
  std::optional<double> longest_survived_ms;        // every row survived or was untouched
  std::optional<double> shortest_errored_ms;        // any row errored
  std::optional<double> predicted_ms, softroce_ms;  // retry_cnt x T; Soft-RoCE's
  Verdict verdict = Verdict::kUndetermined, softroce_verdict = Verdict::kUndetermined;
  std::string label() const;  // "t12 r2"
};

struct SurvivalOptions {
  int hz = kDefaultSoftRoceHz;  // the guests' kernel HZ for the Soft-RoCE bound
};

struct Survival {
  std::string path;
  int hz = kDefaultSoftRoceHz;
  size_t probes = 0;  // survival probe streams (run x host x subject)
  size_t outages = 0, not_applied = 0;
  std::vector<double> grid;               // the planned lengths, sorted, unique
  std::vector<SurvivalRow> rows;          // by run, iteration, host, subject
  std::vector<SurvivalSetting> settings;  // by timeout, retry_cnt
};

// The verdict of a predicted boundary (nullopt: unbounded) against a measured one on `grid`.
Verdict judge_boundary(const std::vector<double>& grid, std::optional<double> longest_survived_ms,
                       std::optional<double> shortest_errored_ms, std::optional<double> predicted_ms);

// One outcome into a grid length's counts.
void count_outcome(SurvivalPoint& pt, Outcome o);
// A setting whose points are counted: its measured boundary, the predicted ones (the arithmetic's
// and Soft-RoCE's at hz) and both verdicts.
void judge_setting(SurvivalSetting& set, const std::vector<double>& grid, int hz);
// "t12 r2: survives <= 20 ms, errors >= 50 ms; predicted 33.554 ms (Soft-RoCE 32.000 ms at HZ=250):
// agrees"; without softroce, no Soft-RoCE bound or verdict.
std::string survival_setting_line(const SurvivalSetting& set, int hz, bool softroce);

// Reads the survival rows of a timeline, streaming (only the ocs outage rows, the emulator's
// light rows and the survival probes' event rows are kept; a line is at most 1 MiB). Throws
// ConfigError "path:line: what" for malformed input (a missing column, a wrong field count, a
// bad number, an outage subject without a length, a second outage in one iteration, a survival
// suffix out of range), "path: cannot open: ..." when the file cannot be opened (as read_timeline).
Survival read_survival(const std::string& path, const SurvivalOptions& options = {});
// The same over text in memory; `name` stands for the path in messages.
Survival parse_survival(std::string_view text, const std::string& name, const SurvivalOptions& options = {});

void write_survival_csv(const Survival& s, std::ostream& out);         // survival.csv
void write_survival_matrix_csv(const Survival& s, std::ostream& out);  // survival_matrix.csv
// One line per setting, then the disagreements, e.g.
//   t12 r2: survives <= 20 ms, errors >= 50 ms; predicted 33.554 ms (Soft-RoCE 32.000 ms at HZ=250): agrees
std::string survival_summary(const Survival& s);

// folder/timeline.csv -> folder/survival.csv and folder/survival_matrix.csv; returns the
// summary. nullopt, and nothing written, when the timeline has no survival probe.
std::optional<std::string> write_survival(const std::string& folder, const SurvivalOptions& options = {});
// The same for any timeline file, writing into out_dir.
std::optional<std::string> write_survival_files(const std::string& timeline_path, const std::string& out_dir,
                                                const SurvivalOptions& options = {});

}  // namespace ocslab::analysis
