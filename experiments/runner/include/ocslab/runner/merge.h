// The merged timeline: capture files and a virtual lab's ground truth merged into one
// timeline.csv on the runner's clock in bounded memory, and the iteration a sample belongs to.
// Used by the capture (host_capture.h) and the experiment types; no run state.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "ocslab/common/sample.h"
#include "ocslab/runner/experiment_spec.h"

namespace ocslab::runner {

// Samples within [from_ns, to_ns] of a virtual lab's ground-truth file, renamed to the runner's
// view: an emulated NIC "<host>-<nic>" becomes host <host>, subject <nic>; switch rows get host
// "switch". Throws Error naming the file when it cannot be read.
// Streams them to fn one at a time (the file can be as long as the lab's life).
void read_ground_truth(const std::string& path, int64_t from_ns, int64_t to_ns, const std::vector<HostEntry>& hosts,
                       const std::function<void(const Sample&)>& fn);

// One input of merge_capture: a capture file (capture_store.h), and what to do to each of its
// rows before they are merged (a host's clock correction); fix may be empty.
struct CaptureInput {
  std::string path;
  std::function<void(Sample&)> fix;
};

// timeline.csv (the Sample columns, run, iteration) from capture files, in memory bounded by
// chunk_rows whatever their length: each input is cut into runs of at most chunk_rows rows,
// sorted by time and written under work_dir (removed after), merged 256 at a time into longer
// runs while there are more, then one k-way merge writes path,
// replaced atomically (write_file_atomic). Ties keep input order, then row order: the order a
// stable sort of the inputs concatenated gives. A last line cut short by a crash is skipped.
// Returns the rows written; throws Error naming the file that could not be read or written.
uint64_t merge_capture(const std::vector<CaptureInput>& inputs, const std::string& path, const std::string& run,
                       const std::function<int(int64_t)>& iteration, const std::string& work_dir,
                       size_t chunk_rows = size_t{1} << 16);

// How long before its command an iteration starts: what a command's first effects may precede it by.
inline constexpr int64_t kIterationGuardNs = 200'000'000;

// The iteration of a sample at t: 0 before the first reconfiguration's issue time minus the
// guard, i when t is in [issued_i - guard, issued_{i+1} - guard).
int iteration_of(int64_t t_ns, const std::vector<int64_t>& issued_ns, int64_t guard_ns = kIterationGuardNs);

}  // namespace ocslab::runner
