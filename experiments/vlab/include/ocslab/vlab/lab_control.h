// Bringing a virtual lab up and down. `up` validates the lab file, prepares the kernel and
// initramfs, plans ports and keys, starts the supervisor (`ocslab vlab supervise DIR`, a
// process of its own that owns the emulator and the QEMU hosts) and waits until every host
// answers over SSH with its RDMA devices ready. `down` stops the supervisor, which stops
// everything it started; nothing of the lab is left behind.
#pragma once

#include <atomic>
#include <chrono>
#include <string>

#include "ocslab/vlab/guest_image.h"
#include "ocslab/vlab/lab_state.h"

namespace ocslab::vlab {

struct UpOptions {
  std::string cache_dir;  // empty: default_cache_dir()
  std::string self_exe;   // the ocslab binary that runs `vlab supervise`; empty: /proc/self/exe
  std::chrono::seconds ready_timeout{300};
  const std::atomic<bool>* interrupted = nullptr;  // Ctrl-C: stop, tear down, throw
};

// Throws ConfigError for a bad lab file (before anything starts), Error when the lab exists
// already, a host dies or readiness times out (after tearing the lab down again).
LabState lab_up(const std::string& spec_path, const UpOptions& options, const ProgressFn& progress);

// Stops the lab in `dir` and removes the folder. Safe on a half-started or crashed lab.
void lab_down(const std::string& dir, const ProgressFn& progress);

// Finds a lab by name, or the only one up when name is empty. Throws Error listing the labs.
std::string find_lab_dir(const std::string& cache_dir, const std::string& name);

// Re-reads the state and checks every recorded process: a supervisor or QEMU that is gone is
// reported as such (alive = false) even when nobody recorded its end.
LabState lab_status(const std::string& dir);

// The supervisor's main loop (`ocslab vlab supervise DIR`): starts the hosts and the
// emulator, records them in state.json, reaps hosts that die, and on SIGTERM/SIGINT stops
// everything. Returns the process exit code.
int lab_supervise(const std::string& dir);

// The Ansible YAML inventory of a running lab.
std::string ansible_inventory(const LabState& lab);

}  // namespace ocslab::vlab
