#include "ocslab/agent/cli.h"

#include <net/if.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>
#include <atomic>
#include <boost/program_options.hpp>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <mutex>
#include <thread>

#include "ocslab/agent/forwarding_cli.h"
#include "ocslab/agent/module_cli.h"
#include "ocslab/agent/registry.h"
#include "ocslab/agent/server.h"
#include "ocslab/common/clock.h"
#include "ocslab/common/csv_writer.h"
#include "ocslab/common/interrupt.h"
#include "ocslab/common/jsonl_writer.h"
#include "ocslab/common/log.h"
#include "ocslab/common/safe_fs.h"
#include "ocslab/common/suggest.h"
#include "ocslab/probes/carrier_probe.h"

namespace po = boost::program_options;

namespace ocslab::agent {

namespace {

struct CommandSpec {
  const char* name;
  const char* usage;
  const char* summary;
  const char* details;
};

const std::vector<CommandSpec>& commands() {
  static const std::vector<CommandSpec> specs = {
      {"serve", "serve (--stdio [--no-daemon] | --socket PATH) [options]", "serve protocol v1 (JSON lines)",
       "--stdio: one session on stdin/stdout, what the runner starts over SSH. It bridges to the\n"
       "agent daemon on --socket (default below), starting the daemon in the background first\n"
       "when none runs (not when run through sudo: then the service's daemon must be running);\n"
       "the daemon owns the probes and the spool, so a dropped SSH session ends\n"
       "only the bridge and a new session fetches the gap with spool.fetch.\n"
       "--stdio --no-daemon: serve in this process; the probes stop when the session ends.\n"
       "--socket PATH alone: run the daemon in the foreground (systemd: agent/systemd/).\n"
       "Default socket: /run/ocslab-agent/agent.sock as root, else RUNTIME/agent.sock, where RUNTIME\n"
       "is $XDG_RUNTIME_DIR/ocslab-agent when XDG_RUNTIME_DIR is set, else /tmp/ocslab-agent-UID;\n"
       "default spool: /var/spool/ocslab-agent as root, else RUNTIME/spool. RUNTIME is made with\n"
       "mode 0700 and used only when it is a folder (not a symlink) owned by this user with mode\n"
       "0700; the socket's folder and the spool folder must be this user's and not writable by\n"
       "others; the lock, log and spool files are never opened through a symlink.\n"
       "Spool retention: each capture's spool (capture-ID.jsonl in the spool folder) is deleted\n"
       "when the runner has its data (spool.delete), else when older than --spool-max-age, or,\n"
       "oldest first, while all spools together exceed --spool-max-bytes; checked when a capture\n"
       "starts and every minute, never the current capture's. With --stdio the limits go to the\n"
       "daemon the bridge starts; a daemon already running keeps its own.\n"
       "Protocol reference: docs/agent-protocol.md"},
      {"capture",
       "capture --probes P[,P...] [--if IF] [--interval-ms N] [--carrier-poll-ms N] [--duration S] [--format F] "
       "[-o FILE]",
       "capture probes on this host to a CSV or JSON-lines file",
       "Runs the named probes without a runner and writes every sample as a CSV row:\n"
       "t_ns,host,source,subject,signal,value,unit (t_ns: CLOCK_REALTIME ns), or with\n"
       "--format jsonl as one JSON object per line with those keys (value a number). Runs for\n"
       "--duration seconds, or until Ctrl-C when 0. Progress is shown on a terminal only.\n"
       "The carrier probe also polls each interface's live carrier bit every --carrier-poll-ms\n"
       "(signal carrier_bit: not delayed by linkwatch as the announced 'carrier' can be).\n"
       "Probes that cannot run on this host are named with the reason; the others still run."},
      {"probes", "probes [--if IF]", "list the probes this agent has and whether each can run on this host",
       "One line per probe: its name, then whether it can run on this host and, when it cannot,\n"
       "why (each is started with no output and stopped again, as capture would start it). With\n"
       "--if IF (repeat or separate with commas) on those interfaces, as 'capture --if IF'.\n"
       "Scripts take the first word of each line for the names."},
      {"module", "module IF [--json]", "a transceiver's identity and DDM, like ethtool -m",
       "See 'ocslab-agent module --help'."},
      {"forwarding", "forwarding (plan|diff|apply|verify|rollback|clear|fabric|ping) [options]",
       "host-based RDMA forwarding rules: plan, diff, apply, verify, roll back; derive the fabric; an RC ping",
       "See 'ocslab-agent forwarding --help'."},
  };
  return specs;
}

const CommandSpec* find_command(const std::string& name) {
  for (const auto& c : commands()) {
    if (name == c.name) return &c;
  }
  return nullptr;
}

po::options_description global_options() {
  po::options_description d("Global options");
  d.add_options()("host", po::value<std::string>(), "host name stamped on samples (default: gethostname)")(
      "log-level", po::value<std::string>()->default_value("warn"),
      "trace, debug, info, warn, error, off (logs go to stderr)")(
      "help,h", "show help (also: ocslab-agent COMMAND --help)")("version,V", "print the version");
  return d;
}

po::options_description serve_options() {
  po::options_description d("serve options");
  d.add_options()("stdio", "serve one session on stdin/stdout")(
      "no-daemon", "with --stdio: serve in this process instead of bridging to the daemon")(
      "socket", po::value<std::string>(), "the daemon's unix socket")("spool-dir", po::value<std::string>(),
                                                                      "folder of the per-capture spool files")(
      "spool-max-age", po::value<std::string>()->default_value("7d"),
      "delete a finished capture's spool once it is this old (last written): N[s|m|h|d], e.g. 36h")(
      "spool-max-bytes", po::value<std::string>()->default_value("4G"),
      "keep all spools together under this size, deleting the oldest first (never the current "
      "capture's): N[K|M|G|T], powers of 1024");
  return d;
}

po::options_description capture_options() {
  po::options_description d("capture options");
  d.add_options()("probes", po::value<std::string>(), "comma-separated probe names (see 'ocslab-agent probes')")(
      "if", po::value<std::vector<std::string>>(), "interface(s) to watch; repeat or separate with commas")(
      "interval-ms", po::value<int>()->default_value(100), "sampling interval of polling probes, ms")(
      "carrier-poll-ms", po::value<int>()->default_value(probes::kDefaultPollMs),
      "carrier probe: poll the live carrier bit every N ms (1..1000; 0: off)")(
      "duration", po::value<double>()->default_value(0), "seconds to capture (0: until Ctrl-C)")(
      "format", po::value<std::string>()->default_value("csv"), "csv, or jsonl (one JSON object per sample)")(
      "output,o", po::value<std::string>()->default_value("-"), "output file ('-': stdout)");
  return d;
}

void print_help(std::ostream& out, const CommandSpec* cmd) {
  if (!cmd) {
    out << "ocslab-agent - per-host probe agent of ocslab\n\n"
           "Usage: ocslab-agent COMMAND [options]\n\nCommands:\n";
    for (const auto& c : commands()) out << fmt::format("  {:<10} {}\n", c.name, c.summary);
    out << "\n"
        << global_options() << "\n"
        << exit_code_help() << "\nExamples:\n"
        << "  ocslab-agent capture --probes heartbeat,carrier --if ens1f0 --duration 30 -o t.csv\n"
        << "  ssh lab-host ocslab-agent serve --stdio        # what the runner does\n"
        << "  ocslab-agent serve --socket /run/ocslab-agent/agent.sock\n"
        << "\nDocumentation: docs/agent-protocol.md\n";
    return;
  }
  out << "Usage: ocslab-agent " << cmd->usage << "\n\n" << cmd->summary << ".\n" << cmd->details << "\n\n";
  if (std::string(cmd->name) == "serve") out << serve_options() << "\n";
  if (std::string(cmd->name) == "capture") out << capture_options() << "\n";
  out << "Global options: see 'ocslab-agent --help'.\n\n" << exit_code_help();
}

// Where a non-root agent keeps its socket, lock, log and (by default) spool:
// $XDG_RUNTIME_DIR/ocslab-agent when XDG_RUNTIME_DIR is an absolute path, else
// /tmp/ocslab-agent-UID. Either is used only as this user's own folder of mode 0700 (checked in
// cmd_serve, never chmod'ed): a folder someone else made at that predictable name is refused.
std::string user_runtime_dir() {
  const char* xdg = std::getenv("XDG_RUNTIME_DIR");
  if (xdg && xdg[0] == '/') return std::string(xdg) + "/ocslab-agent";
  return "/tmp/ocslab-agent-" + std::to_string(::geteuid());
}
bool as_root() { return ::geteuid() == 0; }
std::string default_socket() { return as_root() ? "/run/ocslab-agent/agent.sock" : user_runtime_dir() + "/agent.sock"; }
std::string default_spool() { return as_root() ? "/var/spool/ocslab-agent" : user_runtime_dir() + "/spool"; }

std::string self_exe() {
  std::error_code ec;
  auto p = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) throw Error("cannot find this program's path (/proc/self/exe): " + ec.message());
  return p.string();
}

std::vector<std::string> split_commas(const std::vector<std::string>& items) {
  std::vector<std::string> out;
  for (const auto& item : items) {
    size_t i = 0;
    while (i <= item.size()) {
      size_t j = item.find(',', i);
      if (j == std::string::npos) j = item.size();
      if (j > i) out.push_back(item.substr(i, j - i));
      i = j + 1;
    }
  }
  return out;
}

int cmd_serve(const po::variables_map& vm, std::ostream& err) {
  AgentOptions o;
  if (vm.count("host")) o.host = vm["host"].as<std::string>();
  bool stdio = vm.count("stdio") > 0;
  if (!stdio && !vm.count("socket")) {
    err << "ocslab-agent serve: give --stdio or --socket PATH\nTry 'ocslab-agent serve --help'.\n";
    return kExitUsage;
  }
  if (vm.count("no-daemon") && !stdio) {
    err << "ocslab-agent serve: --no-daemon goes with --stdio\n";
    return kExitUsage;
  }
  const bool default_socket_dir = !vm.count("socket");
  if (!as_root() && (default_socket_dir || !vm.count("spool-dir")))
    ensure_own_dir(user_runtime_dir(), DirPolicy::kPrivate);
  try {
    o.retention.max_age = parse_age(vm["spool-max-age"].as<std::string>(), "--spool-max-age");
    o.retention.max_bytes = parse_size(vm["spool-max-bytes"].as<std::string>(), "--spool-max-bytes");
  } catch (const Error& e) {
    throw ProtocolError(e.what());  // bad input: exit 3, not a serve failure
  }
  o.spool_dir = vm.count("spool-dir") ? vm["spool-dir"].as<std::string>() : default_spool();
  ensure_own_dir(o.spool_dir, DirPolicy::kOwned);  // here too: the bridge's daemon would only log it
  if (stdio && vm.count("no-daemon")) {
    serve_stdio(o);
    return kExitOk;
  }
  std::string socket = default_socket_dir ? default_socket() : vm["socket"].as<std::string>();
  // The socket's folder holds the lock and the daemon's log too.
  std::string socket_dir = std::filesystem::path(socket).parent_path().string();
  if (!socket_dir.empty()) {
    ensure_own_dir(socket_dir, default_socket_dir && !as_root() ? DirPolicy::kPrivate : DirPolicy::kOwned);
  }
  if (!stdio) {
    run_daemon(o, socket);
    return kExitOk;
  }
  std::vector<std::string> argv = {self_exe(),          "serve",
                                   "--socket",          socket,
                                   "--spool-dir",       o.spool_dir,
                                   "--spool-max-age",   vm["spool-max-age"].as<std::string>(),
                                   "--spool-max-bytes", vm["spool-max-bytes"].as<std::string>(),
                                   "--log-level",       vm["log-level"].as<std::string>()};
  if (!o.host.empty()) {
    argv.push_back("--host");
    argv.push_back(o.host);
  }
  // Through sudo the bridge is root: a daemon it started would run as full root, outside the
  // unit's capability bound and read-only file system, and hold the lock the service needs to
  // restart. Such a bridge only connects to the running service's daemon.
  const bool through_sudo = as_root() && std::getenv("SUDO_UID") != nullptr;
  bridge_stdio(socket, through_sudo ? std::vector<std::string>{} : argv, socket + ".log", std::chrono::seconds(10));
  return kExitOk;
}

// This host's name for the samples' host column: --host, else gethostname().
std::string host_name(const po::variables_map& vm) {
  if (vm.count("host") && !vm["host"].as<std::string>().empty()) return vm["host"].as<std::string>();
  char buf[256] = {};
  ::gethostname(buf, sizeof(buf) - 1);
  return buf;
}

// An interface this host does not have is the input's mistake (exit 2, as `module IF`), not a
// probe that cannot run here (exit 3): true, with the first missing one named on `err`.
bool refuse_missing_interface(const char* cmd, const std::vector<std::string>& ifs, std::ostream& err) {
  for (const auto& i : ifs) {
    if (::if_nametoindex(i.c_str()) == 0) {
      err << "ocslab-agent " << cmd << ": --if " << i << ": no such interface on this host\n";
      return true;
    }
  }
  return false;
}

int cmd_probes(const po::variables_map& vm, std::ostream& out, std::ostream& err) {
  auto ifs = vm.count("if") ? split_commas(vm["if"].as<std::vector<std::string>>()) : std::vector<std::string>{};
  if (refuse_missing_interface("probes", ifs, err)) return kExitInput;
  const std::string host = host_name(vm);
  const ProbeRegistry& registry = builtin_registry();
  for (const auto& n : registry.names()) {
    probes::ProbeStatus st;
    try {
      auto probe = registry.create(ProbeConfig{host, n, ifs, 100, nlohmann::json::object()});
      st = probe->start([](const Sample&) {});
      probe->stop();
    } catch (const Error& e) {
      st = {false, "", e.what()};
    }
    out << fmt::format("{:<10} {}\n", n,
                       st.available ? "can run here" + (st.method.empty() ? "" : " (" + st.method + ")")
                                    : "cannot run here: " + st.reason);
  }
  return kExitOk;
}

int cmd_capture(const po::variables_map& vm, std::ostream& out, std::ostream& err) {
  if (!vm.count("probes")) {
    err << "ocslab-agent capture: --probes is required\nTry 'ocslab-agent capture --help'.\n";
    return kExitUsage;
  }
  auto names = split_commas({vm["probes"].as<std::string>()});
  auto ifs = vm.count("if") ? split_commas(vm["if"].as<std::vector<std::string>>()) : std::vector<std::string>{};
  int interval = vm["interval-ms"].as<int>();
  double duration = vm["duration"].as<double>();
  if (names.empty()) throw ProtocolError("--probes names no probe");
  if (interval < 1) throw ProtocolError("--interval-ms must be >= 1, got " + std::to_string(interval));
  const int carrier_poll = vm["carrier-poll-ms"].as<int>();
  if (!probes::poll_interval_problem(carrier_poll).empty())
    throw ProtocolError("--carrier-poll-ms must be 0 (off) or " + std::to_string(probes::kMinPollMs) + ".." +
                        std::to_string(probes::kMaxPollMs) + ", got " + std::to_string(carrier_poll));
  if (!(duration >= 0)) throw ProtocolError("--duration must be >= 0 seconds");
  const std::string format = vm["format"].as<std::string>();
  if (format != "csv" && format != "jsonl") {
    err << "ocslab-agent capture: " << unknown_word_message("format", format, {"csv", "jsonl"})
        << " (--format csv or jsonl)\n";
    return kExitInput;  // a bad value, as `ocslab plot --format gif`
  }
  const std::string host = host_name(vm);
  if (refuse_missing_interface("capture", ifs, err)) return kExitInput;
  const ProbeRegistry& registry = builtin_registry();
  for (const auto& n : names) {
    if (!registry.contains(n)) {
      std::string known;
      for (const auto& k : registry.names()) known += (known.empty() ? "" : ", ") + k;
      err << "ocslab-agent capture: unknown probe '" << n << "' (known: " << known << ")\n";
      return kExitInput;
    }
  }

  std::string path = vm["output"].as<std::string>();
  std::unique_ptr<CsvWriter> csv;
  std::unique_ptr<JsonLinesWriter> jsonl;
  if (format == "jsonl") {
    jsonl = path == "-" ? std::make_unique<JsonLinesWriter>(out) : std::make_unique<JsonLinesWriter>(path);
  } else {
    csv = path == "-" ? std::make_unique<CsvWriter>(out) : std::make_unique<CsvWriter>(path);
    csv->header(sample_csv_columns());
  }
  std::mutex mutex;
  size_t rows = 0;
  // The probes call the sink from their own threads, where an exception cannot go: the first
  // write failure (full disk) is kept and ends the capture from the loop below.
  std::string write_error;
  std::atomic<bool> write_failed{false};
  auto sink = [&](const Sample& s) {
    std::lock_guard lock(mutex);
    if (write_failed) return;
    try {
      if (jsonl) {
        jsonl->write({{"t_ns", s.t_ns},
                      {"host", s.host},
                      {"source", s.source},
                      {"subject", s.subject},
                      {"signal", s.signal},
                      {"value", s.value},
                      {"unit", s.unit}});
      } else {
        csv->row(sample_csv_fields(s));
      }
      ++rows;
    } catch (const Error& e) {
      write_error = e.what();
      write_failed = true;
    }
  };

  InterruptScope interrupt;

  std::vector<std::unique_ptr<probes::Probe>> running;
  for (const auto& n : names) {
    ProbeConfig c{host, n, ifs, interval, nlohmann::json::object()};
    if (n == "carrier") c.params["poll_ms"] = carrier_poll;
    std::unique_ptr<probes::Probe> probe;
    probes::ProbeStatus st;
    try {
      probe = registry.create(c);
      st = probe->start(sink);
    } catch (const Error& e) {  // a probe's bad settings leave the others running
      st = {false, "", e.what()};
    }
    if (st.available) {
      running.push_back(std::move(probe));
    } else {
      err << "ocslab-agent capture: probe " << n << " unavailable: " << st.reason << "\n";
    }
  }
  int rc = kExitOk;
  if (running.empty()) {
    err << "ocslab-agent capture: none of the requested probes can run on this host\n";
    rc = kExitRefused;
  } else {
    bool progress = stderr_is_terminal();
    auto start = std::chrono::steady_clock::now();
    for (;;) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      if (interrupt.raised() || write_failed || (duration > 0 && t >= duration)) break;
      if (progress) {
        std::lock_guard lock(mutex);
        std::cerr << fmt::format("\r{:8.1f} s  {} samples", t, rows) << std::flush;
      }
    }
    if (progress) std::cerr << "\n";
  }
  for (auto& p : running) p->stop();
  interrupt.restore();
  if (write_failed) throw Error(write_error);
  if (csv) csv->close();  // the last rows reach the file here, or the capture fails naming it
  if (path != "-" && rc == kExitOk) err << fmt::format("{} samples written to {}\n", rows, path);
  return rc;
}

}  // namespace

