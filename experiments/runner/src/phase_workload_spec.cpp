// The `workload:` and `phase:` sections of a phase-workload spec, and the command lines the
// runner starts the ranks with (ssh: one per rank; mpirun / srun: one for the job).
#include <fmt/format.h>

#include <boost/asio/ip/address.hpp>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdint>
#include <filesystem>
#include <map>
#include <set>
#include <string_view>
#include <tuple>

#include "ocslab/emulator/lab_config.h"  // parse_link_gbps: the lab file's link rates
#include "ocslab/phase/controller_config.h"
#include "ocslab/runner/experiment_spec.h"
#include "ocslab/runner/idle_windows.h"
#include "ocslab/runner/phase_workload.h"
#include "ocslab/runner/torch_ranks.h"
#include "ocslab/workloads/shim_hooks.h"

namespace ocslab::runner {

namespace fs = std::filesystem;

const char* to_string(Launcher l) {
  switch (l) {
    case Launcher::kSsh:
      return "ssh";
    case Launcher::kMpirun:
      return "mpirun";
    case Launcher::kSrun:
      return "srun";
  }
  return "?";
}

std::vector<RailSpec> PhaseWorkloadSpec::rail_list() const {
  if (!rails.empty()) return rails;
  return {RailSpec{rail, ranks, spares}};
}

std::vector<phase::Slot> PhaseWorkloadSpec::slots_of(const RailSpec& r, const std::vector<HostEntry>& hosts) {
  std::vector<phase::Slot> out;
  std::vector<RankPlacement> all = r.nics;
  all.insert(all.end(), r.spares.begin(), r.spares.end());
  for (const auto& p : all) {
    const NicEntry* n = hosts.at(p.host).nic(p.nic);
    if (!n) throw Error(fmt::format("host {} has no NIC {}", hosts.at(p.host).name, p.nic));
    out.push_back({n->tx_port, n->rx_port});
  }
  return out;
}

std::vector<phase::Slot> PhaseWorkloadSpec::slots(const std::vector<HostEntry>& hosts) const {
  return slots_of(rail_list().front(), hosts);
}

namespace {

bool loopback(const std::string& h) { return h == "127.0.0.1" || h == "localhost" || h == "::1"; }

// What fixes the job's rank count, for the messages: the schedule, or a torch job's layout.
std::string rank_source(const PhaseWorkloadSpec& pw) {
  if (pw.framework == Framework::kTorch)
    return fmt::format("job {} ({}, phase.pp x phase.dims)", pw.layout.job, torch_layout(pw.layout));
  return "schedule " + pw.schedule.origin;
}

// A HOST or HOST:NIC of the lab (HOST alone: its first data NIC); `who` names the entry in
// the messages ("rank 2", "spare 0").
RankPlacement lab_nic(const YamlDoc& doc, const YAML::Node& e, const ExperimentSpec& spec, const std::string& who) {
  std::string text = as_string(doc, e);
  auto colon = text.find(':');
  std::string host = text.substr(0, colon);
  RankPlacement rp;
  bool found = false;
  for (size_t h = 0; h < spec.hosts.size(); ++h) {
    if (spec.hosts[h].name == host) {
      rp.host = h;
      found = true;
    }
  }
  if (!found) {
    throw config_error(doc, e, fmt::format("{}: unknown host '{}' (the lab has: {})", who, host, spec.host_names()));
  }
  const HostEntry& he = spec.hosts[rp.host];
  if (colon == std::string::npos) {
    if (he.nics.empty()) throw config_error(doc, e, fmt::format("host '{}' has no data NIC", host));
    rp.nic = he.nics.front().name;
    return rp;
  }
  rp.nic = text.substr(colon + 1);
  if (!he.nic(rp.nic)) {
    std::string known;
    for (const auto& x : he.nics) known += (known.empty() ? "" : ", ") + x.name;
    throw config_error(doc, e,
                       fmt::format("{}: host '{}' has no data NIC '{}' (it has: {})", who, host, rp.nic, known));
  }
  return rp;
}

// A rank's NIC (its placement, or its NIC on a rail) must not be a standby: in the guest a standby
// is a bond slave without an address; the rank belongs on the bond, its primary's name.
void refuse_standby(const YamlDoc& doc, const YAML::Node& e, const ExperimentSpec& spec, const RankPlacement& p,
                    const std::string& who) {
  const NicEntry* n = spec.hosts[p.host].nic(p.nic);
  if (n && !n->standby_for.empty()) {
    const std::string& host = spec.hosts[p.host].name;
    throw config_error(doc, e,
                       fmt::format("{}: {}:{} is {}'s standby NIC, which carries no rank of its own: use {}:{} (a "
                                   "standby can be a spare)",
                                   who, host, p.nic, n->standby_for, host, n->standby_for));
  }
}

// A rail's spares (phase.spares, or a rail's `spares` in phase.rails): free slots for a rank
// whose port fails, each a NIC of the lab that nothing else of the job uses (`used`: every NIC
// taken so far, by what took it), both of its ports inside switch.allow when one is given (the
// run touches no other port; without one, the allow-list is the job's slots).
std::vector<RankPlacement> parse_spares(const YamlDoc& doc, const YAML::Node& node, const ExperimentSpec& spec,
                                        std::map<std::pair<size_t, std::string>, std::string>& used) {
  if (!node.IsSequence()) throw config_error(doc, node, "spares must be a list of HOST:NIC (free slots of the rail)");
  std::vector<RankPlacement> out;
  for (const auto& e : node) {
    RankPlacement sp = lab_nic(doc, e, spec, fmt::format("spare {}", out.size()));
    const HostEntry& he = spec.hosts[sp.host];
    auto [it, fresh] = used.emplace(std::make_pair(sp.host, sp.nic), "a spare");
    if (!fresh) {
      throw config_error(
          doc, e, fmt::format("spare {}:{} is {}'s NIC already: a spare is a free slot", he.name, sp.nic, it->second));
    }
    const NicEntry* n = he.nic(sp.nic);
    for (ocs::Port p : {n->tx_port, n->rx_port}) {
      if (!spec.allow.empty() && !spec.allow.contains(p)) {
        throw config_error(doc, e,
                           fmt::format("spare {}:{} (ports {}-{}) is outside switch.allow ({}): the run may not "
                                       "touch port {}",
                                       he.name, sp.nic, n->tx_port, n->rx_port, spec.allow.to_string(), p));
      }
    }
    out.push_back(sp);
  }
  return out;
}

// The NICs the ranks' placement took (rank r's: "rank r").
std::map<std::pair<size_t, std::string>, std::string> placement_nics(const PhaseWorkloadSpec& pw) {
  std::map<std::pair<size_t, std::string>, std::string> used;
  for (size_t r = 0; r < pw.ranks.size(); ++r) used[{pw.ranks[r].host, pw.ranks[r].nic}] = fmt::format("rank {}", r);
  return used;
}

// phase.rails: [{name, nics: [HOST:NIC per rank], spares: [...]}]. Each rank's NIC on a rail is
// on the rank's host; no NIC is on two rails; the first rail's NICs are the ranks' placement NICs
// (the data NICs the ranks are started with).
void parse_rails(const YamlDoc& doc, const YAML::Node& node, const ExperimentSpec& spec, PhaseWorkloadSpec& pw) {
  if (!node.IsSequence() || node.size() == 0)
    throw config_error(doc, node, "phase.rails must be a non-empty list of {name, nics, spares}");
  std::map<std::pair<size_t, std::string>, std::string> used;
  std::set<std::string> names;
  for (const auto& r : node) {
    if (!r.IsMap()) throw config_error(doc, r, "a rail is {name, nics: [HOST:NIC per rank], spares: [HOST:NIC]}");
    only_keys(doc, r, {"name", "nics", "spares"});
    RailSpec rail;
    rail.name = as_string(doc, require(doc, r, "name"));
    if (rail.name.empty() || !names.insert(rail.name).second)
      throw config_error(doc, r["name"], fmt::format("rail name '{}' is empty or given twice", rail.name));
    const auto& nics = require(doc, r, "nics");
    if (!nics.IsSequence() || nics.size() != pw.ranks.size()) {
      throw config_error(
          doc, nics,
          fmt::format("rail {}: nics must list one HOST:NIC per rank ({} ranks)", rail.name, pw.ranks.size()));
    }
    for (const auto& e : nics) {
      const size_t rank = rail.nics.size();
      RankPlacement p = lab_nic(doc, e, spec, fmt::format("rail {} rank {}", rail.name, rank));
      refuse_standby(doc, e, spec, p, fmt::format("rail {} rank {}", rail.name, rank));
      const std::string& host = spec.hosts[p.host].name;
      if (p.host != pw.ranks[rank].host) {
        throw config_error(doc, e,
                           fmt::format("rail {}: rank {} runs on {}, but its NIC {}:{} is on another host", rail.name,
                                       rank, spec.hosts[pw.ranks[rank].host].name, host, p.nic));
      }
      if (names.size() == 1 && p.nic != pw.ranks[rank].nic) {
        throw config_error(doc, e,
                           fmt::format("rail {} (the first rail): rank {}'s NIC must be its placement NIC {}:{}, the "
                                       "one the rank is started with",
                                       rail.name, rank, host, pw.ranks[rank].nic));
      }
      auto [it, fresh] = used.emplace(std::make_pair(p.host, p.nic), fmt::format("rail {} rank {}", rail.name, rank));
      if (!fresh) throw config_error(doc, e, fmt::format("{}:{} is {}'s NIC already", host, p.nic, it->second));
      rail.nics.push_back(p);
    }
    if (const auto& sp = r["spares"]) rail.spares = parse_spares(doc, sp, spec, used);
    pw.rails.push_back(std::move(rail));
  }
}

void parse_placement(const YamlDoc& doc, const YAML::Node& wl, const ExperimentSpec& spec, PhaseWorkloadSpec& pw) {
  const int n = pw.schedule.ranks;
  if (const auto& pl = wl["placement"]) {
    if (!pl.IsSequence()) throw config_error(doc, pl, "placement must be a list of HOST or HOST:NIC, one per rank");
    if (static_cast<int>(pl.size()) != n) {
      throw config_error(doc, pl,
                         fmt::format("placement lists {} rank(s) but {} has {} ranks", pl.size(), rank_source(pw), n));
    }
    for (const auto& e : pl) {
      RankPlacement rp = lab_nic(doc, e, spec, fmt::format("rank {}", pw.ranks.size()));
      refuse_standby(doc, e, spec, rp, fmt::format("rank {}", pw.ranks.size()));
      const std::string host = spec.hosts[rp.host].name;
      for (size_t k = 0; k < pw.ranks.size(); ++k) {
        if (pw.ranks[k].host == rp.host && pw.ranks[k].nic == rp.nic) {
          throw config_error(doc, e,
                             fmt::format("ranks {} and {} both on {}:{}: every rank needs a NIC (a slot on the "
                                         "rail) of its own",
                                         k, pw.ranks.size(), host, rp.nic));
        }
      }
      pw.ranks.push_back(rp);
    }
    return;
  }
  if (static_cast<int>(spec.hosts.size()) < n) {
    throw config_error(doc, wl,
                       fmt::format("the lab has {} host(s) but {} has {} ranks: list one HOST:NIC per "
                                   "rank in workload.placement",
                                   spec.hosts.size(), rank_source(pw), n));
  }
  for (int r = 0; r < n; ++r) {
    const HostEntry& he = spec.hosts[static_cast<size_t>(r)];
    if (he.nics.empty()) throw config_error(doc, wl, fmt::format("host '{}' has no data NIC", he.name));
    pw.ranks.push_back({static_cast<size_t>(r), he.nics.front().name});
  }
}

// Every schedule group must be something the job's controller can serve.
void check_groups(const YamlDoc& doc, const YAML::Node& where, const PhaseWorkloadSpec& pw) {
  const auto& L = pw.layout;
  for (const auto& g : pw.schedule.groups) {
    std::string dim = workloads::shim_dim(g);
    if (dim == "mgmt") continue;
    if (dim != "pp") {
      bool known = std::any_of(L.dims.begin(), L.dims.end(), [&](const auto& d) { return d.name == dim; });
      if (!known) {
        throw config_error(doc, where,
                           fmt::format("{}:{}: group '{}' has kind '{}', which job {} has no dimension for ({})",
                                       pw.schedule.origin, g.line, g.name, g.kind, L.job, L.describe_digits()));
      }
      std::set<int> stages;
      for (int r : g.ranks) stages.insert(L.stage_of(r));
      if (stages.size() > 1) {
        throw config_error(doc, where,
                           fmt::format("{}:{}: group '{}' ({}) spans pipeline stages {}..{}; ranks are numbered "
                                       "stage-major ({} per stage)",
                                       pw.schedule.origin, g.line, g.name, g.kind, *stages.begin(), *stages.rbegin(),
                                       L.ranks_per_stage()));
      }
    }
  }
}

// The digit each pipeline stage must have for a group's ops to run without a reconfiguration
// (the topo_id the controller would move the rail to for it); empty for a management group.
std::map<int, int> needed_digits(const phase::JobLayout& layout, const workloads::Group& g) {
  std::map<int, int> out;
  const std::string dim = workloads::shim_dim(g);
  if (dim == "mgmt") return out;
  const int digit = layout.digit_of(dim);  // "pp" -> 0
  for (int r : g.ranks) out[layout.stage_of(r)] = digit;
  return out;
}

bool wired_for(const phase::TopoId& t, const std::map<int, int>& need) {
  return std::all_of(need.begin(), need.end(), [&](const auto& kv) { return t.digit(kv.first) == kv.second; });
}

// native mode: the one topology the rail keeps (phase.native, else the one whose circuits
// serve the most bytes of the step, the initial topology on a tie), and every group it does not
// connect must have a native_group_if interface; otherwise the schedule cannot run statically.
void pick_native(const YamlDoc& doc, const YAML::Node& ph, const YAML::Node& wl, PhaseWorkloadSpec& pw) {
  const bool wanted = std::find(pw.modes.begin(), pw.modes.end(), "native") != pw.modes.end();
  if (!wanted) {
    for (const char* k : {"native"}) {
      if (ph[k])
        throw config_error(doc, ph[k], "phase.native is the topology of the native mode: add native to workload.modes");
    }
    if (wl["native_group_if"]) {
      throw config_error(doc, wl["native_group_if"],
                         "native_group_if is for the native mode: add native to workload.modes");
    }
    return;
  }
  const auto& L = pw.layout;
  std::map<size_t, uint64_t> bytes;  // per group: bytes of its ops in one step (+1 per op: a barrier counts)
  for (const auto& op : pw.schedule.step) bytes[op.group] += op.bytes + 1;
  auto served = [&](const phase::TopoId& t) {
    uint64_t b = 0;
    for (const auto& [g, n] : bytes)
      if (wired_for(t, needed_digits(L, pw.schedule.groups[g]))) b += n;
    return b;
  };
  if (const auto& n = ph["native"]) {
    try {
      pw.native = phase::TopoId::parse(as_string(doc, n), L);
    } catch (const phase::TopologyError& e) {
      throw config_error(doc, n, e.what());
    }
  } else {
    const int digits = static_cast<int>(L.dims.size()) + 1;
    double candidates = 1;
    for (int s = 0; s < L.pp; ++s) candidates *= digits;
    if (candidates > 100000) {
      throw config_error(doc, ph,
                         fmt::format("job {} has {:.0f} possible topologies: name the native one with "
                                     "phase.native",
                                     L.job, candidates));
    }
    pw.native = pw.initial;
    uint64_t best = served(pw.native);
    std::vector<uint8_t> d(static_cast<size_t>(L.pp), 0);
    while (true) {
      phase::TopoId t(d);
      if (uint64_t b = served(t); b > best) {
        best = b;
        pw.native = t;
      }
      size_t i = 0;
      while (i < d.size() && ++d[i] == digits) d[i++] = 0;
      if (i == d.size()) break;
    }
  }
  std::vector<std::string> missing;
  auto unconnected = [&](const std::string& name) {
    pw.native_unconnected.push_back(name);
    bool given = std::any_of(pw.native_group_if.begin(), pw.native_group_if.end(),
                             [&](const auto& kv) { return kv.first == name; });
    if (!given) missing.push_back(name);
  };
  for (const auto& [g, n] : bytes) {
    const auto& grp = pw.schedule.groups[g];
    if (!wired_for(pw.native, needed_digits(L, grp))) unconnected(grp.name);
  }
  // A torch job's groups are the script's: every kind of group the layout has (pp, each
  // dimension) may carry data, and a kind is connected when every stage is wired for it.
  if (pw.framework == Framework::kTorch) {
    for (const auto& kind : torch_group_kinds(L)) {
      if (kind == "world") continue;  // the management group: never on the rail
      std::map<int, int> need;
      for (int st = 0; st < L.pp; ++st) need[st] = L.digit_of(kind);
      if (!wired_for(pw.native, need)) unconnected(kind);
    }
  }
  if (!missing.empty()) {
    std::string names;
    for (const auto& m : missing) names += (names.empty() ? "" : ", ") + m;
    throw config_error(doc, ph["native"] ? ph["native"] : wl["modes"],
                       fmt::format("native: the {} cannot be wired statically on the rail: topology {} ({}) "
                                   "leaves group(s) {} without a circuit. Give each an interface that needs no "
                                   "circuit in workload.native_group_if (e.g. {{{}: lan0}}), or choose another "
                                   "topology with phase.native",
                                   pw.framework == Framework::kTorch ? "job" : "schedule", pw.native.str(),
                                   L.describe_digits(), names, missing.front()));
  }
}

// A sweep.env variable's values: NCCL's queue-pair variables in their ranges (the verbs
// attributes they set: timeout 0..31, retry_cnt 0..7), the port-failover switch 0 or 1, any
// other variable's value in a character set a shell passes through unquoted.
void check_env_value(const YamlDoc& doc, const YAML::Node& v, const std::string& name, const std::string& value) {
  auto number_in = [&](int lo, int hi) {
    int n = 0;
    auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
    if (ec != std::errc() || end != value.data() + value.size() || n < lo || n > hi) {
      throw config_error(doc, v, fmt::format("sweep.env.{}: '{}' is not a value in {}..{}", name, value, lo, hi));
    }
  };
  if (name == kEnvIbTimeout) return number_in(0, 31);
  if (name == kEnvIbRetryCnt) return number_in(0, 7);
  if (name == kEnvIbPortFailover) return number_in(0, 1);
  const bool plain = !value.empty() && std::all_of(value.begin(), value.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || std::string_view("_.,:/+=@-").find(c) != std::string::npos;
  });
  if (!plain) {
    throw config_error(doc, v,
                       fmt::format("sweep.env.{}: '{}' is not a value the ranks' command lines can carry (letters, "
                                   "digits and _.,:/+=@- only)",
                                   name, value));
  }
}

// sweep.env: {NAME: [VALUE, ...], ...}: every combination a run of the job (in the order given).
void parse_sweep_env(const YamlDoc& doc, const YAML::Node& env, PhaseWorkloadSpec& pw) {
  if (!env.IsMap() || env.size() == 0)
    throw config_error(doc, env, "sweep.env is a map {VARIABLE: [VALUE, ...]} (e.g. {NCCL_IB_TIMEOUT: [18, 22]})");
  for (const auto& kv : env) {
    const std::string name = as_string(doc, kv.first);
    const bool word = !name.empty() && !std::isdigit(static_cast<unsigned char>(name[0])) &&
                      std::all_of(name.begin(), name.end(), [](char c) {
                        return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
                      });
    if (!word) throw config_error(doc, kv.first, fmt::format("sweep.env: '{}' is not a variable name", name));
    if (name.rfind("OCSLAB_", 0) == 0 || name.rfind("OMPI_", 0) == 0 || name.rfind("SLURM_", 0) == 0 ||
        name == "PATH" || name.rfind("LD_", 0) == 0 || name == "PYTHONPATH") {
      throw config_error(doc, kv.first,
                         fmt::format("sweep.env: {} is the runner's or the launcher's to set, not a sweep axis",
                                     name));
    }
    const YAML::Node& list = kv.second;
    if (!list.IsSequence() || list.size() == 0)
      throw config_error(doc, list, fmt::format("sweep.env.{} is a non-empty list of values", name));
    std::vector<std::string> values;
    for (const auto& v : list) {
      std::string value = as_string(doc, v);
      check_env_value(doc, v, name, value);
      if (pw.launcher == Launcher::kSrun && value.find(',') != std::string::npos) {
        throw config_error(doc, v,
                           fmt::format("sweep.env.{}: '{}' has a comma, which srun's --export cannot carry", name,
                                       value));
      }
      if (std::find(values.begin(), values.end(), value) != values.end())
        throw config_error(doc, v, fmt::format("sweep.env.{}: {} listed twice", name, value));
      values.push_back(std::move(value));
    }
    pw.sweep_env.emplace_back(name, std::move(values));
  }
}

// phase.safe_window_from: measured (the run's first mode, native, measures the windows the
// later modes' safe-window policy uses) or a previous run's windows.csv (read now: its table).
void parse_safe_window_from(const YamlDoc& doc, const YAML::Node& from, PhaseWorkloadSpec& pw) {
  if (pw.policy != phase::Policy::kSafeWindow) {
    throw config_error(doc, from,
                       fmt::format("safe_window_from is for policy safe-window (this job's policy is {})",
                                   phase::to_string(pw.policy)));
  }
  if (pw.framework == Framework::kTorch) {
    throw config_error(doc, from,
                       "safe_window_from needs a schedule's step (a torch job's windows are its learned phases.csv: "
                       "give that as phase_table)");
  }
  const std::string v = as_string(doc, from);
  if (v == "measured") {
    if (pw.modes.empty() || pw.modes.front() != "native" || pw.modes.size() < 2) {
      throw config_error(doc, from,
                         "safe_window_from: measured takes the windows of the run's native mode, which must come "
                         "first: workload.modes [native, on-demand] (or provisioning)");
    }
    pw.safe_window_from = v;
    return;
  }
  pw.safe_window_from = beside_file(doc, v);
  std::error_code ec;
  if (!fs::is_regular_file(pw.safe_window_from, ec)) {
    throw config_error(doc, from,
                       fmt::format("safe_window_from: {} is not a file (want `measured`, or a previous run's "
                                   "windows.csv)",
                                   pw.safe_window_from));
  }
  try {
    pw.windows = windows_table(pw.schedule, read_group_windows(pw.safe_window_from));
  } catch (const ConfigError& e) {
    throw config_error(doc, from, fmt::format("safe_window_from: {}", e.what()));
  }
}

// sweep.link_gbps: [GBPS, ...]: each rate once, above 0 (an axis of rates; the lab's own, uncapped
// or not, is the run without the axis); only a virtual lab's emulator can set it.
void parse_sweep_link_gbps(const YamlDoc& doc, const YAML::Node& list, const ExperimentSpec& spec,
                           PhaseWorkloadSpec& pw) {
  if (!list.IsSequence() || list.size() == 0)
    throw config_error(doc, list, "sweep.link_gbps is a non-empty list of link rates in Gbit/s");
  for (const auto& v : list) {
    const double gbps = emu::parse_link_gbps(doc, v, "sweep.link_gbps");
    if (gbps == 0) throw config_error(doc, v, "sweep.link_gbps: 0 is no cap, not a rate (leave the axis out for it)");
    if (std::find(pw.sweep_link_gbps.begin(), pw.sweep_link_gbps.end(), gbps) != pw.sweep_link_gbps.end())
      throw config_error(doc, v, fmt::format("sweep.link_gbps: {:g} Gbit/s listed twice", gbps));
    pw.sweep_link_gbps.push_back(gbps);
  }
  if (spec.vlab.empty()) {
    throw config_error(doc, list,
                       fmt::format("sweep.link_gbps sets the emulator's link rate, which only a virtual lab has ({}): "
                                   "cap a real lab's hosts with tc instead (docs/emulator.md)",
                                   spec.switch_url.empty() ? std::string("the spec's switch") : spec.switch_url));
  }
}

// sweep: {switching_ms: [...], link_gbps: [...], env: {...}, outage_ms: [...], repetitions: N, inject: BOOL}.
void parse_sweep(const YamlDoc& doc, const YAML::Node& sw, const ExperimentSpec& spec, PhaseWorkloadSpec& pw) {
  if (!sw.IsMap()) {
    throw config_error(
        doc, sw,
        "sweep is a map {switching_ms: [MS, ...], link_gbps: [GBPS, ...], env: {VARIABLE: [VALUE, ...]}, "
        "outage_ms: [MS, ...], repetitions: N, inject: BOOL, order: random | as-listed}");
  }
  only_keys(doc, sw, {"switching_ms", "link_gbps", "env", "outage_ms", "repetitions", "inject", "order"});
  if (const auto& o = sw["order"]) {
    const std::string v = as_string(doc, o);
    if (v != "random" && v != "as-listed")
      throw config_error(doc, o, fmt::format("sweep.order must be 'random' (seeded by `seed`) or 'as-listed', got '{}'", v));
    pw.sweep_shuffled = v == "random";
  }
  if (!sw["switching_ms"] && !sw["link_gbps"] && !sw["env"] && !sw["outage_ms"])
    throw config_error(doc, sw, "sweep needs an axis: switching_ms, link_gbps, env or outage_ms");
  if (const auto& env = sw["env"]) parse_sweep_env(doc, env, pw);
  if (const auto& rates = sw["link_gbps"]) parse_sweep_link_gbps(doc, rates, spec, pw);
  if (const auto& list = sw["outage_ms"]) {
    if (!list.IsSequence() || list.size() == 0)
      throw config_error(doc, list, "sweep.outage_ms is a non-empty list of outage lengths in ms");
    for (const auto& v : list) {
      double ms = as_double(doc, v);
      if (!(ms > 0 && ms <= kMaxOutageMs) || ms >= pw.timeout_s * 1000.0) {
        throw config_error(doc, v,
                           fmt::format("sweep.outage_ms: {} is not an outage the run allows (above 0, at most {} ms "
                                       "and shorter than workload.timeout_s, {} s)",
                                       ms, kMaxOutageMs, pw.timeout_s));
      }
      if (std::find(pw.sweep_outage_ms.begin(), pw.sweep_outage_ms.end(), ms) != pw.sweep_outage_ms.end())
        throw config_error(doc, v, fmt::format("sweep.outage_ms: {} ms listed twice", ms));
      pw.sweep_outage_ms.push_back(ms);
    }
  }
  if (sw["repetitions"]) pw.repetitions = int_in(doc, sw["repetitions"], 1, 100, "repetitions");
  if (sw["inject"]) pw.inject_delay = as_bool(doc, sw["inject"]);
  const auto& list = sw["switching_ms"];
  if (!list) return;
  if (!list.IsSequence() || list.size() == 0)
    throw config_error(doc, list, "sweep.switching_ms is a non-empty list of switching times in ms");
  for (const auto& v : list) {
    double ms = as_double(doc, v);
    if (!(ms >= 0 && ms <= 60000))
      throw config_error(doc, v, fmt::format("sweep.switching_ms: {} is not a switching time in [0, 60000] ms", ms));
    if (std::find(pw.sweep_switching_ms.begin(), pw.sweep_switching_ms.end(), ms) != pw.sweep_switching_ms.end())
      throw config_error(doc, v, fmt::format("sweep.switching_ms: {} ms listed twice", ms));
    pw.sweep_switching_ms.push_back(ms);
  }
  if (spec.vlab.empty() && !pw.inject_delay) {
    throw config_error(doc, sw,
                       fmt::format("a switching-latency sweep cannot set the switching time of a real switch ({}): "
                                   "add `inject: true` to sweep (the runner's controller then holds every "
                                   "reconfiguration for the point's time on top of the switch's own)",
                                   spec.switch_url.empty() ? std::string("the spec's switch") : spec.switch_url));
  }
  if (std::all_of(pw.modes.begin(), pw.modes.end(), [](const auto& m) { return m == "native"; }))
    throw config_error(doc, list, "a switching-time sweep needs on-demand or provisioning in workload.modes (native "
                                  "never switches)");
}

void check_launcher(const YamlDoc& doc, const YAML::Node& where, const ExperimentSpec& spec,
                    const PhaseWorkloadSpec& pw) {
  if (pw.launcher == Launcher::kSsh) return;
  if (!pw.launcher_host.empty()) {
    bool known = false;
    std::string names;
    for (const auto& h : spec.hosts) {
      known = known || h.name == pw.launcher_host;
      names += (names.empty() ? "" : ", ") + h.name;
    }
    if (!known) {
      throw config_error(doc, where["host"] ? where["host"] : where,
                         fmt::format("launcher.host: unknown host '{}' (the lab has: {})", pw.launcher_host, names));
    }
  }
  // One command line: hosts in blocks (rank order = placement order), one --if for all.
  std::vector<size_t> order;
  std::map<size_t, int> count;
  for (const auto& r : pw.ranks) {
    if (order.empty() || order.back() != r.host) {
      if (count.count(r.host)) {
        throw config_error(doc, where,
                           fmt::format("{} places ranks host by host: host '{}' must hold consecutive ranks in "
                                       "workload.placement",
                                       to_string(pw.launcher), spec.hosts[r.host].name));
      }
      order.push_back(r.host);
    }
    ++count[r.host];
  }
  if (pw.launcher == Launcher::kSrun) {
    int per = count[order.front()];
    for (auto h : order) {
      if (count[h] != per) {
        throw config_error(doc, where,
                           fmt::format("srun --ntasks-per-node needs the same number of ranks on every host "
                                       "({} has {}, {} has {})",
                                       spec.hosts[order.front()].name, per, spec.hosts[h].name, count[h]));
      }
    }
  }
  if (pw.pass_if) {
    for (const auto& r : pw.ranks) {
      if (r.nic != pw.ranks.front().nic) {
        throw config_error(doc, where,
                           fmt::format("{} gives every rank the same --if: ranks use NICs {} and {}",
                                       to_string(pw.launcher), pw.ranks.front().nic, r.nic));
      }
    }
  }
}

}  // namespace

