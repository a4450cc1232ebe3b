#include "ocslab/agent/registry.h"

#include <fmt/format.h>

#include "ocslab/agent/heartbeat_probe.h"
#include "ocslab/common/error.h"
#include "ocslab/common/ifname.h"
#include "ocslab/probes/carrier_probe.h"
#include "ocslab/probes/firmware_probe.h"
#include "ocslab/probes/gid_probe.h"
#include "ocslab/probes/rdma_control.h"
#include "ocslab/probes/rdma_probe.h"
#include "ocslab/probes/rx_power_probe.h"

namespace ocslab::agent {

ProbeConfig ProbeConfig::from(const ProbeRequest& r, const std::string& host) {
  return {host, r.name, r.interfaces, r.interval_ms, r.params};
}

void ProbeRegistry::add(const std::string& name, ProbeFactory factory) {
  if (name.empty()) throw Error("probe registry: empty probe name");
  if (!factories_.emplace(name, std::move(factory)).second) {
    throw Error("probe registry: probe '" + name + "' registered twice");
  }
}

std::unique_ptr<probes::Probe> ProbeRegistry::create(const ProbeConfig& config) const {
  // Names from the network become sysfs paths and netlink requests in a root daemon.
  for (const auto& i : config.interfaces) check_ifname(i, "probe " + config.name);
  auto it = factories_.find(config.name);
  return it == factories_.end() ? nullptr : it->second(config);
}

std::vector<std::string> ProbeRegistry::names() const {
  std::vector<std::string> out;
  for (const auto& [name, f] : factories_) out.push_back(name);
  return out;
}

namespace {

// gid: interfaces = [the RDMA port's netdev], both tables polled every interval_ms; params:
// neighbours (bool, default true: also the interface's neighbour entries), full_scan_every
// (polls between full reads of the GID table, default 50). Bad params throw Error naming the key.
std::unique_ptr<probes::Probe> make_gid_probe(const ProbeConfig& c) {
  if (c.interfaces.size() != 1) throw Error("probe gid: give exactly one interface (the RDMA port's netdev)");
  probes::GidProbeConfig p;
  p.interface = c.interfaces.front();
  p.interval = std::chrono::milliseconds(c.interval_ms);
  p.host = c.host;
  try {
    p.neighbours = c.params.value("neighbours", true);
    p.full_scan_every = c.params.value("full_scan_every", p.full_scan_every);
    if (p.full_scan_every < 1) throw Error("full_scan_every must be >= 1");
  } catch (const nlohmann::json::exception& e) {
    throw Error(std::string("probe gid: bad params: ") + e.what());
  } catch (const Error& e) {
    throw Error(std::string("probe gid: bad params: ") + e.what());
  }
  return std::make_unique<probes::GidProbe>(p);
}

}  // namespace

const ProbeRegistry& builtin_registry() {
  // Built on first use instead of by static registrars: objects of a static library that
  // nothing references are dropped by the linker, and their registrars with them.
  static const ProbeRegistry registry = [] {
    ProbeRegistry r;
    r.add("heartbeat", [](const ProbeConfig& c) {
      return std::make_unique<HeartbeatProbe>(c.host, c.interval_ms,
                                              c.interfaces.empty() ? "agent" : c.interfaces.front());
    });
    r.add("rx_power", [](const ProbeConfig& c) {
      probes::RxPowerProbeConfig p;
      p.interfaces = c.interfaces;
      p.interval = std::chrono::milliseconds(c.interval_ms);
      p.host = c.host;
      return std::make_unique<probes::RxPowerProbe>(p);
    });
    // rdma: interfaces = [the RDMA port's netdev]; params: role (client/server), control
    // (HOST:PORT of the QP exchange on the management network), secret (the run's, required;
    // never logged), any_address (server: allow a wildcard control address), interval_us, timeout,
    // retry_cnt, rnr_retry, outage_factor, counter_period_ms (hardware counters; 0: only at
    // stall, resume, QP error). Bad params throw Error naming the key.
    r.add("rdma", [](const ProbeConfig& c) {
      probes::RdmaProbeConfig p;
      if (c.interfaces.size() != 1) throw Error("probe rdma: give exactly one interface (the RDMA port's netdev)");
      p.interface = c.interfaces.front();
      p.host = c.host;
      const auto& q = c.params;
      try {
        std::string role = q.value("role", "client");
        if (role != "client" && role != "server")
          throw Error("probe rdma: role must be client or server, got '" + role + "'");
        p.role = role == "server" ? probes::RdmaProbeConfig::Role::kServer : probes::RdmaProbeConfig::Role::kClient;
        // No default address for the server either: a root daemon listening on every address would
        // be reachable from any network the host is on. The runner passes the management address.
        p.control = q.value("control", "");
        if (p.control.empty())
          throw Error(p.role == probes::RdmaProbeConfig::Role::kServer
                          ? fmt::format("probe rdma: a server needs params.control = ADDRESS:PORT to listen on "
                                        "(the address clients connect to; port {} by convention)",
                                        probes::kRdmaControlPort)
                          : "probe rdma: a client needs params.control = SERVER:PORT");
        // The run's secret, handed over this SSH-authenticated session: the control connection
        // is authenticated with it. Its value never appears in an error.
        p.secret = q.value("secret", "");
        if (!probes::valid_control_secret(p.secret))
          throw Error("probe rdma: params.secret must be the run's control secret (32 to 256 hex digits)");
        p.any_address = q.value("any_address", false);
        p.interval = std::chrono::microseconds(q.value("interval_us", static_cast<int64_t>(c.interval_ms) * 1000));
        p.timeout = q.value("timeout", p.timeout);
        p.retry_cnt = q.value("retry_cnt", p.retry_cnt);
        p.rnr_retry = q.value("rnr_retry", p.rnr_retry);
        p.outage_factor = q.value("outage_factor", p.outage_factor);
        p.label = q.value("label", "");
        int64_t counter_ms = q.value("counter_period_ms", static_cast<int64_t>(p.counter_period.count()));
        if (counter_ms < 0) throw Error("probe rdma: counter_period_ms must be >= 0");
        p.counter_period = std::chrono::milliseconds(counter_ms);
      } catch (const nlohmann::json::exception& e) {
        throw Error(std::string("probe rdma: bad params: ") + e.what());
      }
      return std::make_unique<probes::RdmaProbe>(p);
    });
    // carrier: params netns (a name under /run/netns), rt_priority (SCHED_FIFO receiver and
    // poller), poll_ms (the live carrier bit every N ms, `carrier_bit`; 0: off; default
    // probes::kDefaultPollMs). Bad params throw Error naming the key.
    r.add("carrier", [](const ProbeConfig& c) {
      probes::CarrierProbeOptions o;
      o.interfaces = c.interfaces;
      o.host = c.host;
      try {
        o.netns = c.params.value("netns", "");
        o.receiver_rt_priority = c.params.value("rt_priority", 0);
        auto poll_ms = c.params.value("poll_ms", static_cast<long long>(probes::kDefaultPollMs));
        if (auto why = probes::poll_interval_problem(poll_ms); !why.empty())
          throw Error("probe carrier: bad params: poll_ms: " + why);
        o.poll_interval_ms = static_cast<int>(poll_ms);
      } catch (const nlohmann::json::exception& e) {
        throw Error(std::string("probe carrier: bad params: ") + e.what());
      }
      return std::make_unique<probes::CarrierProbe>(o);
    });
    // firmware: interfaces = [the RDMA port's netdev], polled every interval_ms; params: vport
    // (a number: query that vport, needs the eswitch manager) and op_mod (vnic / uplink /
    // eswitch) of the DevX QUERY_VPORT_STATE. Bad params throw Error naming the key.
    r.add("firmware", [](const ProbeConfig& c) {
      if (c.interfaces.size() != 1) throw Error("probe firmware: give exactly one interface (the RDMA port's netdev)");
      probes::FirmwareProbeConfig p;
      p.interface = c.interfaces.front();
      p.interval = std::chrono::milliseconds(c.interval_ms);
      p.host = c.host;
      try {
        p.query.op_mod = probes::parse_vport_op_mod(c.params.value("op_mod", "vnic"));
        if (c.params.contains("vport")) {
          int vport = c.params.at("vport").get<int>();
          if (vport < 0 || vport > 0xffff) throw Error("vport must be 0..65535, got " + std::to_string(vport));
          p.query.other_vport = true;
          p.query.vport_number = static_cast<uint16_t>(vport);
        }
      } catch (const nlohmann::json::exception& e) {
        throw Error(std::string("probe firmware: bad params: ") + e.what());
      } catch (const Error& e) {
        throw Error(std::string("probe firmware: bad params: ") + e.what());
      }
      return std::make_unique<probes::FirmwareProbe>(p);
    });
    r.add("gid", make_gid_probe);
    return r;
  }();
  return registry;
}

}  // namespace ocslab::agent
