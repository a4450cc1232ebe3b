// `ocslab controller`: the phase controller of one job as a standalone process, with one
// orchestrator per rail driving that rail's switch. Runs until SIGINT/SIGTERM (or
// --duration), then writes the controller's events and prints its problems.
#include <signal.h>

#include <fmt/format.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <ostream>
#include <thread>

#include "cli_args.h"
#include "commands.h"
#include "ocslab/cli/ocslab_cli.h"
#include "ocslab/common/interrupt.h"
#include "ocslab/ocsctl/driver.h"
#include "ocslab/ocsctl/errors.h"
#include "ocslab/phase/controller.h"
#include "ocslab/phase/controller_config.h"
#include "ocslab/phase/port_watch.h"

namespace ocslab::cli {

namespace {

constexpr const char* kControllerHelp = R"(ocslab controller - the phase controller of one job (Opus-style)

Usage: ocslab controller CONFIG.yaml [--check] [--events FILE.csv] [--duration SECONDS]

Places the job on every rail's switch (one orchestrator per rail, only the configured slots
and allow-list are touched), wires the initial topo_id, then serves the job's shims over
TCP (protocol v2, JSON lines) until SIGINT/SIGTERM or --duration. The first stdout line is
  {"listen":"HOST:PORT","job":"NAME","rails":N}
so a launcher can read the bound port (listen port 0 = any free port).

It listens on 127.0.0.1 unless CONFIG's listen: says otherwise. Every shim's hello must carry
the token from CONFIG's token_file: (a file of yours, mode 0600; checked before the switch is
touched) or token:; a connection without it is refused before it can affect the switch. A
listen address other than loopback without a token is refused. Each client must send its
hello within 5 s of connecting, each line within 5 s of its first byte, 64 KiB at most.

Options:
  --check             validate CONFIG, print the plan (rails, slots, sub-mappings), exit
  --events FILE.csv   write every controller event (request, ack, done, reconfig_start/end,
                      timeout, retry, fallback, ring_ready, disconnect, rejected, declined,
                      port_failed, masked) at exit
  --duration SECONDS  stop after this long
  -h, --help          this text

With detect: in CONFIG, each rail's circuits are watched through the switch's power monitors
(a second session per rail): a port whose light is lost on a made circuit is masked, the rank
on it moves to a spare slot (slots beyond the job's ranks) and its circuits are re-made there,
and every shim is told (docs/phase-control.md, "Failed ports").

Switch passwords come from $OCSLAB_OCS_PASSWORD (bound to $OCSLAB_OCS_PASSWORD_HOST; alone,
loopback switches only) or the credentials file (docs/ocsctl.md).
Exit codes (the table in ocslab --help): 0 done, 1 bad command line, 2 bad CONFIG
(file:line:col) or a port outside a rail's allow-list, 3 a switch refused the initial wiring,
4 a switch not reached (or lost, or no reply), 5 a switch or the listener failed while serving
(the controller fell back), 130 interrupted.
Format and protocol: docs/phase-control.md
)";

// --check: the job, each rail's slots and initial circuits, the listener, the policy and detection.
void print_plan(const phase::ControllerConfig& cfg, const phase::SubMappingTable& table, std::ostream& out) {
  out << fmt::format("job {}: pp={} ranks={} ({}), initial topo_id {}, {} sub-mappings / {} entries\n", cfg.layout.job,
                     cfg.layout.pp, cfg.layout.ranks(), cfg.layout.describe_digits(), cfg.initial.str(), table.count(),
                     table.stored_entries());
  for (const auto& r : cfg.rails) {
    out << fmt::format("rail {}: {} slots on {}{}\n", r.name, r.slots.size(), r.url,
                       r.allow ? " (allow " + r.allow->to_string() + ")" : std::string());
    auto circuits = phase::to_circuits(table.compose(cfg.initial), r.slots);
    for (const auto& c : circuits) out << "  " << ocs::to_string(c) << "\n";
  }
  out << fmt::format("listen {}:{} (token {}), ack timeout {} ms, {} retries\n", cfg.listen_host, cfg.listen_port,
                     !cfg.token_file.empty() ? "from " + cfg.token_file
                     : !cfg.token.empty()    ? std::string("inline")
                                             : std::string("none: loopback only"),
                     cfg.ack_timeout_ms, cfg.max_retries);
  if (cfg.detect) {
    out << fmt::format("detect: every {} ms, dark below {} dBm for {} readings, settle {} ms\n",
                       cfg.detect->interval.count(), cfg.detect->threshold_dbm, cfg.detect->dark_polls,
                       cfg.detect->settle.count() ? cfg.detect->settle.count() : 3 * cfg.detect->interval.count());
  }
  out << fmt::format("policy {}{}\n", phase::to_string(cfg.policy),
                     cfg.policy == phase::Policy::kSafeWindow
                         ? fmt::format(" (switch time {} ms, {} ops in {})", cfg.switch_time_ms, cfg.windows.ops.size(),
                                       cfg.phase_table)
                     : cfg.policy == phase::Policy::kGreedy
                         ? fmt::format(" (allocator {})", phase::to_string(cfg.allocator))
                         : std::string());
}

