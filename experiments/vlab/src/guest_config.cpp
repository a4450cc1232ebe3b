#include "ocslab/vlab/guest_config.h"

#include <fmt/format.h>

#include <algorithm>

namespace ocslab::vlab {

std::string control_qmp_socket(const LabState& lab, const HostState& h) { return lab.host_dir(h.name) + "/qmp.sock"; }
std::string console_socket(const LabState& lab, const HostState& h) { return lab.host_dir(h.name) + "/console.sock"; }
std::string console_log(const LabState& lab, const HostState& h) { return lab.host_dir(h.name) + "/console.log"; }

std::vector<std::string> qemu_argv(const LabState& lab, const HostState& h) {
  std::string dir = lab.host_dir(h.name);
  std::vector<std::string> a = {
      "qemu-system-x86_64", "-name", "ocslab-" + lab.name + "-" + h.name,
      // KVM hangs on these machines (docs/virtual-lab.md#what-up-does): software emulation.
      "-accel", h.tcg_cache_mb > 0 ? fmt::format("tcg,tb-size={}", h.tcg_cache_mb) : "tcg", "-cpu", "max", "-smp",
      std::to_string(h.cpus), "-m", std::to_string(h.memory_mb), "-nodefaults", "-no-user-config", "-display", "none",
      "-no-reboot", "-kernel", lab.boot_image.empty() ? lab.vmlinuz : lab.boot_image, "-initrd", lab.initramfs, "-append",
      fmt::format(
          // clocksource=hpet: under TCG on a busy machine the guest calibrates its TSC wrongly at
          // boot (a clock running about twice too slow was measured, beyond what chrony can
          // correct); the HPET follows QEMU's virtual clock, which tracks real time.
          // no_timer_check: the kernel's check that the IO-APIC delivers timer interrupts
          // within a few ticks fails when the emulating thread is descheduled at that moment
          // ("IO-APIC + timer doesn't work!", a panic seen booting 4 guests on 2 busy cores).
          "console=ttyS0 quiet panic=-1 clocksource=hpet no_timer_check ocslab.modules={} ocslab.inittab={}/inittab "
          "ocslab.busybox=/usr/bin/busybox",
          lab.modules_dir, dir),
      // This machine's root, read-only; the guest puts a tmpfs overlay on top.
      "-virtfs", "local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap",
      // The lab's shared folder, read-write, mounted at the same path by guest-init.sh.
      "-virtfs", "local,path=" + lab.shared_dir() + ",mount_tag=shared,security_model=none,multidevs=remap", "-chardev",
      fmt::format("socket,id=con,path={},server=on,wait=off,logfile={}", console_socket(lab, h), console_log(lab, h)),
      "-serial", "chardev:con", "-qmp", fmt::format("unix:{},server=on,wait=off", control_qmp_socket(lab, h)),
      // Management NIC: user networking, SSH reachable on 127.0.0.1 only.
      "-netdev", fmt::format("user,id=mgmt,ipv6=off,hostfwd=tcp:127.0.0.1:{}-:22", h.ssh_port), "-device",
      "virtio-net-pci,netdev=mgmt,mac=" + h.mgmt_mac,
      // Management LAN: one L2 segment of all hosts through the supervisor's hub.
      "-netdev", fmt::format("socket,id=lan,udp=127.0.0.1:{},localaddr=127.0.0.1:{}", h.lan_hub_port, h.lan_qemu_port),
      "-device", "virtio-net-pci,netdev=lan,mac=" + h.lan_mac};
  for (const auto& n : h.nics) {
    a.insert(a.end(), {"-qmp", fmt::format("unix:{},server=on,wait=off", n.qmp_socket)});
    a.insert(a.end(), {"-netdev", fmt::format("socket,id={},udp=127.0.0.1:{},localaddr=127.0.0.1:{}", n.name,
                                              n.emulator_udp_port, n.qemu_udp_port)});
    a.insert(a.end(), {"-device", fmt::format("virtio-net-pci,netdev={},mac={}", n.name, n.mac)});
  }
  return a;
}

std::string guest_inittab(const LabState& lab, const HostState& h) {
  return fmt::format(
      "# ocslab virtual lab, host {}: busybox init runs the lab's set-up once, then a root shell\n"
      "# on the serial console (`ocslab vlab console {}`).\n"
      "::sysinit:/bin/sh {}/guest-init.sh\n"
      "ttyS0::respawn:/bin/bash -l\n"
      "::shutdown:/bin/sh -c 'kill -TERM -1; sleep 1'\n",
      h.name, h.name, lab.host_dir(h.name));
}

namespace {

// The lab's Slurm in one guest: munged with the lab's key, cgroup v2 mounted for slurmd
// (Slurm 22.05 insists on a cgroup plugin; without systemd it needs the hierarchy and a
// system.slice with controllers delegated), slurmctld on the first host, slurmd everywhere.
std::string slurm_start_script(const LabState& lab, const HostState& h) {
  return fmt::format(R"SH(# Slurm (the lab file's 'slurm: true'): the lab's munge key and slurm.conf from {dir}
mkdir -p /etc/munge /run/munge /var/lib/munge /var/log/munge /etc/slurm {state}/ctld {state}/d
cp {dir}/munge.key /etc/munge/munge.key || fail "copy the munge key"
chown -R munge:munge /etc/munge /run/munge /var/lib/munge /var/log/munge
chmod 0700 /etc/munge
chmod 0400 /etc/munge/munge.key
cp {dir}/slurm.conf {dir}/cgroup.conf /etc/slurm/ || fail "copy slurm.conf"
runuser -u munge -- /usr/sbin/munged || fail "munged"
mount -t cgroup2 cgroup2 /sys/fs/cgroup || fail "mount cgroup2"
mkdir -p /sys/fs/cgroup/system.slice
echo '+cpuset +cpu +memory +pids' > /sys/fs/cgroup/cgroup.subtree_control
echo '+cpuset +cpu +memory +pids' > /sys/fs/cgroup/system.slice/cgroup.subtree_control
{ctld}slurmd || fail "slurmd (log /var/log/slurmd.log)"
)SH",
                     fmt::arg("dir", lab.slurm_dir()), fmt::arg("state", kSlurmStateDir),
                     fmt::arg("ctld", !lab.hosts.empty() && h.name == lab.hosts.front().name ? "slurmctld || fail \"slurmctld (log /var/log/slurmctld.log)\"\n"
                                                               : ""));
}

// A NIC with a standby (lab_spec.h): the NIC's own interface becomes "<name>p", and a bond named
// after the NIC, with its MAC, enslaves it and the standby. The bond is what the NIC's address,
// Soft-RoCE device and neighbours see, so a rank's queue pairs survive a move to the standby as on
// a ConnectX RoCE LAG. The bond's mode is broadcast: every frame leaves through each slave that
// has a link, which with the primary's port failed (dark) is the standby alone. Active-backup,
// RoCE LAG's mode, does not work under Soft-RoCE: each change of active slave (every circuit
// change flaps the primary) makes the kernel delete and re-add the bond's GIDs
// (NETDEV_BONDING_FAILOVER), and a queue pair, whose source GID is an index into that table, then
// fails its next send with a local QP operation error ("qp#22 Failed allocating skb").
std::string bond_script(const NicState& n, size_t n_tmp, const NicState& standby, size_t s_tmp) {
  std::string s;
  s += "modprobe bonding max_bonds=0 || fail \"modprobe bonding\"\n";
  s += fmt::format("ip link set ocstmp{} name {}p || fail \"name {}p\"\n", n_tmp, n.name, n.name);
  s += fmt::format("ip link set ocstmp{} name {} || fail \"name {}\"\n", s_tmp, standby.name, standby.name);
  s += fmt::format("ip link add {0} address {1} type bond mode broadcast miimon 10 || fail \"bond {0}\"\n", n.name,
                   n.mac);
  s += fmt::format("ip link set {0}p master {0} && ip link set {1} master {0} || fail \"enslave {0}p, {1} to {0}\"\n",
                   n.name, standby.name);
  return s;
}

}  // namespace

