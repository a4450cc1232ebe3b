#include "ocslab/tool/cli.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <boost/program_options.hpp>
#include <cmath>
#include <ctime>
#include <filesystem>
#include <fmt/chrono.h>
#include <fmt/format.h>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <thread>

#include "ocslab/common/csv_writer.h"
#include "ocslab/common/log.h"
#include "ocslab/common/suggest.h"
#include "ocslab/common/version.h"
#include "ocslab/ocsctl/credentials.h"
#include "ocslab/ocsctl/driver.h"
#include "ocslab/tool/emulate.h"

namespace po = boost::program_options;
using nlohmann::json;

namespace ocslab::ocs {

namespace {

// A value given to an option that is out of range (`--interval-ms 0`): bad input, exit 2, where
// a wrong option or a missing argument is the command line, exit 1 (docs/exit-codes.md).
struct BadValue : po::error {
  using po::error::error;
};

// The exit code of a command-line error: a value boost cannot convert (`--interval-ms abc`) or
// one a command refuses is bad input; anything else is the command line.
int usage_code(const po::error& e) {
  return dynamic_cast<const BadValue*>(&e) || dynamic_cast<const po::validation_error*>(&e) ? kExitInput : kExitUsage;
}

std::atomic<bool> g_interrupted{false};
void on_signal(int) { g_interrupted = true; }

// Routes SIGINT/SIGTERM to g_interrupted while a long command runs, so it can stop cleanly
// with its output complete; restores the previous handlers on scope exit.
class InterruptGuard {
 public:
  InterruptGuard() {
    g_interrupted = false;
    struct sigaction sa {};
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, &old_int_);
    sigaction(SIGTERM, &sa, &old_term_);
  }
  ~InterruptGuard() {
    sigaction(SIGINT, &old_int_, nullptr);
    sigaction(SIGTERM, &old_term_, nullptr);
  }

