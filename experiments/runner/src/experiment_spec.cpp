#include "ocslab/runner/experiment_spec.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <regex>
#include <set>
#include <tuple>

#include "ocslab/common/ifname.h"
#include "ocslab/common/text.h"
#include "ocslab/emulator/lab_config.h"
#include "ocslab/ocsctl/credentials.h"
#include "ocslab/ocsctl/mapping.h"
#include "ocslab/ocsctl/switch_url.h"
#include "ocslab/runner/phase_workload.h"
#include "ocslab/vlab/lab_spec.h"

namespace ocslab::runner {

namespace fs = std::filesystem;

const NicEntry* HostEntry::nic(const std::string& n) const {
  for (const auto& x : nics) {
    if (x.name == n) return &x;
  }
  return nullptr;
}

std::string HostEntry::link_interface(const std::string& n) const {
  for (const auto& x : nics) {
    if (x.standby_for == n) return n + "p";
  }
  return n;
}

std::string ExperimentSpec::host_names() const {
  std::string known;
  for (const auto& x : hosts) known += (known.empty() ? "" : ", ") + x.name;
  return known;
}

size_t ExperimentSpec::host_index(const std::string& n) const {
  for (size_t i = 0; i < hosts.size(); ++i) {
    if (hosts[i].name == n) return i;
  }
  throw Error("unknown host '" + n + "'");
}

std::vector<FirmwareSweep::Point> ExperimentSpec::sweep_points() const {
  std::vector<FirmwareSweep::Point> out;
  const std::vector<double> dwells = sweep.dwell_s.empty() ? std::vector<double>{dwell_s} : sweep.dwell_s;
  if (sweep.nic_models.empty()) {
    for (double d : dwells) out.push_back({nullptr, d});
    return out;
  }
  for (const auto& m : sweep.nic_models) {
    for (double d : dwells) out.push_back({&m, d});
  }
  return out;
}

int ExperimentSpec::iterations() const {
  if (type != kReconfigLatency || !sweep.enabled()) return reconfigurations;
  return reconfigurations * static_cast<int>(sweep_points().size());
}

std::vector<size_t> ExperimentSpec::schedule() const {
  if (type == kOutages) return std::vector<size_t>(static_cast<size_t>(reconfigurations), 0);
  std::vector<size_t> out;
  size_t current = 0;
  std::mt19937_64 rng(seed);
  const int total = iterations();
  for (int i = 1; i <= total; ++i) {
    size_t next;
    if (order == Order::kAlternate) {
      next = static_cast<size_t>(i) % mappings.size();
    } else {
      std::uniform_int_distribution<size_t> d(0, mappings.size() - 2);
      next = d(rng);
      if (next >= current) ++next;
    }
    out.push_back(next);
    current = next;
  }
  return out;
}

std::vector<double> ExperimentSpec::outage_plan() const {
  std::vector<double> out;
  for (int r = 0; r < outages.repetitions; ++r) out.insert(out.end(), outages.ms.begin(), outages.ms.end());
  if (outages.shuffled) {
    std::mt19937_64 rng(seed);
    std::shuffle(out.begin(), out.end(), rng);
  }
  return out;
}

std::vector<ocs::Port> ExperimentSpec::outage_ports() const {
  std::vector<ocs::Port> out;
  for (const auto& [h, nic] : outages.nics) {
    const NicEntry* n = hosts.at(h).nic(nic);
    for (ocs::Port p : {n->tx_port, n->rx_port}) {
      if (std::find(out.begin(), out.end(), p) == out.end()) out.push_back(p);
    }
  }
  return out;
}

std::vector<RdmaSpec::QpPoint> RdmaSpec::settings() const {
  if (!qp_matrix.empty()) return qp_matrix;
  return {QpPoint{timeout, retry_cnt}};
}

namespace {

std::string location(const YamlDoc& doc, const YAML::Node& node) {
  return fmt::format("{}:{}:{}", doc.origin, node.Mark().line + 1, node.Mark().column + 1);
}

bool valid_name(const std::string& s) {
  static const std::regex re("^[A-Za-z0-9][A-Za-z0-9_.-]*$");
  return !s.empty() && s.size() <= 64 && std::regex_match(s, re);
}

double positive(const YamlDoc& doc, const YAML::Node& n, double min, double max, const char* what) {
  double v = as_double(doc, n);
  if (!(v >= min && v <= max))
    throw config_error(doc, n, fmt::format("{} must be in [{}, {}], got {}", what, min, max, v));
  return v;
}

// A file this machine reads for the run (an SSH key, a known_hosts file), resolved beside the
// spec: refused here rather than at the first login, which may come after a lab has booted.
std::string existing_file(const YamlDoc& doc, const YAML::Node& node, const std::string& what) {
  const std::string p = resolve_path(doc, as_string(doc, node));
  std::error_code ec;
  if (!fs::is_regular_file(p, ec)) {
    throw config_error(doc, node,
                       fmt::format("{} {} {}", what, p,
                                   fs::exists(p, ec) ? "is not a regular file" : "does not exist on this machine"));
  }
  return p;
}

// "HOST:NIC" of the spec's hosts.
std::pair<size_t, std::string> parse_end(const YamlDoc& doc, const YAML::Node& node, const std::string& text,
                                         const ExperimentSpec& spec) {
  auto colon = text.find(':');
  if (colon == std::string::npos) throw config_error(doc, node, "'" + text + "': expected HOST:NIC (e.g. h1:eth1)");
  std::string host = std::string(trim_blanks(text.substr(0, colon))),
              nic = std::string(trim_blanks(text.substr(colon + 1)));
  for (size_t h = 0; h < spec.hosts.size(); ++h) {
    if (spec.hosts[h].name != host) continue;
    if (!spec.hosts[h].nic(nic)) {
      std::string known;
      for (const auto& n : spec.hosts[h].nics) known += (known.empty() ? "" : ", ") + n.name;
      throw config_error(doc, node, fmt::format("host '{}' has no data NIC '{}' (it has: {})", host, nic, known));
    }
    return {h, nic};
  }
  throw config_error(doc, node,
                     fmt::format("unknown host '{}' in '{}' (the lab has: {})", host, text, spec.host_names()));
}

Link parse_link(const YamlDoc& doc, const YAML::Node& node, const ExperimentSpec& spec, const std::string& arrow) {
  std::string text = as_string(doc, node);
  auto p = text.find(arrow);
  if (p == std::string::npos) {
    throw config_error(doc, node, fmt::format("'{}': expected HOST:NIC {} HOST:NIC", text, arrow));
  }
  auto a = parse_end(doc, node, std::string(trim_blanks(text.substr(0, p))), spec);
  auto b = parse_end(doc, node, std::string(trim_blanks(text.substr(p + arrow.size()))), spec);
  if (a == b) throw config_error(doc, node, "'" + text + "' links a NIC to itself");
  return Link{a.first, b.first, a.second, b.second};
}

void parse_lab(const YamlDoc& doc, const YAML::Node& lab, ExperimentSpec& spec) {
  only_keys(doc, lab, {"vlab", "keep", "inventory", "connect_concurrency"});
  bool has_vlab = lab["vlab"].IsDefined(), has_inv = lab["inventory"].IsDefined();
  if (has_vlab == has_inv)
    throw config_error(doc, lab, "lab needs exactly one of 'vlab' (a virtual-lab file) or 'inventory'");
  if (lab["keep"]) spec.keep_lab = as_bool(doc, lab["keep"]);
  if (lab["connect_concurrency"]) {
    spec.connect_concurrency = int_in(doc, lab["connect_concurrency"], 1, 1024, "connect_concurrency");
  }
  if (has_vlab) {
    spec.vlab = resolve_path(doc, as_string(doc, lab["vlab"]));
    vlab::LabSpec l;
    try {
      l = vlab::load_lab_spec(spec.vlab);
    } catch (const ConfigError& e) {
      throw config_error(doc, lab["vlab"], std::string("the virtual-lab file is not valid: ") + e.what());
    }
    spec.vlab_name = l.name;
    for (const auto& h : l.hosts) {
      HostEntry e;
      e.name = h.name;
      e.mgmt = h.name;  // the lab's management LAN resolves host names (/etc/hosts in every guest)
      for (const auto& n : h.nics) e.nics.push_back(NicEntry{n.name, n.tx_port, n.rx_port, n.standby_for});
      spec.hosts.push_back(std::move(e));
    }
    return;
  }
  const auto& inv = lab["inventory"];
  if (!inv.IsSequence() || inv.size() == 0) throw config_error(doc, inv, "inventory must be a non-empty list of hosts");
  ocs::PortUses ports;  // one fibre per port and direction: as `ocsctl apply` counts a mapping's
  for (const auto& hn : inv) {
    only_keys(doc, hn, {"name", "ssh", "identity_file", "known_hosts", "agent", "agent_socket", "mgmt", "nics"});
    HostEntry h;
    h.name = as_string(doc, require(doc, hn, "name"));
    if (!valid_name(h.name)) throw config_error(doc, hn["name"], "'" + h.name + "' is not a valid host name");
    for (const auto& o : spec.hosts) {
      if (o.name == h.name) throw config_error(doc, hn["name"], "host '" + h.name + "' listed twice");
    }
    // [user@]host[:port]
    std::string ssh = as_string(doc, require(doc, hn, "ssh"));
    std::string rest = ssh;
    if (auto at = rest.find('@'); at != std::string::npos) {
      h.user = rest.substr(0, at);
      if (h.user.find(':') != std::string::npos) {  // not echoed: it holds the password
        throw config_error(doc, hn["ssh"],
                           "ssh must not carry a password (USER:PASSWORD@HOST): give the login's key in "
                           "identity_file or load it into ssh-agent");
      }
      rest = rest.substr(at + 1);
    }
    if (auto colon = rest.rfind(':'); colon != std::string::npos && rest.find(']') == std::string::npos) {
      try {
        size_t used = 0;
        h.ssh_port = std::stoi(rest.substr(colon + 1), &used);
        if (used != rest.size() - colon - 1 || h.ssh_port < 1 || h.ssh_port > 65535) throw std::invalid_argument("");
      } catch (const std::exception&) {
        throw config_error(doc, hn["ssh"], "'" + ssh + "': bad port (expected [USER@]HOST[:PORT])");
      }
      rest = rest.substr(0, colon);
    }
    if (rest.empty() || h.user.empty())
      throw config_error(doc, hn["ssh"], "'" + ssh + "': expected [USER@]HOST[:PORT]");
    h.ssh_host = rest;
    if (hn["identity_file"]) h.identity_file = existing_file(doc, hn["identity_file"], "identity_file");
    if (hn["known_hosts"]) h.known_hosts = existing_file(doc, hn["known_hosts"], "known_hosts");
    if (hn["agent"]) h.agent = as_string(doc, hn["agent"]);
    if (hn["agent_socket"]) h.agent_socket = as_string(doc, hn["agent_socket"]);
    h.mgmt = hn["mgmt"] ? as_string(doc, hn["mgmt"]) : h.ssh_host;
    // It goes into remote command lines (HOST:PORT for the probes' and pings' control sockets).
    if (auto why = host_address_problem(h.mgmt); !why.empty()) {
      throw config_error(doc, hn["mgmt"] ? hn["mgmt"] : hn["ssh"],
                         fmt::format("mgmt '{}' is not a host name or address ({})", h.mgmt, why));
    }
    const auto& nics = require(doc, hn, "nics");
    if (!nics.IsSequence() || nics.size() == 0) throw config_error(doc, nics, "nics must be a non-empty list");
    for (const auto& nn : nics) {
      only_keys(doc, nn, {"name", "tx_port", "rx_port"});
      NicEntry n;
      n.name = as_string(doc, require(doc, nn, "name"));
      if (auto why = spec_ifname_problem(n.name); !why.empty()) {
        throw config_error(doc, nn["name"], fmt::format("NIC '{}' is not an interface name ({})", n.name, why));
      }
      if (h.nic(n.name)) throw config_error(doc, nn["name"], "NIC '" + n.name + "' listed twice on " + h.name);
      n.tx_port = static_cast<ocs::Port>(int_in(doc, require(doc, nn, "tx_port"), 1, 100000, "tx_port"));
      n.rx_port = static_cast<ocs::Port>(int_in(doc, require(doc, nn, "rx_port"), 1, 100000, "rx_port"));
      ports.add(doc, nn["tx_port"], n.tx_port, false, fmt::format("{}:{} tx_port", h.name, n.name));
      ports.add(doc, nn["rx_port"], n.rx_port, true, fmt::format("{}:{} rx_port", h.name, n.name));
      h.nics.push_back(n);
    }
    spec.hosts.push_back(std::move(h));
  }
}

// A list of distinct integers in [min, max], or one integer.
std::vector<int> int_list(const YamlDoc& doc, const YAML::Node& n, int min, int max, const char* what) {
  std::vector<int> out;
  if (n.IsScalar()) return {int_in(doc, n, min, max, what)};
  if (!n.IsSequence() || n.size() == 0) {
    throw config_error(doc, n, fmt::format("{} must be a number or a list of numbers in [{}, {}]", what, min, max));
  }
  for (const auto& e : n) {
    int v = int_in(doc, e, min, max, what);
    if (std::find(out.begin(), out.end(), v) != out.end()) {
      throw config_error(doc, e, fmt::format("{} {} is listed twice", what, v));
    }
    out.push_back(v);
  }
  return out;
}

// rdma.qp: {timeout: [..], retry_cnt: [..]}: the product, timeout-major. timeout 0..31 (0: no
// timer), retry_cnt 0..7, the verbs fields' ranges; not beside rdma.timeout / rdma.retry_cnt.
void parse_qp_matrix(const YamlDoc& doc, const YAML::Node& rdma, RdmaSpec& r) {
  const YAML::Node& q = rdma["qp"];
  if (!q.IsMap()) throw config_error(doc, q, "qp must be a map {timeout: [..], retry_cnt: [..]}");
  only_keys(doc, q, {"timeout", "retry_cnt"});
  for (const char* k : {"timeout", "retry_cnt"}) {
    if (rdma[k]) throw config_error(doc, rdma[k], fmt::format("'{}' and 'qp' exclude each other (qp.{} lists it)", k, k));
  }
  auto timeouts = int_list(doc, require(doc, q, "timeout"), 0, 31, "qp.timeout");
  auto retries = int_list(doc, require(doc, q, "retry_cnt"), 0, 7, "qp.retry_cnt");
  for (int t : timeouts) {
    for (int c : retries) r.qp_matrix.push_back({t, c});
  }
}

void parse_probes(const YamlDoc& doc, const YAML::Node& probes, ExperimentSpec& spec) {
  if (!probes.IsMap()) throw config_error(doc, probes, "probes must be a map of probe name -> settings");
  static const std::set<std::string> kKnown = {"carrier", "firmware", "gid", "rx_power", "heartbeat", "rdma"};
  for (const auto& kv : probes) {
    std::string name = as_string(doc, kv.first);
    if (!kKnown.count(name)) {
      throw config_error(doc, kv.first,
                         "unknown probe '" + name + "' (known: carrier, firmware, gid, heartbeat, rdma, rx_power)");
    }
    const YAML::Node& v = kv.second;
    if (!v.IsNull() && !v.IsMap()) throw config_error(doc, v, "settings of probe '" + name + "' must be a map");
    if (name == "rdma") {
      RdmaSpec& r = spec.rdma;
      r.enabled = true;
      if (v.IsNull()) continue;
      only_keys(doc, v, {"pairs", "interval_ms", "timeout", "retry_cnt", "port", "pin_neighbours", "qp"});
      if (v["qp"]) parse_qp_matrix(doc, v, r);
      if (v["pin_neighbours"]) r.pin_neighbours = as_bool(doc, v["pin_neighbours"]);
      if (v["interval_ms"]) r.interval_ms = int_in(doc, v["interval_ms"], 1, 60000, "interval_ms");
      if (v["timeout"]) r.timeout = int_in(doc, v["timeout"], 1, 31, "timeout");
      if (v["retry_cnt"]) r.retry_cnt = int_in(doc, v["retry_cnt"], 0, 7, "retry_cnt");
      if (v["port"]) r.port = int_in(doc, v["port"], 1024, 65000, "port");
      if (v["pairs"] && !v["pairs"].IsScalar()) {
        if (!v["pairs"].IsSequence()) throw config_error(doc, v["pairs"], "pairs must be 'mappings' or a list");
        for (const auto& p : v["pairs"]) r.pairs.push_back(parse_link(doc, p, spec, "->"));
      } else if (v["pairs"] && as_string(doc, v["pairs"]) != "mappings") {
        throw config_error(doc, v["pairs"], "pairs must be 'mappings' or a list of 'HOST:NIC -> HOST:NIC'");
      }
      continue;
    }
    ProbeSpec p;
    p.name = name;
    // A GID poll reads sysfs files and dumps the neighbour table: 100 ms unless the spec says.
    if (name == "gid") p.interval_ms = 100;
    if (!v.IsNull()) {
      only_keys(doc, v, {"hosts", "interfaces", "interval_ms", "params"});
      if (v["hosts"]) {
        p.hosts = as_strings(doc, v["hosts"], "hosts");
        for (const auto& h : p.hosts) {
          bool found = false;
          for (const auto& x : spec.hosts) found = found || x.name == h;
          if (!found) throw config_error(doc, v["hosts"], "probe '" + name + "': unknown host '" + h + "'");
        }
      }
      if (v["interfaces"]) p.interfaces = as_strings(doc, v["interfaces"], "interfaces");
      for (const auto& i : p.interfaces) {
        if (auto why = spec_ifname_problem(i); !why.empty()) {
          throw config_error(doc, v["interfaces"],
                             fmt::format("probe '{}': '{}' is not an interface name ({})", name, i, why));
        }
      }
      if (v["interval_ms"]) p.interval_ms = int_in(doc, v["interval_ms"], 1, 3600000, "interval_ms");
      if (v["params"]) {
        if (!v["params"].IsMap()) throw config_error(doc, v["params"], "params must be a map");
        nlohmann::json j = nlohmann::json::object();
        for (const auto& q : v["params"]) {
          std::string k = as_string(doc, q.first);
          const auto& val = q.second;
          std::string s = as_string(doc, val);
          // numbers stay numbers, booleans booleans, the rest strings
          try {
            size_t used = 0;
            long long i = std::stoll(s, &used);
            if (used == s.size()) {
              j[k] = i;
              continue;
            }
            double d = std::stod(s, &used);
            if (used == s.size()) {
              j[k] = d;
              continue;
            }
          } catch (const std::exception&) {
          }
          if (s == "true" || s == "false") {
            j[k] = s == "true";
          } else {
            j[k] = s;
          }
        }
        p.params_json = j.dump();
      }
    }
    spec.probes.push_back(std::move(p));
  }
}

}  // namespace

namespace {

// type: and the sections only one type may have.
void parse_type(const YamlDoc& doc, const YAML::Node& root, ExperimentSpec& spec) {
  if (root["type"]) {
    spec.type = as_string(doc, root["type"]);
    if (spec.type != kReconfigLatency && spec.type != kPhaseWorkload && spec.type != kOutages) {
      throw config_error(doc, root["type"],
                         fmt::format("unknown experiment type '{}' (known: {}, {}, {})", spec.type, kReconfigLatency,
                                     kPhaseWorkload, kOutages));
    }
  }
  if (root["outages"] && spec.type != kOutages) {
    throw config_error(doc, root["outages"], fmt::format("'outages' needs type: {}", kOutages));
  }
  if (spec.type == kOutages) {
    for (const char* k : {"faults", "forwarding"}) {
      if (root[k]) throw config_error(doc, root[k], fmt::format("'{}' is not part of an {} spec", k, kOutages));
    }
  }
  const bool phase_type = spec.type == kPhaseWorkload;
  for (const char* k : {"workload", "phase"}) {
    if (root[k] && !phase_type) throw config_error(doc, root[k], fmt::format("'{}' needs type: {}", k, kPhaseWorkload));
  }
  if (root["sweep"] && spec.type == kOutages) {
    throw config_error(doc, root["sweep"],
                       fmt::format("'sweep' is not part of an {} spec (outages.ms is its axis)", kOutages));
  }
  if (root["nic_models"] && spec.type != kReconfigLatency) {
    throw config_error(doc, root["nic_models"], fmt::format("'nic_models' needs type: {}", kReconfigLatency));
  }
  for (const char* k : {"mappings", "schedule"}) {
    if (root[k] && phase_type) {
      throw config_error(
          doc, root[k],
          fmt::format("'{}' is not part of a {} spec (the schedule is workload.schedule)", k, kPhaseWorkload));
    }
  }
}

void parse_switch(const YamlDoc& doc, const YAML::Node& root, ExperimentSpec& spec) {
  if (const auto& sw = root["switch"]) {
    only_keys(doc, sw, {"url", "allow", "identity_file", "known_hosts", "power_monitor"});
    if (const auto& pm = sw["power_monitor"]) {
      if (!pm.IsMap()) throw config_error(doc, pm, "power_monitor must be a map {interval_ms, threshold_dbm}");
      only_keys(doc, pm, {"interval_ms", "threshold_dbm"});
      spec.power_monitor_ms = pm["interval_ms"] ? int_in(doc, pm["interval_ms"], 1, 60000, "interval_ms") : 20;
      if (pm["threshold_dbm"]) spec.power_threshold_dbm = positive(doc, pm["threshold_dbm"], -100, 30, "threshold_dbm");
    }
    if (const auto& url = sw["url"]) {
      spec.switch_url = as_string(doc, url);
      spec.switch_url_where = location(doc, url);
      try {
        (void)ocs::SwitchUrl::parse(spec.switch_url);  // the form `ocsctl -s URL` accepts
      } catch (const Error& e) {
        throw config_error(doc, url, e.what());
      }
    }
    if (sw["allow"]) {
      try {
        spec.allow = ocs::PortSet::parse(as_string(doc, sw["allow"]));
      } catch (const Error& e) {
        throw config_error(doc, sw["allow"], e.what());
      }
    }
    if (sw["identity_file"]) spec.switch_identity_file = existing_file(doc, sw["identity_file"], "identity_file");
    if (sw["known_hosts"]) spec.switch_known_hosts = existing_file(doc, sw["known_hosts"], "known_hosts");
  }
  if (spec.switch_url.empty() && spec.vlab.empty()) {
    throw config_error(doc, root["switch"] ? root["switch"] : root,
                       "switch.url is needed with an inventory of real hosts");
  }
}

void parse_faults(const YamlDoc& doc, const YAML::Node& faults, ExperimentSpec& spec, const PhaseWorkloadSpec* pw);

// workload: and phase: (phase_workload_spec.cpp); the ranks' slots must be inside switch.allow,
// which defaults to them; then faults (their ports inside switch.allow, their ranks and steps
// the job's).
void parse_phase_sections(const YamlDoc& doc, const YAML::Node& root, ExperimentSpec& spec) {
  // Probes run on every host through the whole run (all modes and sweep points); there are no
  // mappings to take RDMA probe pairs from, so they are listed.
  if (const auto& p = root["probes"]) {
    parse_probes(doc, p, spec);
    if (spec.rdma.enabled && spec.rdma.pairs.empty()) {
      throw config_error(doc, p["rdma"],
                         fmt::format("probes.rdma in a {} spec needs pairs: a list of 'HOST:NIC -> "
                                     "HOST:NIC' (there are no mappings to take them from)",
                                     kPhaseWorkload));
    }
  }
  auto pw = std::make_shared<PhaseWorkloadSpec>(parse_phase_workload(doc, spec));
  const bool given = !spec.allow.empty();
  for (const auto& rail : pw->rail_list()) {
    for (const auto& slot : PhaseWorkloadSpec::slots_of(rail, spec.hosts)) {
      for (auto p : {slot.ingress, slot.egress}) {
        if (!given) {
          spec.allow.insert(p);
        } else if (!spec.allow.contains(p)) {
          throw config_error(doc, root["switch"]["allow"],
                             fmt::format("switch port {} of a slot of rail {} is outside switch.allow ({})", p,
                                         rail.name, spec.allow.to_string()));
        }
      }
    }
  }
  if (const auto& f = root["faults"]) parse_faults(doc, f, spec, pw.get());
  if (!pw->sweep_outage_ms.empty()) {
    const bool outage = std::any_of(spec.faults.begin(), spec.faults.end(),
                                    [](const FaultSpec& f) { return f.kind == kPortDark || f.kind == kCircuitCut; });
    if (!outage) {
      throw config_error(doc, root["sweep"]["outage_ms"],
                         fmt::format("sweep.outage_ms needs a fault that makes the outage: {{kind: {}, port: P, "
                                     "at_step: N}} (virtual lab) or {{kind: {}, port: P, at_step: N}} in faults",
                                     kPortDark, kCircuitCut));
    }
  }
  spec.phase_workload = std::move(pw);
}

// One mapping: its links, each NIC once, every port inside switch.allow (ports collects them).
Mapping parse_mapping(const YamlDoc& doc, const YAML::Node& name, const YAML::Node& links, const ExperimentSpec& spec,
                      ocs::PortSet& ports) {
  Mapping m;
  m.name = as_string(doc, name);
  if (!valid_name(m.name)) throw config_error(doc, name, "'" + m.name + "' is not a valid mapping name");
  if (!links.IsSequence() || links.size() == 0) {
    throw config_error(doc, links, "mapping '" + m.name + "' must be a non-empty list of links");
  }
  std::set<std::pair<size_t, std::string>> nics;
  for (const auto& ln : links) {
    Link l = parse_link(doc, ln, spec, "<->");
    for (const auto& end : {std::make_pair(l.a_host, l.a_nic), std::make_pair(l.b_host, l.b_nic)}) {
      if (!nics.insert(end).second) {
        throw config_error(
            doc, ln, fmt::format("mapping '{}' uses {}:{} twice", m.name, spec.hosts[end.first].name, end.second));
      }
    }
    const NicEntry& a = *spec.hosts[l.a_host].nic(l.a_nic);
    const NicEntry& b = *spec.hosts[l.b_host].nic(l.b_nic);
    m.circuits.push_back({a.tx_port, b.rx_port});
    m.circuits.push_back({b.tx_port, a.rx_port});
    for (auto p : {a.tx_port, a.rx_port, b.tx_port, b.rx_port}) {
      ports.insert(p);
      if (!spec.allow.empty() && !spec.allow.contains(p)) {
        throw config_error(doc, ln,
                           fmt::format("link '{}' needs switch port {}, which is outside switch.allow ({})",
                                       as_string(doc, ln), p, spec.allow.to_string()));
      }
    }
    m.links.push_back(std::move(l));
  }
  std::sort(m.circuits.begin(), m.circuits.end());
  return m;
}

void parse_mappings(const YamlDoc& doc, const YAML::Node& root, ExperimentSpec& spec) {
  const auto& maps = require(doc, root, "mappings");
  if (spec.type == kOutages) {
    if (!maps.IsMap() || maps.size() != 1) {
      throw config_error(doc, maps,
                         "an outages spec lights exactly one mapping for the whole run (a name -> a list of links "
                         "HOST:NIC <-> HOST:NIC)");
    }
  } else if (!maps.IsMap() || maps.size() < 2) {
    throw config_error(doc, maps, "mappings must map at least two names to lists of links (HOST:NIC <-> HOST:NIC)");
  }
  ocs::PortSet used;
  for (const auto& kv : maps) {
    Mapping m = parse_mapping(doc, kv.first, kv.second, spec, used);
    for (const auto& o : spec.mappings) {
      if (o.circuits == m.circuits) {
        throw config_error(doc, kv.first, "mapping '" + m.name + "' makes the same circuits as '" + o.name + "'");
      }
    }
    spec.mappings.push_back(std::move(m));
  }
  if (spec.allow.empty()) spec.allow = used;
}

void parse_schedule(const YamlDoc& doc, const YAML::Node& s, ExperimentSpec& spec) {
  if (spec.type == kOutages) {
    only_keys(doc, s, {"warmup_s", "settle_s"});  // the outages block is the schedule
  } else {
    only_keys(doc, s, {"reconfigurations", "dwell_s", "warmup_s", "settle_s", "order"});
  }
  if (s["reconfigurations"]) spec.reconfigurations = int_in(doc, s["reconfigurations"], 1, 100000, "reconfigurations");
  if (s["dwell_s"]) spec.dwell_s = positive(doc, s["dwell_s"], 0.01, 3600, "dwell_s");
  if (s["warmup_s"]) spec.warmup_s = positive(doc, s["warmup_s"], 0, 3600, "warmup_s");
  if (s["settle_s"]) spec.settle_s = positive(doc, s["settle_s"], 0, 3600, "settle_s");
  if (s["order"]) {
    std::string o = as_string(doc, s["order"]);
    if (o == "alternate") {
      spec.order = Order::kAlternate;
    } else if (o == "random") {
      spec.order = Order::kRandom;
    } else {
      throw config_error(doc, s["order"], "order must be alternate or random, got '" + o + "'");
    }
  }
}

// `pairs: mappings`: every link of every mapping, once (either direction).
void rdma_pairs_from_mappings(ExperimentSpec& spec) {
  std::set<std::tuple<size_t, std::string, size_t, std::string>> seen;
  for (const auto& m : spec.mappings) {
    for (const auto& l : m.links) {
      auto key = std::make_tuple(std::min(l.a_host, l.b_host), l.a_host < l.b_host ? l.a_nic : l.b_nic,
                                 std::max(l.a_host, l.b_host), l.a_host < l.b_host ? l.b_nic : l.a_nic);
      if (seen.insert(key).second) spec.rdma.pairs.push_back(l);
    }
  }
}

constexpr const char* kFaultShapes =
    "{kind: nic-held-down, nic: HOST:NIC, before_iteration: N}, {kind: port-dark, port: PORT, before_iteration: N} "
    "{kind: switch-unreachable, for_ms: MS, before_iteration: N} or {kind: agent-killed, host: HOST, "
    "before_iteration: N}";
constexpr const char* kPhaseFaultShapes =
    "{kind: rank-killed, rank: R, at_step: N | after_s: S}, {kind: nic-held-down, nic: HOST:NIC, at_step: N | "
    "after_s: S}, {kind: port-dark, port: PORT, for_ms: MS (optional), at_step: N | after_s: S}, {kind: "
    "circuit-cut, port: PORT, for_ms: MS, at_step: N | after_s: S} or {kind: switch-unreachable, for_ms: MS, "
    "at_step: N | after_s: S}";

// port-dark's port: a switch port of one of the lab's NICs (f.host and f.nic become that NIC),
// inside switch.allow (the run touches no other port).
void parse_fault_port(const YamlDoc& doc, const YAML::Node& node, const ExperimentSpec& spec, FaultSpec& f) {
  long long p = as_int(doc, node);
  ocs::PortSet nic_ports;
  for (size_t h = 0; h < spec.hosts.size(); ++h) {
    for (const auto& n : spec.hosts[h].nics) {
      if (n.tx_port == p || n.rx_port == p) {
        f.host = h;
        f.nic = n.name;
        f.port = static_cast<ocs::Port>(p);
      }
      nic_ports.insert(n.tx_port);
      nic_ports.insert(n.rx_port);
    }
  }
  if (f.port == 0) {
    throw config_error(
        doc, node,
        fmt::format("unknown port {}: no NIC of the lab is on it (the lab's NIC ports: {})", p, nic_ports.to_string()));
  }
  if (!spec.allow.contains(f.port)) {
    throw config_error(doc, node,
                       fmt::format("port {} ({}:{}) is outside switch.allow ({}): the run may not touch it", p,
                                   spec.hosts[f.host].name, f.nic, spec.allow.to_string()));
  }
}

// The steps a phase workload's ranks run, warm-up included: the schedule's, or the spec's
// workload.args where they give --steps / --warmup.
int phase_total_steps(const PhaseWorkloadSpec& pw) {
  int steps = pw.schedule.steps, warmup = pw.schedule.warmup;
  for (size_t i = 0; i + 1 < pw.args.size(); ++i) {
    try {
      if (pw.args[i] == "--steps") steps = std::stoi(pw.args[i + 1]);
      if (pw.args[i] == "--warmup") warmup = std::stoi(pw.args[i + 1]);
    } catch (const std::exception&) {
      // the program refuses it itself
    }
  }
  return steps + warmup;
}

// When a fault comes: before_iteration (reconfig-latency), at_step or after_s (phase-workload).
void parse_fault_trigger(const YamlDoc& doc, const YAML::Node& node, const ExperimentSpec& spec,
                         const PhaseWorkloadSpec* pw, FaultSpec& f) {
  if (!pw) {
    const auto& it = require(doc, node, "before_iteration");
    long long i = as_int(doc, it);
    if (i < 1) throw config_error(doc, it, fmt::format("before_iteration must be 1 or more, got {}", i));
    if (i > spec.iterations()) {
      throw config_error(doc, it,
                         fmt::format("before_iteration {} is after the run's last reconfiguration (the schedule "
                                     "has {}): the fault would never be injected",
                                     i, spec.iterations()));
    }
    f.before_iteration = static_cast<int>(i);
    return;
  }
  f.before_iteration = 0;
  if (node["at_step"] && node["after_s"]) {
    throw config_error(doc, node["after_s"], "give at_step or after_s, not both");
  }
  if (const auto& st = node["at_step"]) {
    long long n = as_int(doc, st);
    const int total = phase_total_steps(*pw);
    if (n < 0 || n >= total) {
      throw config_error(doc, st,
                         fmt::format("at_step {} is not a step of the run: its ranks run steps 0..{} (warm-up "
                                     "included): the fault would never be injected",
                                     n, total - 1));
    }
    f.at_step = static_cast<int>(n);
  } else if (const auto& a = node["after_s"]) {
    f.after_s = as_double(doc, a);
    if (!(f.after_s > 0) || f.after_s >= pw->timeout_s) {
      throw config_error(doc, a,
                         fmt::format("after_s must be above 0 and below workload.timeout_s ({} s, when the ranks "
                                     "are stopped), got {}: the fault would never be injected",
                                     pw->timeout_s, f.after_s));
    }
  } else {
    throw config_error(doc, node, "missing key 'at_step' or 'after_s': when the fault comes in each run of the job");
  }
}

// One entry of faults: {kind, nic | port | host | rank, trigger}, after the mappings
// (switch.allow) and the schedule (its iteration must be one of the run's reconfigurations), or
// after a phase workload's placement (pw: its ranks and steps; the trigger is at_step / after_s).
FaultSpec parse_fault(const YamlDoc& doc, const YAML::Node& node, const ExperimentSpec& spec,
                      const PhaseWorkloadSpec* pw) {
  if (!node.IsMap())
    throw config_error(doc, node, std::string("a fault is a map ") + (pw ? kPhaseFaultShapes : kFaultShapes));
  FaultSpec f;
  f.where = location(doc, node);
  f.kind = as_string(doc, require(doc, node, "kind"));
  // The kind's own key and the trigger's.
  auto keys = [&](const char* own, const char* optional = nullptr) {
    if (pw && optional) {
      only_keys(doc, node, {"kind", own, optional, "at_step", "after_s"});
    } else if (pw) {
      only_keys(doc, node, {"kind", own, "at_step", "after_s"});
    } else {
      only_keys(doc, node, {"kind", own, "before_iteration"});
    }
  };
  // An outage's length: above 0, at most the emulator's longest dark spell.
  auto outage_ms = [&](const YAML::Node& ms) {
    const double v = as_double(doc, ms);
    if (!(v > 0 && v <= kMaxOutageMs)) {
      throw config_error(doc, ms,
                         fmt::format("for_ms: {} is not an outage the run can make (above 0, at most {} ms)", v,
                                     kMaxOutageMs));
    }
    if (pw && v >= pw->timeout_s * 1000.0) {
      throw config_error(doc, ms,
                         fmt::format("for_ms: {} ms is longer than the job may run (workload.timeout_s {} s)", v,
                                     pw->timeout_s));
    }
    return v;
  };
  if (pw && f.kind == kAgentKilled) {
    throw config_error(doc, node["kind"],
                       fmt::format("{} is a reconfig-latency fault (its hosts' agents capture each "
                                   "reconfiguration); a {} spec has {}, {}, {} and {}",
                                   kAgentKilled, kPhaseWorkload, kRankKilled, kNicHeldDown, kPortDark,
                                   kSwitchUnreachable));
  }
  if (f.kind == kRankKilled) {
    if (!pw) {
      throw config_error(doc, node["kind"],
                         fmt::format("{} needs a {} spec (it kills one of the job's ranks)", kRankKilled,
                                     kPhaseWorkload));
    }
    keys("rank");
    const auto& r = require(doc, node, "rank");
    long long rank = as_int(doc, r);
    const auto n = static_cast<long long>(pw->ranks.size());
    if (rank < 0 || rank >= n) {
      throw config_error(doc, r, fmt::format("unknown rank {}: the job has ranks 0..{}", rank, n - 1));
    }
    f.rank = static_cast<int>(rank);
    f.host = pw->ranks[static_cast<size_t>(rank)].host;
    if (pw->launcher != Launcher::kSsh) {
      throw config_error(doc, node["kind"],
                         fmt::format("{} needs workload.launcher ssh (the runner starts each rank itself and knows "
                                     "its process; {} starts them on its own)",
                                     kRankKilled, to_string(pw->launcher)));
    }
  } else if (f.kind == kNicHeldDown) {
    keys("nic");
    const auto& nic = require(doc, node, "nic");
    std::tie(f.host, f.nic) = parse_end(doc, nic, as_string(doc, nic), spec);
  } else if (f.kind == kPortDark) {
    keys("port", pw ? "for_ms" : nullptr);
    parse_fault_port(doc, require(doc, node, "port"), spec, f);
    if (const auto& ms = node["for_ms"]) f.for_ms = outage_ms(ms);
  } else if (f.kind == kCircuitCut) {
    if (!pw) {
      throw config_error(doc, node["kind"],
                         fmt::format("{} needs a {} spec (it cuts a circuit under the job for for_ms)", kCircuitCut,
                                     kPhaseWorkload));
    }
    keys("port", "for_ms");
    parse_fault_port(doc, require(doc, node, "port"), spec, f);
    if (pw->sweep_outage_ms.empty()) f.for_ms = outage_ms(require(doc, node, "for_ms"));
  } else if (f.kind == kSwitchUnreachable) {
    keys("for_ms");
    const auto& ms = require(doc, node, "for_ms");
    f.for_ms = as_double(doc, ms);
    if (!(f.for_ms > 0) || f.for_ms > 3'600'000) {
      throw config_error(doc, ms,
                         fmt::format("for_ms must be above 0 and at most 3600000 (an hour), got {}", f.for_ms));
    }
  } else if (f.kind == kAgentKilled) {
    keys("host");
    const auto& h = require(doc, node, "host");
    const std::string name = as_string(doc, h);
    auto it = std::find_if(spec.hosts.begin(), spec.hosts.end(), [&](const HostEntry& e) { return e.name == name; });
    if (it == spec.hosts.end()) {
      throw config_error(doc, h, fmt::format("unknown host '{}' (the lab has: {})", name, spec.host_names()));
    }
    f.host = static_cast<size_t>(it - spec.hosts.begin());
  } else {
    throw config_error(doc, node["kind"],
                       pw ? fmt::format("unknown fault kind '{}' (known: {}, {}, {}, {}, {})", f.kind, kRankKilled,
                                        kNicHeldDown, kPortDark, kCircuitCut, kSwitchUnreachable)
                          : fmt::format("unknown fault kind '{}' (known: {}, {}, {}, {})", f.kind, kNicHeldDown,
                                        kPortDark, kSwitchUnreachable, kAgentKilled));
  }
  if (pw && !pw->sweep_outage_ms.empty() && (f.kind == kPortDark || f.kind == kCircuitCut)) {
    if (node["for_ms"]) {
      throw config_error(doc, node["for_ms"],
                         "for_ms: each run's outage length comes from sweep.outage_ms; give it there only");
    }
    f.for_ms = pw->sweep_outage_ms.front();  // each run's own is set by the runner
  }
  if (spec.vlab.empty() && f.kind != kAgentKilled && f.kind != kRankKilled && f.kind != kCircuitCut) {
    throw config_error(doc, node["kind"],
                       fmt::format("a {} fault needs a virtual lab (lab.vlab): a NIC's link is held down by the "
                                   "lab's emulated NIC firmware, a port darkened and the switch silenced by its "
                                   "emulated switch, which real hosts and a real switch do not offer (on real "
                                   "hosts only {} can be injected)",
                                   f.kind, pw ? kRankKilled : kAgentKilled));
  }
  parse_fault_trigger(doc, node, spec, pw, f);
  return f;
}

// faults: a list; only a virtual lab's emulator can hold a link down or darken a port (an agent
// can be killed anywhere). A NIC is held, a port darkened, an agent killed once: a fault lasts
// to the end of the run.
void parse_faults(const YamlDoc& doc, const YAML::Node& faults, ExperimentSpec& spec, const PhaseWorkloadSpec* pw) {
  if (!faults.IsSequence())
    throw config_error(doc, faults, std::string("faults must be a list of ") + (pw ? kPhaseFaultShapes : kFaultShapes));
  for (const auto& node : faults) {
    FaultSpec f = parse_fault(doc, node, spec, pw);
    for (const auto& o : spec.faults) {
      const bool on_port = f.kind == kPortDark || f.kind == kCircuitCut;
      if (on_port && (o.kind == kPortDark || o.kind == kCircuitCut) && o.port == f.port) {
        if (f.kind == kCircuitCut || o.kind == kCircuitCut || f.for_ms > 0 || o.for_ms > 0) {
          throw config_error(doc, node["port"],
                             fmt::format("port {} has an outage already (at {}): one outage per port in a run of "
                                         "the job",
                                         f.port, o.where));
        }
        throw config_error(doc, node["port"],
                           fmt::format("port {} is dark already (at {}): a dark port stays dark to the end of "
                                       "the run",
                                       f.port, o.where));
      }
      if (f.kind == kNicHeldDown && o.kind == kNicHeldDown && o.host == f.host && o.nic == f.nic) {
        throw config_error(doc, node["nic"],
                           fmt::format("{}:{} is held down already (at {}): a hold lasts to the end "
                                       "of the run",
                                       spec.hosts[f.host].name, f.nic, o.where));
      }
      if (f.kind == kRankKilled && o.kind == kRankKilled && o.rank == f.rank) {
        throw config_error(doc, node["rank"],
                           fmt::format("rank {} is killed already (at {}): it stays dead to the end of the run",
                                       f.rank, o.where));
      }
      if (f.kind == kAgentKilled && o.kind == kAgentKilled && o.host == f.host) {
        throw config_error(doc, node["host"],
                           fmt::format("{}'s agent is killed already (at {}): it stays dead to the end of the run",
                                       spec.hosts[f.host].name, o.where));
      }
    }
    spec.faults.push_back(std::move(f));
  }
}

// outages: {nics: [HOST:NIC, ...], ms: [..], repetitions: N, gap_ms: MS, order: random | as-listed}.
void parse_outages(const YamlDoc& doc, const YAML::Node& root, ExperimentSpec& spec) {
  const YAML::Node& o = require(doc, root, "outages");
  if (!o.IsMap()) throw config_error(doc, o, "outages must be a map {ms: [..], repetitions: N, ...}");
  only_keys(doc, o, {"nics", "ms", "repetitions", "gap_ms", "order"});
  if (spec.vlab.empty()) {
    throw config_error(doc, o,
                       "outages need a virtual lab (lab.vlab): an outage of an exact length is the emulator's dark "
                       "spell; on a real switch use faults: port-dark in a reconfig-latency spec");
  }
  OutageSpec& out = spec.outages;
  const YAML::Node& ms = require(doc, o, "ms");
  if (!ms.IsSequence() || ms.size() == 0) throw config_error(doc, ms, "outages.ms must be a list of milliseconds");
  for (const auto& m : ms) {
    double v = as_double(doc, m);
    if (!(v > 0 && v <= kMaxOutageMs)) {
      throw config_error(doc, m,
                         fmt::format("outages.ms: {} is not an outage the lab can make (above 0, at most {:.0f} ms: "
                                     "the emulator's longest dark spell)",
                                     v, kMaxOutageMs));
    }
    if (std::find(out.ms.begin(), out.ms.end(), v) != out.ms.end()) {
      throw config_error(doc, m, fmt::format("outages.ms: {} is listed twice (use repetitions)", v));
    }
    out.ms.push_back(v);
  }
  if (o["repetitions"]) out.repetitions = int_in(doc, o["repetitions"], 1, 1000, "outages.repetitions");
  if (o["gap_ms"]) out.gap_ms = positive(doc, o["gap_ms"], 0, 600000, "outages.gap_ms");
  if (o["order"]) {
    std::string v = as_string(doc, o["order"]);
    if (v != "random" && v != "as-listed") {
      throw config_error(doc, o["order"], "outages.order must be 'random' (seeded) or 'as-listed'");
    }
    out.shuffled = v == "random";
  }
  if (o["nics"]) {
    if (!o["nics"].IsSequence() || o["nics"].size() == 0) {
      throw config_error(doc, o["nics"], "outages.nics must be a list of HOST:NIC");
    }
    for (const auto& n : o["nics"]) {
      auto end = parse_end(doc, n, as_string(doc, n), spec);
      if (std::find(out.nics.begin(), out.nics.end(), end) != out.nics.end()) {
        throw config_error(doc, n, fmt::format("outages.nics: {} is listed twice", as_string(doc, n)));
      }
      bool lit = false;
      for (const auto& l : spec.mappings.front().links) {
        lit = lit || (l.a_host == end.first && l.a_nic == end.second) || (l.b_host == end.first && l.b_nic == end.second);
      }
      if (!lit) {
        throw config_error(doc, n,
                           fmt::format("outages.nics: {} has no circuit in mapping '{}' (nothing to darken)",
                                       as_string(doc, n), spec.mappings.front().name));
      }
      out.nics.push_back(end);
    }
  } else {
    for (const auto& l : spec.mappings.front().links) {
      for (auto end : {std::pair{l.a_host, l.a_nic}, std::pair{l.b_host, l.b_nic}}) {
        if (std::find(out.nics.begin(), out.nics.end(), end) == out.nics.end()) out.nics.push_back(end);
      }
    }
  }
  const size_t n = out.ms.size() * static_cast<size_t>(out.repetitions);
  if (n > 100000) throw config_error(doc, o, fmt::format("outages: {} outages is more than 100000", n));
  spec.reconfigurations = static_cast<int>(n);
}

// The outages sections: one mapping, the outages, schedule (warm-up, settle), probes.
void parse_outages_sections(const YamlDoc& doc, const YAML::Node& root, ExperimentSpec& spec) {
  parse_mappings(doc, root, spec);
  parse_outages(doc, root, spec);
  if (const auto& s = root["schedule"]) parse_schedule(doc, s, spec);
  if (const auto& p = root["probes"]) parse_probes(doc, p, spec);
  if (spec.rdma.enabled && spec.rdma.pairs.empty()) rdma_pairs_from_mappings(spec);
}

// nic_models: {NAME: MODEL, ...}: the models a firmware sweep may name besides the emulator's
// presets, each in the lab file's nic_model syntax (checked by the emulator's own parser).
std::map<std::string, NicModelChoice> parse_nic_models(const YamlDoc& doc, const YAML::Node& n) {
  std::map<std::string, NicModelChoice> out;
  if (!n.IsMap() || n.size() == 0) {
    throw config_error(doc, n, "nic_models is a map {NAME: {preset, los_ms, firmware_up_ms, ...}, ...}");
  }
  const auto presets = emu::NicLinkParams::preset_names();
  for (const auto& kv : n) {
    const std::string name = as_string(doc, kv.first);
    if (!valid_name(name)) {
      throw config_error(doc, kv.first, "'" + name + "' is not a valid NIC model name (letters, digits, . _ -)");
    }
    if (std::find(presets.begin(), presets.end(), name) != presets.end()) {
      throw config_error(doc, kv.first, "nic_models: '" + name + "' is a preset's name; give the model another");
    }
    std::string preset;
    const emu::NicLinkParams p = emu::parse_nic_link(doc, kv.second, preset);
    YAML::Emitter e;
    e.SetMapFormat(YAML::Flow);
    e.SetSeqFormat(YAML::Flow);
    e << kv.second;
    out[name] = NicModelChoice{name, e.c_str(), p.firmware_up.mean_ms(), ""};
  }
  return out;
}

// sweep.nic_model: [NAME, ...]: presets or nic_models entries, each once.
void parse_sweep_models(const YamlDoc& doc, const YAML::Node& root, const YAML::Node& list, ExperimentSpec& spec) {
  if (!list.IsSequence() || list.size() == 0) {
    throw config_error(doc, list, "sweep.nic_model is a non-empty list of NIC model names");
  }
  const auto defined = root["nic_models"] ? parse_nic_models(doc, root["nic_models"])
                                          : std::map<std::string, NicModelChoice>{};
  if (spec.vlab.empty()) {
    throw config_error(doc, list,
                       "sweep.nic_model needs a virtual lab (lab.vlab): the runner sets the model on its emulator");
  }
  const auto presets = emu::NicLinkParams::preset_names();
  for (const auto& v : list) {
    const std::string name = as_string(doc, v);
    NicModelChoice c;
    if (auto it = defined.find(name); it != defined.end()) {
      c = it->second;
    } else if (std::find(presets.begin(), presets.end(), name) != presets.end()) {
      c = {name, name, emu::NicLinkParams::preset(name).firmware_up.mean_ms(), ""};
    } else {
      std::string known;
      for (const auto& [k, m] : defined) known += ", " + k;
      throw config_error(doc, v,
                         fmt::format("sweep.nic_model: unknown NIC model '{}' (presets: {}; nic_models: {})", name,
                                     fmt::join(presets, ", "), known.empty() ? "none" : known.substr(2)));
    }
    for (const auto& m : spec.sweep.nic_models) {
      if (m.name == name) throw config_error(doc, v, fmt::format("sweep.nic_model: '{}' listed twice", name));
    }
    c.where = location(doc, v);
    spec.sweep.nic_models.push_back(std::move(c));
  }
}

// sweep.dwell_s: [S, ...]: each above 0 (at least 0.01 s, as schedule.dwell_s), each once.
void parse_sweep_dwells(const YamlDoc& doc, const YAML::Node& list, ExperimentSpec& spec) {
  if (!list.IsSequence() || list.size() == 0) {
    throw config_error(doc, list, "sweep.dwell_s is a non-empty list of dwell times in seconds");
  }
  for (const auto& v : list) {
    const double d = as_double(doc, v);
    if (!(d >= 0.01 && d <= 3600)) {
      throw config_error(doc, v,
                         fmt::format("sweep.dwell_s: {} is not a dwell time (at least 0.01 s, at most 3600 s)", d));
    }
    if (std::find(spec.sweep.dwell_s.begin(), spec.sweep.dwell_s.end(), d) != spec.sweep.dwell_s.end()) {
      throw config_error(doc, v, fmt::format("sweep.dwell_s: {} s listed twice", d));
    }
    spec.sweep.dwell_s.push_back(d);
  }
}

// sweep: {nic_model: [...], dwell_s: [...]} of a reconfig-latency spec: the firmware study.
void parse_firmware_sweep(const YamlDoc& doc, const YAML::Node& root, const YAML::Node& sw, ExperimentSpec& spec) {
  if (!sw.IsMap()) throw config_error(doc, sw, "sweep is a map {nic_model: [NAME, ...], dwell_s: [S, ...]}");
  for (const char* k : {"switching_ms", "env", "outage_ms", "repetitions", "inject", "order"}) {
    if (sw[k]) {
      throw config_error(doc, sw,
                         fmt::format("'sweep' needs type: {} for {} (a {} sweep has nic_model and dwell_s)",
                                     kPhaseWorkload, k, kReconfigLatency));
    }
  }
  only_keys(doc, sw, {"nic_model", "dwell_s"});
  if (!sw["nic_model"] && !sw["dwell_s"]) throw config_error(doc, sw, "sweep needs an axis: nic_model or dwell_s");
  if (sw["nic_model"]) parse_sweep_models(doc, root, sw["nic_model"], spec);
  if (sw["dwell_s"]) parse_sweep_dwells(doc, sw["dwell_s"], spec);
  const size_t points = spec.sweep_points().size();
  if (points > kMaxSweepPoints) {
    throw config_error(doc, sw, fmt::format("sweep: {} points is more than {}", points, kMaxSweepPoints));
  }
  if (points * static_cast<size_t>(spec.reconfigurations) > 100000) {
    throw config_error(doc, sw,
                       fmt::format("sweep: {} points x {} reconfigurations is more than 100000 reconfigurations",
                                   points, spec.reconfigurations));
  }
}

// The reconfig-latency sections: mappings, schedule, probes, forwarding, faults.
void parse_reconfiguration_sections(const YamlDoc& doc, const YAML::Node& root, ExperimentSpec& spec) {
  parse_mappings(doc, root, spec);
  if (const auto& s = root["schedule"]) parse_schedule(doc, s, spec);
  if (const auto& s = root["sweep"]) parse_firmware_sweep(doc, root, s, spec);
  if (root["nic_models"] && spec.sweep.nic_models.empty()) {
    throw config_error(doc, root["nic_models"], "nic_models: no sweep.nic_model names them");
  }
  if (const auto& f = root["faults"]) parse_faults(doc, f, spec, nullptr);
  if (const auto& p = root["probes"]) parse_probes(doc, p, spec);
  if (spec.rdma.enabled && spec.rdma.pairs.empty()) rdma_pairs_from_mappings(spec);
  if (const auto& f = root["forwarding"]) {
    spec.forwarding = parse_forwarding_spec(doc, f, spec);
    for (const auto& m : spec.mappings) fabric_for(spec, m);  // every mapping's fabric must be valid
  }
}

}  // namespace

ExperimentSpec parse_experiment_spec(const YamlDoc& doc) {
  const auto& root = doc.root;
  if (!root.IsMap()) throw config_error(doc, root, "an experiment spec is a map (name, lab, switch, mappings, ...)");
  only_keys(doc, root,
            {"type", "name", "lab", "switch", "mappings", "schedule", "probes", "seed", "output", "workload", "phase",
             "forwarding", "sweep", "faults", "outages", "nic_models"});
  ExperimentSpec spec;
  spec.origin = doc.origin;
  parse_type(doc, root, spec);
  spec.name = root["name"] ? as_string(doc, root["name"]) : fs::path(doc.origin).stem().string();
  if (!valid_name(spec.name))
    throw config_error(doc, root["name"] ? root["name"] : root,
                       "'" + spec.name + "' is not a valid experiment name (letters, digits, . _ -)");
  parse_lab(doc, require(doc, root, "lab"), spec);
  parse_switch(doc, root, spec);
  if (spec.type == kPhaseWorkload) {
    parse_phase_sections(doc, root, spec);
  } else if (spec.type == kOutages) {
    parse_outages_sections(doc, root, spec);
  } else {
    parse_reconfiguration_sections(doc, root, spec);
  }
  if (root["seed"]) spec.seed = static_cast<uint64_t>(as_int(doc, root["seed"]));
  if (root["output"]) spec.output = as_string(doc, root["output"]);  // relative to where ocslab runs
  return spec;
}

ExperimentSpec load_experiment_spec(const std::string& path) { return parse_experiment_spec(load_yaml_file(path)); }

void check_switch_login(const ExperimentSpec& spec) {
  if (spec.switch_url.empty()) return;  // a virtual lab's emulator: the lab holds its password
  const auto url = ocs::SwitchUrl::parse(spec.switch_url);
  const std::string file = ocs::default_credentials_path();
  std::optional<std::string> password;
  try {
    password = ocs::resolve_password(url, file);
  } catch (const Error& e) {
    throw ConfigError(spec.switch_url_where + ": " + e.what());
  }
  // Raw TL1 logs in with ACT-USER only (tl1_driver.cpp); over SSH a key may do instead.
  if (password || url.protocol != ocs::Protocol::kTl1) return;
  const bool loopback = ocs::is_loopback_host(url.host);
  throw ConfigError(fmt::format(
      "{}: no password for {}@{}: set ${}{} or add a line '{} {} PASSWORD' to the credentials file {} (mode 0600)",
      spec.switch_url_where, url.user, url.host, ocs::kPasswordEnv,
      loopback ? "" : fmt::format(" with ${}={}", ocs::kPasswordHostEnv, url.host), url.host, url.user, file));
}

bool rdma_pins_neighbours(const ExperimentSpec& spec) {
  return spec.rdma.pin_neighbours.value_or(!spec.vlab.empty() && !spec.forwarding.enabled);
}

}  // namespace ocslab::runner
