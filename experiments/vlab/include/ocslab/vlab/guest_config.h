// What each virtual-lab host is made of: the QEMU command line (9p root, serial console,
// management NIC with SSH forwarded to 127.0.0.1, data NICs on the emulator's UDP data plane,
// one QMP socket per data NIC for the emulator's link driver) and the files its busybox init
// runs (inittab, the guest init script, sshd's configuration), generated from the lab state.
#pragma once

#include <string>
#include <vector>

#include "ocslab/vlab/lab_state.h"

namespace ocslab::vlab {

// Serial console line the guest prints when it is set up.
// The management LAN's addresses: host i (1-based) is kLanPrefix + i, /24.
inline constexpr const char* kLanPrefix = "192.168.127.";
inline constexpr const char* kGuestReadyLine = "ocslab-guest: ready";
// What the guest prints before the reason when a set-up step fails.
inline constexpr const char* kGuestFailedMark = "ocslab-guest: FAILED";
// Where a Slurm lab's daemons keep their state in each guest (its overlay: gone at shutdown,
// outside the folders a shared lab's reset compares).
inline constexpr const char* kSlurmStateDir = "/srv/ocslab-slurm";

std::vector<std::string> qemu_argv(const LabState& lab, const HostState& host);
std::string guest_inittab(const LabState& lab, const HostState& host);
std::string guest_init_script(const LabState& lab, const HostState& host);
std::string guest_sshd_config(const LabState& lab, const HostState& host);
// The Slurm cluster of a lab with 'slurm: true': the controller on the first host, every host a
// node of one partition "lab" at its management-LAN address (guest-init.sh copies both files
// to /etc/slurm). No accounting, no cgroup confinement of the steps, no systemd.
std::string slurm_conf(const LabState& lab);
std::string slurm_cgroup_conf();
// A shell command, run over SSH, that exits 0 once the host is ready: every Soft-RoCE device
// exists, and those on NICs lit at `up` are ACTIVE. Otherwise it prints what is missing.
std::string ready_check_command(const LabState& lab, const HostState& host);
// The host's control QMP socket (the supervisor's, not the emulator's).
std::string control_qmp_socket(const LabState& lab, const HostState& host);
std::string console_socket(const LabState& lab, const HostState& host);
std::string console_log(const LabState& lab, const HostState& host);

}  // namespace ocslab::vlab
