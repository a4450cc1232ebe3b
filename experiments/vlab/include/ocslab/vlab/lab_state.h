// A running virtual lab as recorded on disk (<cache>/labs/<name>/state.json): what `up`
// planned (ports, MACs, paths), what the supervisor started (pids, the switch's bound ports)
// and what it saw die. Every `ocslab vlab` command and the runner read the lab from here.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ocslab/emulator/distribution.h"

namespace ocslab::vlab {

struct NicState {
  std::string name;  // in the guest
  std::string mac;
  std::string ip;            // with prefix
  std::string rdma_device;   // empty: no Soft-RoCE
  std::string if2, if2_mac;  // empty: no macvlan
  int tx_port = 0, rx_port = 0;
  int emulator_udp_port = 0;  // the emulator's end of the QEMU UDP link
  int qemu_udp_port = 0;      // QEMU's end
  std::string qmp_socket;     // the emulator drives this NIC's link here
  bool linked_at_start = false;
  std::string standby_for;  // DataNicSpec::standby_for: empty, or the NIC whose bond it backs up
};

struct HostState {
  std::string name;
  int cpus = 1, memory_mb = 512;
  int tcg_cache_mb = 0;  // HostSpec::tcg_cache_mb
  int ssh_port = 0;
  std::string mgmt_mac;
  // The lab's management LAN (NIC lan0): every host on one L2 segment, as behind a lab's
  // management switch, for out-of-band traffic such as RDMA probes exchanging QP numbers.
  std::string lan_mac, lan_ip;  // lan_ip with prefix
  int lan_hub_port = 0;         // the supervisor's hub end of the QEMU UDP link
  int lan_qemu_port = 0;        // QEMU's end
  std::vector<NicState> nics;
  pid_t pid = 0;
  bool alive = false;
  std::string exit;  // how it ended, when it did
};

// The timing the lab's emulator runs with: from the lab file at boot, then from every
// timing.yaml the supervisor applied on SIGHUP (`ocslab vlab timing`).
struct TimingState {
  uint64_t generation = 0;    // reloads handled (applied or refused); 0: the lab file's timing
  std::string error;          // why the last reload was refused; empty when it applied
  std::string switch_preset;  // preset name, or "custom"
  emu::Distribution switching;
  std::string nic_model;  // preset name, "custom", or "mixed" (the lab file gives NICs different models)
  double los_ms = 0;
  emu::Distribution firmware_up;
  double rapid_window_ms = 0;
  emu::Distribution rapid_extra;
  double max_up_ms = 0;  // the cap on a link-up delay; 0: none
  // NICs whose link is held down (fault injection), as the lab names them: HOST:NIC.
  std::vector<std::string> held_down;
  // Switch ports darkened through this channel (fault injection: shutters closed).
  std::vector<int> dark_ports;
  // Every lit circuit's rate, Gbit/s (the lab file's link_gbps, or the last retime's); 0: no cap.
  double link_gbps = 0;

  // One line: "switch polatis-6000 (fixed 25 ms), NICs cx6dx-autoneg (up normal ..., LOS 1 ms)",
  // then "; held down: h3:eth1" when a NIC is, "; dark ports: 19" when a port is and
  // "; circuits capped at 10 Gbit/s" when link_gbps is set.
  std::string summary() const;
};

struct LabState {
  std::string name;
  std::string dir;                 // the run folder
  std::string spec;                // the lab file as given to `up`
  std::string phase = "starting";  // starting, running, stopping, failed, stopped
  std::string error;
  pid_t supervisor_pid = 0;
  std::string kernel, vmlinuz, initramfs, modules_dir;
  std::string boot_image;  // what -kernel loads (KernelImage::boot_image); empty in older state: vmlinuz
  std::string switch_user, switch_password;
  int tl1_port = 0, events_port = 0, netconf_port = 0, scpi_port = 0;
  std::vector<HostState> hosts;
  bool slurm = false;  // the lab file's 'slurm: true': a Slurm cluster runs in the guests
  TimingState timing;  // state.json: timing_generation, timing_error, timing {...}

  std::string switch_url() const;  // tl1://admin@127.0.0.1:PORT
  std::string host_dir(const std::string& host) const { return dir + "/hosts/" + host; }
  std::string client_key() const { return dir + "/keys/client_key"; }
  std::string known_hosts() const { return dir + "/known_hosts"; }
  std::string inventory() const { return dir + "/inventory.yml"; }
  std::string ground_truth() const { return dir + "/ground-truth.csv"; }
  std::string timing_file() const { return dir + "/timing.yaml"; }
  // A folder this machine and every guest share read-write, at this same path in the guests
  // (9p): where the mpirun / srun launchers' ranks write their files.
  std::string shared_dir() const { return dir + "/shared"; }
  // slurm.conf, cgroup.conf and the munge key the guests copy at boot (when slurm is on).
  std::string slurm_dir() const { return dir + "/slurm"; }
  const HostState& host(const std::string& name) const;  // throws Error naming the known hosts

  std::string to_json() const;
  static LabState from_json(const std::string& text, const std::string& origin);
  // Atomic replace of <dir>/state.json, mode 0600 from creation (it holds the switch password).
  void save() const;
  // Refuses a state.json that is a symbolic link, not owned by this user or root, or open to
  // group or others, naming the file and what is wrong.
  static LabState load(const std::string& dir);
};

// {"lab", "timing_generation", "timing_error", "timing": {...}}: the timing fields of state.json
// with the lab's name (`ocslab vlab timing --json`).
std::string timing_to_json(const std::string& lab, const TimingState& timing);

// $OCSLAB_VLAB_CACHE, else $HOME/.cache/ocslab/vlab.
std::string default_cache_dir();
std::string labs_dir(const std::string& cache_dir);
// Labs with a state.json under the cache.
std::vector<LabState> list_labs(const std::string& cache_dir);

}  // namespace ocslab::vlab