std::string slurm_conf(const LabState& lab) {
  std::string s = fmt::format(R"(# ocslab virtual lab {name}: generated by `ocslab vlab up` (the lab file's 'slurm: true').
# The controller runs on {ctl}; every host is a node of partition "lab" at its management-LAN
# address. Test-lab choices: daemons as root, no accounting, steps not confined by cgroups.
ClusterName={cluster}
SlurmctldHost={ctl}({ctl_ip})
AuthType=auth/munge
SlurmUser=root
SlurmdUser=root
StateSaveLocation={state}/ctld
SlurmdSpoolDir={state}/d
SlurmctldPidFile=/run/slurmctld.pid
SlurmdPidFile=/run/slurmd.pid
SlurmctldLogFile=/var/log/slurmctld.log
SlurmdLogFile=/var/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
MpiDefault=none
SlurmctldTimeout=30
SlurmdTimeout=60
)",
                              fmt::arg("name", lab.name), fmt::arg("cluster", lab.name),
                              fmt::arg("ctl", lab.hosts.front().name),
                              fmt::arg("ctl_ip", lab.hosts.front().lan_ip.substr(0, lab.hosts.front().lan_ip.find('/'))),
                              fmt::arg("state", kSlurmStateDir));
  for (const auto& h : lab.hosts) {
    s += fmt::format("NodeName={} NodeAddr={} CPUs={} State=UNKNOWN\n", h.name, h.lan_ip.substr(0, h.lan_ip.find('/')),
                     h.cpus);
  }
  s += "PartitionName=lab Nodes=ALL Default=YES MaxTime=INFINITE State=UP\n";
  return s;
}

