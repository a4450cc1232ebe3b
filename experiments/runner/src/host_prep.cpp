#include "ocslab/runner/host_prep.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include "ocslab/common/error.h"
#include "ocslab/common/shell.h"
#include "ocslab/ocsctl/ssh_session.h"
#include "ocslab/runner/target.h"

namespace ocslab::runner {

using nlohmann::json;

std::string must_exec(const HostEntry& h, const std::string& cmd) {
  ocs::SshSession s(ssh_options(h));
  auto r = s.exec(cmd, std::chrono::seconds(60));
  if (r.exit_status != 0)
    throw Error(fmt::format("{}: `{}` failed (status {}): {}", h.name, cmd, r.exit_status, r.err.empty() ? r.out : r.err));
  return r.out;
}

HostPrep::~HostPrep() {
  std::map<size_t, std::string> per_host;
  for (auto it = undo_.rbegin(); it != undo_.rend(); ++it) per_host[it->first] += it->second + " 2>/dev/null; ";
  for (const auto& [h, cmd] : per_host) {
    try {
      ocs::SshSession s(ssh_options(spec_.hosts[h]));
      s.exec(cmd + "true", std::chrono::seconds(60));
    } catch (const std::exception& e) {
      spdlog::warn("{}: could not undo the host preparation: {}", spec_.hosts[h].name, e.what());
    }
  }
}

void HostPrep::add_rxe(const std::vector<size_t>& hosts, const std::vector<std::string>& nics, const Log& log) {
  for (size_t h : hosts) {
    for (const auto& nic : nics) {
      // `rdma link` lists "link rxe_x/1 state ACTIVE ... netdev NIC": a NIC that has a device keeps it.
      std::string out = must_exec(spec_.hosts[h], fmt::format("if rdma link show | grep -qw {0}; then echo "
                                                              "present; else rdma link add {1} type rxe netdev {2} "
                                                              "&& echo added; fi",
                                                              shell_quote("netdev " + nic), shell_quote("rxe_" + nic),
                                                              shell_quote(nic)));
      if (out.find("added") == std::string::npos) continue;
      undo_.emplace_back(h, "rdma link delete " + shell_quote("rxe_" + nic));
      record_["rxe_added"].push_back({{"host", spec_.hosts[h].name}, {"nic", nic}});
      log(fmt::format("{}: Soft-RoCE device rxe_{} added on {}", spec_.hosts[h].name, nic, nic));
    }
  }
}

HostPrep::Addr HostPrep::address_of(const NicRef& n) const {
  const HostEntry& he = spec_.hosts[n.host];
  std::string out = must_exec(he, fmt::format("cat {} && ip -4 -o addr show dev {}",
                                              shell_quote("/sys/class/net/" + n.nic + "/address"), shell_quote(n.nic)));
  std::istringstream in(out);
  Addr a;
  std::getline(in, a.mac);
  std::string line;
  while (a.ip.empty() && std::getline(in, line)) {
    auto at = line.find(" inet ");
    if (at == std::string::npos) continue;
    std::istringstream w(line.substr(at + 6));
    w >> a.ip;
    a.ip = a.ip.substr(0, a.ip.find('/'));
  }
  // What goes into the next commands must be an address and nothing else.
  static const std::regex kMac("([0-9a-f]{2}:){5}[0-9a-f]{2}"), kIp("([0-9]{1,3}\\.){3}[0-9]{1,3}");
  if (!std::regex_match(a.mac, kMac) || !std::regex_match(a.ip, kIp))
    throw Error(fmt::format("pin_neighbours: {}:{} has no IPv4 address or MAC ({})", he.name, n.nic, out));
  return a;
}

void HostPrep::pin_neighbours(const std::vector<std::pair<NicRef, NicRef>>& pairs, const Log& log) {
  std::map<NicRef, Addr> addr;
  for (const auto& [a, b] : pairs)
    for (const NicRef& n : {a, b})
      if (!addr.count(n)) addr[n] = address_of(n);
  // Per host, each (nic, peer) once, in a stable order.
  std::map<size_t, std::set<std::pair<std::string, NicRef>>> wanted;
  for (const auto& [a, b] : pairs) {
    if (addr[a].ip == addr[b].ip) continue;
    wanted[a.host].insert({a.nic, b});
    wanted[b.host].insert({b.nic, a});
  }
  record_["pinned_neighbours"] = json::array();
  size_t pinned = 0, kept = 0;
  for (const auto& [host, entries] : wanted) {
    std::string cmd;
    for (const auto& [nic, peer] : entries) {
      const Addr& p = addr[peer];
      // Permanent already: someone's configuration, not ocslab's; left alone and not undone.
      cmd += fmt::format(
          "if ip neigh show to {0} dev {2} nud permanent | grep -q .; then echo kept {0}; else ip neigh replace {0} "
          "lladdr {1} dev {2} nud permanent && echo pinned {0}; fi; ",
          p.ip, p.mac, shell_quote(nic));
    }
    std::string out = must_exec(spec_.hosts[host], cmd);
    for (const auto& [nic, peer] : entries) {
      const Addr& p = addr[peer];
      json entry = {{"host", spec_.hosts[host].name}, {"nic", nic}, {"ip", p.ip}, {"mac", p.mac}};
      if (out.find("pinned " + p.ip + "\n") != std::string::npos) {
        undo_.emplace_back(host, fmt::format("ip neigh del {} dev {}", p.ip, shell_quote(nic)));
        record_["pinned_neighbours"].push_back(entry);
        ++pinned;
      } else {
        record_["left_alone"].push_back(entry);
        ++kept;
      }
    }
  }
  log(fmt::format("pinned {} neighbour entr{} between {} data NIC(s){} (Soft-RoCE then needs no ARP after a link "
                  "flap, like a hardware QP: docs/probes.md)",
                  pinned, pinned == 1 ? "y" : "ies", addr.size(),
                  kept ? fmt::format(", {} already permanent and left alone", kept) : std::string()));
}

}  // namespace ocslab::runner
