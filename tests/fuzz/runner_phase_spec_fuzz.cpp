// Phase-workload specs are user input: any text must give a spec whose placement, slots and
// command lines are consistent, or an ocslab::Error; never crash. The spec's origin is a folder
// holding a valid schedule (sched.yaml, the DP=2 x PP=2 shape) and a phase table with idle windows
// (phases.csv, for policy safe-window) so inputs get past the files.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>

#include "ocslab/common/shell.h"
#include "ocslab/emulator/data_plane.h"
#include "ocslab/runner/experiment_spec.h"
#include "ocslab/runner/phase_workload.h"

namespace {

std::string origin() {
  static const std::string dir = [] {
    std::string d =
        std::filesystem::temp_directory_path().string() + "/runner-phase-spec-fuzz-" + std::to_string(::getpid());
    std::filesystem::create_directories(d);
    std::ofstream(d + "/sched.yaml") << "ranks: 4\nsteps: 1\ngroups:\n"
                                        "  - {name: pp0, kind: pp, ranks: [0, 2]}\n"
                                        "  - {name: dp-s0, kind: dp, ranks: [0, 1]}\n"
                                        "  - {name: dp-s1, kind: dp, ranks: [2, 3]}\n"
                                        "  - {name: world, kind: world, ranks: [0, 1, 2, 3]}\n"
                                        "step:\n  - {group: pp0, op: sendrecv, bytes: 4KiB}\n"
                                        "  - {group: dp-s0, op: allreduce, bytes: 4KiB}\n"
                                        "  - {group: world, op: barrier}\n";
    // safe-window's phase table with idle windows (phase.phase_table: phases.csv)
    std::ofstream(d + "/phases.csv") << "index,group,type,bytes,idle_us\n0,pp0,sendrecv,4096,100\n"
                                        "1,dp-s0,allreduce,4096,50000\n2,world,barrier,0,0\n";
    return d + "/spec.yaml";
  }();
  return dir;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  using namespace ocslab::runner;
  try {
    auto s = parse_experiment_spec(ocslab::load_yaml_string(text, origin()));
    if (!s.phase_workload) return 0;
    const auto& pw = *s.phase_workload;
    auto slots = pw.slots(s.hosts);
    // The first rail's slots: the ranks' in rank order, then its spares'.
    if (slots.size() != static_cast<size_t>(pw.schedule.ranks) + pw.rail_list().front().spares.size()) __builtin_trap();
    for (const auto& sl : slots) {
      if (!s.allow.contains(sl.ingress) || !s.allow.contains(sl.egress)) __builtin_trap();
    }
    RankLaunch l{pw.program, "s.yaml", "out", "127.0.0.1:1", pw.layout.job, pw.modes.front(), "127.0.0.1:2",
                 "out/controller.token", "", {}};
    // A survival sweep's point reaches the command lines as NAME=VALUE words, nothing more.
    for (const auto& [name, values] : pw.sweep_env) {
      if (values.empty()) __builtin_trap();
      for (const auto& v : values) {
        if (v.empty() || v.find_first_of(" ;$`'\"\\|&<>()\n") != std::string::npos) __builtin_trap();
      }
      l.env.emplace_back(name, values.front());
    }
    // Link rates only for a virtual lab's emulator, each one it takes, above 0.
    if (!pw.sweep_link_gbps.empty() && s.vlab.empty()) __builtin_trap();
    for (double g : pw.sweep_link_gbps) {
      if (!(g >= ocslab::emu::kMinLinkGbps && g <= ocslab::emu::kMaxLinkGbps)) __builtin_trap();
    }
    for (double ms : pw.sweep_outage_ms) {
      if (!(ms > 0) || ms >= pw.timeout_s * 1000.0) __builtin_trap();
    }
    for (const auto& f : s.faults) {
      if (f.kind == kCircuitCut && !(f.for_ms > 0)) __builtin_trap();
    }
    for (int r = 0; r < pw.schedule.ranks; ++r) (void)ocslab::shell_join(rank_argv(pw, s.hosts, r, l));
    if (pw.launcher != Launcher::kSsh) (void)launcher_argv(pw, s.hosts, l);
  } catch (const ocslab::Error&) {
  } catch (const YAML::Exception&) {
  }
  return 0;
}
