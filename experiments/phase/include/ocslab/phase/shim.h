// The per-rank shim a workload links: it sits between the workload and its collective
// library and calls the job's controller before and after every communication operation, so
// the rails are wired for each op's parallelism phase (Opus-style). On-demand mode asks for
// an op's topology when the op starts; provisioning mode asks for the next op's topology as
// soon as the current op ends, hiding the switch time behind compute. Management ops pass
// without any reconfiguration. Every decision and every wait is recorded as a Sample.
//
// Usage (one Shim per rank, see docs/phase-control.md):
//   Shim shim({.port = p, .job = "j", .rank = r, .world = n});
//   shim.add_group("dp0", "dp", {0, 1});
//   auto d = shim.pre_communication({"dp0", "allreduce", bytes, index});
//   ... the collective ...
//   shim.post_communication({"dp0", "allreduce", bytes, index});
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "ocslab/common/error.h"
#include "ocslab/common/sample.h"

namespace ocslab::phase {

// A failure the workload must not continue from silently: the controller refused the shim's
// input (unknown group, wrong group size...) or a peer of the group disconnected.
class PhaseError : public Error {
 public:
  using Error::Error;
};

// What the workload tells the shim about one communication operation.
struct OpDescriptor {
  std::string group;  // a group registered with add_group
  std::string type;   // allreduce, allgather, reduce_scatter, send, recv, broadcast, ...
  uint64_t bytes = 0;
  // Position of the op within one training step (0 starts a step), or kStepUnknown from a
  // caller that does not know its steps (a PyTorch job): the shim then finds the step by period
  // and numbers the ops itself once it learned it.
  int index = 0;
  static constexpr int kStepUnknown = -1;
};

// One op of the step's schedule, as profiled or loaded.
struct PhaseEntry {
  int index = 0;
  std::string group;
  std::string type;
  uint64_t bytes = 0;
  bool operator==(const PhaseEntry&) const = default;
};

// The step's op sequence. File format: CSV with header "index,group,type,bytes", one row per
// op in step order; load errors name file:line.
struct PhaseTable {
  std::vector<PhaseEntry> ops;
  static PhaseTable load(const std::string& path);
  void save(const std::string& path) const;
  bool empty() const { return ops.empty(); }
};

enum class ShimMode { kOnDemand, kProvisioning };

class PhaseProfiler;   // phase_profiler.h
struct LearnedPhases;  // phase_profiler.h
struct ProfiledOp;     // phase_profiler.h

struct ShimOptions {
  std::string host = "127.0.0.1";
  int port = 0;
  std::string job;
  int rank = 0;
  int world = 1;
  // The controller's shared secret, sent in the hello (empty: a controller without one).
  std::string token;
  ShimMode mode = ShimMode::kOnDemand;
  // Provisioning needs the step's op sequence: from this file when set, otherwise learned by
  // the phase profiler (phase_profiler.h) once profile_steps steps in a row were the same
  // (every op asks meanwhile; earlier steps that differ are the warm-up). >= 1.
  std::string phase_table;
  int profile_steps = 1;
  std::string sample_host = "localhost";  // the Sample's host column
  // How long a hook waits for the controller before reporting it lost and falling back.
  std::chrono::milliseconds ack_wait{60000};
  std::chrono::milliseconds connect_timeout{5000};
  // Skip the controller round trip for ops whose topology is provably in force: each request
  // declares how many ops of its group follow back to back in the phase table (profiled or
  // loaded, both modes), and when every member declared a run the ACK grants those ops with
  // it (docs/phase-control.md, "Skipping the barrier"). false: every op asks, as before.
  bool skip_unchanged = true;
};

// What pre_communication decided.
struct Decision {
  bool passed = false;        // management op: no controller involved
  bool reconfigured = false;  // the fabric changed for this op
  bool fallback = false;      // controller gave up or is gone: the fabric is a static giant ring or unknown
  bool provisioned = false;   // the request was sent ahead by the previous op's post hook
  // This op made a controller round trip (a request, on demand or provisioned, and its ACK).
  // false for management ops, ops run in fallback without a controller, and ops granted by an
  // earlier ACK of their group (a `topo_hit` sample): their topology was provably in force.
  bool barrier = false;
  double wait_ms = 0;                       // time the hook blocked
  std::map<std::string, std::string> topo;  // rail -> topo_id the op runs on
};

// A failed port the controller masked (its `masked` message): on `rail` the rank's slot moved
// from the one holding `port` to ingress/egress, where its circuits were re-made.
struct SlotMove {
  std::string rail;
  int rank = -1;
  int port = 0;
  int ingress = 0;
  int egress = 0;
  std::string reason;
};

class Shim {
 public:
  // Connects and says hello. Throws PhaseError with the controller's message when refused
  // (wrong job, world size, duplicate rank) and ocslab::Error when it cannot connect.
  explicit Shim(ShimOptions options);
  ~Shim();
  Shim(const Shim&) = delete;
  Shim& operator=(const Shim&) = delete;

