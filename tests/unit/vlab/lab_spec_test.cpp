#include <catch2/catch.hpp>

#include "ocslab/vlab/cpio.h"
#include "ocslab/vlab/guest_config.h"
#include "ocslab/vlab/lab_control.h"
#include "ocslab/vlab/lab_spec.h"

using namespace ocslab;
using namespace ocslab::vlab;
using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;

namespace {

const char* kGood = R"(name: lab1
switch:
  size: 8x8
nic_model: {preset: ideal, firmware_up_ms: 1500}
hosts:
  - name: h1
    memory_mb: 384
    nics:
      - {name: eth1, ip: 10.1.0.1/24, tx_port: 1, rx_port: 9}
  - name: h2
    nics:
      - {name: eth1, ip: 10.1.0.2/24, tx_port: 2, rx_port: 10, if2: true}
      - {name: eth2, ip: 10.2.0.2/24, tx_port: 3, rx_port: 11, mac: "52:54:00:AA:00:01", rdma: false}
links:
  - h1:eth1 <-> h2:eth1
)";

LabSpec parse(const std::string& text) { return parse_lab_spec(load_yaml_string(text, "lab.yaml")); }

// Replaces the first occurrence of `from` in the good lab.
std::string variant(const std::string& from, const std::string& to) {
  std::string s = kGood;
  auto pos = s.find(from);
  REQUIRE(pos != std::string::npos);
  return s.replace(pos, from.size(), to);
}

std::string error_of(const std::string& text) {
  try {
    parse(text);
  } catch (const ConfigError& e) {
    return e.what();
  }
  FAIL("no error for:\n" << text);
  return {};
}

}  // namespace

TEST_CASE("a valid lab file gives hosts, NICs with defaults, and the links' circuits") {
  LabSpec lab = parse(kGood);
  CHECK(lab.name == "lab1");
  REQUIRE(lab.hosts.size() == 2);
  CHECK(lab.hosts[0].memory_mb == 384);
  CHECK(lab.hosts[1].memory_mb == 512);
  CHECK(lab.hosts[0].tcg_cache_mb == 0);  // QEMU's default
  CHECK(parse(variant("memory_mb: 384", "memory_mb: 384\n    tcg_cache_mb: 128")).hosts[0].tcg_cache_mb == 128);
  const auto& h1 = lab.hosts[0].nics[0];
  CHECK(h1.mac == "52:54:00:6c:01:01");
  CHECK(h1.rdma);
  CHECK_FALSE(h1.if2);
  CHECK(h1.link.firmware_up.to_string() == lab.hosts[1].nics[0].link.firmware_up.to_string());
  const auto& h2e1 = lab.hosts[1].nics[0];
  CHECK(h2e1.if2);
  CHECK(h2e1.if2_name() == "eth1v");
  CHECK(h2e1.if2_mac == "52:54:00:6d:02:01");
  CHECK(lab.hosts[1].nics[1].mac == "52:54:00:aa:00:01");  // lower-cased
  CHECK_FALSE(lab.hosts[1].nics[1].rdma);
  // h1 -> h2: 1 -> 10, h2 -> h1: 2 -> 9.
  auto circuits = lab.initial_circuits();
  REQUIRE(circuits.size() == 2);
  CHECK(circuits[0] == ocs::Circuit{1, 10});
  CHECK(circuits[1] == ocs::Circuit{2, 9});
  CHECK(lab.linked_at_start(NicRef{0, 0}));
  CHECK_FALSE(lab.linked_at_start(NicRef{1, 1}));
  CHECK(lab.emulator_nic_name(NicRef{1, 1}) == "h2-eth2");
}