namespace {

void parse_modes(const YamlDoc& doc, const YAML::Node& wl, PhaseWorkloadSpec& pw) {
  pw.modes =
      wl["modes"] ? as_strings(doc, wl["modes"], "modes") : std::vector<std::string>{"on-demand", "provisioning"};
  if (pw.modes.empty())
    throw config_error(doc, wl["modes"], "modes must name at least one of native, on-demand, provisioning");
  for (size_t i = 0; i < pw.modes.size(); ++i) {
    const auto& m = pw.modes[i];
    if (m != "native" && m != "on-demand" && m != "provisioning") {
      throw config_error(doc, wl["modes"],
                         fmt::format("unknown phase mode '{}' (known: native, on-demand, provisioning)", m));
    }
    if (std::find(pw.modes.begin(), pw.modes.begin() + static_cast<long>(i), m) !=
        pw.modes.begin() + static_cast<long>(i)) {
      throw config_error(doc, wl["modes"], fmt::format("phase mode '{}' listed twice", m));
    }
  }
}

void parse_launcher(const YamlDoc& doc, const YAML::Node& wl, PhaseWorkloadSpec& pw) {
  if (const auto& l = wl["launcher"]) {
    std::string name;
    // (YAML::Node assignment would write into the node it refers to: pick the node instead.)
    const YAML::Node name_node = l.IsMap() ? require(doc, l, "name") : l;
    if (l.IsMap()) {
      only_keys(doc, l, {"name", "program", "args", "host"});
      name = as_string(doc, name_node);
      if (l["program"]) pw.launcher_program = as_string(doc, l["program"]);
      if (l["args"]) pw.launcher_args = as_strings(doc, l["args"], "launcher.args");
      if (l["host"]) pw.launcher_host = as_string(doc, l["host"]);
    } else {
      name = as_string(doc, l);
    }
    if (name == "ssh") {
      pw.launcher = Launcher::kSsh;
      if (l.IsMap() && (l["program"] || l["args"] || l["host"])) {
        throw config_error(doc, l,
                           "the ssh launcher takes no program, args or host (the runner's SSH sessions start the "
                           "ranks)");
      }
    } else if (name == "mpirun") {
      pw.launcher = Launcher::kMpirun;
    } else if (name == "srun") {
      pw.launcher = Launcher::kSrun;
    } else {
      throw config_error(doc, name_node, fmt::format("unknown launcher '{}' (known: ssh, mpirun, srun)", name));
    }
    if (pw.launcher_program.empty() && pw.launcher != Launcher::kSsh) pw.launcher_program = name;
  }
  if (wl["shared_dir"]) {
    if (pw.launcher == Launcher::kSsh) {
      throw config_error(doc, wl["shared_dir"],
                         "shared_dir is for the mpirun and srun launchers (ssh fetches each rank's files)");
    }
    pw.shared_dir = as_string(doc, wl["shared_dir"]);
  }
}

// group_if / native_group_if: a map GROUP: NIC over the schedule's groups (collbench), or
// KIND: NIC over the layout's group kinds (torch: the script's groups are only known at run time).
std::vector<std::pair<std::string, std::string>> parse_group_map(const YamlDoc& doc, const YAML::Node& gi,
                                                                 const PhaseWorkloadSpec& pw, const char* key) {
  std::vector<std::pair<std::string, std::string>> out;
  const bool torch = pw.framework == Framework::kTorch;
  if (!gi.IsMap()) {
    throw config_error(doc, gi,
                       fmt::format("{} is a map {}: NIC (e.g. {{world: lan0}})", key, torch ? "KIND" : "GROUP"));
  }
  std::vector<std::string> names;
  if (torch) {
    names = torch_group_kinds(pw.layout);
  } else {
    for (const auto& x : pw.schedule.groups) names.push_back(x.name);
  }
  for (const auto& kv : gi) {
    std::string g = as_string(doc, kv.first), nic = as_string(doc, kv.second);
    if (std::find(names.begin(), names.end(), g) == names.end()) {
      std::string list;
      for (const auto& x : names) list += (list.empty() ? "" : ", ") + x;
      if (torch) {
        throw config_error(doc, kv.first,
                           fmt::format("{}: a torch job's groups are named by kind, and '{}' is none of the layout's "
                                       "(it has: {})",
                                       key, g, list));
      }
      throw config_error(
          doc, kv.first,
          fmt::format("{}: schedule {} has no group '{}' (it has: {})", key, pw.schedule.origin, g, list));
    }
    if (nic.empty() || nic.find_first_of(" \t/'\"=") != std::string::npos)
      throw config_error(doc, kv.second, fmt::format("{}: '{}' is not an interface name", key, nic));
    out.emplace_back(g, nic);
  }
  return out;
}

void parse_group_if(const YamlDoc& doc, const YAML::Node& wl, PhaseWorkloadSpec& pw) {
  if (const auto& gi = wl["group_if"]) pw.group_if = parse_group_map(doc, gi, pw, "group_if");
  if (const auto& gi = wl["native_group_if"]) pw.native_group_if = parse_group_map(doc, gi, pw, "native_group_if");
}

// pin_neighbours and rxe: host preparation over the runner's SSH sessions.
void parse_host_prep(const YamlDoc& doc, const YAML::Node& wl, PhaseWorkloadSpec& pw) {
  if (wl["pin_neighbours"]) pw.pin_neighbours = as_bool(doc, wl["pin_neighbours"]);
  if (wl["rxe"]) {
    pw.rxe = as_strings(doc, wl["rxe"], "rxe");
    for (const auto& nic : pw.rxe) {
      if (nic.empty() || nic.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-.") !=
                             std::string::npos)
        throw config_error(doc, wl["rxe"], fmt::format("rxe: '{}' is not an interface name", nic));
    }
  }
}

// workload.framework and, for torch, workload.script. A torch job's ranks run the script, so
// what only a schedule-driven collective workload reads is refused rather than ignored.
void parse_framework(const YamlDoc& doc, const YAML::Node& wl, PhaseWorkloadSpec& pw) {
  if (const auto& f = wl["framework"]) {
    const std::string name = as_string(doc, f);
    if (name == "torch") {
      pw.framework = Framework::kTorch;
    } else if (name != "collbench") {
      throw config_error(doc, f,
                         fmt::format("workload.framework: unknown framework '{}' (known: collbench, torch)", name));
    }
  }
  if (pw.framework == Framework::kCollbench) {
    if (wl["script"]) {
      throw config_error(doc, wl["script"],
                         "workload.script is the training script of `framework: torch` (the collective workloads "
                         "run workload.schedule)");
    }
    return;
  }
  for (const char* k : {"schedule", "program", "pass_if"}) {
    if (wl[k]) {
      throw config_error(doc, wl[k],
                         fmt::format("workload.{} is for the collective workloads (framework collbench): a torch job "
                                     "runs workload.script with workload.args, its groups are the script's own",
                                     k));
    }
  }
  // The backend's own default (OCSLAB_PROFILE_STEPS unset) is Opus's 5.
  pw.profile_steps = 0;
  const auto& sc = wl["script"];
  if (!sc) throw config_error(doc, wl, "workload.script is missing: the training script a torch job runs");
  pw.script = resolve_path(doc, as_string(doc, sc));
  if (pw.script.empty()) throw config_error(doc, sc, "workload.script must not be empty");
  pw.program = kTorchPython;
  pw.pass_if = false;
}

// program, pass_if and the schedule of the collective workloads.
void parse_collbench(const YamlDoc& doc, const YAML::Node& wl, PhaseWorkloadSpec& pw) {
  if (wl["program"]) pw.program = as_string(doc, wl["program"]);
  if (pw.program.empty()) throw config_error(doc, wl["program"], "program must not be empty");
  pw.pass_if = fs::path(pw.program).filename().string() == "ocslab-collbench-verbs";
  if (wl["pass_if"]) pw.pass_if = as_bool(doc, wl["pass_if"]);

  const auto& sched = require(doc, wl, "schedule");
  pw.schedule_path = resolve_path(doc, as_string(doc, sched));
  try {
    pw.schedule = workloads::load_schedule(pw.schedule_path);
  } catch (const Error& e) {
    throw config_error(doc, sched, std::string("the schedule is not valid: ") + e.what());
  }
}

// workload: everything but the placement (parsed once phase: gave the layout).
void parse_workload(const YamlDoc& doc, const YAML::Node& wl, PhaseWorkloadSpec& pw) {
  if (!wl.IsMap())
    throw config_error(doc, wl, "workload must be a map (program, schedule, modes, placement, launcher, ...)");
  only_keys(
      doc, wl,
      {"framework", "script", "program", "schedule", "modes", "placement", "launcher", "args", "port", "profile_steps",
       "timeout_s", "pass_if", "shared_dir", "group_if", "native_group_if", "pin_neighbours", "rxe"});
  parse_framework(doc, wl, pw);
  if (pw.framework == Framework::kCollbench) parse_collbench(doc, wl, pw);
  parse_modes(doc, wl, pw);
  if (wl["args"]) pw.args = as_strings(doc, wl["args"], "args");
  if (wl["port"]) pw.rendezvous_port = int_in(doc, wl["port"], 1, 65535, "port");
  if (wl["profile_steps"]) pw.profile_steps = int_in(doc, wl["profile_steps"], 1, 1000, "profile_steps");
  if (wl["timeout_s"]) pw.timeout_s = int_in(doc, wl["timeout_s"], 1, 86400, "timeout_s");
  parse_launcher(doc, wl, pw);
  // A torch job's group kinds come from the layout: parsed after phase: (parse_phase_workload).
  if (pw.framework == Framework::kCollbench) parse_group_if(doc, wl, pw);
  parse_host_prep(doc, wl, pw);
}

// phase: job, pp, dims (validated against the schedule's rank count), initial topology.
void parse_layout(const YamlDoc& doc, const YAML::Node& ph, const ExperimentSpec& spec, PhaseWorkloadSpec& pw) {
  pw.layout.job = ph["job"] ? as_string(doc, ph["job"]) : spec.name;
  const auto& pp = require(doc, ph, "pp");
  pw.layout.pp = int_in(doc, pp, 1, 1000, "pp");
  if (const auto& dims = ph["dims"]) {
    if (!dims.IsSequence()) throw config_error(doc, dims, "dims is a list of {name, size}");
    for (const auto& d : dims) {
      if (!d.IsMap()) throw config_error(doc, d, "a dimension is {name: NAME, size: N}");
      only_keys(doc, d, {"name", "size"});
      pw.layout.dims.push_back(
          {as_string(doc, require(doc, d, "name")), int_in(doc, require(doc, d, "size"), 1, 1 << 20, "size")});
    }
  }
  try {
    pw.layout.validate();
  } catch (const phase::TopologyError& e) {
    throw config_error(doc, pp, e.what());
  }
  if (pw.framework == Framework::kTorch) pw.schedule.ranks = pw.layout.ranks();  // no schedule: the layout's
  if (pw.layout.ranks() != pw.schedule.ranks) {
    throw config_error(doc, pp,
                       fmt::format("job {} has {} ranks (pp {} x {} per stage) but schedule {} has {}", pw.layout.job,
                                   pw.layout.ranks(), pw.layout.pp, pw.layout.ranks_per_stage(), pw.schedule.origin,
                                   pw.schedule.ranks));
  }
  if (const auto& init = ph["initial"]) {
    try {
      pw.initial = phase::TopoId::parse(as_string(doc, init), pw.layout);
    } catch (const phase::TopologyError& e) {
      throw config_error(doc, init, e.what());
    }
  } else {
    pw.initial = phase::TopoId::uniform(pw.layout, pw.layout.dims.empty() ? 0 : 1);
  }
}

// How the ranks reach the runner's controller: phase.controller, the QEMU host in a virtual
// lab, loopback when every rank is local. And, without phase.listen, the one address the
// controller binds: the one the ranks reach, never every address.
void pick_controller_host(const YamlDoc& doc, const YAML::Node& ph, const ExperimentSpec& spec, PhaseWorkloadSpec& pw) {
  const bool listen_given = static_cast<bool>(ph["listen"]);
  if (ph["controller"]) {
    pw.controller_host = as_string(doc, ph["controller"]);
    if (!listen_given) {
      boost::system::error_code ec;
      boost::asio::ip::make_address(pw.controller_host, ec);
      if (ec) {
        throw config_error(doc, ph["controller"],
                           fmt::format("phase.controller '{}' is a name: give phase.listen ADDRESS:PORT, the "
                                       "address of this machine the controller binds (it never binds every address "
                                       "by default)",
                                       pw.controller_host));
      }
      pw.listen_host = pw.controller_host;
    }
  } else if (!spec.vlab.empty()) {
    // QEMU user networking: the guests' way to the runner's machine is 10.0.2.2, which QEMU
    // turns into a connection from its own process to the runner's loopback.
    pw.controller_host = "10.0.2.2";
    if (!listen_given) pw.listen_host = "127.0.0.1";
  } else {
    bool all_local = pw.launcher == Launcher::kSsh;
    for (const auto& r : pw.ranks) all_local = all_local && loopback(spec.hosts[r.host].ssh_host);
    if (!all_local) {
      throw config_error(doc, ph,
                         "phase.controller (the address the ranks reach the runner's machine at) is needed when "
                         "the ranks run on other machines");
    }
    pw.controller_host = "127.0.0.1";
    if (!listen_given) pw.listen_host = "127.0.0.1";
  }
}

// A torch job whose ranks run on this machine (loopback hosts, or a virtual lab's guests, which
// get the runner's copy) needs the script here; on real hosts it is theirs to have.
void check_script_here(const YamlDoc& doc, const YAML::Node& where, const ExperimentSpec& spec,
                       const PhaseWorkloadSpec& pw) {
  bool here = !spec.vlab.empty() || pw.launcher == Launcher::kSsh;
  for (const auto& r : pw.ranks) here = here && (!spec.vlab.empty() || loopback(spec.hosts[r.host].ssh_host));
  std::error_code ec;
  if (here && !fs::is_regular_file(pw.script, ec)) {
    throw config_error(doc, where,
                       fmt::format("workload.script: {} is not a file on this machine (the ranks run here{})",
                                   pw.script, spec.vlab.empty() ? "" : ": the virtual lab's guests get this copy"));
  }
}

}  // namespace