 private:
  struct sigaction old_int_ {};
  struct sigaction old_term_ {};
};

struct CommandSpec {
  const char* name;
  const char* usage;
  const char* summary;
  const char* details;
  std::vector<std::string> options;  // command-specific options it accepts
  bool needs_switch = true;           // false: the command is a switch itself (emulate), no -s URL
  // Options this command reads differently from the shared table's text: (option, its text here).
  std::vector<std::pair<std::string, std::string>> own_texts = {};
};

const std::vector<CommandSpec>& commands() {
  static const std::vector<CommandSpec> specs = {
      {"info", "info", "show the switch's identity and size", "Reads vendor, model, serial, software version and the N x M port layout.", {}},
      {"list", "list", "list the circuits currently made", "One row per circuit: ingress port, egress port.", {}},
      {"connect", "connect INGRESS-EGRESS...", "make circuits",
       "Makes all given circuits in one protocol command where the protocol allows it. A port\n"
       "that is already patched is refused by the switch unless --replace is given, which\n"
       "first removes the conflicting circuits (minimal diff, like 'apply').",
       {"replace"}},
      {"disconnect", "disconnect PORTS...", "delete circuits by either end",
       "PORTS: numbers and A..B ranges. Deletes every circuit that has one of these ports as\n"
       "ingress or egress. With --allow, both ends of each affected circuit must be allowed.",
       {}},
      {"apply", "apply MAPPING.yaml", "move the switch to a mapping with the minimal set of changes",
       "Reads the current circuits, computes the minimal diff and applies it: removals first,\n"
       "then additions (NETCONF does both in one edit-config). Without --replace only the\n"
       "ports named in the file change; with --replace every other circuit (within --allow)\n"
       "is removed too. --dry-run prints the diff and the protocol commands, sending none.\n"
       "Mapping file:  circuits: [1-33, 2-34, {ingress: 3, egress: 35}]",
       {"replace", "dry-run"}},
      {"clear", "clear --yes", "delete every circuit (within --allow)", "Refuses to run without --yes.", {"yes"}},
      {"power", "power PORTS", "read optical power at port monitors", "PORTS: numbers and A..B ranges. Power in dBm as the switch reports it.", {}},
      {"watch-power", "watch-power PORTS [--interval-ms N] [--count N]", "sample port power as CSV (or JSON lines) on stdout",
       "Writes t_ns,port,dbm rows (t_ns: CLOCK_REALTIME when the reading arrived) until\n"
       "--count samples per port were taken or Ctrl-C. With --json: one object per reading\n"
       "and line, {\"t_ns\": ..., \"port\": ..., \"dbm\": ...}.",
       {"interval-ms", "count"}},
      {"bench", "bench --pairs A-B,... [--pairs A-B,...] [--toggles N] [--warmup N] [--no-restore] [-o FILE]",
       "time repeated reconfigurations",
       "Alternates the switch between two mappings (the second --pairs, or no circuits on\n"
       "those ports when given once) --toggles times, after --warmup untimed toggles (default 1:\n"
       "the first change after a login is slower). Prints n, mean, stdev, min, median, p90 (10\n"
       "samples or more), p99 (100 or more) and max of the whole reconfiguration span and of each\n"
       "protocol call, and writes every timed call to a CSV file. Then the switch gets back the\n"
       "circuits it had on those ports (--no-restore: it stays on the last mapping); when that\n"
       "fails the exit code is 6 and the message says what the switch has.\n"
       "Each toggle's calls are flushed to the file when it ends. Ctrl-C stops after the toggle\n"
       "in progress (exit 130); a toggle that fails stops the bench: its calls (the failed one\n"
       "with ok 0) are written, the statistics of the completed toggles printed, and the exit\n"
       "code is the failure's (3, 4 or 5).",
       {"pairs", "toggles", "warmup", "no-restore", "output"}},
      {"emulate", "emulate [LAB.yaml] [--preset P] [--listen ADDR] [--scpi ADDR] ...", "run the OCS emulator",
       "Serves TL1 (TCP and SSH), NETCONF (SSH) and SCPI on one emulated switch with a\n"
       "switching-time model, light and power per port, and (with NICs in the lab file) an\n"
       "optical data plane and NIC link model. Flags override the lab file; without either,\n"
       "a polatis-6000 32x32 listens for TL1 on 127.0.0.1:3082. ADDR is HOST:PORT or PORT\n"
       "(0: any free port; the chosen ports are printed and written to --ready-file).\n"
       "--dry-run validates the lab file and prints the wiring. Runs until Ctrl-C.\n"
       "Lab file reference: docs/emulator.md",
       {"preset", "size", "listen", "tl1-ssh", "netconf", "scpi", "events", "switching-ms", "ground-truth", "seed",
        "ready-file", "dry-run"},
       false,
       {{"dry-run", "validate the lab file and print the wiring; start nothing"}}},
  };
  return specs;
}

const CommandSpec* find_command(const std::string& name) {
  for (const auto& c : commands()) {
    if (name == c.name) return &c;
  }
  return nullptr;
}

std::vector<std::string> command_names() {
  std::vector<std::string> names = {"help"};
  for (const auto& c : commands()) names.push_back(c.name);
  return names;
}

po::options_description global_options();
po::options_description command_options();

// Every long option, as the user types it (--name): what an unknown option is compared with.
std::vector<std::string> option_names() {
  std::vector<std::string> names;
  for (const auto& d : {global_options(), command_options()}) {
    for (const auto& o : d.options()) names.push_back("--" + o->long_name());
  }
  return names;
}

// A command-line error as the user reads it: po's message, with the nearest valid option for
// an unknown one.
std::string usage_message(const po::error& e) {
  if (const auto* u = dynamic_cast<const po::unknown_option*>(&e)) {
    return unknown_word_message("option", u->get_option_name(), option_names());
  }
  return e.what();
}

po::options_description global_options() {
  po::options_description d("Global options");
  d.add_options()
      ("switch,s", po::value<std::string>(), "switch URL (or $OCSLAB_SWITCH): tl1://user@host[:3082], tl1+ssh://user@host[:22], netconf://user@host[:830], scpi://host[:5025]")
      ("allow", po::value<std::string>(), "allow-list: the only ports this command may change, e.g. 1..16,33..48; any other port is refused before anything is sent")
      ("timeout-ms", po::value<int>()->default_value(10000), "deadline for each reply from the switch")
      ("connect-timeout-ms", po::value<int>()->default_value(10000), "deadline for connecting and logging in")
      ("credentials", po::value<std::string>(), "credentials file (mode 0600): lines '<host>[:<port>] <user> <password>' (IPv6 host in brackets; '#' comments only at a line's start or after the password); default $OCSLAB_OCS_CREDENTIALS or ~/.config/ocslab/credentials. $OCSLAB_OCS_PASSWORD takes precedence for the switch host(s) $OCSLAB_OCS_PASSWORD_HOST names (HOST[:PORT],...; unset: loopback only)")
      ("identity,i", po::value<std::string>(), "SSH private key (tl1+ssh, netconf); default: ssh-agent, then ~/.ssh keys")
      ("known-hosts", po::value<std::string>(), "SSH known_hosts file; default ~/.ssh/known_hosts")
      ("accept-unknown-host", "SSH: accept a host key not in known_hosts (a changed key is always refused)")
      ("json", "machine-readable JSON on stdout")
      ("csv", "CSV on stdout")
      ("log-level", po::value<std::string>()->default_value("warn"), "trace, debug, info, warn, error, off (logs go to stderr)")
      ("help,h", "show help (also: ocsctl COMMAND --help)")
      ("version,V", "print the version");
  return d;
}

po::options_description command_options() {
  po::options_description d("Command options");
  d.add_options()
      ("replace", "connect/apply: remove conflicting (apply: all other) circuits")
      ("dry-run", "apply: print the diff and protocol commands, send nothing")
      ("yes", "clear: confirm")
      ("interval-ms", po::value<int>()->default_value(100), "watch-power: sampling interval")
      ("count", po::value<int>()->default_value(0), "watch-power: samples per port (0: until Ctrl-C)")
      ("pairs", po::value<std::vector<std::string>>(), "bench: a mapping as comma-separated INGRESS-EGRESS (give once or twice)")
      ("toggles", po::value<int>()->default_value(10), "bench: number of reconfigurations")
      ("warmup", po::value<int>()->default_value(1), "bench: untimed toggles before the timed ones")
      ("no-restore", "bench: leave the switch on the last mapping, not the circuits it found")
      ("output,o", po::value<std::string>(), "bench: CSV file with every call (default results/ocsctl-bench-TIME.csv, TIME in UTC)")
      ("preset", po::value<std::string>(), "emulate: switch preset (polatis-6000, mems-3d, liquid-crystal, rotor, robotic-patch-panel)")
      ("size", po::value<std::string>(), "emulate: NxM ports, e.g. 32x32")
      ("listen", po::value<std::string>(), "emulate: TL1 over TCP on HOST:PORT")
      ("tl1-ssh", po::value<std::string>(), "emulate: TL1 over SSH on HOST:PORT")
      ("netconf", po::value<std::string>(), "emulate: NETCONF over SSH on HOST:PORT")
      ("scpi", po::value<std::string>(), "emulate: SCPI on HOST:PORT")
      ("events", po::value<std::string>(), "emulate: live ground truth as JSON lines on HOST:PORT")
      ("switching-ms", po::value<std::string>(), "emulate: switching time: MS, or YAML like '{uniform: [10, 20]}'")
      ("ground-truth", po::value<std::string>(), "emulate: write the ground-truth timeline CSV here")
      ("seed", po::value<long long>(), "emulate: random seed of the delay models")
      ("ready-file", po::value<std::string>(), "emulate: write bound ports (JSON) here once listening");
  return d;
}

// An option's text in one command's help: what it does there. The shared table's text names
// the commands it applies to ("connect/apply: ..."); in a command's own help that prefix goes,
// and an option two commands read differently has its own text here.
std::string option_text_for(const CommandSpec& spec, const std::string& option, const std::string& shared) {
  for (const auto& [name, text] : spec.own_texts) {
    if (name == option) return text;
  }
  const std::string_view cmd = spec.name;
  const size_t colon = shared.find(": ");
  if (colon == std::string::npos) return shared;
  std::string_view names(shared.data(), colon);
  for (size_t at = 0; at <= names.size();) {
    size_t slash = names.find('/', at);
    if (slash == std::string_view::npos) slash = names.size();
    if (names.substr(at, slash - at) == cmd) return shared.substr(colon + 2);
    at = slash + 1;
  }
  return shared;
}

void print_help(std::ostream& out, const CommandSpec* cmd) {
  if (!cmd) {
    out << "ocsctl - drive an optical circuit switch (TL1, NETCONF, SCPI)\n\n"
           "Usage: ocsctl -s URL [options] COMMAND [args]\n\nCommands:\n";
    for (const auto& c : commands()) out << fmt::format("  {:<12} {}\n", c.name, c.summary);
    out << "\n" << global_options() << "\n" << command_options() << "\n"
        << "Passwords never go on the command line: set OCSLAB_OCS_PASSWORD with OCSLAB_OCS_PASSWORD_HOST (the switch\n"
           "it is for; without it, only a switch on loopback gets it) or use a credentials file.\n\n"
        << exit_code_help() << "\nExamples:\n"
        << "  ocsctl -s tl1://admin@10.0.0.5 info\n"
        << "  ocsctl -s tl1://admin@10.0.0.5 --allow 1..8,33..40 connect 1-33 2-34\n"
        << "  ocsctl -s netconf://admin@sw1 apply rail-a.yaml --replace --dry-run\n"
        << "  ocsctl -s scpi://sw1 watch-power 33..36 --interval-ms 10 > power.csv\n"
        << "  ocsctl -s tl1://admin@sw1 bench --pairs 1-33,2-34 --pairs 1-34,2-33 --toggles 50\n"
        << "\nDocumentation: docs/ocsctl.md\n";
    return;
  }
  out << "Usage: ocsctl " << (cmd->needs_switch ? "-s URL [options] " : "[options] ") << cmd->usage << "\n\n"
      << cmd->summary << ".\n"
      << cmd->details << "\n";
  if (!cmd->options.empty()) {
    out << "\nOptions:\n";
    auto all = command_options();
    for (const auto& name : cmd->options) {
      const auto& opt = all.find(name, false);
      out << fmt::format("  {:<22} {}\n", opt.format_name(), option_text_for(*cmd, name, opt.description()));
    }
  }
  out << "\nGlobal options: see 'ocsctl --help'.\n\n" << exit_code_help();
}

enum class Format { kTable, kJson, kCsv };

json circuits_json(const std::vector<Circuit>& cs) {
  json a = json::array();
  for (const auto& c : cs) a.push_back({{"ingress", c.ingress}, {"egress", c.egress}});
  return a;
}

json timing_json(const CallTiming& t) {
  return {{"op", t.op},
          {"command", t.command},
          {"issued_ns", t.issued.realtime_ns},
          {"acked_ns", t.acked.realtime_ns},
          {"latency_ms", t.latency_ms()},
          {"ok", t.ok},
          {"error", t.error}};
}

std::string circuits_text(const std::vector<Circuit>& cs) {
  std::string out;
  for (const auto& c : cs) out += (out.empty() ? "" : " ") + to_string(c);
  return out.empty() ? "-" : out;
}

std::vector<Port> parse_ports(const std::vector<std::string>& args) {
  PortSet set;
  for (const auto& a : args) {
    for (Port p : PortSet::parse(a).to_vector()) set.insert(p);
  }
  if (set.empty()) throw Error("no ports given");
  return set.to_vector();
}

std::vector<Circuit> parse_pairs(const std::string& text) {
  std::vector<Circuit> out;
  size_t i = 0;
  while (i <= text.size()) {
    size_t j = text.find(',', i);
    if (j == std::string::npos) j = text.size();
    std::string item = text.substr(i, j - i);
    if (!item.empty()) out.push_back(parse_circuit(item));
    i = j + 1;
  }
  check_mapping(out);
  return out;
}

// The exit code of a failure, as docs/ocsctl.md's table maps them.
int exit_code_of(const Error& e) {
  if (const auto* o = dynamic_cast<const OcsError*>(&e)) return ocs::exit_code_of(*o);
  return kExitInput;
}

// A failure for --json: the message, and for a partial reconfiguration what it left behind.
json error_json(const Error& e) {
  json j = {{"error", e.what()}};
  if (const auto* a = dynamic_cast<const ApplyError*>(&e)) {
    j["state_known"] = a->state_known();
    j["made"] = circuits_json(a->made());
    j["not_made"] = circuits_json(a->not_made());
    j["removed"] = circuits_json(a->removed());
  }
  return j;
}

// The q-quantile of a sorted, non-empty series, interpolated between neighbours.
double percentile_of_sorted(const std::vector<double>& v, double q) {
  double pos = q * static_cast<double>(v.size() - 1);
  size_t lo = static_cast<size_t>(std::floor(pos));
  size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (pos - static_cast<double>(lo));
}

// -o FILE, else results/ocsctl-bench-YYYYmmdd-HHMMSS.csv (UTC) with results/ made: beside the
// results of `ocslab run` (output: results), never a file in whatever folder the bench ran from.
std::string bench_output_path(const po::variables_map& vm) {
  if (vm.count("output")) return vm["output"].as<std::string>();
  std::error_code ec;
  std::filesystem::create_directories("results", ec);
  if (ec) throw Error("bench: cannot make the folder 'results' for its CSV (" + ec.message() + "); give -o FILE");
  return fmt::format("results/ocsctl-bench-{:%Y%m%d-%H%M%S}.csv", fmt::gmtime(std::time(nullptr)));
}

// A bench's statistics of one series: a percentile only where the sample count supports it
// (p90 from 10 samples, p99 from 100: below that it is the maximum by another name).
struct BenchStats {
  size_t n = 0;
  double mean = NAN, stdev = NAN, min = NAN, median = NAN, max = NAN;
  std::optional<double> p90, p99;
};

BenchStats bench_stats(const std::vector<double>& v) {
  BenchStats s;
  s.n = v.size();
  if (v.empty()) return s;
  double sum = 0;
  for (double x : v) sum += x;
  s.mean = sum / static_cast<double>(v.size());
  double sq = 0;
  for (double x : v) sq += (x - s.mean) * (x - s.mean);
  s.stdev = v.size() > 1 ? std::sqrt(sq / static_cast<double>(v.size() - 1)) : 0;  // the sample's
  std::vector<double> sorted = v;
  std::sort(sorted.begin(), sorted.end());
  s.min = sorted.front();
  s.median = percentile_of_sorted(sorted, 0.5);
  s.max = sorted.back();
  if (v.size() >= 10) s.p90 = percentile_of_sorted(sorted, 0.9);
  if (v.size() >= 100) s.p99 = percentile_of_sorted(sorted, 0.99);
  return s;
}

json bench_stats_json(const BenchStats& s) {
  auto opt = [](const std::optional<double>& x) { return x ? json(*x) : json(nullptr); };
  return json{{"n", s.n},           {"mean_ms", s.mean},     {"stdev_ms", s.stdev}, {"min_ms", s.min},
              {"median_ms", s.median}, {"p90_ms", opt(s.p90)}, {"p99_ms", opt(s.p99)}, {"max_ms", s.max}};
}

std::string bench_stats_line(const std::string& what, const BenchStats& s) {
  auto opt = [](const std::optional<double>& x) { return x ? fmt::format("{:.3f}", *x) : std::string("-"); };
  return fmt::format("{:<16} {:>5} {:>9.3f} {:>9.3f} {:>9.3f} {:>9.3f} {:>9} {:>9} {:>9.3f}\n", what, s.n, s.mean,
                     s.stdev, s.min, s.median, opt(s.p90), opt(s.p99), s.max);
}

// A bench once it has ended: its samples, how far it got, and whether the switch is back.
struct BenchOutcome {
  std::string switch_name, path;
  int requested = 0, warmup = 0, done = 0;
  bool restore = true;
  bool before_timed = false;  // it failed before its first timed toggle (start or warm-up)
  std::vector<double> spans;
  std::map<std::string, std::vector<double>> per_op;
  std::vector<Circuit> found;  // the circuits on the bench's ports when it began
  std::optional<std::string> failure, restore_error;
  int failure_code = 0;
  json failure_json;
};

class Cli {
 public:
  Cli(std::ostream& out, std::ostream& err) : out_(out), err_(err) {}
  int run(const std::vector<std::string>& args);

