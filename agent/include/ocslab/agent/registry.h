// Probe factories by name, so the agent can start whatever probes.start (or capture --probes)
// names. Adding a probe to the agent is one line in builtin_registry() (agent/src/registry.cpp):
//   r.add("carrier", [](const ProbeConfig& c) { return probes::make_carrier_probe(c.host, c.interfaces); });
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "ocslab/agent/protocol.h"
#include "ocslab/probes/probe.h"

namespace ocslab::agent {

// What a factory gets: the probes.start entry plus the host name samples are stamped with.
struct ProbeConfig {
  std::string host;
  std::string name;
  std::vector<std::string> interfaces;
  int interval_ms = 1000;
  nlohmann::json params = nlohmann::json::object();  // the whole probes.start entry

  static ProbeConfig from(const ProbeRequest& r, const std::string& host);
};

using ProbeFactory = std::function<std::unique_ptr<probes::Probe>(const ProbeConfig&)>;

class ProbeRegistry {
 public:
  // Throws ocslab::Error when name is already registered (two probes must not share a name).
  void add(const std::string& name, ProbeFactory factory);
  // nullptr when no probe of that name is registered. A factory may throw ocslab::Error for
  // parameters it cannot accept (the message names the parameter).
  std::unique_ptr<probes::Probe> create(const ProbeConfig& config) const;
  bool contains(const std::string& name) const { return factories_.count(name) > 0; }
  std::vector<std::string> names() const;

 private:
  std::map<std::string, ProbeFactory> factories_;
};

// Every probe this build of the agent knows.
const ProbeRegistry& builtin_registry();

}  // namespace ocslab::agent
