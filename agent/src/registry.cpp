#include "ocslab/agent/registry.h"

#include "ocslab/agent/heartbeat_probe.h"
#include "ocslab/common/error.h"

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
  auto it = factories_.find(config.name);
  return it == factories_.end() ? nullptr : it->second(config);
}

std::vector<std::string> ProbeRegistry::names() const {
  std::vector<std::string> out;
  for (const auto& [name, f] : factories_) out.push_back(name);
  return out;
}

const ProbeRegistry& builtin_registry() {
  // Built on first use instead of by static registrars: objects of a static library that
  // nothing references are dropped by the linker, and their registrars with them.
  static const ProbeRegistry registry = [] {
    ProbeRegistry r;
    r.add("heartbeat", [](const ProbeConfig& c) {
      return std::make_unique<HeartbeatProbe>(c.host, c.interval_ms,
                                              c.interfaces.empty() ? "agent" : c.interfaces.front());
    });
    // carrier, rx_power, firmware, rdma: one r.add(...) line each when they land in probes/.
    return r;
  }();
  return registry;
}

}  // namespace ocslab::agent
