#include "ocslab/runner/lab_forwarding.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "ocslab/common/bounded_line.h"
#include "ocslab/common/clock.h"
#include "ocslab/common/csv_writer.h"
#include "ocslab/common/exit_code.h"
#include "ocslab/common/in_parallel.h"
#include "ocslab/common/secret.h"
#include "ocslab/common/shell.h"
#include "ocslab/common/text.h"
#include "ocslab/forwarding/diff.h"
#include "ocslab/ocsctl/errors.h"
#include "ocslab/ocsctl/ssh_session.h"
#include "ocslab/runner/forwarding_spec.h"
#include "ocslab/runner/run_context.h"

namespace ocslab::runner {

namespace fw = ocslab::forwarding;
using json = nlohmann::json;
using namespace std::chrono_literals;

namespace {

// What a failed agent command said: its standard error (or output), the last lines only, for
// a message that names the cause without flooding the log.
std::string failure_text(const std::string& err, const std::string& out, int status) {
  std::string t = err.empty() ? out : err;
  while (!t.empty() && (t.back() == '\n' || t.back() == '\r')) t.pop_back();
  size_t pos = t.size();
  for (int lines = 0; lines < 12 && pos != std::string::npos && pos > 0; ++lines) pos = t.rfind('\n', pos - 1);
  if (pos != std::string::npos && pos > 0) t = "..." + t.substr(pos);
  if (t.empty()) t = fmt::format("exit status {}", status);
  return t;
}

}  // namespace

bool VerifyMatrix::all_reachable() const {
  return std::all_of(pairs.begin(), pairs.end(), [](const PairResult& p) { return p.reachable; });
}

bool VerifyMatrix::hops_as_planned() const {
  return std::all_of(pairs.begin(), pairs.end(), [](const PairResult& p) {
    return p.reachable && p.hops == p.expected_hops && p.relays == p.expected_relays;
  });
}

std::vector<std::string> relays_from_counters(const std::vector<FilterCount>& before,
                                              const std::vector<FilterCount>& after, const std::string& dst_ip,
                                              uint64_t min_packets, const std::vector<std::string>& expected_relays) {
  std::map<std::tuple<std::string, std::string>, uint64_t> b;
  for (const auto& f : before)
    if (f.dst == dst_ip) b[{f.host, f.dev}] = f.packets;
  std::set<std::string> moved;
  for (const auto& f : after) {
    if (f.dst != dst_ip) continue;
    auto it = b.find({f.host, f.dev});
    uint64_t was = it == b.end() ? 0 : it->second;
    // A counter that went down was reset (filter re-created): count from zero.
    uint64_t delta = f.packets >= was ? f.packets - was : f.packets;
    if (delta >= std::max<uint64_t>(min_packets, 1)) moved.insert(f.host);
  }
  std::vector<std::string> out;
  for (const auto& r : expected_relays)
    if (moved.erase(r)) out.push_back(r);
  out.insert(out.end(), moved.begin(), moved.end());
  return out;
}

PairResult plan_pair(const fw::Fabric& fabric, const fw::Routes& routes, const std::string& src,
                     const std::string& dst) {
  PairResult p;
  p.src = src;
  p.dst = dst;
  const fw::DestinationTree& tree = routes.tree_for(src, dst);
  p.dst_ip = fw::format_ipv4(tree.ip) + "/32";
  p.dst_if = fabric.find_port(tree.dst)->if1.name;
  fw::Path path = routes.path_to(tree, src);
  if (path.empty()) throw Error(fmt::format("forwarding: no path from {} to {}", src, dst));
  p.src_if = fabric.find_port(path.front().from)->if1.name;
  p.expected_hops = static_cast<int>(path.size());
  for (size_t k = 1; k < path.size(); ++k) p.expected_relays.push_back(path[k].from.host);
  return p;
}

std::vector<fw::HostPlan> lab_plans(const ExperimentSpec& spec, const Mapping& mapping) {
  fw::Fabric fabric = fabric_for(spec, mapping);
  return lab_plans(spec, fabric, fw::compute_routes(fabric, route_options(spec, fabric)));
}

std::vector<fw::HostPlan> lab_plans(const ExperimentSpec& spec, const fw::Fabric& fabric, const fw::Routes& routes) {
  fw::Plan plan = fw::make_plan(fabric, routes, fw::PlanOptions{spec.forwarding.every_nic});
  std::vector<fw::HostPlan> out;
  for (size_t h = 0; h < spec.hosts.size(); ++h) {
    fw::HostPlan p = plan.host(spec.hosts[h].name);
    if (spec.forwarding.hosts[h].if2 == If2Mode::kMacvlan && spec.forwarding.relay) {
      // As `ocslab-agent forwarding --if2-macvlan`: only the if2s that get a clsact.
      std::set<std::string> relay_devs;
      for (const auto& q : p.qdiscs) relay_devs.insert(q.dev);
      for (const auto& m : fw::if2_macvlans(fabric, p.host))
        if (relay_devs.count(m.name)) p.links.push_back({m.name, m.parent, m.mac});
    }
    out.push_back(std::move(p));
  }
  return out;
}

std::string format_matrix(const VerifyMatrix& m) {
  // Cell: hops and the relays actually taken ("2 via h2"), "-" on the diagonal, "FAIL" when the
  // RC ping did not complete; "!" marks a path other than the plan's.
  std::map<std::pair<std::string, std::string>, std::string> cell;
  size_t width = 6;
  for (const auto& p : m.pairs) {
    std::string c;
    if (!p.reachable)
      c = "FAIL";
    else {
      c = std::to_string(p.hops);
      if (!p.relays.empty()) {
        c += " via ";
        for (size_t k = 0; k < p.relays.size(); ++k) c += (k ? "," : "") + p.relays[k];
      }
      if (p.hops != p.expected_hops || p.relays != p.expected_relays) c += " !";
    }
    width = std::max(width, c.size());
    cell[{p.src, p.dst}] = c;
  }
  for (const auto& h : m.hosts) width = std::max(width, h.size());
  std::string out =
      fmt::format("forwarding verify: mapping {} (rows: source, columns: destination; hops, relays)\n", m.mapping);
  out += fmt::format("{:<{}}", "", width + 2);
  for (const auto& h : m.hosts) out += fmt::format("{:<{}}", h, width + 2);
  out += "\n";
  for (const auto& s : m.hosts) {
    out += fmt::format("{:<{}}", s, width + 2);
    for (const auto& d : m.hosts) {
      auto it = cell.find({s, d});
      out += fmt::format("{:<{}}", s == d ? std::string("-") : (it == cell.end() ? std::string("?") : it->second),
                         width + 2);
    }
    out += "\n";
  }
  size_t reach = 0, planned = 0;
  for (const auto& p : m.pairs) {
    reach += p.reachable;
    planned += p.reachable && p.hops == p.expected_hops && p.relays == p.expected_relays;
  }
  std::string sync;
  for (const auto& [h, ok] : m.in_sync)
    if (!ok) sync += (sync.empty() ? "" : ", ") + h;
  out += fmt::format("{} of {} pairs reachable, {} over the planned path; hosts out of sync with the plan: {}\n", reach,
                     m.pairs.size(), planned, sync.empty() ? "none" : sync);
  return out;
}

void write_matrix_csv(const VerifyMatrix& m, const std::string& path) {
  CsvWriter w(path);
  w.header({"mapping", "src", "dst", "src_if", "dst_if", "dst_ip", "reachable", "ok", "errors", "hops", "relays",
            "expected_hops", "expected_relays", "elapsed_ms", "error"});
  auto join = [](const std::vector<std::string>& v) {
    std::string s;
    for (const auto& x : v) s += (s.empty() ? "" : " ") + x;
    return s;
  };
  for (const auto& p : m.pairs)
    w.row({m.mapping, p.src, p.dst, p.src_if, p.dst_if, p.dst_ip, p.reachable ? "1" : "0", std::to_string(p.ok),
           std::to_string(p.errors), std::to_string(p.hops), join(p.relays), std::to_string(p.expected_hops),
           join(p.expected_relays), fmt::format("{:.1f}", p.elapsed_ms), p.error});
  w.flush();
}

json to_json(const VerifyMatrix& m) {
  json pairs = json::array();
  for (const auto& p : m.pairs)
    pairs.push_back({{"src", p.src},
                     {"dst", p.dst},
                     {"src_if", p.src_if},
                     {"dst_if", p.dst_if},
                     {"dst_ip", p.dst_ip},
                     {"reachable", p.reachable},
                     {"ok", p.ok},
                     {"errors", p.errors},
                     {"hops", p.hops},
                     {"relays", p.relays},
                     {"expected_hops", p.expected_hops},
                     {"expected_relays", p.expected_relays},
                     {"elapsed_ms", p.elapsed_ms},
                     {"error", p.error}});
  return {{"mapping", m.mapping},
          {"hosts", m.hosts},
          {"in_sync", m.in_sync},
          {"all_reachable", m.all_reachable()},
          {"hops_as_planned", m.hops_as_planned()},
          {"pairs", pairs}};
}

LabForwarding::LabForwarding(const ExperimentSpec& spec, std::vector<ForwardingHostAccess> hosts, Log log)
    : spec_(spec), hosts_(std::move(hosts)), log_(std::move(log)) {
  ssh_.resize(hosts_.size());
  if (!log_) log_ = [](const std::string&) {};
}

LabForwarding::~LabForwarding() {
  if (!dirty_) return;
  try {
    clear();
  } catch (const std::exception& e) {
    log_(std::string("forwarding clear failed: ") + e.what());
  }
}

std::string agent_forwarding_command(const std::string& agent, const std::vector<std::string>& argv) {
  std::vector<std::string> words{"forwarding"};
  words.insert(words.end(), argv.begin(), argv.end());
  return agent + " " + shell_join(words);
}

std::vector<std::string> ping_argv(const std::string& nic, bool listen, const std::string& mgmt, int port, int count,
                                   int timeout_s) {
  return {"ping",
          "--if",
          nic,
          listen ? "--listen" : "--connect",
          fmt::format("{}:{}", mgmt, port),
          "--secret-file",
          "-",
          "--count",
          std::to_string(count),
          "--timeout-s",
          std::to_string(timeout_s)};
}

LabForwarding::Exec LabForwarding::run(size_t i, const std::vector<std::string>& argv, const std::string& input) {
  Exec r;
  for (int attempt = 0; attempt < 2; ++attempt) {
    try {
      if (!ssh_[i]) ssh_[i] = std::make_unique<ocs::SshSession>(hosts_[i].ssh);
      auto x = ssh_[i]->exec(agent_forwarding_command(hosts_[i].agent, argv), 180s, input);
      r.status = x.exit_status;
      r.out = std::move(x.out);
      r.err = std::move(x.err);
      return r;
    } catch (const ocs::ConnectionError& e) {
      // A dropped connection: one fresh one (the agent's operations are journaled and locked).
      ssh_[i].reset();
      r.err = e.what();
    } catch (const std::exception& e) {
      // A timeout: the connection is in an unknown state; the next command opens a fresh one.
      ssh_[i].reset();
      r.err = e.what();
      break;
    }
  }
  r.status = -1;
  return r;
}

std::vector<ForwardingApplyRecord> LabForwarding::apply(const Mapping& mapping, int iteration) {
  fw::Fabric fabric = fabric_for(spec_, mapping);
  fw::Routes routes = fw::compute_routes(fabric, route_options(spec_, fabric));
  return apply_routes(mapping.name, fabric, routes, iteration);
}

std::vector<ForwardingApplyRecord> LabForwarding::apply_routes(const std::string& label, const fw::Fabric& fabric,
                                                               const fw::Routes& routes, int iteration) {
  auto plans = lab_plans(spec_, fabric, routes);
  // One id for this apply on every host and every retry: a retry after a dropped session finds
  // its own journal entry, and the rollback below undoes exactly this apply and nothing older.
  const std::string op_id = fmt::format("apply-{}-{}", iteration, random_token(8));
  std::vector<std::string> argv{"apply",   "--plan", "-", "--json", "--state-dir", spec_.forwarding.state_dir,
                                "--op-id", op_id};
  if (!spec_.forwarding.relay) argv.push_back("--no-relay");
  std::vector<ForwardingApplyRecord> recs(hosts_.size());
  dirty_ = true;
  in_parallel(hosts_.size(), [&](size_t i) {
    auto& r = recs[i];
    r.host = hosts_[i].name;
    r.mapping = label;
    r.iteration = iteration;
    r.started_ns = realtime_ns();
    Exec x = run(i, argv, fw::to_json(plans[i]).dump());
    r.finished_ns = realtime_ns();
    if (x.status == 0) {
      try {
        json reply = json::parse(x.out);
        r.changes = reply.at("changes").at("changes").get<size_t>();
        r.journaled = reply.value("journaled", r.changes > 0);  // an agent without op ids: as before
        r.ok = true;
      } catch (const std::exception& e) {
        r.error = std::string("unreadable answer: ") + e.what() + ": " + last_line(x.out);
      }
    } else {
      r.error = failure_text(x.err, x.out, x.status);
    }
  });
  std::string failed;
  for (const auto& r : recs)
    if (!r.ok) failed += fmt::format("\n  {}: {}", r.host, r.error);
  records_.insert(records_.end(), recs.begin(), recs.end());
  if (failed.empty()) {
    installed_ = Installed{label, fabric, routes};
    return recs;
  }
  // Transactional across the lab: undo this apply wherever it may have landed. A host that
  // answered without journaling it is left alone (a rollback there would undo an older
  // operation); a host whose answer never came (the session dropped twice) may hold it, so it
  // gets the rollback too: with the op id that undoes this apply only, or is a no-op.
  std::vector<std::string> rb_err(hosts_.size());
  in_parallel(hosts_.size(), [&](size_t i) {
    if (recs[i].ok && !recs[i].journaled) return;
    Exec x = run(i, {"rollback", "--state-dir", spec_.forwarding.state_dir, "--op-id", op_id});
    if (x.status != 0) rb_err[i] = failure_text(x.err, x.out, x.status);
  });
  std::string rb;
  for (size_t i = 0; i < hosts_.size(); ++i)
    if (!rb_err[i].empty()) rb += fmt::format("\n  rollback on {} failed too: {}", hosts_[i].name, rb_err[i]);
  throw ForwardingFailed(fmt::format(
      "forwarding apply of mapping '{}' failed on:{}\nthe other hosts were rolled back{}", label, failed, rb));
}

std::vector<std::string> LabForwarding::clear() {
  std::vector<std::string> errors(hosts_.size());
  in_parallel(hosts_.size(), [&](size_t i) {
    Exec x = run(i, {"clear", "--host", hosts_[i].name, "--state-dir", spec_.forwarding.state_dir});
    if (x.status != 0) errors[i] = failure_text(x.err, x.out, x.status);
  });
  dirty_ = false;
  for (size_t i = 0; i < hosts_.size(); ++i)
    if (!errors[i].empty()) log_(fmt::format("forwarding clear on {} failed: {}", hosts_[i].name, errors[i]));
  return errors;
}

std::vector<FilterCount> LabForwarding::read_counters(const std::vector<fw::HostPlan>& plans,
                                                      std::map<std::string, bool>* in_sync) {
  std::vector<std::vector<FilterCount>> per(hosts_.size());
  std::vector<int> sync(hosts_.size(), -1);
  std::vector<std::string> argv{"verify", "--plan", "-", "--json", "--state-dir", spec_.forwarding.state_dir};
  if (!spec_.forwarding.relay) argv.push_back("--no-relay");
  in_parallel(hosts_.size(), [&](size_t i) {
    if (plans[i].filters.empty() && !in_sync) return;  // relays nothing: no counters to read
    Exec x = run(i, argv, fw::to_json(plans[i]).dump());
    if (x.status != kExitOk && x.status != kExitMismatch) {  // 7: verify found a difference
      log_(fmt::format("forwarding verify on {} failed: {}", hosts_[i].name, last_line(x.err)));
      return;
    }
    try {
      json j = json::parse(x.out);
      sync[i] = j.at("in_sync").get<bool>() ? 1 : 0;
      for (const auto& f : j.at("filters"))
        per[i].push_back({hosts_[i].name, f.at("dev"), f.at("dst"), f.at("packets").get<uint64_t>()});
    } catch (const std::exception& e) {
      log_(fmt::format("forwarding verify on {}: unreadable answer: {}", hosts_[i].name, e.what()));
    }
  });
  if (in_sync)
    for (size_t i = 0; i < hosts_.size(); ++i) (*in_sync)[hosts_[i].name] = sync[i] == 1;
  std::vector<FilterCount> out;
  for (auto& v : per) out.insert(out.end(), v.begin(), v.end());
  return out;
}

std::vector<std::vector<std::pair<size_t, size_t>>> verify_rounds(size_t hosts) {
  std::vector<std::vector<std::pair<size_t, size_t>>> rounds;
  std::vector<std::vector<bool>> busy;  // per round, per host: already a source or destination in it
  for (size_t s = 0; s < hosts; ++s)
    for (size_t d = 0; d < hosts; ++d) {
      if (s == d) continue;
      size_t r = 0;
      while (r < rounds.size() && (busy[r][s] || busy[r][d])) ++r;
      if (r == rounds.size()) {
        rounds.emplace_back();
        busy.emplace_back(hosts, false);
      }
      rounds[r].push_back({s, d});
      busy[r][s] = busy[r][d] = true;
    }
  return rounds;
}

void LabForwarding::ping_pair(PairResult& p, size_t s, size_t d, int port, const std::string& secret) {
  const auto& f = spec_.forwarding;
  Exec server, client;
  auto t0 = std::chrono::steady_clock::now();
  std::thread srv([&] {
    // The server listens on its management address only: where the client connects.
    server = run(d, ping_argv(p.dst_if, true, hosts_[d].mgmt, port, f.ping_count, f.ping_timeout_s + 5), secret);
  });
  client = run(s, ping_argv(p.src_if, false, hosts_[d].mgmt, port, f.ping_count, f.ping_timeout_s), secret);
  srv.join();
  p.elapsed_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  try {
    json c = json::parse(last_line(client.out));
    p.ok = c.value("ok", 0LL);
    p.errors = c.value("errors", 0LL);
    p.reachable = client.status == 0 && server.status == 0;
  } catch (const std::exception&) {
    p.reachable = false;
  }
  if (!p.reachable)
    p.error = last_line(client.err.empty() ? client.out : client.err) +
              (server.status != 0 ? " / server: " + last_line(server.err.empty() ? server.out : server.err) : "");
}

VerifyMatrix LabForwarding::verify(const Mapping& mapping) {
  fw::Fabric fabric = fabric_for(spec_, mapping);
  return verify_routes(mapping.name, fabric, fw::compute_routes(fabric, route_options(spec_, fabric)));
}

VerifyMatrix LabForwarding::verify_installed(const std::string& label) {
  if (installed_.label.empty()) throw Error("forwarding verify: nothing applied yet");
  return verify_routes(label, installed_.fabric, installed_.routes);
}

VerifyMatrix LabForwarding::verify_routes(const std::string& label, const fw::Fabric& fabric,
                                          const fw::Routes& routes) {
  auto plans = lab_plans(spec_, fabric, routes);
  VerifyMatrix m;
  m.mapping = label;
  for (const auto& h : hosts_) m.hosts.push_back(h.name);
  auto counters = read_counters(plans, &m.in_sync);
  // The pings' QP exchanges are authenticated: a fresh secret, sent to both sides on standard
  // input over the SSH session (not on a command line another user of the host could read).
  const std::string secret = random_token() + "\n";
  // The pairs of a round run at once (verify_rounds): a relay's filter counts per destination
  // address and the replies go to the sources, so the pairs of a round, whose hosts are all
  // distinct, move disjoint counters. The counters are read once per round; the "after" read of
  // a round is the "before" of the next.
  const size_t n = hosts_.size();
  std::vector<PairResult> results(n * n);
  for (const auto& round : verify_rounds(n)) {
    std::vector<int> ports;
    for (auto [s, d] : round) {
      if (routes.has_route(hosts_[s].name, hosts_[d].name)) {
        results[s * n + d] = plan_pair(fabric, routes, hosts_[s].name, hosts_[d].name);
      } else {  // the installed routes cannot join them (a dark circuit split the fabric)
        results[s * n + d].src = hosts_[s].name;
        results[s * n + d].dst = hosts_[d].name;
        results[s * n + d].error = "no route over the circuits the routes were computed on";
      }
      ports.push_back(spec_.forwarding.ping_port + (next_port_++ % 2000));
    }
    in_parallel(round.size(), [&](size_t k) {
      auto [s, d] = round[k];
      if (results[s * n + d].error.empty()) ping_pair(results[s * n + d], s, d, ports[k], secret);
    });
    auto after = read_counters(plans, nullptr);
    for (auto [s, d] : round) {
      PairResult& p = results[s * n + d];
      if (!p.reachable) continue;
      // Each good SEND crossed every relay on the way at least once.
      p.relays = relays_from_counters(counters, after, p.dst_ip, static_cast<uint64_t>(spec_.forwarding.ping_count),
                                      p.expected_relays);
      p.hops = 1 + static_cast<int>(p.relays.size());
    }
    counters = std::move(after);
  }
  for (size_t s = 0; s < n; ++s)
    for (size_t d = 0; d < n; ++d)
      if (s != d) m.pairs.push_back(std::move(results[s * n + d]));
  return m;
}

std::vector<Sample> LabForwarding::samples() const {
  std::vector<Sample> out;
  for (const auto& r : records_) {
    double ms = static_cast<double>(r.finished_ns - r.started_ns) / 1e6;
    out.push_back(Sample{r.finished_ns, 0, r.host, "forwarding", r.mapping, "apply_ms", r.ok ? ms : -1, "ms"});
    out.push_back(Sample{r.finished_ns, 0, r.host, "forwarding", r.mapping, "apply_changes",
                         static_cast<double>(r.changes), "count"});
  }
  return out;
}

std::vector<ForwardingHostAccess> forwarding_access(const ExperimentSpec& spec,
                                                    const std::vector<ocs::SshOptions>& ssh) {
  std::vector<ForwardingHostAccess> out;
  for (size_t i = 0; i < spec.hosts.size(); ++i)
    out.push_back({spec.hosts[i].name, ssh.at(i), spec.hosts[i].agent,
                   spec.hosts[i].mgmt.empty() ? spec.hosts[i].ssh_host : spec.hosts[i].mgmt});
  return out;
}

void write_matrix_files(const VerifyMatrix& m, const std::string& folder, int iteration) {
  std::string base = fmt::format("{}/forwarding-verify-{}-{}", folder, iteration, m.mapping);
  write_matrix_csv(m, base + ".csv");
  write_text(base + ".json", to_json(m).dump(2) + "\n");  // checked on close: a full disk names the file
  write_text(base + ".txt", format_matrix(m));
}

namespace {
void verify_and_write(LabForwarding& fwd, const ExperimentSpec& spec, const Mapping& mapping, int iteration,
                      const std::string& folder, const LabForwarding::Log& log) {
  (void)spec;
  VerifyMatrix m = fwd.verify(mapping);
  write_matrix_files(m, folder, iteration);
  log(format_matrix(m));
}
}  // namespace

std::unique_ptr<LabForwarding> forwarding_start(const ExperimentSpec& spec, const std::vector<ocs::SshOptions>& ssh,
                                                const std::string& folder, const LabForwarding::Log& log) {
  if (!spec.forwarding.enabled) return nullptr;
  auto fwd = std::make_unique<LabForwarding>(spec, forwarding_access(spec, ssh), log);
  auto recs = fwd->apply(spec.mappings[0], 0);
  std::string times;
  for (const auto& r : recs)
    times += fmt::format(" {} {:.0f} ms ({} changes)", r.host, (r.finished_ns - r.started_ns) / 1e6, r.changes);
  log("forwarding applied for mapping '" + spec.mappings[0].name + "':" + times);
  if (spec.forwarding.verify != VerifyWhen::kNever) verify_and_write(*fwd, spec, spec.mappings[0], 0, folder, log);
  return fwd;
}

void forwarding_reconfigured(LabForwarding& fwd, const Mapping& mapping, int iteration, const std::string& folder) {
  auto recs = fwd.apply(mapping, iteration);
  if (fwd.spec().forwarding.verify == VerifyWhen::kEvery)
    verify_and_write(fwd, fwd.spec(), mapping, iteration, folder, fwd.log());
}

}  // namespace ocslab::runner