std::string slurm_cgroup_conf() {
  return "# ocslab virtual lab: cgroup v2 without systemd (guest-init.sh mounts it)\n"
         "CgroupPlugin=cgroup/v2\nIgnoreSystemd=yes\n";
}

std::string guest_init_script(const LabState& lab, const HostState& h) {
  std::string dir = lab.host_dir(h.name);
  std::string s = fmt::format(R"SH(#!/bin/sh
# ocslab virtual lab, host {host}: generated by `ocslab vlab up`; runs once as busybox init's
# sysinit, output on the serial console.
export PATH=/usr/sbin:/usr/bin:/sbin:/bin
fail() {{ echo "ocslab-guest: FAILED: $*"; exit 1; }}
hostname {host}
mkdir -p /dev/pts /dev/shm
mount -t devpts devpts /dev/pts
mount -t tmpfs tmpfs /dev/shm
echo "127.0.0.1 localhost" > /etc/hosts
ip link set lo up
by_mac() {{ for d in /sys/class/net/*; do [ "$(cat "$d/address")" = "$1" ] && basename "$d" && return 0; done; return 1; }}
# No udev here: load the NIC driver and wait for every NIC of the lab to appear.
modprobe virtio_net || fail "modprobe virtio_net"
for mac in {macs}; do
  n=0
  until by_mac "$mac" > /dev/null; do n=$((n+1)); [ $n -gt 100 ] && fail "no NIC with MAC $mac"; sleep 0.1; done
done
# Kernel names follow PCI order; the lab names NICs by MAC. Rename through temporary names so
# no rename collides with an interface that still has its kernel name.
i=0
for mac in {macs}; do
  dev=$(by_mac "$mac") || fail "no NIC with MAC $mac"
  ip link set "$dev" name "ocstmp$i" || fail "rename $dev"
  i=$((i+1))
done
ip link set ocstmp0 name eth0
ip addr add 10.0.2.15/24 dev eth0
ip link set eth0 up
ip route add default via 10.0.2.2 dev eth0
ip link set ocstmp1 name lan0
ip addr add {lan_ip} dev lan0
ip link set lan0 up
{lan_hosts}modprobe rdma_rxe || fail "modprobe rdma_rxe"
mount -t 9p -o trans=virtio,version=9p2000.L,msize=512000 shared {shared} || fail "mount the shared folder {shared}"
)SH",
                              fmt::arg("host", h.name), fmt::arg("shared", lab.shared_dir()), fmt::arg("lan_ip", h.lan_ip),
                              fmt::arg("lan_hosts",
                                       [&] {
                                         std::string hosts;
                                         for (const auto& o : lab.hosts) {
                                           hosts += fmt::format("echo \"{} {}\" >> /etc/hosts\n",
                                                                o.lan_ip.substr(0, o.lan_ip.find('/')), o.name);
                                         }
                                         return hosts;
                                       }()),
                              fmt::arg("macs", [&] {
                                std::string m = h.mgmt_mac + " " + h.lan_mac;
                                for (const auto& n : h.nics) m += " " + n.mac;
                                return m;
                              }()));
  for (size_t i = 0; i < h.nics.size(); ++i) {
    const auto& n = h.nics[i];
    if (!n.standby_for.empty()) continue;  // enslaved with its primary, below
    auto standby = std::find_if(h.nics.begin(), h.nics.end(), [&](const NicState& x) { return x.standby_for == n.name; });
    if (standby == h.nics.end()) {
      s += fmt::format("ip link set ocstmp{} name {} || fail \"name {}\"\n", i + 2, n.name, n.name);
    } else {
      s += bond_script(n, i + 2, *standby, static_cast<size_t>(standby - h.nics.begin()) + 2);
    }
    s += fmt::format("ip addr add {} dev {} || fail \"address {}\"\n", n.ip, n.name, n.ip);
    s += fmt::format("ip link set {} up\n", n.name);
    if (!n.if2.empty()) {
      s += fmt::format("ip link add link {} name {} address {} type macvlan mode private || fail \"macvlan {}\"\n",
                       n.name, n.if2, n.if2_mac, n.if2);
      s += fmt::format("ip link set {} up\n", n.if2);
    }
    if (!n.rdma_device.empty()) {
      s += fmt::format("rdma link add {} type rxe netdev {} || fail \"Soft-RoCE on {}\"\n", n.rdma_device, n.name,
                       n.name);
    }
  }
  if (lab.slurm) s += slurm_start_script(lab, h);
  s += fmt::format(R"SH(# This machine's own dotfiles (pyenv, cargo, ...) would run before every SSH command and cost
# seconds under emulation: the guest's root gets plain ones, in its overlay only.
echo 'export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' > /root/.bashrc
cp /root/.bashrc /root/.profile
# man-db's dpkg trigger re-indexes the manual pages after every package install or removal: about
# 10 s of emulated CPU each time (0.5 s without), for an index nothing in a lab reads. Off in the
# guest's overlay only (the trigger does nothing without this file).
rm -f /var/lib/man-db/auto-update
mkdir -p /run/sshd
chmod 0755 /run/sshd
# -r: no re-exec of sshd for each connection. Under emulation that re-exec (sshd loaded, linked
# and configured again) is about half of a connection's cost: 0.86 s instead of 1.55 s per
# `ssh true`, and the tests, the runner and Ansible open hundreds. The price, ASLR not renewed per
# connection, buys nothing in a test guest. An sshd without -r is started as it is.
/usr/sbin/sshd -r -f {dir}/sshd_config -E /run/sshd.log 2>/dev/null ||
  /usr/sbin/sshd -f {dir}/sshd_config -E /run/sshd.log || fail "sshd"
echo "{ready}"
)SH",
                   fmt::arg("dir", dir), fmt::arg("ready", kGuestReadyLine));
  return s;
}

std::string guest_sshd_config(const LabState& lab, const HostState& h) {
  std::string dir = lab.host_dir(h.name);
  return fmt::format(R"SH(# ocslab virtual lab, host {host}: sshd for the runner, Ansible and `ocslab vlab ssh`.
Port 22
ListenAddress 0.0.0.0
HostKey {dir}/ssh_host_ed25519_key
AuthorizedKeysFile {dir}/authorized_keys .ssh/authorized_keys
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
# The key files reach the guest over 9p with this machine's ownership and modes.
StrictModes no
UseDNS no
PrintMotd no
PidFile /run/sshd.pid
MaxStartups 64:30:128
MaxSessions 64
Subsystem sftp /usr/lib/openssh/sftp-server
)SH",
                     fmt::arg("host", h.name), fmt::arg("dir", dir));
}

std::string ready_check_command(const LabState& lab, const HostState& h) {
  std::string s;
  if (lab.slurm) {
    // The node registered with the controller and takes jobs.
    s += fmt::format("s=$(sinfo -h -n {0} -o %T 2>&1); case \"$s\" in idle*) ;; *) echo \"slurm node {0}: ${{s:-no "
                     "state}}\"; exit 1;; esac; ",
                     h.name);
  }
  for (const auto& n : h.nics) {
    if (n.rdma_device.empty()) continue;
    std::string f = "/sys/class/infiniband/" + n.rdma_device + "/ports/1/state";
    if (n.linked_at_start) {
      s += fmt::format(
          "s=$(cat {} 2>/dev/null); case \"$s\" in *ACTIVE*) ;; *) echo \"{} ${{s:-missing}}\"; exit 1;; esac; ", f,
          n.rdma_device);
    } else {
      s += fmt::format("[ -e {} ] || {{ echo \"{} missing\"; exit 1; }}; ", f, n.rdma_device);
    }
  }
  return s + "echo ready";
}

}  // namespace ocslab::vlab
