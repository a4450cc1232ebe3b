// The virtual lab's file: the emulator's switch section plus the hosts (CPU, memory, data
// NICs with their MAC, address, switch ports, Soft-RoCE, macvlan "if2" and standby) and the circuits
// made when the lab comes up. Validated completely before anything starts; every error names
// file:line:col.
#pragma once

#include <string>
#include <vector>

#include "ocslab/common/config.h"
#include "ocslab/emulator/lab_config.h"

namespace ocslab::vlab {

struct DataNicSpec {
  std::string name;  // interface name in the guest, e.g. "eth1"
  std::string mac;   // "52:54:00:..", lower case
  std::string ip;    // address with prefix, "10.10.0.1/24"
  ocs::Port tx_port = 0;
  ocs::Port rx_port = 0;
  bool rdma = true;     // a Soft-RoCE device "rxe_<name>" on it
  bool if2 = false;     // a macvlan "<name>v" (no IP, own MAC): the forwarding function
  std::string if2_mac;  // set when if2
  emu::NicLinkParams link;
  std::string link_preset;
  // Non-empty: this NIC is the standby of the host's NIC of that name (declared before it). In the
  // guest the two are a bond that carries the primary's name, address and Soft-RoCE device, with
  // the primary's own interface renamed "<name>p" (what RoCE LAG makes of two ConnectX ports;
  // guest_config.cpp says why the bond's mode is broadcast). A standby has no address and no
  // Soft-RoCE device of its own.
  std::string standby_for;
  std::string rdma_device() const { return "rxe_" + name; }
  std::string if2_name() const { return name + "v"; }
  std::string address() const { return ip.substr(0, ip.find('/')); }
};

struct HostSpec {
  std::string name;
  int cpus = 1;
  int memory_mb = 512;
  // QEMU's TCG translation cache (-accel tcg,tb-size=N MiB); 0: QEMU's default, 1 GiB on a
  // 64-bit host, which a busy guest fills: resident memory grows to memory_mb + 1 GiB.
  int tcg_cache_mb = 0;
  std::vector<DataNicSpec> nics;
};

struct NicRef {
  size_t host = 0;
  size_t nic = 0;
};

// A bidirectional link made on the switch at `up`: a's transmit fibre to b's receive fibre
// and b's to a's.
struct LinkSpec {
  NicRef a, b;
};

struct LabSpec {
  std::string name;              // from 'name' or the file's stem
  std::string origin;            // file path
  emu::EmulatorConfig emulator;  // switch and defaults; nics are filled in at start
  std::vector<HostSpec> hosts;
  std::vector<LinkSpec> links;
  // 'slurm: true': a Slurm cluster in the guests when the lab comes up (munged and slurmd on
  // every host, slurmctld on the first), for the runner's srun launcher (docs/virtual-lab.md).
  bool slurm = false;

  const DataNicSpec& nic(NicRef r) const { return hosts[r.host].nics[r.nic]; }
  // The emulator's name for a data NIC: "<host>-<nic>".
  std::string emulator_nic_name(NicRef r) const { return hosts[r.host].name + "-" + nic(r).name; }
  // The circuits the links make: (a.tx -> b.rx) and (b.tx -> a.rx) for each link.
  std::vector<ocs::Circuit> initial_circuits() const;
  // True when some link lights this NIC's receive fibre at `up`.
  bool linked_at_start(NicRef r) const;
  size_t host_index(const std::string& name) const;  // throws Error for an unknown host
};

LabSpec load_lab_spec(const std::string& path);
LabSpec parse_lab_spec(const YamlDoc& doc);

}  // namespace ocslab::vlab