TEST_CASE("lab file errors name file:line:col and the culprit") {
  CHECK_THAT(error_of(variant("h1:eth1 <-> h2:eth1", "h1:eth1 <-> h9:eth1")),
             StartsWith("lab.yaml:15:5:") && Contains("unknown host 'h9'"));
  CHECK_THAT(error_of(variant("h1:eth1 <-> h2:eth1", "h1:eth1 <-> h2:eth7")), Contains("no data NIC 'eth7'"));
  CHECK_THAT(error_of(variant("tx_port: 2,", "tx_port: 1,")),
             StartsWith("lab.yaml:12:") && Contains("port 1 used twice (also at line 9)"));
  CHECK_THAT(error_of(variant("rx_port: 11", "rx_port: 9")), Contains("port 9 used twice"));
  CHECK_THAT(error_of(variant("\"52:54:00:AA:00:01\"", "\"52:54:00:6c:01:01\"")),
             StartsWith("lab.yaml:13:") && Contains("MAC 52:54:00:6c:01:01 used twice"));
  CHECK_THAT(error_of(variant("10.1.0.2/24", "10.1.0.1/24")), Contains("address 10.1.0.1 used twice"));
  CHECK_THAT(error_of(variant("10.1.0.2/24", "10.1.0.300/24")), Contains("not an IPv4 address"));
  CHECK_THAT(error_of(variant("10.1.0.2/24", "10.1.0.2")), Contains("not an IPv4 address with a prefix"));
  // The address goes verbatim into the guest's `ip addr add`: iproute2 reads "/024" as octal
  // (a /20), and a blank splits the prefix off (caught by vlab_lab_spec_fuzz's properties).
  CHECK_THAT(error_of(variant("10.1.0.2/24", "10.1.0.2/024")),
             StartsWith("lab.yaml:12:") && Contains("'10.1.0.2/024' is not an IPv4 address with a prefix"));
  CHECK_THAT(error_of(variant("10.1.0.2/24", "\"10.1.0.2/ 24\"")), Contains("not an IPv4 address with a prefix"));
  CHECK_THAT(error_of(variant("10.1.0.2/24", "10.1.0.2/+24")), Contains("not an IPv4 address with a prefix"));
  CHECK_THAT(error_of(variant("10.1.0.2/24", "10.1.0.2/33")), Contains("not an IPv4 address with a prefix"));
  // A port is range-checked as written, not after narrowing to int (4294967297 would be port 1).
  CHECK_THAT(error_of(variant("tx_port: 1,", "tx_port: 4294967297,")),
             StartsWith("lab.yaml:9:") && Contains("tx_port 4294967297 is not an ingress port"));
  CHECK_THAT(error_of(variant("rx_port: 9}", "rx_port: 4294967305}")),
             Contains("rx_port 4294967305 is not an egress port"));
  CHECK_THAT(error_of(variant("\"52:54:00:AA:00:01\"", "\"53:54:00:aa:00:01\"")), Contains("multicast"));
  CHECK_THAT(error_of(variant("\"52:54:00:AA:00:01\"", "nonsense")), Contains("not a MAC address"));
  CHECK_THAT(error_of(variant("tx_port: 1,", "tx_port: 9,")), Contains("tx_port 9 is not an ingress port"));
  CHECK_THAT(error_of(variant("rx_port: 9}", "rx_port: 3}")), Contains("rx_port 3 is not an egress port"));
  CHECK_THAT(error_of(variant("name: h2", "name: h1")),
             StartsWith("lab.yaml:10:") && Contains("host name h1 used twice"));
  CHECK_THAT(error_of(variant("name: eth2", "name: eth1")), Contains("NIC name eth1 used twice"));
  // "<host>-<nic>" names the NIC to the emulator: h2's x-eth1 and a host h2-x's eth1 would be
  // one NIC there (caught by vlab_lab_spec_fuzz's properties).
  CHECK_THAT(error_of("switch: {size: 8x8}\nhosts:\n"
                      "  - name: h2-x\n    nics: [{name: eth1, ip: 10.9.0.1/24, tx_port: 1, rx_port: 9}]\n"
                      "  - name: h2\n    nics: [{name: x-eth1, ip: 10.9.0.2/24, tx_port: 2, rx_port: 10}]\n"),
             StartsWith("lab.yaml:6:") &&
                 Contains("h2:x-eth1 has the emulator NIC name h2-x-eth1 of the NIC at line 4; rename a host or NIC"));
  CHECK_THAT(error_of(variant("name: eth2", "name: eth0")), Contains("eth0 (management)"));
  CHECK_THAT(error_of(variant("memory_mb: 384", "memory_mb: 64")), Contains("memory_mb must be"));
  CHECK_THAT(error_of(variant("memory_mb: 384", "tcg_cache_mb: 4096")),
             Contains("lab.yaml:7:19: tcg_cache_mb must be 32..1024 (MiB)"));
  CHECK_THAT(error_of(variant("memory_mb: 384", "colour: blue")), Contains("unknown key 'colour'"));
  CHECK_THAT(error_of(variant("h1:eth1 <-> h2:eth1", "h1:eth1 -> h2:eth1")), Contains("HOST:NIC <-> HOST:NIC"));
  CHECK_THAT(error_of(std::string(kGood) + "  - h2:eth1 <-> h2:eth2\n"), Contains("NIC h2:eth1 used twice"));
  CHECK_THAT(error_of(variant("switch:", "nics: []\nswitch:")), Contains("unknown key 'nics'"));
  CHECK_THAT(error_of(variant("preset: ideal", "preset: warp-drive")), Contains("warp-drive"));
}

