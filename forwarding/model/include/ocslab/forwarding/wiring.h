// The cabling between the hosts' forwarding ports and the OCS (which switch port each host
// port transmits into and receives from), and the derivation of the fabric (fabric.h) from the
// circuits the switch makes: pure functions, shared by `ocslab-agent forwarding fabric` and the
// runner, so a reconfiguration of the OCS gives the fabric to plan for.
#pragma once

#include <string>
#include <vector>

#include "ocslab/forwarding/fabric.h"

namespace ocslab::forwarding {

// A switch port as the switch numbers it (Polatis: ingress 1..N, egress N+1..N+M).
using OcsPort = int;

// One host port's two fibres: its transmitter goes into OCS ingress `tx`, its receiver is fed
// by OCS egress `rx`.
struct Cable {
  PortRef port;
  OcsPort tx = 0;
  OcsPort rx = 0;
  Where where;
};

struct Wiring {
  std::vector<Host> hosts;  // the fabric file's host schema, no circuits
  std::vector<Cable> cables;

  const Cable* by_port(const PortRef& ref) const;
  const Cable* by_tx(OcsPort ingress) const;
  const Cable* by_rx(OcsPort egress) const;
};

// Throws ConfigError naming the entry (file:line:col when known): everything validate_hosts()
// rejects, a cable for an unknown host or port, a host port cabled twice, an OCS port used by
// two cables (or as tx and rx), a port number below 1, a host or port name that a circuit
// "host:port <-> host:port" cannot carry (':', '<->', white space).
void validate_wiring(const Wiring& wiring);

// Against a switch of `ingress` x `egress` ports (Polatis numbering: ingress 1..N, egress
// N+1..N+M): every tx must be an ingress and every rx an egress. Throws ConfigError naming the
// cable and `switch_name` otherwise (a transmitter cabled to an egress carries no light).
void check_wiring_ports(const Wiring& wiring, int ingress, int egress, const std::string& switch_name);

// YAML loading (format in docs/forwarding.md, "Deriving the fabric"); the result is validated.
Wiring load_wiring_file(const std::string& path);
Wiring load_wiring_string(const std::string& text, const std::string& origin);

// One unidirectional circuit of the switch, light from `ingress` to `egress`, and where it was
// read (a mapping file's file:line:col, or the switch's URL).
struct OcsCircuit {
  OcsPort ingress = 0;
  OcsPort egress = 0;
  Where where;
};

struct DerivedFabric {
  Fabric fabric;                    // validated; circuits in the wiring's host and port order
  std::vector<OcsCircuit> ignored;  // circuits with neither end in the wiring (other users')
};

// The fabric the circuits make over the wiring: circuit a.tx -> b.rx together with
// b.tx -> a.rx is the link a <-> b. Forwarding needs both directions, so a circuit with one
// end wired and the other not, a circuit using a wired tx as egress or a wired rx as ingress, a circuit whose reverse
// direction is missing or leads elsewhere, a circuit between two ports of one host, and an ingress or egress used twice
// are errors (ConfigError naming the circuit's `where`, the ports and their cables), as is a resulting fabric that
// validate() refuses (a host left unreachable). Circuits that touch no wired port are returned in `ignored`.
DerivedFabric derive_fabric(const Wiring& wiring, const std::vector<OcsCircuit>& circuits);

}  // namespace ocslab::forwarding
