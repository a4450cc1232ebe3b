#include "ocslab/runner/host_prep.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include "ocslab/common/error.h"
#include "ocslab/common/in_parallel.h"
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

// One command per host, every host at once, each over a session of its own. What each printed
// is kept whatever its exit (a command that did two things and failed on the second still says
// what the first did); `error` names what failed.
struct HostOutput {
  std::string out;
  std::string error;  // empty: exit status 0
};

std::map<size_t, HostOutput> exec_each(const ExperimentSpec& spec, const std::map<size_t, std::string>& cmds) {
  std::map<size_t, HostOutput> res;
  const std::vector<std::pair<size_t, std::string>> jobs(cmds.begin(), cmds.end());
  for (const auto& [h, cmd] : jobs) res[h];  // every entry exists before the threads write
  in_parallel(jobs.size(), [&](size_t i) {
    const auto& [h, cmd] = jobs[i];
    HostOutput& r = res.at(h);
    const HostEntry& he = spec.hosts[h];
    try {
      ocs::SshSession s(ssh_options(he));
      auto x = s.exec(cmd, std::chrono::seconds(60));
      r.out = x.out;
      if (x.exit_status != 0)
        r.error = fmt::format("{}: `{}` failed (status {}): {}", he.name, cmd, x.exit_status, x.err.empty() ? x.out : x.err);
    } catch (const std::exception& e) {
      r.error = fmt::format("{}: {}", he.name, e.what());
    }
  });
  return res;
}

// The first host's error, in host order, as the exception; none: nothing.
void throw_first_error(const std::map<size_t, HostOutput>& res) {
  for (const auto& [h, r] : res)
    if (!r.error.empty()) throw Error(r.error);
}

HostPrep::~HostPrep() {
  std::map<size_t, std::string> per_host;
  for (auto it = undo_.rbegin(); it != undo_.rend(); ++it) per_host[it->first] += it->second + " 2>/dev/null; ";
  for (auto& [h, cmd] : per_host) cmd += "true";
  // Every host at once; a host that cannot be reached is named and the others are still undone.
  const std::vector<std::pair<size_t, std::string>> jobs(per_host.begin(), per_host.end());
  in_parallel(jobs.size(), [&](size_t i) {
    const auto& [h, cmd] = jobs[i];
    try {
      ocs::SshSession s(ssh_options(spec_.hosts[h]));
      s.exec(cmd, std::chrono::seconds(60));
    } catch (const std::exception& e) {
      spdlog::warn("{}: could not undo the host preparation: {}", spec_.hosts[h].name, e.what());
    }
  });
}

void HostPrep::add_rxe(const std::vector<size_t>& hosts, const std::vector<std::string>& nics, const Log& log) {
  if (nics.empty()) return;
  // One session per host, all hosts at once. `rdma link` lists "link rxe_x/1 state ACTIVE ...
  // netdev NIC": a NIC that has a device keeps it. Each NIC answers "added NIC" or "present NIC".
  std::map<size_t, std::string> cmds;
  for (size_t h : hosts) {
    std::string& cmd = cmds[h];
    for (const auto& nic : nics) {
      cmd += fmt::format("if rdma link show | grep -qw {0}; then echo present {3}; else rdma link add {1} type rxe "
                         "netdev {2} && echo added {3} || exit 1; fi; ",
                         shell_quote("netdev " + nic), shell_quote("rxe_" + nic), shell_quote(nic), shell_quote(nic));
    }
  }
  // Devices a host added before another (or a later NIC of its own) failed are recorded and
  // undone like any other.
  const auto res = exec_each(spec_, cmds);
  for (size_t h : hosts) {
    for (const auto& nic : nics) {
      if (res.at(h).out.find("added " + nic + "\n") == std::string::npos) continue;
      undo_.emplace_back(h, "rdma link delete " + shell_quote("rxe_" + nic));
      record_["rxe_added"].push_back({{"host", spec_.hosts[h].name}, {"nic", nic}});
      log(fmt::format("{}: Soft-RoCE device rxe_{} added on {}", spec_.hosts[h].name, nic, nic));
    }
  }
  throw_first_error(res);
}