TEST_CASE("the QEMU command line wires each data NIC to its emulator port and QMP socket") {
  LabState s;
  s.name = "lab1";
  s.dir = "/var/lib/x/labs/lab1";
  s.vmlinuz = "/k/vmlinuz";
  s.initramfs = "/k/initramfs.cpio";
  s.modules_dir = "/k/lib/modules";
  HostState h;
  h.name = "h2";
  h.cpus = 2;
  h.memory_mb = 768;
  h.ssh_port = 2202;
  h.mgmt_mac = "52:54:00:6b:02:00";
  h.lan_mac = "52:54:00:6b:02:01";
  h.lan_ip = "192.168.127.2/24";
  h.lan_hub_port = 40011;
  h.lan_qemu_port = 40012;
  NicState n;
  n.name = "eth1";
  n.mac = "52:54:00:6c:02:01";
  n.ip = "10.1.0.2/24";
  n.rdma_device = "rxe_eth1";
  n.emulator_udp_port = 40001;
  n.qemu_udp_port = 40002;
  n.qmp_socket = s.dir + "/hosts/h2/qmp-eth1.sock";
  n.linked_at_start = true;
  h.nics.push_back(n);
  NicState dark = n;
  dark.name = "eth2";
  dark.rdma_device = "rxe_eth2";
  dark.linked_at_start = false;
  h.nics.push_back(dark);

  std::string argv;
  for (const auto& a : qemu_argv(s, h)) argv += a + " ";
  CHECK_THAT(argv, Contains("-accel tcg -cpu"));  // QEMU's own translation cache size
  CHECK_THAT(argv, Contains("-smp 2 -m 768"));
  CHECK_THAT(argv, Contains("hostfwd=tcp:127.0.0.1:2202-:22"));
  CHECK_THAT(argv, Contains("socket,id=eth1,udp=127.0.0.1:40001,localaddr=127.0.0.1:40002"));
  CHECK_THAT(argv, Contains("virtio-net-pci,netdev=eth1,mac=52:54:00:6c:02:01"));
  CHECK_THAT(argv, Contains("unix:/var/lib/x/labs/lab1/hosts/h2/qmp-eth1.sock,server=on,wait=off"));
  CHECK_THAT(argv, Contains("readonly=on"));
  CHECK_THAT(argv, Contains("socket,id=lan,udp=127.0.0.1:40011,localaddr=127.0.0.1:40012"));
  h.tcg_cache_mb = 128;
  argv.clear();
  for (const auto& a : qemu_argv(s, h)) argv += a + " ";
  CHECK_THAT(argv, Contains("-accel tcg,tb-size=128 -cpu"));

  std::string init = guest_init_script(s, h);
  CHECK_THAT(init, Contains("ip addr add 10.1.0.2/24 dev eth1"));
  CHECK_THAT(init, Contains("rdma link add rxe_eth1 type rxe netdev eth1"));
  // Renamed in this order: management (eth0), management LAN (lan0), then the data NICs.
  CHECK_THAT(init, Contains("52:54:00:6b:02:00 52:54:00:6b:02:01 52:54:00:6c:02:01"));
  CHECK_THAT(init, Contains("ip link set ocstmp1 name lan0") && Contains("ip addr add 192.168.127.2/24 dev lan0"));
  CHECK_THAT(init, Contains("ip link set ocstmp2 name eth1"));
  CHECK_THAT(init, Contains(kGuestReadyLine));

  // The lab's shared folder: read-write, at the same path as on this machine.
  CHECK_THAT(argv, Contains("local,path=" + s.shared_dir() + ",mount_tag=shared,security_model=none"));
  CHECK_THAT(init, Contains("mount -t 9p -o trans=virtio,version=9p2000.L,msize=512000 shared " + s.shared_dir()));
  CHECK_THAT(init, !Contains("slurmd"));

  std::string check = ready_check_command(s, h);
  CHECK_THAT(check, Contains("rxe_eth1/ports/1/state") && Contains("ACTIVE"));
  CHECK_THAT(check, Contains("[ -e /sys/class/infiniband/rxe_eth2/ports/1/state ]"));
  CHECK_THAT(check, !Contains("sinfo"));

  // ansible/ reads the NIC kind from the inventory, and the runner user's own keys must work.
  s.hosts.push_back(h);
  CHECK(LabState::from_json(s.to_json(), "state.json").hosts.at(0).tcg_cache_mb == 128);  // kept for restarts
  std::string inv = ansible_inventory(s);
  CHECK_THAT(inv, Contains("    ocslab_nic_kind: virtio\n") && Contains("    ocslab_vlab: lab1\n"));
  // The guests' Python is this machine's: no interpreter discovery (under Mitogen it bootstraps
  // the guest's interpreter again).
  CHECK_THAT(inv, Contains("    ansible_python_interpreter: /usr/bin/python3\n"));
  CHECK_THAT(inv, Contains("{name: eth1, mac: \"52:54:00:6c:02:01\", ip: 10.1.0.2/24, rdma_device: \"rxe_eth1\""));
  CHECK_THAT(guest_sshd_config(s, h),
             Contains("AuthorizedKeysFile /var/lib/x/labs/lab1/hosts/h2/authorized_keys .ssh/authorized_keys"));
}