int run_cli(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  // forwarding has subcommands and options of its own.
  if (!args.empty() && args[0] == "forwarding")
    return run_forwarding_cli(std::vector<std::string>(args.begin() + 1, args.end()), out, err);
  if (!args.empty() && args[0] == "module")
    return run_module_cli(std::vector<std::string>(args.begin() + 1, args.end()), out, err);
  po::options_description all;
  all.add(global_options()).add(serve_options()).add(capture_options());
  all.add_options()("command", po::value<std::string>())("args", po::value<std::vector<std::string>>());
  po::positional_options_description pos;
  pos.add("command", 1).add("args", -1);
  po::variables_map vm;
  try {
    po::store(po::command_line_parser(args).options(all).positional(pos).run(), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    std::string message = e.what();
    if (const auto* u = dynamic_cast<const po::unknown_option*>(&e)) {
      std::vector<std::string> names;
      for (const auto& o : all.options()) {
        if (o->long_name() != "command" && o->long_name() != "args") names.push_back("--" + o->long_name());
      }
      message = unknown_word_message("option", u->get_option_name(), names);
    }
    err << "ocslab-agent: " << message << "\nTry 'ocslab-agent --help'.\n";
    // A value that does not convert (`--interval-ms abc`) is bad input like `--interval-ms 0`;
    // a wrong option or a missing argument is the command line (docs/exit-codes.md).
    return dynamic_cast<const po::validation_error*>(&e) ? kExitInput : kExitUsage;
  }
  std::string cmd = vm.count("command") ? vm["command"].as<std::string>() : "";
  const CommandSpec* spec = cmd.empty() ? nullptr : find_command(cmd);
  if (cmd == "help") {
    auto rest = vm.count("args") ? vm["args"].as<std::vector<std::string>>() : std::vector<std::string>{};
    if (!rest.empty() && rest[0] == "forwarding") {
      out << forwarding_help();
      return kExitOk;
    }
    print_help(out, rest.empty() ? nullptr : find_command(rest[0]));
    return kExitOk;
  }
  if (vm.count("help")) {
    print_help(out, spec);
    return kExitOk;
  }
  if (vm.count("version")) {
    out << "ocslab-agent " << OCSLAB_VERSION << " (protocol " << kProtocolVersion << ")\n";
    return kExitOk;
  }
  if (cmd.empty()) {
    print_help(err, nullptr);
    return kExitUsage;
  }
  if (!spec) {
    std::vector<std::string> names = {"help"};
    for (const auto& c : commands()) names.push_back(c.name);
    err << "ocslab-agent: " << unknown_word_message("command", cmd, names) << "\nTry 'ocslab-agent --help'.\n";
    return kExitUsage;
  }
  if (vm.count("args")) {
    err << "ocslab-agent " << cmd << ": unexpected argument '" << vm["args"].as<std::vector<std::string>>()[0]
        << "'\nTry 'ocslab-agent " << cmd << " --help'.\n";
    return kExitUsage;
  }
  // Options are parsed as one set; reject one that belongs to another command instead of
  // silently ignoring it (capture --socket, serve --duration).
  const auto serve = serve_options(), capture = capture_options();  // must outlive the loop
  for (const auto* owned : {&serve, &capture}) {
    if ((owned == &serve && cmd == "serve") || (owned == &capture && cmd == "capture")) continue;
    for (const auto& opt : owned->options()) {
      const std::string& name = opt->long_name();
      if (cmd == "probes" && name == "if") continue;  // probes checks them on --if as capture would
      if (vm.count(name) && !vm[name].defaulted()) {
        err << "ocslab-agent: option --" << name << " does not apply to '" << cmd << "'\nTry 'ocslab-agent " << cmd
            << " --help'.\n";
        return kExitUsage;
      }
    }
  }
  try {
    init_logging(vm["log-level"].as<std::string>());
    if (cmd == "probes") return cmd_probes(vm, out, err);
    if (cmd == "capture") return cmd_capture(vm, out, err);
    return cmd_serve(vm, err);
  } catch (const ProtocolError& e) {
    err << "ocslab-agent " << cmd << ": " << e.what() << "\n";
    return kExitInput;
  } catch (const std::exception& e) {
    err << "ocslab-agent " << cmd << ": " << e.what() << "\n";
    return cmd == "serve" ? kExitFailed : kExitInput;
  }
}

}  // namespace ocslab::agent