  // dim: "pp", one of the job's symmetric dimension names, or "mgmt" (never reconfigures).
  // Throws PhaseError when the controller refuses (size disagreement, unknown dimension).
  void add_group(const std::string& name, const std::string& dim, const std::vector<int>& ranks);

  Decision pre_communication(const OpDescriptor& op);
  void post_communication(const OpDescriptor& op);
  // Clean goodbye (also done by the destructor).
  void close();

  bool in_fallback() const { return fallback_; }
  const std::string& fallback_reason() const { return fallback_reason_; }
  // Every report the shim received or raised (fallback, peer lost, controller lost), in words.
  const std::vector<std::string>& reports() const { return reports_; }
  const std::vector<Sample>& samples() const { return samples_; }
  // Every masked port the controller announced (any rank's), in arrival order. Messages are
  // read while the shim waits for an ACK, so a move shows here by the next op's hook.
  const std::vector<SlotMove>& slot_moves() const { return moves_; }
  void write_csv(const std::string& path) const;
  const PhaseTable& phase_table() const { return table_; }
  // The profiled step (phases, boundaries, pipeline sends, idle times; write_phases_csv writes
  // it), null until profiling learned it and with a loaded table.
  const LearnedPhases* learned() const { return learned_.get(); }
  bool provisioning_active() const { return options_.mode == ShimMode::kProvisioning && table_ready_; }

 private:
  void send_line(const std::string& line);
  // Reads one controller message (blocking up to the deadline); false on timeout.
  bool read_one(std::chrono::steady_clock::time_point deadline);
  void handle(const std::string& line);
  void lose_controller(const std::string& why);
  void sample(const std::string& subject, const std::string& signal, double value, const std::string& unit);
  // Profiling: the op starts (index 0 marks a step) and, in the post hook, ends.
  void note_op(const OpDescriptor& op);
  void note_op_end();
  // Unmarked ops: profiled on after the step is learned; an op that leaves it ends the table.
  void note_unmarked(const OpDescriptor& op, ProfiledOp p);
  // keep_profiling: unmarked, the profiler goes on (a later op may refute the step).
  void learn(LearnedPhases l, bool keep_profiling);
  // The op's index in the step: the caller's, or for an unmarked op its place in the learned
  // step (its stream position before one is learned).
  int step_index(const OpDescriptor& op) const;
  void send_request(const std::string& group, int64_t seq, int64_t op, bool provision);
  // Ops of the same group that follow the op at table index `index` back to back in the phase
  // table (0 when the table is not ready, the op is not in it, or skipping is off).
  int64_t run_after(int index, const std::string& group) const;
  bool granted(const std::string& group, int64_t seq) const;

  ShimOptions options_;
  int fd_ = -1;
  std::string inbuf_;
  std::map<std::string, std::string> dims_;  // group -> dim
  std::map<std::string, int64_t> seq_;       // group -> seq of the last op started
  std::set<std::pair<std::string, int64_t>> requested_;
  struct Ack {
    bool reconfigured = false;
    bool fallback = false;
    std::map<std::string, std::string> topo;
    int64_t keep = 0;
  };
  // group -> the ops an ACK granted with it: seq after..until run without a request.
  struct Grant {
    int64_t by = 0;     // the seq whose ACK granted them
    int64_t until = 0;  // the last granted seq
    std::map<std::string, std::string> topo;
  };
  std::map<std::string, Grant> grants_;
  std::map<std::pair<std::string, int64_t>, Ack> acks_;
  std::map<std::pair<std::string, int64_t>, std::string> errors_;
  std::optional<std::string> registered_, register_error_;
  std::set<int> lost_peers_;
  bool fallback_ = false;
  std::string fallback_reason_;
  std::vector<std::string> reports_;
  std::vector<SlotMove> moves_;
  std::vector<Sample> samples_;
  PhaseTable table_;
  bool table_ready_ = false;
  std::map<std::string, std::vector<int>> members_;  // group -> ranks, for the profiler
  std::unique_ptr<PhaseProfiler> profiler_;          // until the table is learned
  std::unique_ptr<LearnedPhases> learned_;
  int steps_started_ = 0;  // while profiling
  // Unmarked ops: how many the rank ran, where the learned step first starts, and the step
  // index of the op between the hooks.
  int64_t ops_seen_ = 0;
  int64_t step_from_ = 0;
  int current_index_ = 0;
  bool warned_no_table_ = false;
  std::map<std::string, std::string> topo_;  // last known rail -> topo_id
};

}  // namespace ocslab::phase