namespace {

// phase.detect_nic: {down_ms}. Each rail NIC's host must run a heartbeat probe (what says how far
// its stream has come) and its own link must be read by a carrier or firmware probe of the spec
// (its host among the probe's hosts, its link interface among the probe's interfaces when they
// are listed); after the rails are parsed.
void parse_detect_nic(const YamlDoc& doc, const YAML::Node& d, const ExperimentSpec& spec, PhaseWorkloadSpec& pw) {
  if (!d.IsMap()) throw config_error(doc, d, "phase.detect_nic is {down_ms: MS} (a NIC down that long under its circuits has failed)");
  only_keys(doc, d, {"down_ms"});
  phase::NicWatchOptions o;
  if (d["down_ms"]) o.down_for = std::chrono::milliseconds(int_in(doc, d["down_ms"], 1, 600'000, "down_ms"));
  for (const auto& rail : pw.rail_list()) {
    for (const auto* list : {&rail.nics, &rail.spares}) {
      for (const auto& p : *list) {
        const HostEntry& h = spec.hosts[p.host];
        const std::string itf = h.link_interface(p.nic);
        bool read = false;
        for (const auto& probe : spec.probes) {
          if (probe.name != "carrier" && probe.name != "firmware") continue;
          if (!probe.hosts.empty() && std::find(probe.hosts.begin(), probe.hosts.end(), h.name) == probe.hosts.end())
            continue;
          // The firmware probe reads an RDMA device's port: never a bond member's.
          if (probe.name == "firmware" && itf != p.nic) continue;
          if (probe.interfaces.empty() ||
              std::find(probe.interfaces.begin(), probe.interfaces.end(), itf) != probe.interfaces.end())
            read = true;
        }
        const bool heard = std::any_of(spec.probes.begin(), spec.probes.end(), [&](const ProbeSpec& probe) {
          return probe.name == "heartbeat" &&
                 (probe.hosts.empty() || std::find(probe.hosts.begin(), probe.hosts.end(), h.name) != probe.hosts.end());
        });
        if (!heard)
          throw config_error(doc, d,
                             fmt::format("phase.detect_nic: no heartbeat probe on {} (probes: {{heartbeat: {{interval_ms: "
                                         "20}}}}): a NIC is judged only as far as its host's stream has been heard, "
                                         "and a host's carrier rows come only when a link changes",
                                         h.name));
        if (!read)
          throw config_error(doc, d,
                             fmt::format("phase.detect_nic: nothing reads the link of {}:{} (interface {}) on rail {}: "
                                         "add a carrier probe on {} (probes: {{carrier: ...}}){}",
                                         h.name, p.nic, itf, rail.name, h.name,
                                         itf == p.nic ? std::string(" or a firmware probe")
                                                      : fmt::format(" whose interfaces include {}", itf)));
      }
    }
  }
  pw.detect_nic = o;
}

}  // namespace

PhaseWorkloadSpec parse_phase_workload(const YamlDoc& doc, const ExperimentSpec& spec) {
  PhaseWorkloadSpec pw;
  const auto& root = doc.root;
  const auto& wl = require(doc, root, "workload");
  parse_workload(doc, wl, pw);
  const auto& ph = require(doc, root, "phase");
  if (!ph.IsMap()) throw config_error(doc, ph, "phase must be a map (job, pp, dims, initial, ...)");
  only_keys(doc, ph,
            {"job", "pp", "dims", "initial", "native", "settle_ms", "rail", "listen", "controller", "ack_timeout_ms",
             "max_retries", "policy", "allocator", "phase_table", "switch_time_ms", "spares", "detect", "detect_nic",
             "rails", "safe_window_from"});
  parse_layout(doc, ph, spec, pw);
  if (pw.framework == Framework::kTorch) parse_group_if(doc, wl, pw);
  if (ph["rail"]) pw.rail = as_string(doc, ph["rail"]);
  if (const auto& l = ph["listen"]) std::tie(pw.listen_host, pw.listen_port) = as_host_port(doc, l, "listen");
  if (ph["ack_timeout_ms"]) pw.ack_timeout_ms = int_in(doc, ph["ack_timeout_ms"], 1, 3'600'000, "ack_timeout_ms");
  if (ph["settle_ms"]) pw.settle_ms = int_in(doc, ph["settle_ms"], 0, 600'000, "settle_ms");
  if (ph["max_retries"]) pw.max_retries = int_in(doc, ph["max_retries"], 0, 100, "max_retries");
  const auto& from = ph["safe_window_from"];
  auto policy = phase::parse_policy_config(doc, ph, static_cast<bool>(from));  // before anything is touched
  pw.policy = policy.policy;
  pw.allocator = policy.allocator;
  pw.phase_table = policy.phase_table;
  pw.switch_time_ms = policy.switch_time_ms;
  if (from) {
    parse_safe_window_from(doc, from, pw);
  } else if (pw.policy == phase::Policy::kSafeWindow) {
    pw.windows = phase::PhaseWindows::load(pw.phase_table);
  }
  if (pw.framework == Framework::kCollbench) check_groups(doc, require(doc, wl, "schedule"), pw);
  pick_native(doc, ph, wl, pw);
  if (const auto& sw = root["sweep"]) parse_sweep(doc, sw, spec, pw);
  parse_placement(doc, wl, spec, pw);
  if (const auto& rails = ph["rails"]) {
    for (const char* k : {"rail", "spares"}) {
      if (ph[k])
        throw config_error(doc, ph[k], fmt::format("phase.{} and phase.rails: give it per rail in phase.rails", k));
    }
    parse_rails(doc, rails, spec, pw);
  } else if (const auto& sp = ph["spares"]) {
    auto used = placement_nics(pw);
    pw.spares = parse_spares(doc, sp, spec, used);
  }
  if (const auto& d = ph["detect"]) pw.detect = phase::parse_detect_config(doc, d);
  if (const auto& d = ph["detect_nic"]) parse_detect_nic(doc, d, spec, pw);
  check_launcher(doc, wl["launcher"] ? wl["launcher"] : wl, spec, pw);
  pick_controller_host(doc, ph, spec, pw);
  if (pw.framework == Framework::kTorch) check_script_here(doc, wl["script"], spec, pw);
  return pw;
}

namespace {

// What every rank's command line ends with, however it is started: the phase-control flags
// (none in native mode: no controller, the groups without a circuit on their
// native_group_if interface), --if, the per-group interfaces, the timeout, the spec's args.
void append_rank_options(std::vector<std::string>& a, const PhaseWorkloadSpec& spec, const RankLaunch& l,
                         const std::string& nic) {
  const bool native = l.mode == "native";
  if (!native) a.insert(a.end(), {"--controller", l.controller, "--job", l.job, "--phase-mode", l.mode});
  if (!l.token_file.empty()) {  // the token itself never goes into argv; it guards both doors
    if (!native) a.insert(a.end(), {"--controller-token-file", l.token_file});
    a.insert(a.end(), {"--rendezvous-token-file", l.token_file});
  }
  if (l.mode == "provisioning") a.insert(a.end(), {"--profile-steps", std::to_string(spec.profile_steps)});
  if (spec.pass_if) a.insert(a.end(), {"--if", nic});
  for (const auto& [g, n] : spec.group_if) a.insert(a.end(), {"--group-if", g + "=" + n});
  if (native) {
    for (const auto& [g, n] : spec.native_group_if) a.insert(a.end(), {"--group-if", g + "=" + n});
  }
  a.insert(a.end(), {"--timeout-s", std::to_string(spec.timeout_s)});
  a.insert(a.end(), spec.args.begin(), spec.args.end());
}

}  // namespace

std::vector<bool> phase_starts(const PhaseWorkloadSpec& pw) {
  const auto& s = pw.schedule;
  std::vector<bool> starts(s.step.size(), false);
  phase::TopoId t = pw.initial;
  for (int pass = 0; pass < 2; ++pass) {
    for (size_t i = 0; i < s.step.size(); ++i) {
      const auto need = needed_digits(pw.layout, s.group_of(s.step[i]));
      const bool change = !wired_for(t, need);
      if (pass == 1) starts[i] = change;
      for (const auto& [stage, digit] : need) t.set(stage, digit);
    }
  }
  return starts;
}

std::string env_label(const std::vector<std::pair<std::string, std::string>>& env) {
  std::string out;
  for (const auto& [name, value] : env) {
    std::string n = name;
    for (const char* prefix : {"NCCL_IB_", "NCCL_"}) {
      if (n.rfind(prefix, 0) == 0 && n.size() > std::string_view(prefix).size()) {
        n = n.substr(std::string_view(prefix).size());
        break;
      }
    }
    std::string part;
    for (char c : n + value) {
      const bool keep = std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-';
      part += keep ? static_cast<char>(std::tolower(static_cast<unsigned char>(c))) : '_';
    }
    out += (out.empty() ? "" : ".") + part;
  }
  return out;
}

std::vector<std::string> rank_argv(const PhaseWorkloadSpec& spec, const std::vector<HostEntry>& hosts, int rank,
                                   const RankLaunch& l) {
  if (spec.framework == Framework::kTorch) return torch_rank_argv(spec, rank, l);
  const RankPlacement& p = spec.ranks.at(static_cast<size_t>(rank));
  std::vector<std::string> a;
  if (!l.env.empty()) {  // the run's sweep.env point, through env(1): the ranks' own shell is not asked
    a.push_back("env");
    for (const auto& [k, v] : l.env) a.push_back(k + "=" + v);
  }
  a.insert(a.end(), {l.program,
                                "--schedule",
                                l.schedule,
                                "--rank",
                                std::to_string(rank),
                                "--nranks",
                                std::to_string(spec.schedule.ranks),
                                "--rendezvous",
                                l.rendezvous,
                                "--host",
                                hosts.at(p.host).name,
                                "--output",
                                l.output_dir});
  append_rank_options(a, spec, l, p.nic);
  return a;
}

std::vector<std::string> launcher_argv(const PhaseWorkloadSpec& spec, const std::vector<HostEntry>& hosts,
                                       const RankLaunch& l) {
  if (spec.launcher == Launcher::kSsh) throw Error("launcher_argv: the ssh launcher starts one command per rank");
  // Hosts as the launcher reaches them: from a host of the lab (launcher.host) by their names,
  // the cluster's own (Slurm's node names); from the runner's machine as the runner does.
  std::vector<std::pair<std::string, int>> blocks;  // host, ranks on it
  size_t last = SIZE_MAX;
  for (const auto& r : spec.ranks) {
    const HostEntry& e = hosts.at(r.host);
    const std::string& h = !spec.launcher_host.empty() || e.ssh_host.empty() ? e.name : e.ssh_host;
    if (blocks.empty() || last != r.host) blocks.push_back({h, 0});
    last = r.host;
    ++blocks.back().second;
  }
  const int n = spec.schedule.ranks;
  std::vector<std::string> a = {spec.launcher_program};
  if (spec.launcher == Launcher::kMpirun) {
    std::string hl;
    for (const auto& [h, k] : blocks) hl += (hl.empty() ? "" : ",") + fmt::format("{}:{}", h, k);
    a.insert(a.end(), {"-np", std::to_string(n), "-H", hl, "--map-by", "slot"});
  } else {
    std::string nl;
    for (const auto& [h, k] : blocks) nl += (nl.empty() ? "" : ",") + h;
    if (!l.job_id.empty()) a.push_back("--jobid=" + l.job_id);
    a.insert(a.end(), {"--nodes=" + std::to_string(blocks.size()), "--ntasks=" + std::to_string(n),
                       "--ntasks-per-node=" + std::to_string(blocks.front().second), "--nodelist=" + nl,
                       "--distribution=block"});
  }
  // The run's sweep.env point, exported to every rank by the launcher itself.
  if (!l.env.empty() && spec.launcher == Launcher::kMpirun) {
    for (const auto& [k, v] : l.env) a.insert(a.end(), {"-x", k + "=" + v});
  } else if (!l.env.empty()) {
    std::string exports = "--export=ALL";
    for (const auto& [k, v] : l.env) exports += "," + k + "=" + v;
    a.push_back(exports);
  }
  a.insert(a.end(), l.launcher_args.begin(), l.launcher_args.end());
  a.insert(a.end(), spec.launcher_args.begin(), spec.launcher_args.end());
  if (spec.framework == Framework::kTorch) {
    auto tail = torch_launcher_tail(spec, l);
    a.insert(a.end(), tail.begin(), tail.end());
    return a;
  }
  // The program takes rank and world size from the launcher's environment (OMPI_COMM_WORLD_RANK,
  // SLURM_PROCID), and its host label from the machine's hostname.
  a.insert(a.end(), {l.program, "--schedule", l.schedule, "--nranks", std::to_string(n), "--rendezvous", l.rendezvous,
                     "--output", l.output_dir});
  append_rank_options(a, spec, l, spec.ranks.front().nic);
  return a;
}

std::vector<std::string> salloc_argv(const PhaseWorkloadSpec& spec, const std::vector<HostEntry>& hosts,
                                     const std::string& job_name, int minutes) {
  std::vector<std::string> nodes;
  std::map<std::string, int> per;
  for (const auto& r : spec.ranks) {
    const std::string& n = hosts.at(r.host).name;
    if (per[n]++ == 0) nodes.push_back(n);
  }
  std::string nl;
  for (const auto& n : nodes) nl += (nl.empty() ? "" : ",") + n;
  return {"salloc",
          "--no-shell",
          "--job-name=" + job_name,
          "--nodes=" + std::to_string(nodes.size()),
          "--nodelist=" + nl,
          "--ntasks-per-node=" + std::to_string(per[nodes.front()]),
          "--time=" + std::to_string(minutes),
          "--immediate=60"};
}

}  // namespace ocslab::runner
