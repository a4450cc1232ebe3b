// The optional `forwarding:` section of an experiment spec: how each host's forwarding ports
// are addressed and provisioned (if2 as a macvlan ocslab makes, or a named NPAR/VF device), the
// route options, and when to run the verify matrix. From it and one mapping of the spec the
// runner builds the fabric of that mapping directly (the mapping's links are the circuits), so
// no separate fabric file is needed. Schema: docs/experiments.md ("Host-based forwarding").
#pragma once

#include <string>
#include <vector>

#include "ocslab/common/config.h"
#include "ocslab/forwarding/fabric.h"
#include "ocslab/forwarding/routes.h"

namespace ocslab::runner {

struct ExperimentSpec;
struct Mapping;

enum class If2Mode { kMacvlan, kDevice };
enum class VerifyWhen { kNever, kFirst, kEvery };

// One data NIC as a forwarding port (port name = NIC name).
struct ForwardingNic {
  std::string nic;      // the spec's NIC name: if1
  std::string ip;       // "10.0.0.10/24"
  std::string mac;      // if1's MAC
  std::string rdma;     // RDMA device on if1 (may be empty)
  std::string if2;      // if2 netdev: the macvlan to make, or the NPAR partition / VF
  std::string if2_mac;  // with kDevice: the device's own MAC
  std::string where;    // file:line:col of the entry (or of the lab file's NIC)
};

struct ForwardingHost {
  If2Mode if2 = If2Mode::kMacvlan;
  std::vector<ForwardingNic> nics;  // every NIC of the host that some mapping links
};

struct ForwardingSpec {
  bool enabled = false;
  std::vector<ForwardingHost> hosts;   // parallel to ExperimentSpec::hosts
  bool balance = false;                // load balancing over equal-cost paths
  std::string traffic = "all-to-all";  // all-to-all | ring (with `ring` below as the order)
  std::vector<std::string> ring;       // ring order (default: the spec's host order)
  bool relay = true;                   // false: routes and neighbours only (--no-relay)
  bool every_nic = false;              // every NIC reaches every address (PlanOptions::every_nic)
  VerifyWhen verify = VerifyWhen::kNever;
  // Follow the fabric between reconfigurations (docs/forwarding.md, "Around a dark circuit and
  // before breaking one"): a circuit of the current mapping that the switch's power monitor or
  // a host's carrier probe reports dark gets the routes recomputed on the surviving circuits at
  // once, and again when it lights (needs switch.power_monitor or the carrier probe); a planned
  // reconfiguration first moves the routes that can move onto the circuits it keeps;
  // verify_change takes the verify matrix during each planned change (after the switch's
  // command, before the new routes) and after each reroute.
  bool reroute_on_dark = false;
  bool make_before_break = false;
  bool verify_change = false;
  std::string state_dir = "/var/lib/ocslab/forwarding";
  // The verify matrix's RC ping: good completions per pair, give-up time, first TCP port of the
  // QP exchange (on the management network, so it does not disturb the relay counters).
  int ping_count = 20;
  double ping_timeout_s = 20;
  int ping_port = 18600;
  std::string where;  // file:line:col of the section
};

// Parses `node` (the forwarding section) against the spec's hosts (already parsed). With a
// virtual lab, every NIC's ip, mac, rdma device and (when the lab makes one) if2 name + MAC
// default to the lab file's; a host whose lab NICs have if2 defaults to `if2: device`.
// Throws ConfigError naming file:line:col: unknown host or NIC, a NIC some mapping links with
// no address / MAC / if2 MAC, bad values. Every mapping's fabric is built and validated here
// too (duplicate MACs or IPs, a host the circuits do not reach), naming the mapping.
ForwardingSpec parse_forwarding_spec(const YamlDoc& doc, const YAML::Node& node, const ExperimentSpec& spec);

// The fabric of one mapping: the spec's hosts in order, each with its forwarding NICs as ports,
// and the mapping's links as circuits. Validated (ConfigError naming the mapping).
forwarding::Fabric fabric_for(const ExperimentSpec& spec, const Mapping& mapping);
forwarding::RouteOptions route_options(const ExperimentSpec& spec, const forwarding::Fabric& fabric);

}  // namespace ocslab::runner
