#include "ocslab/agent/forwarding_cli.h"
#include "ocslab/common/exit_code.h"

#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <boost/program_options.hpp>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <optional>
#include <set>
#include <sstream>

#include "ocslab/agent/forwarding_fabric_cli.h"
#include "ocslab/common/suggest.h"
#include "ocslab/forwarding/apply.h"
#include "ocslab/forwarding/diff.h"
#include "ocslab/forwarding/fabric.h"
#include "ocslab/forwarding/if2_link.h"
#include "ocslab/forwarding/routes.h"
#include "ocslab/forwarding/rule_plan.h"

namespace po = boost::program_options;
namespace fw = ocslab::forwarding;

namespace ocslab::agent {

namespace {

po::options_description forwarding_options() {
  po::options_description d("forwarding options");
  d.add_options()("fabric", po::value<std::string>(), "fabric YAML file (plan, diff, apply)")(
      "plan", po::value<std::string>(),
      "instead of --fabric (diff, apply, verify): this host's plan as JSON (the fields of 'plan --json', "
      "links included), '-' for standard input; what the runner sends")(
      "host", po::value<std::string>(), "this host's name in the fabric (default: gethostname)")(
      "state-dir", po::value<std::string>()->default_value(fw::kDefaultStateDir),
      "where the journal of the last operation lives")(
      "op-id", po::value<std::string>(),
      "apply, clear, rollback: the caller's id for this operation (letters, digits, . _ : -; at most 64), "
      "kept in the journal: a retried apply with the same id reports 'journaled' instead of no changes, "
      "and rollback undoes only that operation (a no-op with a note otherwise)")(
      "if2-macvlan",
      "create each port's if2 as a macvlan (mode private) over its if1 (virtual lab, NICs without "
      "NPAR/SR-IOV); ocslab owns and removes only macvlans it created")(
      "every-nic",
      "plan from --fabric: every NIC reaches every address through its own circuit (an RDMA queue pair "
      "sends only through its own NIC): neighbours on the other NICs, filters on their peers' if2s")(
      "no-relay",
      "program only routes and neighbours: leave out the plan's clsacts and filters (a kernel "
      "without flower; ocslab's earlier relay state is removed)")("json", "print JSON instead of text")(
      "help,h", "show this help");
  d.add_options()("if", po::value<std::string>(), "ping: the RDMA port's netdev (if1)")(
      "listen", po::value<std::string>(),
      "ping: serve the QP exchange at ADDR:PORT, on that address only (the management address; "
      "0.0.0.0 only with --any-address)")("connect", po::value<std::string>(), "ping: the server's HOST:PORT")(
      "secret-file", po::value<std::string>(),
      "ping: read the control connection's secret (32 to 256 hex digits, the same on both sides) "
      "from this file, '-' for standard input; required")(
      "any-address", "ping: allow --listen on a wildcard address (every interface of the host)")(
      "count", po::value<int>()->default_value(20), "ping: good completions to wait for")(
      "timeout-s", po::value<double>()->default_value(20), "ping: give up after this many seconds");
  return d;
}

std::string counts(const fw::PlanDiff& d) {
  auto count = [](const auto& v, fw::ChangeOp op) {
    size_t n = 0;
    for (const auto& c : v) n += c.op == op;
    return n;
  };
  std::string s = fmt::format("routes +{} ~{} -{}, neighbours +{} ~{} -{}", count(d.routes, fw::ChangeOp::add),
                              count(d.routes, fw::ChangeOp::replace), count(d.routes, fw::ChangeOp::remove),
                              count(d.neighbours, fw::ChangeOp::add), count(d.neighbours, fw::ChangeOp::replace),
                              count(d.neighbours, fw::ChangeOp::remove));
  if (!d.links.empty() || !d.qdiscs.empty() || !d.filters.empty())
    s += fmt::format(", macvlans +{} ~{} -{}, qdiscs +{} -{}, filters +{} ~{} -{}", count(d.links, fw::ChangeOp::add),
                     count(d.links, fw::ChangeOp::replace), count(d.links, fw::ChangeOp::remove),
                     count(d.qdiscs, fw::ChangeOp::add), count(d.qdiscs, fw::ChangeOp::remove),
                     count(d.filters, fw::ChangeOp::add), count(d.filters, fw::ChangeOp::replace),
                     count(d.filters, fw::ChangeOp::remove));
  return s;
}

std::string default_host() {
  char buf[256] = {};
  ::gethostname(buf, sizeof(buf) - 1);
  return buf;
}

// --plan FILE|-: a host plan as JSON, made elsewhere (the runner computes every host's plan from
// the experiment spec and sends each its own).
fw::HostPlan plan_from_option(const std::string& path) {
  std::stringstream ss;
  if (path == "-") {
    ss << std::cin.rdbuf();
  } else {
    std::ifstream f(path);
    if (!f) throw ConfigError(path + ": cannot read the plan");
    ss << f.rdbuf();
  }
  try {
    return fw::host_plan_from_json(nlohmann::json::parse(ss.str()));
  } catch (const std::exception& e) {
    throw ConfigError(fmt::format("{}: not a host plan: {}", path == "-" ? "standard input" : path, e.what()));
  }
}

fw::HostPlan host_plan(const po::variables_map& vm, const std::string& host, std::vector<std::string>* unreachable) {
  if (vm.count("plan")) {
    fw::HostPlan p = plan_from_option(vm["plan"].as<std::string>());
    if (!host.empty() && host != p.host)
      throw ConfigError(fmt::format("the plan is host '{}', not --host '{}'", p.host, host));
    return p;
  }
  fw::Fabric f = fw::load_fabric_file(vm["fabric"].as<std::string>());
  if (!f.find_host(host))
    throw ConfigError(
        fmt::format("{}: no host '{}' in the fabric (give --host)", vm["fabric"].as<std::string>(), host));
  fw::Plan plan = fw::make_plan(f, fw::compute_routes(f), fw::PlanOptions{vm.count("every-nic") > 0});
  if (unreachable)
    for (const auto& u : plan.unreachable)
      if (u.rfind(host + " -> ", 0) == 0) unreachable->push_back(u);
  fw::HostPlan p = plan.host(host);
  if (vm.count("if2-macvlan")) {
    // Only the if2s that get a clsact (ports in a circuit) are needed.
    std::set<std::string> relay_devs;
    for (const auto& q : p.qdiscs) relay_devs.insert(q.dev);
    for (const auto& m : fw::if2_macvlans(f, host))
      if (relay_devs.count(m.name)) p.links.push_back({m.name, m.parent, m.mac});
  }
  return p;
}

void print_report(const std::string& verb, const std::string& host, const fw::ApplyReport& r,
                  const std::string& journal, bool json, std::ostream& out) {
  if (json) {
    nlohmann::json j = {{"operation", verb},
                        {"host", host},
                        {"changes", fw::to_json(r.changes)},
                        {"not_programmed", {{"qdiscs", r.skipped_qdiscs}, {"filters", r.skipped_filters}}},
                        {"journal", journal},
                        {"journaled", r.journaled}};
    if (!r.note.empty()) j["note"] = r.note;
    out << j.dump(2) << "\n";
    return;
  }
  if (!r.note.empty()) out << fmt::format("{}: host {}: {}\n", verb, host, r.note);
  if (r.changes.empty() && r.note.empty())
    out << fmt::format("{}: host {}: no changes\n", verb, host);
  else
    out << fmt::format("{}: host {}: {} change(s) ({})\n", verb, host, r.changes.size(), counts(r.changes));
  for (const auto& c : fw::commands(r.changes)) out << "  " << c << "\n";
  if (r.skipped_qdiscs || r.skipped_filters)
    out << fmt::format("note: {} clsact qdisc(s) and {} filter(s) of the plan are not programmed (--no-relay)\n",
                       r.skipped_qdiscs, r.skipped_filters);
}

}  // namespace

std::string forwarding_help() {
  std::ostringstream s;
  s << "Usage: ocslab-agent forwarding (plan|diff|apply|verify|rollback|clear) [--fabric FILE | --plan FILE]\n"
       "                               [--host NAME] [--state-dir DIR] [--json]\n"
       "       ocslab-agent forwarding ping --if IF (--listen ADDR:PORT | --connect HOST:PORT)\n"
       "                               --secret-file FILE [--any-address] [--count N]\n"
       "       ocslab-agent forwarding fabric --wiring FILE (--mapping FILE | --from-switch URL) [-o FILE]\n\n"
       "Host-based RDMA forwarding rules of one fabric host (docs/forwarding.md).\n"
       "  plan      print the host's rule plan and the equivalent ip/tc commands (no kernel access)\n"
       "  diff      print what apply would change in this network namespace\n"
       "  apply     install the plan: journal the previous and intended state in --state-dir, then\n"
       "            change only the difference; on any error or SIGINT/SIGTERM the previous state\n"
       "            is restored\n"
       "  rollback  undo the last apply or clear recorded in the journal (also one a kill -9 cut short)\n"
       "  verify    compare what is installed with the plan (read-only) and show every relay\n"
       "            filter's hit counter; exit 7 when they differ\n"
       "  ping      one RC queue pair (the probes library's RDMA probe) from --if to a server started\n"
       "            with --listen; prints JSON {ok, errors, elapsed_ms}; exit 0 when --count good\n"
       "            completions arrived, 4 when not within --timeout-s. The QP exchange is\n"
       "            authenticated with the --secret-file both sides read (the runner sends a fresh\n"
       "            one on standard input); the server drops, answering nothing, a connection\n"
       "            without it, a line over 4 KiB or one not complete within 5 s\n"
       "  clear     remove every route, neighbour, filter, clsact and macvlan ocslab owns here\n"
       "            (nothing else)\n"
       "  fabric    derive the fabric file from a wiring file and the OCS's circuits (a mapping\n"
       "            file or the live switch); see 'ocslab-agent forwarding fabric --help'\n\n"
       "Apply order: if2 macvlans (--if2-macvlan), clsact qdiscs, flower filters (the relay side),\n"
       "then neighbours and routes; removals in reverse. A host whose plan has no filters never\n"
       "touches tc.\n\n"
    << forwarding_options()
    << "\nExit codes:\n"
       "  0  success (also: nothing to change)\n"
       "  1  bad command line\n"
       "  2  bad input: fabric file, unknown host, unreadable journal; ping: a --secret-file\n"
       "     without a usable secret\n"
       "  3  ping: the RDMA probe cannot run on --if\n"
       "  4  ping: fewer than --count good completions within --timeout-s; fabric: the switch\n"
       "     cannot be reached, refused the request or answered garbage\n"
       "  5  refused or failed (a foreign rule in the way, the kernel refused, interrupted): the\n"
       "     previous state is in place\n"
       "  6  failed and restoring the previous state failed too: run 'forwarding rollback'\n"
       "  7  verify: the installed state differs from the plan\n\n"
       "These are the codes of every ocslab program, with what they mean here (docs/exit-codes.md).\n\n"
       "Examples:\n"
       "  ocslab-agent forwarding plan --fabric ring4.yaml --host h1\n"
       "  ip netns exec h1 ocslab-agent forwarding apply --fabric ring4.yaml --host h1\n"
       "  ocslab-agent forwarding rollback\n";
  return s.str();
}

namespace {

int run_forwarding_words(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

// The message of a failure as the JSON error object shows it: stderr's text without the
// trailing "Try ... --help" hint and newlines.
std::string failure_message(const std::string& text) {
  std::string m = text;
  if (auto hint = m.find("\nTry '"); hint != std::string::npos) m.erase(hint);
  while (!m.empty() && (m.back() == '\n' || m.back() == ' ')) m.pop_back();
  return m;
}

}  // namespace

// With --json, a failure that printed no report is also one JSON object on stdout,
// {"error": MESSAGE, "exit_code": N} (docs/cli.md), so a script reading stdout sees it; the
// message goes to stderr as always.
int run_forwarding_cli(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  const bool json = std::find(args.begin(), args.end(), "--json") != args.end();
  if (!json) return run_forwarding_words(args, out, err);
  std::ostringstream o, e;
  int rc = run_forwarding_words(args, o, e);
  err << e.str();
  if (rc != kExitOk && o.str().empty()) {
    out << nlohmann::json{{"error", failure_message(e.str())}, {"exit_code", rc}}.dump() << "\n";
  } else {
    out << o.str();
  }
  return rc;
}

namespace {

// Parses the words after `forwarding` into vm; a value is the exit code to stop with.
std::optional<int> parse_forwarding_words(const std::vector<std::string>& args, po::variables_map& vm,
                                          std::ostream& err) {
  po::options_description all = forwarding_options();
  all.add_options()("sub", po::value<std::string>())("rest", po::value<std::vector<std::string>>());
  po::positional_options_description pos;
  pos.add("sub", 1).add("rest", -1);
  try {
    po::store(po::command_line_parser(args).options(all).positional(pos).run(), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    std::string message = e.what();
    if (const auto* u = dynamic_cast<const po::unknown_option*>(&e)) {
      std::vector<std::string> names;
      const auto options = forwarding_options();  // outlives the loop (options() is a reference into it)
      for (const auto& o : options.options()) names.push_back("--" + o->long_name());
      message = unknown_word_message("option", u->get_option_name(), names);
    }
    err << "ocslab-agent forwarding: " << message << "\nTry 'ocslab-agent forwarding --help'.\n";
    return kExitUsage;
  }
  return std::nullopt;
}

int run_ping(const po::variables_map& vm, std::ostream& out, std::ostream& err) {
  if (!vm.count("if") || vm.count("listen") == vm.count("connect") || !vm.count("secret-file")) {
    err << "ocslab-agent forwarding ping: give --if IF, one of --listen ADDR:PORT / --connect HOST:PORT and "
           "--secret-file FILE\n";
    return kExitUsage;
  }
  PingOptions o;
  o.iface = vm["if"].as<std::string>();
  o.listen = vm.count("listen") ? vm["listen"].as<std::string>() : "";
  o.connect = vm.count("connect") ? vm["connect"].as<std::string>() : "";
  o.any_address = vm.count("any-address") > 0;
  o.count = vm["count"].as<int>();
  o.timeout_s = vm["timeout-s"].as<double>();
  try {
    o.secret = read_ping_secret(vm["secret-file"].as<std::string>());
  } catch (const Error& e) {
    err << "ocslab-agent forwarding ping: " << e.what() << "\n";
    return kExitInput;
  }
  return forwarding_ping(o, out, err);
}

// The words a kernel subcommand (plan ... clear) takes; a value is the exit code to stop with.
std::optional<int> check_kernel_words(const std::string& sub, const po::variables_map& vm, std::ostream& err) {
  if (sub != "plan" && sub != "diff" && sub != "apply" && sub != "rollback" && sub != "clear" && sub != "verify") {
    err << (sub.empty() ? std::string("ocslab-agent forwarding: give a subcommand")
                        : "ocslab-agent forwarding: " + unknown_word_message("subcommand", sub,
                                                                             {"plan", "diff", "apply", "verify",
                                                                              "rollback", "clear", "fabric", "ping"}))
        << "\nTry 'ocslab-agent forwarding --help'.\n";
    return kExitUsage;
  }
  if (vm.count("rest")) {
    err << "ocslab-agent forwarding " << sub << ": unexpected argument '"
        << vm["rest"].as<std::vector<std::string>>()[0] << "'\n";
    return kExitUsage;
  }
  if (sub == "plan" && !vm.count("fabric")) {
    err << "ocslab-agent forwarding plan: --fabric FILE is required\n";
    return kExitUsage;
  }
  if ((sub == "diff" || sub == "apply" || sub == "verify") && vm.count("fabric") == vm.count("plan")) {
    err << "ocslab-agent forwarding " << sub << ": give one of --fabric FILE or --plan FILE\n";
    return kExitUsage;
  }
  return std::nullopt;
}

// What every kernel subcommand works with.
struct KernelCommand {
  const std::string& sub;
  const po::variables_map& vm;
  fw::Forwarder& fwd;
  const fw::ApplyOptions& options;
  std::string host;  // --host; empty when not given
  bool json;
  std::ostream& out;
};

int run_plan(KernelCommand& c) {
  if (c.host.empty()) c.host = default_host();
  std::vector<std::string> unreachable;
  fw::HostPlan p = host_plan(c.vm, c.host, &unreachable);
  if (c.json) {
    nlohmann::json j = fw::to_json(p);
    j["commands"] = fw::commands(p);
    j["unreachable"] = unreachable;
    j["tags"] = {{"route_protocol", fw::kRouteProtocol},
                 {"tc_chain", fw::kTcChain},
                 {"tc_prio_first", fw::kTcPrioFirst},
                 {"tc_prio_last", fw::kTcPrioLast},
                 {"action_cookie", fw::kActionCookie}};
    c.out << j.dump(2) << "\n";
    return kExitOk;
  }
  c.out << fmt::format("host {}: {} routes, {} permanent neighbours, {} clsact qdiscs, {} filters\n", c.host,
                       p.routes.size(), p.neighbours.size(), p.qdiscs.size(), p.filters.size());
  c.out << fmt::format("tags: route protocol {}, tc chain {} prio {:#x}..{:#x}, action cookie {}\n", fw::kRouteProtocol,
                       fw::kTcChain, fw::kTcPrioFirst, fw::kTcPrioLast, fw::kActionCookie);
  for (const auto& u : unreachable) c.out << "unreachable (not programmed): " << u << "\n";
  c.out << "commands, in apply order:\n";
  for (const auto& cmd : fw::commands(p)) c.out << "  " << cmd << "\n";
  return kExitOk;
}

// diff and apply (and verify's plan): --plan names its host, --fabric needs one.
fw::HostPlan kernel_plan(KernelCommand& c) {
  if (c.host.empty() && !c.vm.count("plan")) c.host = default_host();
  fw::HostPlan p = host_plan(c.vm, c.host, nullptr);
  c.host = p.host;
  return p;
}

int run_diff_or_apply(KernelCommand& c) {
  fw::HostPlan p = kernel_plan(c);
  fw::ApplyReport r = c.sub == "diff" ? c.fwd.diff(p) : c.fwd.apply(p);
  print_report(c.sub, c.host, r, c.fwd.journal_path(), c.json, c.out);
  return kExitOk;
}

// Read-only: the diff apply would make, plus every ocslab filter's hit counter.
int run_verify(KernelCommand& c) {
  fw::HostPlan p = kernel_plan(c);
  fw::ApplyReport r = c.fwd.diff(p);
  auto filters = fw::owned_filters(fw::programmable(p, c.options.relay));
  bool in_sync = r.changes.empty();
  if (c.json) {
    nlohmann::json fj = nlohmann::json::array();
    for (const auto& f : filters)
      fj.push_back({{"dev", f.rule.dev},
                    {"prio", f.rule.prio},
                    {"dst", f.rule.dst},
                    {"set_eth_dst", f.rule.set_eth_dst},
                    {"redirect_dev", f.rule.redirect_dev},
                    {"packets", f.packets},
                    {"bytes", f.bytes},
                    {"problem", f.problem}});
    c.out << nlohmann::json{{"operation", "verify"},
                            {"host", c.host},
                            {"in_sync", in_sync},
                            {"diff", fw::to_json(r.changes)},
                            {"filters", fj}}
                 .dump(2)
          << "\n";
  } else {
    if (in_sync)
      c.out << fmt::format("verify: host {}: in sync with the plan\n", c.host);
    else
      c.out << fmt::format("verify: host {}: {} difference(s) ({}); apply would run:\n", c.host, r.changes.size(),
                           counts(r.changes));
    for (const auto& cmd : fw::commands(r.changes)) c.out << "  " << cmd << "\n";
    for (const auto& f : filters)
      c.out << fmt::format("  filter {} prio {} dst {} -> {}: {} packets, {} bytes{}\n", f.rule.dev, f.rule.prio,
                           f.rule.dst, f.rule.redirect_dev, f.packets, f.bytes,
                           f.problem.empty() ? "" : " (" + f.problem + ")");
  }
  return in_sync ? kExitOk : kExitMismatch;
}

int run_rollback(KernelCommand& c) {
  auto j = c.fwd.journal();
  fw::ApplyReport r = c.fwd.rollback();
  print_report(c.sub, j ? j->host : c.host, r, c.fwd.journal_path(), c.json, c.out);
  return kExitOk;
}

int run_clear(KernelCommand& c) {
  if (c.host.empty()) {
    auto j = c.fwd.journal();
    c.host = j ? j->host : default_host();
  }
  fw::ApplyReport r = c.fwd.clear(c.host);
  print_report(c.sub, c.host, r, c.fwd.journal_path(), c.json, c.out);
  return kExitOk;
}

int run_kernel_command(KernelCommand& c) {
  if (c.sub == "plan") return run_plan(c);
  if (c.sub == "diff" || c.sub == "apply") return run_diff_or_apply(c);
  if (c.sub == "verify") return run_verify(c);
  if (c.sub == "rollback") return run_rollback(c);
  return run_clear(c);
}

int run_forwarding_words(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  // fabric reads files or a switch, not the kernel: options of its own.
  if (!args.empty() && args[0] == "fabric")
    return run_forwarding_fabric_cli(std::vector<std::string>(args.begin() + 1, args.end()), out, err);
  po::variables_map vm;
  if (auto rc = parse_forwarding_words(args, vm, err)) return *rc;
  if (vm.count("help")) {
    out << forwarding_help();
    return kExitOk;
  }
  std::string sub = vm.count("sub") ? vm["sub"].as<std::string>() : "";
  if (sub == "ping") return run_ping(vm, out, err);
  if (auto rc = check_kernel_words(sub, vm, err)) return *rc;
  fw::ApplyOptions o;
  o.state_dir = vm["state-dir"].as<std::string>();
  o.relay = vm.count("no-relay") == 0;
  if (const char* p = std::getenv(fw::kPauseEnv)) o.pause_after = std::strtoull(p, nullptr, 10);
  if (vm.count("op-id")) {
    o.op_id = vm["op-id"].as<std::string>();
    if (auto p = fw::op_id_problem(o.op_id); !p.empty()) {
      err << "ocslab-agent forwarding " << sub << ": --op-id '" << o.op_id << "': " << p << "\n";
      return kExitUsage;
    }
  }
  fw::Forwarder fwd(o);
  KernelCommand c{sub, vm, fwd, o, vm.count("host") ? vm["host"].as<std::string>() : "", vm.count("json") > 0, out};
  try {
    return run_kernel_command(c);
  } catch (const ConfigError& e) {
    err << "ocslab-agent forwarding " << sub << ": " << e.what() << "\n";
    return kExitInput;
  } catch (const fw::RestoreFailed& e) {
    err << "ocslab-agent forwarding " << sub << ": " << e.what() << "\n";
    return kExitNotRestored;
  } catch (const std::exception& e) {
    err << "ocslab-agent forwarding " << sub << ": " << e.what() << "\n";
    return kExitFailed;
  }
}

}  // namespace

}  // namespace ocslab::agent
