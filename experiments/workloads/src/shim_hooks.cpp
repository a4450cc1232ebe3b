#include "ocslab/workloads/shim_hooks.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <filesystem>
#include <set>

#include "ocslab/common/error.h"
#include "ocslab/common/secret.h"

namespace po = boost::program_options;

namespace ocslab::workloads {

std::string shim_dim(const Group& g) {
  if (g.kind == "world") return "mgmt";
  return g.kind;  // "pp" stays "pp"; symmetric kinds are the controller's dimension names
}

std::string shim_group(const Schedule& s, const Op& op) {
  const Group& g = s.group_of(op);
  if (op.type != OpType::kSendRecv || g.ranks.size() <= 2) return g.name;
  return fmt::format("{}:{}-{}", g.name, std::min(op.src, op.dst), std::max(op.src, op.dst));
}

namespace {

// The members of op's shim group: the pair of a sendrecv's pair group, else the group's ranks.
std::vector<int> shim_members(const Schedule& s, const Op& op) {
  if (shim_group(s, op) != s.group_of(op).name) return {std::min(op.src, op.dst), std::max(op.src, op.dst)};
  return s.group_of(op).ranks;
}

}  // namespace

phase::OpDescriptor shim_descriptor(const Schedule& s, size_t i, int rank, int local_index) {
  const Op& op = s.step.at(i);
  phase::OpDescriptor o;
  o.group = shim_group(s, op);
  if (op.type == OpType::kSendRecv) {
    o.type = rank == op.src ? "send" : "recv";
  } else {
    o.type = std::string(op_name(op.type));
  }
  o.bytes = op.bytes;
  o.index = local_index;
  return o;
}

phase::PhaseTable declared_phase_table(const Schedule& s, int rank) {
  phase::PhaseTable t;
  for (size_t i = 0; i < s.step.size(); ++i) {
    if (!s.involves(s.step[i], rank)) continue;
    auto d = shim_descriptor(s, i, rank, static_cast<int>(t.ops.size()));
    t.ops.push_back({d.index, d.group, d.type, d.bytes});
  }
  return t;
}

phase::ProfiledOp profiled_op(const Schedule& s, const OpRecord& r, bool step_start) {
  const Op& op = s.step.at(static_cast<size_t>(r.index));
  auto d = shim_descriptor(s, static_cast<size_t>(r.index), r.rank, 0);
  phase::ProfiledOp p;
  p.group = d.group;
  p.ranks = shim_members(s, op);
  p.type = d.type;
  p.kind = phase::kind_of_type(p.type);
  p.bytes = d.bytes;
  // From entering the pre hook: the wait for the fabric is part of the op, not idle time.
  p.start_ns = r.wait_start_ns != 0 ? r.wait_start_ns : r.start_ns;
  p.end_ns = r.end_ns;
  p.step_start = step_start;
  return p;
}

ShimHooks::ShimHooks(const Schedule& s, int rank, phase::ShimOptions options) {
  options.rank = rank;
  shim_ = std::make_unique<phase::Shim>(std::move(options));
  group_of_op_.resize(s.step.size());
  descriptors_.resize(s.step.size());
  int local = 0;
  // Register in schedule order, each shim group once: both ends of a pair group register the
  // same name, dim and members, which the controller accepts.
  std::set<std::string> registered;
  for (size_t i = 0; i < s.step.size(); ++i) {
    const Op& op = s.step[i];
    group_of_op_[i] = shim_group(s, op);
    if (!s.involves(op, rank)) continue;
    descriptors_[i] = shim_descriptor(s, i, rank, local);
    ++local;
    if (!registered.insert(group_of_op_[i]).second) continue;
    shim_->add_group(group_of_op_[i], shim_dim(s.group_of(op)), shim_members(s, op));
  }
}

phase::OpDescriptor ShimHooks::descriptor(const OpDesc& d) const {
  return descriptors_.at(static_cast<size_t>(d.index));
}

void ShimHooks::pre_communication(const OpDesc& d) { last_ = shim_->pre_communication(descriptor(d)); }

void ShimHooks::post_communication(const OpDesc& d) { shim_->post_communication(descriptor(d)); }

HookOutcome ShimHooks::outcome(const OpDesc&) {
  HookOutcome o;
  o.reconfigured = last_.reconfigured;
  o.provisioned = last_.provisioned;
  o.fallback = last_.fallback;
  o.barrier = last_.barrier;
  if (last_.fallback) {
    o.phase = "fallback";
  } else if (last_.passed) {
    o.phase = "pass";
  } else if (last_.reconfigured) {
    o.phase = "reconfigured";
  } else {
    o.phase = "ready";
  }
  for (const auto& [rail, topo] : last_.topo) o.topo += (o.topo.empty() ? "" : ";") + rail + "=" + topo;
  return o;
}

void add_phase_options(po::options_description& d) {
  d.add_options()("controller", po::value<std::string>(),
                  "HOST:PORT of the job's phase controller (`ocslab controller`); without it the fabric is "
                  "never reconfigured")("job", po::value<std::string>(),
                                        "job name the controller runs (with --controller)")(
      "controller-token-file", po::value<std::string>(),
      "file holding the controller's token (mode 0600, owned by you); else $OCSLAB_CONTROLLER_TOKEN")(
      "phase-mode", po::value<std::string>(),
      "on-demand (ask for an op's topology when it starts; default) or provisioning (ask for the next op's "
      "when the current one ends)")("profile-steps", po::value<int>(),
                                    "provisioning: steps profiled on demand to learn the op sequence (default 1)")(
      "phase-table", po::value<std::string>(),
      "provisioning: the op sequence from this CSV (index,group,type,bytes) instead of profiling");
}

std::optional<phase::ShimOptions> phase_options(const po::variables_map& vm, int rank, int world,
                                                const std::string& host, std::chrono::milliseconds ack_wait) {
  if (!vm.count("controller")) {
    for (const char* f : {"job", "controller-token-file", "phase-mode", "profile-steps", "phase-table"}) {
      if (vm.count(f)) throw Error(fmt::format("--{} needs --controller HOST:PORT", f));
    }
    return std::nullopt;
  }
  phase::ShimOptions o;
  std::string c = vm["controller"].as<std::string>();
  auto colon = c.rfind(':');
  if (colon == std::string::npos || colon == 0) throw Error("--controller '" + c + "': want HOST:PORT");
  std::string port = c.substr(colon + 1);
  int p = 0;
  auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), p);
  if (ec != std::errc() || end != port.data() + port.size() || p < 1 || p > 65535) {
    throw Error("--controller '" + c + "': port '" + port + "' is not 1..65535");
  }
  o.host = c.substr(0, colon);
  if (o.host.size() > 2 && o.host.front() == '[' && o.host.back() == ']') o.host = o.host.substr(1, o.host.size() - 2);
  o.port = p;
  if (!vm.count("job") || vm["job"].as<std::string>().empty()) throw Error("--controller needs --job NAME");
  o.job = vm["job"].as<std::string>();
  // The secret never travels in argv (other users see it in ps): a private file or the environment.
  if (vm.count("controller-token-file")) {
    o.token = read_secret_file(vm["controller-token-file"].as<std::string>(), "--controller-token-file");
  } else if (const char* env = std::getenv("OCSLAB_CONTROLLER_TOKEN"); env && *env) {
    o.token = env;
  }
  o.rank = rank;
  o.world = world;
  o.sample_host = host;
  o.ack_wait = ack_wait;
  std::string mode = vm.count("phase-mode") ? vm["phase-mode"].as<std::string>() : "on-demand";
  if (mode == "on-demand") {
    o.mode = phase::ShimMode::kOnDemand;
  } else if (mode == "provisioning") {
    o.mode = phase::ShimMode::kProvisioning;
  } else {
    throw Error("--phase-mode '" + mode + "': want on-demand or provisioning");
  }
  if (vm.count("profile-steps") && vm.count("phase-table")) {
    throw Error("--profile-steps and --phase-table exclude each other");
  }
  if (o.mode == phase::ShimMode::kOnDemand) {
    for (const char* f : {"profile-steps", "phase-table"}) {
      if (vm.count(f)) throw Error(fmt::format("--{} only applies with --phase-mode provisioning", f));
    }
  }
  if (vm.count("profile-steps")) {
    o.profile_steps = vm["profile-steps"].as<int>();
    if (o.profile_steps < 1) throw Error(fmt::format("--profile-steps {}: want at least 1", o.profile_steps));
  }
  if (vm.count("phase-table")) {
    o.phase_table = vm["phase-table"].as<std::string>();
    // Tables are per rank (each rank's own op sequence): "{rank}" picks this rank's file, e.g.
    // the phase-table-rank{rank}.csv files an earlier run wrote into its --output folder.
    for (auto at = o.phase_table.find("{rank}"); at != std::string::npos; at = o.phase_table.find("{rank}")) {
      o.phase_table.replace(at, 6, std::to_string(rank));
    }
    if (!std::filesystem::is_regular_file(o.phase_table)) {
      throw Error("--phase-table '" + o.phase_table + "': no such file");
    }
  }
  return o;
}

}  // namespace ocslab::workloads
