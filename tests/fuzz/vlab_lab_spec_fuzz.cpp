// Virtual-lab files come from users and are "validated completely before anything starts"
// (lab_spec.h): any bytes must give an ocslab::Error naming the input, or a spec whose every
// field is already what `vlab up` needs: valid unique names, unicast MACs in the form guests
// are given, addresses that go verbatim into `ip addr add`, ports on the right side of the
// switch and used once, links between distinct NICs each linked once, and the port numbers
// the file wrote (not a truncated copy).
#include <arpa/inet.h>

#include <cstddef>
#include <cstdint>
#include <set>
#include <string>

#include "ocslab/common/config.h"
#include "ocslab/common/error.h"
#include "ocslab/vlab/lab_spec.h"

namespace {

bool valid_name(const std::string& s, size_t max) {
  if (s.empty() || s.size() > max || s[0] < 'a' || s[0] > 'z') return false;
  for (char c : s) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-')) return false;
  }
  return true;
}

bool unicast_mac(const std::string& m) {
  if (m.size() != 17) return false;
  for (size_t i = 0; i < m.size(); ++i) {
    char c = m[i];
    if (i % 3 == 2) {
      if (c != ':') return false;
    } else if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) {
      return false;
    }
  }
  return (std::stoi(m.substr(0, 2), nullptr, 16) & 1) == 0;
}

// "a.b.c.d/p" with a decimal prefix 1..32 and nothing else: the guest script runs
// `ip addr add <ip> dev <nic>` with it unquoted, and iproute2 reads a prefix with a leading
// zero as octal ("/024" is a /20).
bool plain_cidr(const std::string& ip) {
  auto slash = ip.find('/');
  if (slash == std::string::npos) return false;
  in_addr a{};
  if (inet_pton(AF_INET, ip.substr(0, slash).c_str(), &a) != 1) return false;
  std::string p = ip.substr(slash + 1);
  if (p.empty() || p.size() > 2 || p[0] == '0') return false;
  for (char c : p) {
    if (c < '0' || c > '9') return false;
  }
  int prefix = std::stoi(p);
  return prefix >= 1 && prefix <= 32;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 8192) return 0;  // bigger labs only make each run slower, not different
  std::string text(reinterpret_cast<const char*>(data), size);
  ocslab::YamlDoc doc;
  ocslab::vlab::LabSpec lab;
  try {
    doc = ocslab::load_yaml_string(text, "fuzz-lab.yaml");
    lab = ocslab::vlab::parse_lab_spec(doc);
  } catch (const ocslab::Error&) {
    return 0;  // refused with a message; YAML::Exception or anything else escaping is a bug
  }
  const auto& sw = lab.emulator.sw;
  const int in_ports = sw.ingress_ports, out_ports = sw.egress_ports;
  if (in_ports < 1 || out_ports < 1) __builtin_trap();
  if (!valid_name(lab.name, 40) || lab.hosts.empty()) __builtin_trap();

  std::set<std::string> host_names, macs, addresses, emulator_names;
  std::set<int> tx_used, rx_used;
  const YAML::Node file_hosts = doc.root["hosts"];
  for (size_t h = 0; h < lab.hosts.size(); ++h) {
    const auto& host = lab.hosts[h];
    if (!valid_name(host.name, 20) || !host_names.insert(host.name).second) __builtin_trap();
    if (lab.host_index(host.name) != h) __builtin_trap();
    if (host.cpus < 1 || host.cpus > 16 || host.memory_mb < 256 || host.memory_mb > 16384) __builtin_trap();
    if (host.tcg_cache_mb != 0 && (host.tcg_cache_mb < 32 || host.tcg_cache_mb > 1024)) __builtin_trap();
    if (host.nics.empty()) __builtin_trap();
    std::set<std::string> nic_names;
    for (size_t i = 0; i < host.nics.size(); ++i) {
      const auto& nic = host.nics[i];
      if (!valid_name(nic.name, 14) || nic.name == "eth0" || nic.name == "lo") __builtin_trap();
      if (!nic_names.insert(nic.name).second) __builtin_trap();
      if (!unicast_mac(nic.mac) || !macs.insert(nic.mac).second) __builtin_trap();
      if (nic.if2 && (!unicast_mac(nic.if2_mac) || !macs.insert(nic.if2_mac).second)) __builtin_trap();
      if (!nic.if2 && !nic.if2_mac.empty()) __builtin_trap();
      if (nic.standby_for.empty()) {
        if (!plain_cidr(nic.ip) || !addresses.insert(nic.address()).second) __builtin_trap();
      } else {
        // A standby: no address, Soft-RoCE or macvlan of its own; its primary is an earlier NIC
        // of the host, not a standby itself, without a macvlan, and has no other standby.
        if (!nic.ip.empty() || nic.rdma || nic.if2) __builtin_trap();
        size_t primaries = 0, standbys = 0;
        for (size_t k = 0; k < i; ++k) {
          const auto& p = host.nics[k];
          if (p.name == nic.standby_for && p.standby_for.empty() && !p.if2) ++primaries;
          if (p.standby_for == nic.standby_for) ++standbys;
        }
        if (primaries != 1 || standbys != 0) __builtin_trap();
        for (const auto& other : host.nics) {
          if (other.name == nic.standby_for + "p") __builtin_trap();  // the bond's own interface name
        }
      }
      if (nic.tx_port < 1 || nic.tx_port > in_ports) __builtin_trap();
      if (nic.rx_port <= in_ports || nic.rx_port > in_ports + out_ports) __builtin_trap();
      if (!tx_used.insert(nic.tx_port).second || !rx_used.insert(nic.rx_port).second) __builtin_trap();
      // The ports are the numbers the file wrote, not a narrowed copy of them.
      const YAML::Node fn = file_hosts[h]["nics"][i];
      if (fn["tx_port"].as<long long>() != nic.tx_port || fn["rx_port"].as<long long>() != nic.rx_port)
        __builtin_trap();
      // The emulator refuses duplicate NIC names, and the lab hands it "<host>-<nic>".
      if (!emulator_names.insert(lab.emulator_nic_name({h, i})).second) __builtin_trap();
    }
  }

  std::set<std::pair<size_t, size_t>> linked;
  for (const auto& l : lab.links) {
    if (l.a.host >= lab.hosts.size() || l.b.host >= lab.hosts.size()) __builtin_trap();
    if (l.a.nic >= lab.hosts[l.a.host].nics.size() || l.b.nic >= lab.hosts[l.b.host].nics.size()) __builtin_trap();
    if (l.a.host == l.b.host && l.a.nic == l.b.nic) __builtin_trap();
    if (!linked.insert({l.a.host, l.a.nic}).second || !linked.insert({l.b.host, l.b.nic}).second) __builtin_trap();
  }
  auto circuits = lab.initial_circuits();
  if (circuits.size() != 2 * lab.links.size()) __builtin_trap();
  std::set<int> c_in, c_out;
  for (const auto& c : circuits) {
    if (!tx_used.count(c.ingress) || !rx_used.count(c.egress)) __builtin_trap();
    if (!c_in.insert(c.ingress).second || !c_out.insert(c.egress).second) __builtin_trap();
  }
  for (size_t h = 0; h < lab.hosts.size(); ++h) {
    for (size_t i = 0; i < lab.hosts[h].nics.size(); ++i) {
      if (lab.linked_at_start({h, i}) != (linked.count({h, i}) == 1)) __builtin_trap();
    }
  }
  return 0;
}
