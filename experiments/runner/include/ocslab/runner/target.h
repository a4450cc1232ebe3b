// The target of a run, resolved once for every experiment type and for `ocslab forwarding`: the
// spec's hosts with the SSH details to reach them (a virtual lab's guests filled in from its
// state), the lab itself when there is one (brought up or reused), this build's binaries
// installed where the hosts see them (refreshed whenever they differ), and the switch access.
// Pipeline: docs/architecture.md, "The experiment pipeline".
#pragma once

#include <atomic>
#include <functional>
#include <iosfwd>
#include <string>
#include <vector>

#include "ocslab/ocsctl/driver.h"
#include "ocslab/ocsctl/ssh_session.h"
#include "ocslab/runner/experiment_spec.h"
#include "ocslab/vlab/lab_state.h"

namespace ocslab::runner {

// The switch a spec drives: its `switch:` URL with the spec's SSH files, or else the virtual
// lab's emulator with the lab's password; the spec's port allow-list either way.
struct SwitchAccess {
  ocs::SwitchUrl url;
  ocs::DriverOptions options;
};
// Throws Error naming the URL when it is malformed.
SwitchAccess switch_access(const ExperimentSpec& spec, const vlab::LabState& lab);

struct Target {
  ExperimentSpec spec;       // hosts carry their SSH details and agent path
  vlab::LabState lab;        // lab.dir empty: real hosts
  bool started_lab = false;  // this resolution booted the lab (stopped by release_target unless kept)

  bool is_vlab() const { return !spec.vlab.empty(); }
  // Where the hosts see this build's binaries: the lab's bin folder; empty for real hosts.
  std::string bin_dir() const;
  std::vector<ocs::SshOptions> ssh() const;  // one per host, in spec order
  SwitchAccess switch_access() const { return runner::switch_access(spec, lab); }
};

enum class LabUse {
  kBringUp,  // `ocslab run`: reuse the spec's lab when it is up and healthy, else (re)start it
  kRunning,  // `ocslab forwarding`: the lab must be up already
};

struct TargetOptions {
  std::string cache_dir;     // virtual labs; empty: vlab::default_cache_dir()
  std::string self_exe;      // the ocslab binary; empty: /proc/self/exe
  std::string agent_binary;  // the ocslab-agent installed into a lab; empty: next to self_exe
  LabUse lab = LabUse::kBringUp;
  const std::atomic<bool>* interrupted = nullptr;  // a lab boot stops on it
  std::ostream* progress = nullptr;                // a terminal: the boot's progress line
  std::function<void(const std::string&)> log;     // one line per step; may be empty
};

// Throws Error before anything is changed on a host when the lab cannot be used (another lab of
// the same name is up from another file; kRunning and the lab is not up; a boot failed).
Target resolve_target(const ExperimentSpec& spec, const TargetOptions& options);

// Stops the lab when resolve_target started it and the spec does not keep it (lab.keep: false).
void release_target(const Target& target, const std::function<void(const std::string&)>& log);

// How the runner reaches a host over SSH.
ocs::SshOptions ssh_options(const HostEntry& host);

// The folder of a program (empty: this process's own executable).
std::string exe_dir(const std::string& self);

// Installs src as dir/name.TAG, TAG 12 hex digits of a hash of its bytes (a virtual lab's
// guests see dir over 9p with cache=loose: a file replaced under the same name keeps its old
// bytes there): copied to a temporary name, then renamed into place, unless a file with the
// same bytes is there already. Older copies stay (a running guest may still execute one; the
// folder goes with `vlab down`). Returns the path. Throws Error naming both paths when the
// copy fails, and when src is missing one saying how to get it: from a build tree (a
// CMakeCache.txt above src's folder) the build command, else the Debian package that holds it.
std::string install_binary(const std::string& src, const std::string& dir, const std::string& name);

}  // namespace ocslab::runner