TEST_CASE("a standby NIC: an active-backup bond in the guest that keeps its primary's name, address and Soft-RoCE") {
  const std::string with_standby = variant(
      "      - {name: eth1, ip: 10.1.0.2/24, tx_port: 2, rx_port: 10, if2: true}\n",
      "      - {name: eth1, ip: 10.1.0.2/24, tx_port: 2, rx_port: 10}\n"
      "      - {name: eth1s, standby_for: eth1, tx_port: 4, rx_port: 12}\n");
  LabSpec lab = parse(with_standby);
  const auto& nics = lab.hosts.at(1).nics;
  REQUIRE(nics.size() == 3);
  CHECK(nics[1].name == "eth1s");
  CHECK(nics[1].standby_for == "eth1");
  CHECK(nics[1].ip.empty());
  CHECK_FALSE(nics[1].rdma);
  CHECK(nics[1].tx_port == 4);
  CHECK(nics[1].rx_port == 12);
  CHECK(nics[0].standby_for.empty());

  auto err = [&](const std::string& line) {
    return error_of(variant("      - {name: eth1, ip: 10.1.0.2/24, tx_port: 2, rx_port: 10, if2: true}\n",
                            "      - {name: eth1, ip: 10.1.0.2/24, tx_port: 2, rx_port: 10}\n" + line));
  };
  CHECK_THAT(err("      - {name: eth1s, standby_for: eth7, tx_port: 4, rx_port: 12}\n"),
             Contains("lab.yaml:13:36:") && Contains("h2:eth1s: standby_for 'eth7' is not a NIC of h2 listed before it"));
  CHECK_THAT(err("      - {name: eth1s, standby_for: eth1, ip: 10.1.0.9/24, tx_port: 4, rx_port: 12}\n"),
             Contains("h2:eth1s is a standby NIC") && Contains("'ip' belongs on the primary"));
  CHECK_THAT(err("      - {name: eth1s, standby_for: eth1, tx_port: 4, rx_port: 12}\n"
                 "      - {name: eth1t, standby_for: eth1, tx_port: 5, rx_port: 13}\n"),
             Contains("lab.yaml:14:36:") && Contains("eth1 has a standby already (eth1s)"));
  CHECK_THAT(err("      - {name: eth1s, standby_for: eth1, tx_port: 4, rx_port: 12}\n"
                 "      - {name: eth3, standby_for: eth1s, tx_port: 5, rx_port: 13}\n"),
             Contains("eth1s is itself a standby (of eth1)"));
  CHECK_THAT(err("      - {name: eth1s, standby_for: eth1, tx_port: 4, rx_port: 12}\n"
                 "      - {name: eth1p, ip: 10.3.0.2/24, tx_port: 5, rx_port: 13}\n"),
             Contains("h2:eth1p: the name is taken by eth1's own interface in its bond with standby eth1s"));
  CHECK_THAT(error_of(variant("if2: true}", "if2: true}\n      - {name: eth1s, standby_for: eth1, tx_port: 4, rx_port: 12}")),
             Contains("eth1 has a macvlan (if2)"));

  // The guest: the primary's interface renamed, the bond made with its MAC and both enslaved;
  // the address and Soft-RoCE device on the bond; the standby has neither.
  LabState s;
  s.name = "lab1";
  s.dir = "/var/lib/x/labs/lab1";
  HostState h;
  h.name = "h2";
  NicState p;
  p.name = "eth1";
  p.mac = "52:54:00:6c:02:01";
  p.ip = "10.1.0.2/24";
  p.rdma_device = "rxe_eth1";
  p.linked_at_start = true;
  NicState sb;
  sb.name = "eth1s";
  sb.mac = "52:54:00:6c:02:02";
  sb.standby_for = "eth1";
  h.nics = {p, sb};
  std::string init = guest_init_script(s, h);
  CHECK_THAT(init, Contains("ip link set ocstmp2 name eth1p"));
  CHECK_THAT(init, Contains("ip link set ocstmp3 name eth1s"));
  CHECK_THAT(init, Contains("ip link add eth1 address 52:54:00:6c:02:01 type bond mode broadcast miimon 10"));
  CHECK_THAT(init, Contains("ip link set eth1p master eth1 && ip link set eth1s master eth1"));
  CHECK_THAT(init, Contains("ip addr add 10.1.0.2/24 dev eth1"));
  CHECK_THAT(init, Contains("rdma link add rxe_eth1 type rxe netdev eth1"));
  CHECK_THAT(init, !Contains("dev eth1s") && !Contains("name eth1 ||"));
  // The bond comes before its address: the order the guest runs it in.
  CHECK(init.find("type bond mode") < init.find("ip addr add 10.1.0.2/24 dev eth1"));
  s.hosts.push_back(h);
  CHECK(LabState::from_json(s.to_json(), "state.json").hosts.at(0).nics.at(1).standby_for == "eth1");
  CHECK_THAT(ansible_inventory(s), !Contains("eth1s"));  // a bond slave: nothing for ansible/ to configure
}

