// `ocslab forwarding apply|verify|clear SPEC.yaml [--mapping NAME]`: the runner's lab-wide
// host-based forwarding (runner/lab_forwarding.h) by hand, on the spec's running virtual lab or
// its inventory's hosts: apply puts the switch on the mapping and applies every host's plan,
// verify prints the reachability / hop matrix, clear removes ocslab's state on every host.
#include <fmt/format.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <ostream>

#include "cli_args.h"
#include "commands.h"
#include "ocslab/cli/ocslab_cli.h"
#include "ocslab/ocsctl/driver.h"
#include "ocslab/runner/experiment_spec.h"
#include "ocslab/runner/lab_forwarding.h"
#include "ocslab/runner/runner.h"
#include "ocslab/vlab/lab_control.h"
#include "ocslab/vlab/lab_state.h"

namespace ocslab::cli {

namespace fs = std::filesystem;

namespace {

const char* kForwardingHelp = R"(ocslab forwarding - host-based forwarding across a spec's lab

Usage: ocslab forwarding (apply|verify|clear) SPEC.yaml [--mapping NAME] [-o DIR] [--cache DIR]

The spec's `forwarding:` section (docs/experiments.md) and one of its mappings (default: the
first) give every host's plan, as `ocslab run` applies it. The virtual lab must be up.
  apply   put the switch on the mapping, then apply every host's plan in parallel; when a host
          fails, the others are rolled back (exit 3)
  verify  for every ordered host pair an RC ping over the fabric and the hops it took (relay
          filter counters before/after); prints the matrix, -o DIR writes
          forwarding-verify-0-<mapping>.{csv,json,txt}; exit 0 when every pair is reachable over
          the planned relays, 3 otherwise
  clear   remove ocslab's forwarding state on every host
)";

// Where to reach each host: the running virtual lab's guests or the inventory's hosts.
std::vector<ocs::SshOptions> host_ssh(runner::ExperimentSpec& spec, const std::string& cache, vlab::LabState* lab) {
  if (!spec.vlab.empty()) {
    std::string dir = vlab::labs_dir(cache.empty() ? vlab::default_cache_dir() : cache) + "/" + spec.vlab_name;
    if (!fs::exists(dir + "/state.json"))
      throw Error(fmt::format("the virtual lab '{}' is not up (ocslab vlab up {})", spec.vlab_name, spec.vlab));
    *lab = vlab::lab_status(dir);
    std::string agent = lab->dir + "/bin/ocslab-agent";
    if (!fs::exists(agent)) {
      // Guests see the host's root read-only: the agent next to this ocslab, copied as the runner does.
      std::error_code ec;
      fs::create_directories(lab->dir + "/bin");
      fs::copy_file(fs::read_symlink("/proc/self/exe").parent_path() / "ocslab-agent", agent, ec);
      if (ec) throw Error("cannot copy ocslab-agent into " + agent + ": " + ec.message());
    }
    for (auto& h : spec.hosts) {
      h.ssh_host = "127.0.0.1";
      h.ssh_port = lab->host(h.name).ssh_port;
      h.user = "root";
      h.identity_file = lab->client_key();
      h.known_hosts = lab->known_hosts();
      h.agent = agent;
    }
  }
  std::vector<ocs::SshOptions> out;
  for (const auto& h : spec.hosts) {
    ocs::SshOptions o;
    o.host = h.ssh_host;
    o.port = h.ssh_port;
    o.user = h.user;
    o.identity_file = h.identity_file;
    o.known_hosts_file = h.known_hosts;
    out.push_back(o);
  }
  return out;
}

}  // namespace

int run_forwarding(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  std::string sub, spec_path, mapping, output, cache;
  auto option = [&](const std::string& a, const OptionValue& value) {
    if (a == "--mapping") {
      mapping = value();
    } else if (a == "-o" || a == "--output") {
      output = value();
    } else if (a == "--cache") {
      cache = value();
    } else {
      return false;
    }
    return true;
  };
  auto positional = [&](const std::string& a) {
    if (sub.empty()) {
      sub = a;
    } else if (spec_path.empty()) {
      spec_path = a;
    } else {
      throw UsageError("unexpected argument '" + a + "' (ocslab forwarding --help)");
    }
  };
  if (!parse_args(args, "forwarding", kForwardingHelp, out, option, positional)) return kExitOk;
  if (sub != "apply" && sub != "verify" && sub != "clear")
    throw UsageError(
        "usage: ocslab forwarding (apply|verify|clear) SPEC.yaml [--mapping NAME] (ocslab forwarding --help)");
  if (spec_path.empty()) throw UsageError("ocslab forwarding " + sub + ": give the experiment spec");
  runner::ExperimentSpec spec = runner::load_experiment_spec(spec_path);
  if (!spec.forwarding.enabled) throw ConfigError(spec.origin + ": the spec has no forwarding section");
  const runner::Mapping* m = &spec.mappings[0];
  if (!mapping.empty()) {
    m = nullptr;
    for (const auto& x : spec.mappings)
      if (x.name == mapping) m = &x;
    if (!m) throw UsageError("the spec has no mapping '" + mapping + "'");
  }
  vlab::LabState lab;
  auto ssh = host_ssh(spec, cache, &lab);
  auto log = [&](const std::string& s) { err << "ocslab forwarding: " << s << "\n"; };
  runner::LabForwarding fwd(spec, runner::forwarding_access(spec, ssh), log);
  if (sub == "clear") {
    int failed = 0;
    for (const auto& e : fwd.clear()) failed += !e.empty();
    out << fmt::format("forwarding cleared on {} of {} hosts\n", spec.hosts.size() - failed, spec.hosts.size());
    return failed ? kExitFailed : kExitOk;
  }
  if (sub == "apply") {
    runner::SwitchAccess sw = runner::switch_access(spec, lab);
    auto driver = ocs::make_driver(sw.url, sw.options);
    auto rep = driver->apply(m->circuits, ocs::ApplyMode::kReplace);
    out << fmt::format("switch on mapping '{}' ({} circuit(s) made, {} removed)\n", m->name, rep.diff.add.size(),
                       rep.diff.remove.size());
    std::vector<runner::ForwardingApplyRecord> recs;
    try {
      recs = fwd.apply(*m, 0);
    } catch (const runner::ForwardingFailed&) {
      fwd.keep();  // the others were rolled back to what they had: no clear on top (exit 3)
      throw;
    }
    fwd.keep();
    for (const auto& r : recs)
      out << fmt::format("  {}: {} change(s) in {:.0f} ms\n", r.host, r.changes, (r.finished_ns - r.started_ns) / 1e6);
    return kExitOk;
  }
  runner::VerifyMatrix v = fwd.verify(*m);
  out << runner::format_matrix(v);
  if (!output.empty()) {
    fs::create_directories(output);
    runner::write_matrix_files(v, output, 0);
  }
  return v.hops_as_planned() ? kExitOk : kExitFailed;
}

}  // namespace ocslab::cli
