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
#include "ocslab/runner/target.h"

namespace ocslab::cli {

namespace fs = std::filesystem;

namespace {

const char* kForwardingHelp = R"(ocslab forwarding - host-based forwarding across a spec's lab

Usage: ocslab forwarding (apply|verify|clear) SPEC.yaml [--mapping NAME] [-o DIR] [--cache DIR] [--json]

The spec's `forwarding:` section (docs/experiments.md) and one of its mappings (default: the
first) give every host's plan, as `ocslab run` applies it. The virtual lab must be up.
  apply   put the switch on the mapping, then apply every host's plan in parallel; when a host
          fails, the others are rolled back (exit 5)
  verify  for every ordered host pair an RC ping over the fabric and the hops it took (relay
          filter counters before/after); prints the matrix, -o DIR writes
          forwarding-verify-0-<mapping>.{csv,json,txt}; exit 0 when every pair is reachable over
          the planned relays, 5 otherwise; --json prints the matrix as the JSON document of
          forwarding-verify-0-<mapping>.json on stdout instead of the text
  clear   remove ocslab's forwarding state on every host
)";

}  // namespace

int run_forwarding(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  std::string sub, spec_path, mapping, output, cache;
  bool json = false;
  auto option = [&](const std::string& a, const OptionValue& value) {
    if (a == "--mapping") {
      mapping = value();
    } else if (a == "-o" || a == "--output") {
      output = value();
    } else if (a == "--cache") {
      cache = value();
    } else if (a == "--json") {
      json = true;
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
  if (!sub.empty() && sub != "apply" && sub != "verify" && sub != "clear")
    throw unknown_word("forwarding command", sub, {"apply", "verify", "clear"}, "ocslab forwarding");
  if (sub.empty())
    throw UsageError(
        "usage: ocslab forwarding (apply|verify|clear) SPEC.yaml [--mapping NAME] (ocslab forwarding --help)");
  if (spec_path.empty()) throw UsageError("ocslab forwarding " + sub + ": give the experiment spec");
  if (json && sub != "verify") throw UsageError("--json only applies to `ocslab forwarding verify`");
  runner::ExperimentSpec spec = runner::load_experiment_spec(spec_path);
  if (!spec.forwarding.enabled) throw ConfigError(spec.origin + ": the spec has no forwarding section");
  const runner::Mapping* m = &spec.mappings[0];
  if (!mapping.empty()) {
    m = nullptr;
    for (const auto& x : spec.mappings)
      if (x.name == mapping) m = &x;
    if (!m) throw UsageError("the spec has no mapping '" + mapping + "'");
  }
  auto log = [&](const std::string& s) { err << "ocslab forwarding: " << s << "\n"; };
  // The running lab's guests (this build's agent installed where they see it) or the inventory's hosts.
  runner::TargetOptions to;
  to.cache_dir = cache;
  to.lab = runner::LabUse::kRunning;
  to.log = log;
  const runner::Target target = runner::resolve_target(spec, to);
  runner::LabForwarding fwd(target.spec, runner::forwarding_access(target.spec, target.ssh()), log);
  if (sub == "clear") {
    int failed = 0;
    for (const auto& e : fwd.clear()) failed += !e.empty();
    out << fmt::format("forwarding cleared on {} of {} hosts\n", spec.hosts.size() - failed, spec.hosts.size());
    return failed ? kExitFailed : kExitOk;
  }
  if (sub == "apply") {
    runner::SwitchAccess sw = target.switch_access();
    auto driver = ocs::make_driver(sw.url, sw.options);
    auto rep = driver->apply(m->circuits, ocs::ApplyMode::kReplace);
    out << fmt::format("switch on mapping '{}' ({} circuit(s) made, {} removed)\n", m->name, rep.diff.add.size(),
                       rep.diff.remove.size());
    std::vector<runner::ForwardingApplyRecord> recs;
    try {
      recs = fwd.apply(*m, 0);
    } catch (const runner::ForwardingFailed&) {
      fwd.keep();  // the others were rolled back to what they had: no clear on top (exit 5)
      throw;
    }
    fwd.keep();
    for (const auto& r : recs)
      out << fmt::format("  {}: {} change(s) in {:.0f} ms\n", r.host, r.changes, (r.finished_ns - r.started_ns) / 1e6);
    return kExitOk;
  }
  runner::VerifyMatrix v = fwd.verify(*m);
  out << (json ? runner::to_json(v).dump(2) + "\n" : runner::format_matrix(v));
  if (!output.empty()) {
    fs::create_directories(output);
    runner::write_matrix_files(v, output, 0);
  }
  return v.hops_as_planned() ? kExitOk : kExitFailed;
}

}  // namespace ocslab::cli