HostPrep::Addr HostPrep::parse_address(const NicRef& n, const std::string& out) const {
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
    throw Error(
        fmt::format("pin_neighbours: {}:{} has no IPv4 address or MAC ({})", spec_.hosts[n.host].name, n.nic, out));
  return a;
}

std::map<NicRef, HostPrep::Addr> HostPrep::addresses_of(const std::set<NicRef>& nics) const {
  // One session per host for all its NICs, all hosts at once; each NIC's answer follows a line
  // "@@ocslab-nic N" (N its index here), so no NIC name is parsed back from the output.
  const std::vector<NicRef> list(nics.begin(), nics.end());
  std::map<size_t, std::string> cmds;
  for (size_t i = 0; i < list.size(); ++i) {
    cmds[list[i].host] += fmt::format("echo @@ocslab-nic {}; cat {} && ip -4 -o addr show dev {} || exit 1; ", i,
                                      shell_quote("/sys/class/net/" + list[i].nic + "/address"),
                                      shell_quote(list[i].nic));
  }
  const auto res = exec_each(spec_, cmds);
  throw_first_error(res);
  std::map<NicRef, Addr> addr;
  for (size_t i = 0; i < list.size(); ++i) {
    const std::string& text = res.at(list[i].host).out;
    const std::string mark = fmt::format("@@ocslab-nic {}\n", i);
    auto from = text.find(mark);
    std::string mine;
    if (from != std::string::npos) {
      from += mark.size();
      auto to = text.find("@@ocslab-nic ", from);
      mine = text.substr(from, to == std::string::npos ? std::string::npos : to - from);
    }
    addr[list[i]] = parse_address(list[i], mine);
  }
  return addr;
}

void HostPrep::pin_neighbours(const std::vector<std::pair<NicRef, NicRef>>& pairs, const Log& log) {
  std::set<NicRef> nics;
  for (const auto& [a, b] : pairs) nics.insert({a, b});
  std::map<NicRef, Addr> addr = addresses_of(nics);
  // Per host, each (nic, peer) once, in a stable order.
  std::map<size_t, std::set<std::pair<std::string, NicRef>>> wanted;
  for (const auto& [a, b] : pairs) {
    if (addr[a].ip == addr[b].ip) continue;
    wanted[a.host].insert({a.nic, b});
    wanted[b.host].insert({b.nic, a});
  }
  record_["pinned_neighbours"] = json::array();
  size_t pinned = 0, kept = 0;
  std::map<size_t, std::string> cmds;
  for (const auto& [host, entries] : wanted) {
    std::string& cmd = cmds[host];
    for (const auto& [nic, peer] : entries) {
      const Addr& p = addr[peer];
      // Permanent already: someone's configuration, not ocslab's; left alone and not undone.
      cmd += fmt::format(
          "if ip neigh show to {0} dev {2} nud permanent | grep -q .; then echo kept {0}; else ip neigh replace {0} "
          "lladdr {1} dev {2} nud permanent && echo pinned {0}; fi; ",
          p.ip, p.mac, shell_quote(nic));
    }
  }
  // Entries a host pinned before its command failed are recorded and undone like any other
  // ("pinned ADDR" is printed as each one is made).
  const auto res = exec_each(spec_, cmds);
  for (const auto& [host, entries] : wanted) {
    const std::string& out = res.at(host).out;
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
  throw_first_error(res);
  log(fmt::format("pinned {} neighbour entr{} between {} data NIC(s){} (Soft-RoCE then needs no ARP after a link "
                  "flap, like a hardware QP: docs/probes.md)",
                  pinned, pinned == 1 ? "y" : "ies", addr.size(),
                  kept ? fmt::format(", {} already permanent and left alone", kept) : std::string()));
}

}  // namespace ocslab::runner
