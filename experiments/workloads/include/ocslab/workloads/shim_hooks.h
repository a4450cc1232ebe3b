// The workloads' bridge to phase-driven reconfiguration: PhaseHooks backed by an
// ocslab::phase::Shim that talks to the job's controller (docs/phase-control.md), plus the
// --controller/--job/--controller-token-file/--phase-mode/--profile-steps/--phase-table options both collbench
// programs share (docs/workloads.md, "Running with the controller").
#pragma once

#include <boost/program_options.hpp>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ocslab/phase/phase_profiler.h"
#include "ocslab/phase/shim.h"
#include "ocslab/workloads/hooks.h"
#include "ocslab/workloads/op_record.h"
#include "ocslab/workloads/schedule.h"

namespace ocslab::workloads {

// The shim dimension a schedule group kind maps to: pp -> "pp", world -> "mgmt" (a world ring
// spans every stage and has no topo_id digit; its ops pass without reconfiguration and run on
// whatever the fabric is, as Opus routes management traffic), every other kind -> its name
// (it must be one of the controller's symmetric dimensions, else the join is refused).
std::string shim_dim(const Group& g);

// The shim group an op runs on: the schedule group, except a sendrecv on a group of more than
// two ranks, which gets a pair group "<group>:<a>-<b>" (a < b) of its own so the controller
// waits for the two ranks that take part, not for the whole group.
std::string shim_group(const Schedule& s, const Op& op);

// What the shim on `rank` is told about the step's op `i` (the rank takes part in it): its shim
// group, "send" or "recv" for a sendrecv, its bytes, and `local_index`, the op's position among
// the rank's ops of the step.
phase::OpDescriptor shim_descriptor(const Schedule& s, size_t i, int rank, int local_index);
// The phase table a shim on `rank` holds for the schedule: the rank's ops of one step in order,
// as shim_descriptor gives them (what a learned table must equal).
phase::PhaseTable declared_phase_table(const Schedule& s, int rank);
// A measured op as the phase profiler takes it: the shim's group and members, kind, type and
// bytes, the op's span from its record (from entering the pre hook to the op's end), and
// step_start as the caller says (the rank's first op of a step, when steps are marked).
phase::ProfiledOp profiled_op(const Schedule& s, const OpRecord& r, bool step_start);

class ShimHooks : public PhaseHooks {
 public:
  // Connects, says hello and registers every group (and sendrecv pair group) this rank is in.
  // Throws phase::PhaseError with the controller's message (naming rank and group) when the
  // join is refused, ocslab::Error when the controller cannot be reached.
  ShimHooks(const Schedule& s, int rank, phase::ShimOptions options);
  void pre_communication(const OpDesc& d) override;
  void post_communication(const OpDesc& d) override;
  HookOutcome outcome(const OpDesc& d) override;
  phase::Shim& shim() { return *shim_; }

 private:
  phase::OpDescriptor descriptor(const OpDesc& d) const;

  std::unique_ptr<phase::Shim> shim_;
  std::vector<std::string> group_of_op_;  // schedule op index -> shim group
  // Schedule op index -> what the shim is told (index: the op's position among this rank's ops
  // of the step; the shim starts a step, for profiling and provisioning, at index 0).
  std::vector<phase::OpDescriptor> descriptors_;
  phase::Decision last_;
};

// --controller HOST:PORT, --job NAME, --controller-token-file FILE (else the token from
// $OCSLAB_CONTROLLER_TOKEN, else none), --phase-mode on-demand|provisioning,
// --profile-steps K, --phase-table FILE ("{rank}" in FILE is replaced by the rank).
void add_phase_options(boost::program_options::options_description& desc);
// The shim's options from those flags; nullopt without --controller (then none of the others
// may be given). Throws ocslab::Error naming the flag and its bad value.
std::optional<phase::ShimOptions> phase_options(const boost::program_options::variables_map& vm, int rank, int world,
                                                const std::string& host, std::chrono::milliseconds ack_wait);
}  // namespace ocslab::workloads