int serve(const phase::ControllerConfig& cfg, const std::string& events_path, double duration, std::ostream& out,
          std::ostream& err);

}  // namespace

int run_controller(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  std::string config_path, events_path;
  bool check = false;
  double duration = 0;
  auto option = [&](const std::string& w, const OptionValue& value) {
    if (w == "--check") {
      check = true;
    } else if (w == "--events") {
      events_path = value();
    } else if (w == "--duration") {
      auto v = value();
      try {
        size_t pos = 0;
        duration = std::stod(v, &pos);
        if (pos != v.size() || duration <= 0) throw std::invalid_argument(v);
      } catch (const std::exception&) {
        throw BadValue("--duration needs a positive number of seconds, got '" + v + "' (ocslab controller --help)");
      }
    } else {
      return false;
    }
    return true;
  };
  auto positional = [&](const std::string& w) {
    if (!config_path.empty()) throw UsageError("one CONFIG.yaml only (ocslab controller --help)");
    config_path = w;
  };
  if (!parse_args(args, "controller", kControllerHelp, out, option, positional)) return kExitOk;
  if (config_path.empty()) throw UsageError("usage: ocslab controller CONFIG.yaml (ocslab controller --help)");
  auto cfg = phase::load_controller_config(config_path);
  phase::SubMappingTable table(cfg.layout);
  if (check) {
    print_plan(cfg, table, out);
    return kExitOk;
  }
  try {
    return serve(cfg, events_path, duration, out, err);
  } catch (const ocs::OcsError& e) {
    // Its switches, as ocsctl reports them (docs/exit-codes.md).
    throw CommandFailure(e.what(), ocs::exit_code_of(e));
  }
}

namespace {

// Wires the job on every rail, serves its shims until interrupted or `duration`, writes the events.
int serve(const phase::ControllerConfig& cfg, const std::string& events_path, double duration, std::ostream& out,
          std::ostream& err) {
  phase::ControllerOptions co;
  co.token = phase::controller_token(cfg);  // before any switch is touched
  co.layout = cfg.layout;
  co.listen_host = cfg.listen_host;
  co.listen_port = cfg.listen_port;
  co.ack_timeout = std::chrono::milliseconds(cfg.ack_timeout_ms);
  co.max_retries = cfg.max_retries;
  co.policy = cfg.policy;
  co.allocator = cfg.allocator;
  co.windows = cfg.windows;
  co.switch_time = std::chrono::microseconds(static_cast<int64_t>(cfg.switch_time_ms * 1000));
  for (const auto& r : cfg.rails) {
    ocs::DriverOptions o;
    o.allow = r.allow;
    auto orch =
        std::make_shared<phase::Orchestrator>(r.name, r.slots, ocs::make_driver(ocs::SwitchUrl::parse(r.url), o));
    auto rep = orch->add_job(cfg.layout, cfg.initial,
                             std::vector<phase::Slot>(r.slots.begin(), r.slots.begin() + cfg.layout.ranks()));
    err << fmt::format("ocslab controller: rail {}: job {} wired as {} ({} circuits made, {} removed, {:.1f} ms)\n",
                       r.name, cfg.layout.job, cfg.initial.str(), rep.added.size(), rep.removed.size(), rep.total_ms);
    co.rails.push_back(std::move(orch));
  }
  phase::Controller ctl(co);
  ctl.start();
  std::vector<std::unique_ptr<phase::PortWatch>> watches;
  if (cfg.detect) {
    for (size_t k = 0; k < cfg.rails.size(); ++k) {
      ocs::DriverOptions o;
      o.allow = cfg.rails[k].allow;
      watches.push_back(std::make_unique<phase::PortWatch>(
          co.rails[k], ocs::make_driver(ocs::SwitchUrl::parse(cfg.rails[k].url), o),
          [&ctl](const phase::PortFailure& f) { ctl.port_failed(f.rail, f.port, f.evidence, f.seen_mono_ns); },
          *cfg.detect));
      watches.back()->start();
    }
  }
  out << fmt::format("{{\"listen\":\"{}:{}\",\"job\":\"{}\",\"rails\":{}}}\n", cfg.listen_host, ctl.port(),
                     cfg.layout.job, cfg.rails.size())
      << std::flush;
  InterruptScope interrupt;
  auto start = std::chrono::steady_clock::now();
  while (!interrupt.raised()) {
    if (duration > 0 && std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() >= duration)
      break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  interrupt.restore();
  watches.clear();  // stopped before the controller they report to
  ctl.stop();
  if (!events_path.empty()) phase::write_events_csv(events_path, ctl.events());
  for (const auto& p : ctl.problems()) err << "ocslab controller: problem: " << p << "\n";
  if (cfg.policy == phase::Policy::kSafeWindow)
    err << fmt::format("ocslab controller: policy safe-window declined {} reconfigurations\n", ctl.declined());
  if (interrupt.raised()) return kExitInterrupted;
  return ctl.in_fallback() ? kExitFailed : kExitOk;
}

}  // namespace

}  // namespace ocslab::cli
