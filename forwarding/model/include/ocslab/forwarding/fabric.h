// The fabric model for host-based forwarding: hosts, their forwarding ports (if1 carries the
// IP and RDMA, if2 only a MAC for relayed frames) and the circuits the OCS currently makes.
// Loaded from YAML; validated before anything is computed from it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ocslab/common/error.h"

namespace ocslab::forwarding {

struct Ipv4Prefix {
  uint32_t addr = 0;  // host byte order
  int prefix_len = 32;
};

// "10.0.0.1/24" -> Ipv4Prefix; nullopt if malformed. A bare address means /32.
std::optional<Ipv4Prefix> parse_ipv4_prefix(const std::string& text);
std::string format_ipv4(uint32_t addr);
// "02:00:00:00:00:0A" -> "02:00:00:00:00:0a"; nullopt unless six hex pairs separated by ':'.
std::optional<std::string> normalize_mac(const std::string& text);

// Where an entry came from, "file:line:col", empty for fabrics built in code.
using Where = std::string;

struct If1 {
  std::string name;
  Ipv4Prefix ip;
  std::string mac;
  std::string rdma;  // RDMA device bound to this netdev (e.g. rxe0, mlx5_0); may be empty
  Where where;
};

struct If2 {
  std::string name;
  std::string mac;
  Where where;
};

struct Port {
  std::string name;
  If1 if1;
  std::optional<If2> if2;  // optional only so validation can name a port without one
  Where where;
};

struct Host {
  std::string name;
  std::vector<Port> ports;
  Where where;
};

struct PortRef {
  std::string host;
  std::string port;
  bool operator==(const PortRef&) const = default;
  auto operator<=>(const PortRef&) const = default;  // NOLINT(modernize-use-nullptr): clang-tidy false positive
};
std::string to_string(const PortRef& p);  // "h1:p0"

// One bidirectional circuit of the OCS, as seen from the hosts: a <-> b.
struct Circuit {
  PortRef a;
  PortRef b;
  Where where;
};

struct Fabric {
  std::vector<Host> hosts;
  std::vector<Circuit> circuits;

  const Host* find_host(const std::string& name) const;
  const Port* find_port(const PortRef& ref) const;
  // Index into circuits of the circuit using this port, if any.
  std::optional<size_t> circuit_of(const PortRef& ref) const;
};

// Throws ConfigError naming the offending entry (with its file:line:col when known):
// duplicate host or port names, a port without if2, a MAC or IP used twice, a circuit to an
// unknown host or port, a circuit from a port to itself, a port in two circuits, and any host
// that cannot be reached from the first host over the circuits.
void validate(const Fabric& fabric);
// The host part of validate() alone (names, if2 present, MACs and IPs unique), for host lists
// that have no circuits yet (a wiring file, wiring.h).
void validate_hosts(const std::vector<Host>& hosts);

// YAML loading (format in docs/forwarding.md); the result is validated.
Fabric load_fabric_file(const std::string& path);
Fabric load_fabric_string(const std::string& text, const std::string& origin);

// The fabric as a fabric file that load_fabric_string reads back into the same hosts, ports
// and circuits. `comment` (may span lines) goes first, each line behind "# ". Throws Error when
// yaml-cpp cannot emit a value.
std::string to_yaml(const Fabric& fabric, const std::string& comment = {});

// A port's if2 as a macvlan over its if1 (where the NIC has no second function): what
// if2_link.h creates.
struct MacvlanSpec {
  std::string name;    // the if2 name from the fabric, e.g. "eth1v"
  std::string parent;  // the port's if1 netdev, e.g. "eth1"
  std::string mac;
};

// The if2 of every port of `host`, over that port's if1. Throws Error for an unknown host.
std::vector<MacvlanSpec> if2_macvlans(const Fabric& fabric, const std::string& host);

}  // namespace ocslab::forwarding