TEST_CASE("a lab file's 'slurm: true' gives a Slurm cluster: controller on the first host, every host a node") {
  CHECK_FALSE(parse(kGood).slurm);
  LabSpec spec = parse(variant("name: lab1\n", "name: lab1\nslurm: true\n"));
  CHECK(spec.slurm);
  CHECK_THAT(error_of(variant("name: lab1\n", "name: lab1\nslurm: maybe\n")), StartsWith("lab.yaml:2:"));

  LabState s;
  s.name = "lab1";
  s.dir = "/var/lib/x/labs/lab1";
  s.slurm = true;
  for (int i = 1; i <= 3; ++i) {
    HostState h;
    h.name = "h" + std::to_string(i);
    h.cpus = i == 3 ? 2 : 1;
    h.lan_ip = "192.168.127." + std::to_string(i) + "/24";
    s.hosts.push_back(h);
  }
  std::string conf = slurm_conf(s);
  CHECK_THAT(conf, Contains("SlurmctldHost=h1(192.168.127.1)\n") && Contains("AuthType=auth/munge\n"));
  CHECK_THAT(conf, Contains("NodeName=h2 NodeAddr=192.168.127.2 CPUs=1 State=UNKNOWN\n"));
  CHECK_THAT(conf, Contains("NodeName=h3 NodeAddr=192.168.127.3 CPUs=2 State=UNKNOWN\n"));
  CHECK_THAT(conf, Contains("PartitionName=lab Nodes=ALL Default=YES"));
  CHECK_THAT(slurm_cgroup_conf(), Contains("IgnoreSystemd=yes"));
  // The controller starts on h1 only; munged and slurmd everywhere, with the lab's key.
  std::string init1 = guest_init_script(s, s.hosts[0]);
  std::string init2 = guest_init_script(s, s.hosts[1]);
  CHECK_THAT(init1, Contains("slurmctld ||") && Contains("slurmd ||"));
  CHECK_THAT(init2, !Contains("slurmctld ||") && Contains("slurmd ||"));
  CHECK_THAT(init2, Contains("cp /var/lib/x/labs/lab1/slurm/munge.key /etc/munge/munge.key"));
  CHECK_THAT(init2, Contains("runuser -u munge -- /usr/sbin/munged"));
  // Ready once the node takes jobs; Slurm starts before sshd and the ready line.
  CHECK_THAT(ready_check_command(s, s.hosts[1]), Contains("sinfo -h -n h2 -o %T"));
  CHECK(init2.find("slurmd ||") < init2.find(kGuestReadyLine));
  // state.json keeps it.
  CHECK(LabState::from_json(s.to_json(), "state.json").slurm);
}

TEST_CASE("cpio newc archive: headers, names padded to 4 bytes, trailer") {
  CpioWriter w;
  w.add_dir("bin");
  w.add_file("init", "#!/bin/sh\n", 0755);
  std::string a = w.finish();
  REQUIRE(a.rfind("070701", 0) == 0);
  CHECK(a.size() % 4 == 0);
  // Second entry: "init", mode 0100755, size 10.
  auto pos = a.find("070701", 6);
  REQUIRE(pos != std::string::npos);
  std::string hdr = a.substr(pos, 110);
  CHECK(hdr.substr(14, 8) == "000081ED");
  CHECK(hdr.substr(54, 8) == "0000000A");
  CHECK(hdr.substr(94, 8) == "00000005");  // "init" + NUL
  CHECK(a.substr(pos + 110, 5) == std::string("init\0", 5));
  CHECK(a.find("TRAILER!!!") != std::string::npos);
}