 private:
  int dispatch(const std::string& cmd, const std::vector<std::string>& args);
  static bool wants_json(const std::vector<std::string>& args);
  int usage_error(const std::string& message, const std::string& see, bool json_out, int code = kExitUsage);
  int cmd_info();
  int cmd_list();
  int cmd_connect(const std::vector<std::string>& args);
  int cmd_disconnect(const std::vector<std::string>& args);
  int cmd_apply(const std::vector<std::string>& args);
  int cmd_clear();
  int cmd_power(const std::vector<std::string>& args);
  int cmd_watch_power(const std::vector<std::string>& args);
  int cmd_bench();
  int report_bench(const BenchOutcome& o);
  int cmd_emulate(const std::vector<std::string>& args);
  int report_apply(const ApplyReport& r, bool dry_run);
  OcsDriver& driver();

  std::ostream& out_;
  std::ostream& err_;
  po::variables_map vm_;
  Format format_ = Format::kTable;
  // bench: every call of the toggle in progress, failed ones included (a throwing apply()
  // returns no ApplyReport): the first toggle_call_count_ of toggle_calls_. The records are
  // assigned over, not appended, so their strings keep their capacity: no allocation between
  // the timed calls. Declared before driver_ so they outlive it.
  std::vector<CallTiming> toggle_calls_;
  size_t toggle_call_count_ = 0;
  bool collect_calls_ = false;
  std::unique_ptr<OcsDriver> driver_;
  std::optional<PortSet> allow_override_;  // bench: confine changes to the benchmarked ports
};

OcsDriver& Cli::driver() {
  if (driver_) return *driver_;
  std::string url_text;
  if (vm_.count("switch")) url_text = vm_["switch"].as<std::string>();
  else if (const char* e = std::getenv("OCSLAB_SWITCH"); e && *e) url_text = e;
  else throw po::error("no switch given: use -s URL or set OCSLAB_SWITCH (e.g. tl1://admin@10.0.0.5:3082)");
  SwitchUrl url = SwitchUrl::parse(url_text);
  DriverOptions o;
  o.reply_timeout = std::chrono::milliseconds(vm_["timeout-ms"].as<int>());
  o.connect_timeout = std::chrono::milliseconds(vm_["connect-timeout-ms"].as<int>());
  if (vm_.count("allow")) o.allow = PortSet::parse(vm_["allow"].as<std::string>());
  if (allow_override_) o.allow = allow_override_;
  if (vm_.count("identity")) o.identity_file = vm_["identity"].as<std::string>();
  if (vm_.count("known-hosts")) o.known_hosts_file = vm_["known-hosts"].as<std::string>();
  o.accept_unknown_host = vm_.count("accept-unknown-host") > 0;
  o.on_timing = [this](const CallTiming& t) {
    if (!collect_calls_) return;
    if (toggle_call_count_ == toggle_calls_.size()) toggle_calls_.emplace_back();
    toggle_calls_[toggle_call_count_++] = t;
  };
  std::string cred = vm_.count("credentials") ? vm_["credentials"].as<std::string>() : default_credentials_path();
  o.password = resolve_password(url, cred);
  driver_ = make_driver(url, std::move(o));
  return *driver_;
}

int Cli::run(const std::vector<std::string>& args) {
  po::options_description all;
  all.add(global_options()).add(command_options());
  all.add_options()("command", po::value<std::string>())("args", po::value<std::vector<std::string>>());
  po::positional_options_description pos;
  pos.add("command", 1).add("args", -1);
  try {
    std::vector<std::string> argv = args;
    po::store(po::command_line_parser(argv).options(all).positional(pos).run(), vm_);
    po::notify(vm_);
  } catch (const po::error& e) {
    return usage_error(usage_message(e), "ocsctl --help", wants_json(args), usage_code(e));
  }
  std::string cmd = vm_.count("command") ? vm_["command"].as<std::string>() : "";
  const CommandSpec* spec = cmd.empty() ? nullptr : find_command(cmd);
  if (cmd == "help") {
    auto rest = vm_.count("args") ? vm_["args"].as<std::vector<std::string>>() : std::vector<std::string>{};
    print_help(out_, rest.empty() ? nullptr : find_command(rest[0]));
    return kExitOk;
  }
  if (vm_.count("help")) {
    print_help(out_, spec);
    return kExitOk;
  }
  if (vm_.count("version")) {
    out_ << "ocsctl " << project_version() << "\n";
    return kExitOk;
  }
  if (cmd.empty()) {
    print_help(err_, nullptr);
    return kExitUsage;
  }
  const bool json_out = vm_.count("json") > 0;
  if (!spec) return usage_error(unknown_word_message("command", cmd, command_names()), "ocsctl --help", json_out);
  // Reject options that belong to another command instead of silently ignoring them.
  const auto all_command_options = command_options();  // must outlive the loop below
  for (const auto& opt : all_command_options.options()) {
    const std::string& name = opt->long_name();
    if (vm_.count(name) && !vm_[name].defaulted() &&
        std::find(spec->options.begin(), spec->options.end(), name) == spec->options.end()) {
      return usage_error("option --" + name + " does not apply to '" + cmd + "'", "ocsctl " + cmd + " --help", json_out);
    }
  }
  if (vm_.count("json") && vm_.count("csv")) return usage_error("choose one of --json and --csv", "", json_out);
  format_ = vm_.count("json") ? Format::kJson : vm_.count("csv") ? Format::kCsv : Format::kTable;
  try {
    init_logging(vm_["log-level"].as<std::string>());
  } catch (const Error& e) {
    return usage_error(e.what(), "", json_out);
  }
  auto rest = vm_.count("args") ? vm_["args"].as<std::vector<std::string>>() : std::vector<std::string>{};
  try {
    return dispatch(cmd, rest);
  } catch (const Error& e) {
    err_ << "ocsctl: error: " << e.what() << "\n";
    const int rc = exit_code_of(e);
    if (format_ == Format::kJson) {
      json j = error_json(e);
      j["exit_code"] = rc;
      out_ << j.dump(2) << "\n";
    }
    return rc;
  }
}

bool Cli::wants_json(const std::vector<std::string>& args) {
  return std::find(args.begin(), args.end(), "--json") != args.end();
}

// A bad command line: the message on stderr with where to look; with --json also
// {"error": MESSAGE, "exit_code": 1} on stdout, so a script reading stdout sees the failure.
int Cli::usage_error(const std::string& message, const std::string& see, bool json_out, int code) {
  err_ << "ocsctl: " << message << "\n";
  if (!see.empty()) err_ << "Try '" << see << "'.\n";
  if (json_out) out_ << json{{"error", message}, {"exit_code", code}}.dump(2) << "\n";
  return code;
}

int Cli::dispatch(const std::string& cmd, const std::vector<std::string>& args) {
  auto no_args = [&] {
    if (!args.empty()) throw po::error("'" + cmd + "' takes no arguments (got '" + args[0] + "')");
  };
  try {
    if (cmd == "info") return no_args(), cmd_info();
    if (cmd == "list") return no_args(), cmd_list();
    if (cmd == "connect") return cmd_connect(args);
    if (cmd == "disconnect") return cmd_disconnect(args);
    if (cmd == "apply") return cmd_apply(args);
    if (cmd == "clear") return no_args(), cmd_clear();
    if (cmd == "power") return cmd_power(args);
    if (cmd == "watch-power") return cmd_watch_power(args);
    if (cmd == "bench") return no_args(), cmd_bench();
    if (cmd == "emulate") return cmd_emulate(args);
  } catch (const po::error& e) {
    return usage_error(usage_message(e), "ocsctl " + cmd + " --help", format_ == Format::kJson, usage_code(e));
  }
  return kExitUsage;
}

int Cli::cmd_info() {
  SwitchInfo i = driver().info();
  std::string size = fmt::format("{}x{}", i.ingress_ports, i.egress_ports);
  std::vector<std::pair<std::string, std::string>> rows = {
      {"switch", driver().name()}, {"vendor", i.vendor}, {"model", i.model}, {"serial", i.serial},
      {"version", i.version},      {"size", size}};
  if (format_ == Format::kJson) {
    out_ << json{{"switch", driver().name()}, {"vendor", i.vendor}, {"model", i.model}, {"serial", i.serial},
                 {"version", i.version}, {"ingress_ports", i.ingress_ports}, {"egress_ports", i.egress_ports}}
                .dump(2)
         << "\n";
  } else if (format_ == Format::kCsv) {
    CsvWriter w(out_);
    w.header({"key", "value"});
    for (const auto& [k, v] : rows) w.row({k, v});
  } else {
    for (const auto& [k, v] : rows) out_ << fmt::format("{:<9} {}\n", k, v);
    out_ << fmt::format("{:<9} ingress 1..{}, egress {}..{}\n", "ports", i.ingress_ports, i.first_egress(),
                        i.ingress_ports + i.egress_ports);
  }
  return kExitOk;
}

int Cli::cmd_list() {
  auto cs = driver().list();
  if (format_ == Format::kJson) {
    out_ << json{{"switch", driver().name()}, {"circuits", circuits_json(cs)}}.dump(2) << "\n";
  } else if (format_ == Format::kCsv) {
    CsvWriter w(out_);
    w.header({"ingress", "egress"});
    for (const auto& c : cs) w.row({std::to_string(c.ingress), std::to_string(c.egress)});
  } else {
    out_ << fmt::format("{:>7}  {:>7}\n", "INGRESS", "EGRESS");
    for (const auto& c : cs) out_ << fmt::format("{:>7}  {:>7}\n", c.ingress, c.egress);
    out_ << cs.size() << " circuit(s)\n";
  }
  return kExitOk;
}

int Cli::report_apply(const ApplyReport& r, bool dry_run) {
  double span = r.calls.empty() ? 0 : elapsed_ms(r.started, r.finished);
  if (format_ == Format::kJson) {
    json calls = json::array();
    for (const auto& t : r.calls) calls.push_back(timing_json(t));
    json j = {{"switch", driver().name()},
              {"dry_run", dry_run},
              {"remove", circuits_json(r.diff.remove)},
              {"add", circuits_json(r.diff.add)},
              {"keep", circuits_json(r.diff.keep)},
              {"calls", calls}};
    if (dry_run) j["commands"] = driver().render_commands(r.diff);
    out_ << j.dump(2) << "\n";
    return kExitOk;
  }
  if (format_ == Format::kCsv) {
    CsvWriter w(out_);
    w.header({"action", "ingress", "egress"});
    for (const auto& c : r.diff.remove) w.row({"remove", std::to_string(c.ingress), std::to_string(c.egress)});
    for (const auto& c : r.diff.add) w.row({"add", std::to_string(c.ingress), std::to_string(c.egress)});
    for (const auto& c : r.diff.keep) w.row({"keep", std::to_string(c.ingress), std::to_string(c.egress)});
    return kExitOk;
  }
  out_ << "remove: " << circuits_text(r.diff.remove) << "\n";
  out_ << "add:    " << circuits_text(r.diff.add) << "\n";
  out_ << "keep:   " << r.diff.keep.size() << " circuit(s)\n";
  if (dry_run) {
    out_ << "dry run: nothing sent. Commands that would be sent:\n";
    for (const auto& c : driver().render_commands(r.diff)) out_ << "  " << c << "\n";
    return kExitOk;
  }
  for (const auto& t : r.calls) out_ << fmt::format("  {:<11} {:>9.3f} ms  {}\n", t.op, t.latency_ms(), t.command);
  out_ << fmt::format("done in {:.3f} ms ({} call(s))\n", span, r.calls.size());
  return kExitOk;
}

// After a refused connect: the circuits already on the requested ports (read back from the
// switch), so the user sees the partner and how to replace it. Empty when none is found or
// the read fails (the switch's own refusal then stands alone).
std::string conflict_hint(OcsDriver& d, const std::vector<Circuit>& wanted) {
  std::vector<Circuit> in_the_way;
  try {
    for (const auto& c : d.list()) {
      for (const auto& w : wanted) {
        if (c != w && (c.ingress == w.ingress || c.egress == w.egress)) {
          in_the_way.push_back(c);
          break;
        }
      }
    }
  } catch (const std::exception&) {
    return "";
  }
  if (in_the_way.empty()) return "";
  return fmt::format("; already made: {} (connect --replace removes {} first)", circuits_text(in_the_way),
                     in_the_way.size() == 1 ? "it" : "them");
}

int Cli::cmd_connect(const std::vector<std::string>& args) {
  if (args.empty()) throw po::error("connect needs at least one INGRESS-EGRESS circuit");
  std::vector<Circuit> cs;
  for (const auto& a : args) cs.push_back(parse_circuit(a));
  check_mapping(cs);
  if (vm_.count("replace")) return report_apply(driver().apply(cs, ApplyMode::kMerge), false);
  try {
    driver().connect(cs);
  } catch (const DenyError& e) {
    throw DenyError(std::string(e.what()) + conflict_hint(driver(), cs), e.code(), e.text());
  }
  auto t = driver().last_timing();
  if (format_ == Format::kJson) {
    out_ << json{{"switch", driver().name()}, {"made", circuits_json(cs)}, {"call", t ? timing_json(*t) : json()}}.dump(2) << "\n";
  } else if (format_ == Format::kCsv) {
    CsvWriter w(out_);
    w.header({"ingress", "egress"});
    for (const auto& c : cs) w.row({std::to_string(c.ingress), std::to_string(c.egress)});
  } else {
    out_ << fmt::format("made {} circuit(s): {} ({:.3f} ms)\n", cs.size(), circuits_text(cs), t ? t->latency_ms() : 0.0);
  }
  return kExitOk;
}

int Cli::cmd_disconnect(const std::vector<std::string>& args) {
  if (args.empty()) throw po::error("disconnect needs ports");
  auto ports = parse_ports(args);
  driver().disconnect(ports);
  auto t = driver().last_timing();
  if (format_ == Format::kJson) {
    json p = ports;
    out_ << json{{"switch", driver().name()}, {"ports", p}, {"call", t ? timing_json(*t) : json()}}.dump(2) << "\n";
  } else if (format_ != Format::kCsv) {
    out_ << fmt::format("disconnected ports {} ({:.3f} ms)\n", PortSet({ports.begin(), ports.end()}).to_string(),
                        t ? t->latency_ms() : 0.0);
  }
  return kExitOk;
}

int Cli::cmd_apply(const std::vector<std::string>& args) {
  if (args.size() != 1) throw po::error("apply needs exactly one mapping file");
  auto target = load_mapping_file(args[0]);
  bool dry = vm_.count("dry-run") > 0;
  auto mode = vm_.count("replace") ? ApplyMode::kReplace : ApplyMode::kMerge;
  return report_apply(driver().apply(target, mode, dry), dry);
}

int Cli::cmd_clear() {
  if (!vm_.count("yes")) {
    err_ << "ocsctl: clear deletes every circuit" << (vm_.count("allow") ? " on the allowed ports" : "")
         << "; add --yes to confirm\n";
    return kExitUsage;
  }
  return report_apply(driver().clear(), false);
}

int Cli::cmd_power(const std::vector<std::string>& args) {
  if (args.empty()) throw po::error("power needs ports");
  auto readings = driver().power(parse_ports(args));
  if (format_ == Format::kJson) {
    json a = json::array();
    for (const auto& r : readings) a.push_back({{"port", r.port}, {"dbm", r.dbm}});
    out_ << json{{"switch", driver().name()}, {"power", a}}.dump(2) << "\n";
  } else if (format_ == Format::kCsv) {
    CsvWriter w(out_);
    w.header({"port", "dbm"});
    for (const auto& r : readings) w.row({std::to_string(r.port), fmt::format("{:.2f}", r.dbm)});
  } else {
    out_ << fmt::format("{:>5}  {:>8}\n", "PORT", "DBM");
    for (const auto& r : readings) out_ << fmt::format("{:>5}  {:>8.2f}\n", r.port, r.dbm);
  }
  return kExitOk;
}

int Cli::cmd_watch_power(const std::vector<std::string>& args) {
  if (args.empty()) throw po::error("watch-power needs ports");
  auto ports = parse_ports(args);
  int interval = vm_["interval-ms"].as<int>();
  int count = vm_["count"].as<int>();
  if (interval < 1) throw BadValue("--interval-ms must be at least 1");
  if (count < 0) throw BadValue("--count must be 0 (forever) or more");
  InterruptGuard guard;
  CsvWriter w(out_);
  const bool jsonl = format_ == Format::kJson;
  if (!jsonl) w.header({"t_ns", "port", "dbm"});
  auto next = std::chrono::steady_clock::now();
  int taken = 0;
  while (!g_interrupted && (count == 0 || taken < count)) {
    auto readings = driver().power(ports);
    int64_t t = realtime_ns();
    for (const auto& r : readings) {
      if (jsonl) {
        // dBm rounded as in the CSV: the switch reports two decimals.
        out_ << json{{"t_ns", t}, {"port", r.port}, {"dbm", std::round(r.dbm * 100) / 100}}.dump() << "\n";
      } else {
        w.row({std::to_string(t), std::to_string(r.port), fmt::format("{:.2f}", r.dbm)});
      }
    }
    if (jsonl) out_.flush();
    w.flush();
    ++taken;
    next += std::chrono::milliseconds(interval);
    while (!g_interrupted && std::chrono::steady_clock::now() < next) {
      std::this_thread::sleep_for(std::min<std::chrono::steady_clock::duration>(next - std::chrono::steady_clock::now(),
                                                                                std::chrono::milliseconds(50)));
    }
  }
  return kExitOk;
}

// What the statistics and the exit code are made of, once the switch is back (or not).
int Cli::report_bench(const BenchOutcome& o) {
  bool interrupted = !o.failure && o.done < o.requested;
  if (format_ == Format::kJson) {
    json ops;
    for (const auto& [op, v] : o.per_op) ops[op] = bench_stats_json(bench_stats(v));
    json j = {{"switch", o.switch_name},
              {"toggles", o.requested},
              {"warmup", o.warmup},
              {"completed", o.done},
              {"interrupted", interrupted},
              {"reconfiguration", bench_stats_json(bench_stats(o.spans))},
              {"calls", ops},
              {"restored", o.restore && !o.restore_error},
              {"csv", o.path}};
    if (o.failure) j.update(o.failure_json);
    if (o.restore_error) {
      j["restore_error"] = *o.restore_error;
      j["exit_code"] = int(kExitNotRestored);
    }
    out_ << j.dump(2) << "\n";
  } else {
    out_ << fmt::format("{:<16} {:>5} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9}\n", "latency (ms)", "n", "mean",
                        "stdev", "min", "median", "p90", "p99", "max");
    out_ << bench_stats_line("reconfiguration", bench_stats(o.spans));
    for (const auto& [op, v] : o.per_op) out_ << bench_stats_line("  " + op, bench_stats(v));
    out_ << "calls written to " << o.path << "\n";
    if (o.restore && !o.restore_error) {
      out_ << fmt::format("switch back on the {} circuit(s) it had on these ports\n", o.found.size());
    } else if (!o.restore) {
      out_ << "switch left on the last mapping (--no-restore)\n";
    }
  }
  if (o.restore_error) {
    std::string had;
    for (const auto& c : o.found) had += fmt::format("{}{}-{}", had.empty() ? "" : " ", c.ingress, c.egress);
    err_ << fmt::format(
        "ocsctl: error: could not put the switch back on the circuits it had on the bench's ports ({}): {}; "
        "check with 'ocsctl list' and make them with 'ocsctl apply'\n",
        had.empty() ? std::string("none") : had, *o.restore_error);
  }
  if (o.failure) {
    if (o.before_timed) {
      err_ << fmt::format("ocsctl: error: bench stopped before its first timed toggle: {}\n", *o.failure);
    } else {
      err_ << fmt::format("ocsctl: error: bench stopped at toggle {} of {} ({} completed): {}\n", o.done + 1, o.requested,
                          o.done, *o.failure);
    }
    return o.restore_error ? int(kExitNotRestored) : o.failure_code;
  }
  if (o.restore_error) return kExitNotRestored;
  if (interrupted) {
    err_ << fmt::format("ocsctl: bench interrupted after {} of {} toggles\n", o.done, o.requested);
    return kExitInterrupted;
  }
  return kExitOk;
}

int Cli::cmd_bench() {
  if (!vm_.count("pairs")) throw po::error("bench needs --pairs INGRESS-EGRESS,...");
  auto given = vm_["pairs"].as<std::vector<std::string>>();
  if (given.size() > 2) throw po::error("give --pairs once or twice");
  std::vector<Circuit> a = parse_pairs(given[0]);
  std::vector<Circuit> b = given.size() == 2 ? parse_pairs(given[1]) : std::vector<Circuit>{};
  if (a.empty()) throw po::error("--pairs lists no circuits");
  int toggles = vm_["toggles"].as<int>();
  if (toggles < 1) throw BadValue("--toggles must be at least 1");
  const int warmup = vm_["warmup"].as<int>();
  if (warmup < 0) throw BadValue("--warmup must be 0 or more");
  const bool restore = !vm_.count("no-restore");
  // The ports both mappings use are the whole scope: replace within it, never beyond.
  PortSet scope;
  for (const auto* m : {&a, &b}) {
    for (const auto& c : *m) {
      scope.insert(c.ingress);
      scope.insert(c.egress);
    }
  }
  // Replace within exactly the ports of the two mappings: the bench never touches others.
  if (vm_.count("allow")) {
    PortSet allowed = PortSet::parse(vm_["allow"].as<std::string>());
    for (Port p : scope.to_vector()) {
      if (!allowed.contains(p)) throw PortError(fmt::format("bench uses port {}, which is outside --allow {}", p, allowed.to_string()));
    }
  }
  allow_override_ = scope;
  OcsDriver& d = driver();
  const std::string path = bench_output_path(vm_);
  CsvWriter csv(path);
  csv.header({"toggle", "target", "op", "command", "issued_ns", "acked_ns", "latency_ms", "ok"});
  BenchOutcome o;
  o.path = path;
  o.warmup = warmup;
  o.restore = restore;
  o.requested = toggles;
  std::vector<double>& spans = o.spans;
  auto& per_op = o.per_op;
  auto write_calls = [&](int toggle, const std::vector<CallTiming>& calls) {
    for (const auto& t : calls) {
      csv.row({std::to_string(toggle), toggle % 2 == 0 ? "A" : "B", t.op, t.command,
               std::to_string(t.issued.realtime_ns), std::to_string(t.acked.realtime_ns),
               fmt::format("{:.6f}", t.latency_ms()), t.ok ? "1" : "0"});
    }
  };
  bool progress = stderr_is_terminal() && format_ == Format::kTable;
  // Ctrl-C ends the bench between toggles: the toggles done so far are written and reported.
  InterruptGuard guard;
  // What the switch has on the bench's ports now (both ends on them: a circuit leaving them
  // could not be changed within them): put back at the end unless --no-restore.
  for (const auto& c : d.list()) {
    if (scope.contains(c.ingress) && scope.contains(c.egress)) o.found.push_back(c);
  }
  int& done = o.done;
  // A failed toggle ends the bench; its error is reported after the statistics of the others.
  auto fail_with = [&](const OcsError& e) {
    o.failure = e.what();
    o.failure_code = exit_code_of(e);
    o.failure_json = error_json(e);
    o.failure_json["exit_code"] = o.failure_code;
  };
  try {
    d.apply(b, ApplyMode::kReplace);  // start from B so every timed toggle is a real change
    // Untimed toggles: the first change after a login (a session's first ENT-PATCH, a cold
    // cache in the switch's controller) is not what the bench measures. Ends on B.
    for (int w = 0; w < warmup && !g_interrupted; ++w) d.apply(w % 2 == 0 ? a : b, ApplyMode::kReplace);
    if (warmup % 2 == 1) d.apply(b, ApplyMode::kReplace);
  } catch (const OcsError& e) {
    fail_with(e);
    toggles = 0;  // no timed toggle runs; the circuits found are still put back below
    o.before_timed = true;
  }
  for (int i = 0; i < toggles && !g_interrupted; ++i) {
    ApplyReport r;
    toggle_call_count_ = 0;
    collect_calls_ = true;
    try {
      r = d.apply(i % 2 == 0 ? a : b, ApplyMode::kReplace);
    } catch (const OcsError& e) {
      collect_calls_ = false;
      // What this toggle did before it failed (the failed call has ok 0) is data too.
      toggle_calls_.resize(toggle_call_count_);
      write_calls(i, toggle_calls_);
      fail_with(e);
      break;
    }
    collect_calls_ = false;
    // The span of a reconfiguration runs from the first change request to the last ack;
    // the read of the current circuits before it is not part of it.
    std::vector<const CallTiming*> changes;
    for (const auto& t : r.calls) {
      if (t.op != "list") changes.push_back(&t);
    }
    if (!changes.empty()) spans.push_back(elapsed_ms(changes.front()->issued, changes.back()->acked));
    for (const auto& t : r.calls) per_op[t.op].push_back(t.latency_ms());
    write_calls(i, r.calls);
    csv.flush();  // a toggle's rows are on disk before the next one starts
    ++done;
    if (progress) err_ << fmt::format("\rtoggle {}/{}", i + 1, toggles) << std::flush;
  }
  if (progress) err_ << "\n";
  // The switch back on what it had (also after a failed or interrupted toggle: a switch that
  // failed may still take it). A failure here is its own exit code: 6, not restored.
  if (restore) {
    try {
      d.apply(o.found, ApplyMode::kReplace);
    } catch (const OcsError& e) {
      o.restore_error = e.what();
    }
  }
  csv.close();  // the calls reach the file here, or the command fails naming it
  o.switch_name = d.name();
  return report_bench(o);
}

int Cli::cmd_emulate(const std::vector<std::string>& args) {
  if (args.size() > 1) throw po::error("emulate takes at most one lab file");
  tool::EmulateOptions o;
  if (!args.empty()) o.lab_file = args[0];
  auto opt = [&](const char* name, std::optional<std::string>& slot) {
    if (vm_.count(name)) slot = vm_[name].as<std::string>();
  };
  opt("preset", o.preset);
  opt("size", o.size);
  opt("listen", o.tl1);
  opt("tl1-ssh", o.tl1_ssh);
  opt("netconf", o.netconf);
  opt("scpi", o.scpi);
  opt("events", o.events);
  opt("switching-ms", o.switching_ms);
  opt("ground-truth", o.ground_truth);
  if (vm_.count("seed")) o.seed = vm_["seed"].as<long long>();
  if (vm_.count("ready-file")) o.ready_file = vm_["ready-file"].as<std::string>();
  o.dry_run = vm_.count("dry-run") > 0;
  InterruptGuard guard;
  return tool::run_emulate(o, out_, err_, g_interrupted);
}

}  // namespace

int run_ocsctl(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  Cli cli(out, err);
  return cli.run(args);
}

}  // namespace ocslab::ocs
