#include "ocslab/cli/ocslab_cli.h"

#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <termios.h>
#include <unistd.h>

#include <fmt/format.h>
#include <algorithm>
#include <charconv>
#include <cctype>
#include <atomic>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <map>
#include <optional>
#include <set>

#include <nlohmann/json.hpp>

#include "ocslab/common/error.h"
#include "ocslab/common/log.h"
#include "ocslab/common/suggest.h"
#include "ocslab/common/version.h"
#include "ocslab/vlab/guest_config.h"
#include "ocslab/vlab/lab_control.h"
#include "ocslab/vlab/lab_spec.h"
#include "ocslab/vlab/lab_timing.h"
#include "ocslab/common/interrupt.h"
#include "commands.h"

namespace fs = std::filesystem;

namespace ocslab::cli {

namespace {


const char* kTopHelp = R"(ocslab - hardware-in-the-loop testbed toolkit for optical-circuit-switched ML networks

Usage: ocslab COMMAND ...

Commands:
  run       a reconfiguration-latency experiment from a spec: timeline, breakdown, summary,
            plots (ocslab run --help; docs/experiments.md)
  recover   finish the results folder of a run whose runner died: fetch what the agents
            spooled, write timeline.csv and meta.json (ocslab recover --help)
  forwarding  apply / verify (RDMA reachability and hop matrix) / clear a spec's host-based
            forwarding on its lab (ocslab forwarding --help; docs/forwarding.md)
  vlab      the virtual lab: QEMU hosts with Soft-RoCE wired through the OCS emulator
            (ocslab vlab --help)
  analyze   per-layer reconfiguration latency of a results folder or a capture file:
            breakdown.csv and summary (ocslab analyze --help)
  plot      draw timeline.png and cdf.png of a results folder (ocslab plot --help)
  controller  the phase controller of one job: orchestrates its rails for the shims of its
            ranks (ocslab controller --help; docs/phase-control.md)
  schedule  generate a collective schedule from a job's parallel configuration (model shape,
            TP/DP/PP/CP/EP, pipeline, sharding) (ocslab schedule --help; docs/workloads.md)

Global options: --help, -V|--version, --log-level LEVEL (trace..off; logs go to stderr)

Documentation: docs/virtual-lab.md, docs/experiments.md; the switch itself: ocsctl --help
)";

const char* kVlabHelp = R"(ocslab vlab - a photonic-rail lab of real Linux hosts on this machine

Usage:
  ocslab vlab up LAB.yaml [--cache DIR] [--timeout S] [--json]
        boot every host of the lab file, wire its data NICs through the emulated switch,
        make the file's links, and wait until every host answers over SSH with its
        Soft-RoCE devices ready. Prints the inventory (table, or JSON with --json) and
        writes an Ansible inventory. Ctrl-C stops and removes what was started.
  ocslab vlab down [NAME | LAB.yaml] [--cache DIR]
        stop the lab (the only one up when no name is given) and remove its run folder.
  ocslab vlab status [NAME] [--json] [--cache DIR]
        the labs that are up, their hosts, and any host or supervisor that died.
  ocslab vlab timing NAME [--preset P] [--switching-ms V] [--nic-model PRESET] [--los-ms V]
                   [--firmware-up-ms V] [--hold-down HOST:NIC]... [--release HOST:NIC]...
                   [--dark-port PORT]... [--light-port PORT]... [--release-all]
                   [--unreachable-ms V] [--link-gbps G] [--cache DIR] [--json]
        show, or change without rebooting, the lab's switching time, NIC link model and link rate, and
        hold NIC links down (fault injection) (ocslab vlab timing --help).
  ocslab vlab ssh HOST [--lab NAME] [COMMAND...]
        an SSH session (or one command) on a host, with the lab's key and known_hosts.
        --lab and --cache may also follow HOST; the command starts at the first other word
        (or after --) and goes to the host as it is, --log-level included.
  ocslab vlab console HOST [--lab NAME]
        the host's serial console (a root shell); Ctrl-] leaves.
  ocslab vlab supervise DIR
        internal: the process `up` starts to own the emulator and the QEMU hosts.

Options:
  --cache DIR   kernel cache and lab run folders (default $OCSLAB_VLAB_CACHE, else
                ~/.cache/ocslab/vlab); not under /tmp or /run, which guests replace
  --timeout S   up: give up when hosts are not ready after S seconds (default 300)
  --lab NAME    which lab, when several are up
  --json        machine-readable output on stdout

The switch of a running lab speaks TL1 on the port `status` shows, e.g.
  OCSLAB_OCS_PASSWORD=root ocsctl -s tl1://admin@127.0.0.1:PORT list

Lab file reference and a worked example: docs/virtual-lab.md
)";

const char* kTimingHelp = R"(ocslab vlab timing - the timing of a running lab, changed without rebooting it

Usage: ocslab vlab timing NAME [--preset P] [--switching-ms V] [--nic-model PRESET] [--los-ms V]
                          [--firmware-up-ms V] [--hold-down HOST:NIC]... [--release HOST:NIC]...
                          [--dark-port PORT]... [--light-port PORT]... [--release-all]
                          [--dark-for MS] [--unreachable-ms V] [--link-gbps G] [--cache DIR] [--json]

With no timing option: prints the lab's current timing (text, or JSON with --json).
With options: writes <lab>/timing.yaml, has the lab's supervisor apply it (SIGHUP), waits up
to 10 s for it and prints the timing now in force. Circuit moves and light changes that start
afterwards use it; a move already under way keeps its time. A refused value changes nothing.

Options (the lab file's keys and syntax, docs/virtual-lab.md):
  --preset P           the switch's switching time from a switch preset (polatis-6000,
                       mems-3d, liquid-crystal, rotor, robotic-patch-panel)
  --switching-ms V     switching time: milliseconds, or a distribution in YAML flow syntax,
                       e.g. '{uniform: [10, 20]}' or '{normal: {mean: 25, sd: 3, floor: 15}}';
                       wins over --preset
  --nic-model PRESET   every NIC's link model: ideal, cx6dx-no-autoneg, cx6dx-autoneg
  --los-ms V           loss of light -> link down, in milliseconds
  --firmware-up-ms V   light back -> link up: milliseconds or a distribution, as --switching-ms
                       (--los-ms / --firmware-up-ms without --nic-model give a custom model:
                       what they do not set takes the lab file's defaults, as in nic_model)
  --hold-down HOST:NIC hold this data NIC's link down (repeatable; added to those held): the
                       emulated firmware never raises it, so light returning leaves it down;
                       light loss still takes it down
  --release HOST:NIC   release a held NIC (repeatable): with light, its link comes up after the
                       firmware delay
  --dark-port PORT     a failed switch port (repeatable; added to those dark): its shutter
                       closes, so no light passes it either way until it is lit again; PORT
                       is the switch's port number (a NIC's tx_port or rx_port in the lab file)
  --light-port PORT    open a port darkened with --dark-port again (repeatable)
  --dark-for MS        with --dark-port: a dark spell instead of a failed port; those ports go
                       dark now and the emulator lights them again exactly MS later by itself
                       (an outage of an exact length; a port already dark is refused)
  --unreachable-ms V   the switch's control plane is unreachable for V ms from now: what
                       clients send meanwhile is held and served when the spell ends
  --link-gbps G        every lit circuit's rate from now on, Gbit/s on the wire (0.001..1000;
                       0 removes the cap): the emulator delays frames beyond it
  --release-all        release every held NIC and light every dark port (before --hold-down
                       and --dark-port add any)
  --cache DIR          where the lab's run folder is (default as for `up`)
  --json               {"lab", "timing_generation", "timing_error", "timing": {...}}

Example: sweep the switching time of lab `rail4` without rebooting it
  ocslab vlab timing rail4 --switching-ms 5
  ocslab vlab timing rail4 --switching-ms '{uniform: [20, 40]}' --nic-model cx6dx-no-autoneg
  ocslab vlab timing rail4 --json
Example: h3's eth1 does not come back after the next reconfiguration, then it does
  ocslab vlab timing rail4 --hold-down h3:eth1
  ocslab vlab timing rail4 --release-all
Example: switch port 19 (h3:eth1's receive port) fails, then comes back
  ocslab vlab timing rail4 --dark-port 19
  ocslab vlab timing rail4 --light-port 19
Example: h3:eth1's circuit dark for exactly 150 ms, both directions (its tx and rx ports)
  ocslab vlab timing rail4 --dark-port 3 --dark-port 19 --dark-for 150
Example: every circuit carries at most 10 Gbit/s, then as fast as the emulator forwards
  ocslab vlab timing rail4 --link-gbps 10
  ocslab vlab timing rail4 --link-gbps 0
)";

// The options that only `vlab timing` takes (with the LabTiming field each sets).
const std::map<std::string, std::optional<std::string> vlab::LabTiming::*> kTimingOptions = {
    {"--preset", &vlab::LabTiming::switch_preset},
    {"--unreachable-ms", &vlab::LabTiming::unreachable_ms},
    {"--link-gbps", &vlab::LabTiming::link_gbps},
    {"--switching-ms", &vlab::LabTiming::switching_ms},
    {"--nic-model", &vlab::LabTiming::nic_model},
    {"--los-ms", &vlab::LabTiming::los_ms},
    {"--firmware-up-ms", &vlab::LabTiming::firmware_up_ms}};

struct Args {
  std::vector<std::string> positional;
  std::map<std::string, std::string> options;           // --name value (or "" for flags); the last one given
  std::map<std::string, std::vector<std::string>> all;  // every value of each option, in order
  bool has(const std::string& k) const { return options.count(k) != 0; }
  std::vector<std::string> values(const std::string& k) const {
    auto it = all.find(k);
    return it == all.end() ? std::vector<std::string>{} : it->second;
  }
  std::string get(const std::string& k, const std::string& dflt = {}) const {
    auto it = options.find(k);
    return it == options.end() ? dflt : it->second;
  }
};

// Options may come anywhere among the positional words; after `--` every word is positional.
// `vlab ssh` passes only the words before its remote command (vlab_ssh_remote_start).
Args parse(const std::vector<std::string>& words, size_t first) {
  static const std::map<std::string, bool> kKnown = {
      {"--cache", true},   {"--timeout", true},        {"--lab", true},
      {"--json", false},   {"--help", false},          {"-h", false},
      {"--preset", true},  {"--switching-ms", true},   {"--nic-model", true},
      {"--los-ms", true},  {"--firmware-up-ms", true}, {"--hold-down", true},
      {"--release", true}, {"--release-all", false},   {"--dark-port", true},
      {"--light-port", true}, {"--unreachable-ms", true}, {"--dark-for", true}, {"--link-gbps", true}};
  Args a;
  for (size_t i = first; i < words.size(); ++i) {
    const std::string& w = words[i];
    if (w == "--") {
      for (++i; i < words.size(); ++i) a.positional.push_back(words[i]);
      break;
    }
    if (w.rfind("-", 0) == 0 && w.size() > 1) {
      auto eq = w.find('=');
      std::string name = w.substr(0, eq);
      auto it = kKnown.find(name);
      if (it == kKnown.end()) {
        std::vector<std::string> names;
        for (const auto& [known, _] : kKnown) names.push_back(known);
        throw unknown_word("option", name, names, "ocslab vlab");
      }
      if (name == "-h") name = "--help";
      if (!it->second) {
        a.options[name] = "";
      } else if (eq != std::string::npos) {
        a.options[name] = w.substr(eq + 1);
      } else {
        if (i + 1 >= words.size()) throw UsageError(name + " needs a value");
        a.options[name] = words[++i];
      }
      a.all[name].push_back(a.options[name]);
      continue;
    }
    a.positional.push_back(w);
  }
  return a;
}

std::string cache_of(const Args& a) { return a.has("--cache") ? a.get("--cache") : vlab::default_cache_dir(); }

vlab::ProgressFn progress_printer(std::ostream& err) {
  if (!stderr_is_terminal()) return [](const std::string&) {};
  return [&err](const std::string& msg) {
    std::string m = msg.size() > 160 ? msg.substr(0, 157) + "..." : msg;
    err << "\r\033[K" << m << std::flush;
  };
}

void print_inventory(const vlab::LabState& s, std::ostream& out) {
  // Not the password: this goes to terminals and CI logs (it is in the lab file and state.json).
  out << fmt::format("lab {}: switch {} (password: the lab file's), ground truth live on 127.0.0.1:{}\n", s.name,
                     s.switch_url(), s.events_port);
  out << fmt::format("{:<8} {:<6} {:<8} {:<9} {:<18} {:<18} {:<10} {:<6} {}\n", "host", "state", "ssh", "nic", "ip",
                     "mac", "rdma", "ports", "if2");
  for (const auto& h : s.hosts) {
    for (size_t i = 0; i < h.nics.size(); ++i) {
      const auto& n = h.nics[i];
      out << fmt::format("{:<8} {:<6} {:<8} {:<9} {:<18} {:<18} {:<10} {:<6} {}\n", i ? "" : h.name,
                         i ? "" : (h.alive ? "up" : "DEAD"), i ? "" : std::to_string(h.ssh_port), n.name,
                         n.standby_for.empty() ? n.ip : "standby of " + n.standby_for, n.mac,
                         n.rdma_device.empty() ? "-" : n.rdma_device, fmt::format("{}>{}", n.tx_port, n.rx_port),
                         n.if2.empty() ? "-" : n.if2 + " " + n.if2_mac);
    }
  }
  out << "ssh: ocslab vlab ssh HOST   ansible: -i " << s.inventory() << "\n";
}

int cmd_up(const Args& a, std::ostream& out, std::ostream& err) {
  if (a.positional.size() != 1) throw UsageError("usage: ocslab vlab up LAB.yaml");
  vlab::UpOptions o;
  o.cache_dir = cache_of(a);
  if (a.has("--timeout")) {
    try {
      o.ready_timeout = std::chrono::seconds(std::stoi(a.get("--timeout")));
    } catch (const std::exception&) {
      throw BadValue("--timeout needs a number of seconds, got '" + a.get("--timeout") + "' (ocslab vlab up --help)");
    }
  }
  InterruptScope interrupt;
  o.interrupted = InterruptScope::flag();
  auto progress = progress_printer(err);
  auto started = std::chrono::steady_clock::now();
  try {
    vlab::LabState s = vlab::lab_up(a.positional[0], o, progress);
    interrupt.restore();
    if (stderr_is_terminal()) err << "\r\033[K";
    double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    if (a.has("--json")) {
      out << s.to_json();
    } else {
      print_inventory(s, out);
      out << fmt::format("{} host(s) ready in {:.1f} s\n", s.hosts.size(), secs);
    }
    return kExitOk;
  } catch (...) {
    interrupt.restore();
    if (stderr_is_terminal()) err << "\r\033[K";
    if (interrupt.raised()) {
      err << "ocslab vlab up: interrupted; everything it started was stopped\n";
      return kExitInterrupted;
    }
    throw;
  }
}

std::string lab_dir_for(const Args& a, const std::string& name_or_file);

void print_timing(const std::string& lab, const vlab::TimingState& t, bool json, std::ostream& out) {
  if (json) {
    out << vlab::timing_to_json(lab, t);
  } else {
    out << fmt::format("lab {} timing (generation {}): {}\n", lab, t.generation, t.summary());
  }
}

// --hold-down / --release / --release-all: the set of NICs held down afterwards (those held
// now, none with --release-all, less --release, plus --hold-down), each named checked against
// the lab. Unset when none of them is given.
void held_after(const Args& a, const std::string& dir, vlab::LabTiming& t) {
  if (!a.has("--hold-down") && !a.has("--release") && !a.has("--release-all")) return;
  vlab::TimingState now = vlab::lab_timing(dir);  // the lab must be running
  vlab::LabState lab = vlab::LabState::load(dir);
  auto check = [&](const std::string& option, const std::string& nic) {
    try {
      vlab::emulator_nic_name(lab, nic);
    } catch (const ConfigError& e) {
      throw ConfigError(option + " '" + nic + "': " + e.what());
    }
  };
  std::vector<std::string> held = a.has("--release-all") ? std::vector<std::string>{} : now.held_down;
  for (const auto& nic : a.values("--release")) {
    check("--release", nic);
    held.erase(std::remove(held.begin(), held.end(), nic), held.end());
  }
  for (const auto& nic : a.values("--hold-down")) {
    check("--hold-down", nic);
    if (std::find(held.begin(), held.end(), nic) == held.end()) held.push_back(nic);
  }
  t.hold_down = held;
}

// A switch port given to `option`, as a number (its range is the emulator's to check).
int port_value(const std::string& option, const std::string& text) {
  int port = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), port);
  if (ec != std::errc() || end != text.data() + text.size() || port < 1) {
    throw ConfigError(option + " '" + text + "': expected a switch port number (1 or more)");
  }
  return port;
}

// --dark-port / --light-port / --release-all: the set of ports dark afterwards (those dark now,
// none with --release-all, less --light-port, plus --dark-port). Unset when none is given.
void dark_after(const Args& a, const std::string& dir, vlab::LabTiming& t) {
  if (a.has("--dark-for")) {  // a spell: the --dark-port ports, not the dark set
    if (a.has("--light-port") || a.has("--release-all")) {
      throw UsageError("--dark-for takes --dark-port only: a spell's ports light again by themselves");
    }
    if (!a.has("--dark-port")) throw UsageError("--dark-for MS: name the ports with --dark-port PORT");
    for (const auto& text : a.values("--dark-port")) t.dark_spell_ports.push_back(port_value("--dark-port", text));
    t.dark_spell_ms = a.get("--dark-for");
    return;
  }
  if (!a.has("--dark-port") && !a.has("--light-port") && !a.has("--release-all")) return;
  std::vector<int> dark = a.has("--release-all") ? std::vector<int>{} : vlab::lab_timing(dir).dark_ports;
  for (const auto& text : a.values("--light-port")) {
    int port = port_value("--light-port", text);
    dark.erase(std::remove(dark.begin(), dark.end(), port), dark.end());
  }
  for (const auto& text : a.values("--dark-port")) {
    int port = port_value("--dark-port", text);
    if (std::find(dark.begin(), dark.end(), port) == dark.end()) dark.push_back(port);
  }
  t.dark_ports = dark;
}

int cmd_timing(const Args& a, std::ostream& out, std::ostream&) {
  if (a.positional.size() > 1) throw UsageError("usage: ocslab vlab timing NAME [OPTIONS] (ocslab vlab timing --help)");
  vlab::LabTiming t;
  for (const auto& [option, field] : kTimingOptions) {
    if (a.has(option)) t.*field = a.get(option);
  }
  vlab::timing_yaml(t);  // a bad value is named before the lab is looked at
  std::string dir = lab_dir_for(a, a.positional.empty() ? "" : a.positional[0]);
  held_after(a, dir, t);
  dark_after(a, dir, t);
  std::string lab = fs::path(dir).filename().string();
  vlab::TimingState now = t.empty() ? vlab::lab_timing(dir) : vlab::set_lab_timing(dir, t, std::chrono::seconds(10));
  print_timing(lab, now, a.has("--json"), out);
  return kExitOk;
}

std::string lab_dir_for(const Args& a, const std::string& name_or_file) {
  std::string name = name_or_file;
  if (name.size() > 5 && (name.ends_with(".yaml") || name.ends_with(".yml"))) name = vlab::load_lab_spec(name).name;
  if (name.empty() && a.has("--lab")) name = a.get("--lab");
  return vlab::find_lab_dir(cache_of(a), name);
}

int cmd_down(const Args& a, std::ostream& out, std::ostream& err) {
  if (a.positional.size() > 1) throw UsageError("usage: ocslab vlab down [NAME | LAB.yaml]");
  std::string dir = lab_dir_for(a, a.positional.empty() ? "" : a.positional[0]);
  vlab::lab_down(dir, progress_printer(err));
  if (stderr_is_terminal()) err << "\r\033[K";
  out << "lab " << fs::path(dir).filename().string() << " is down\n";
  return kExitOk;
}

int cmd_status(const Args& a, std::ostream& out, std::ostream&) {
  std::vector<vlab::LabState> labs;
  if (!a.positional.empty()) {
    labs.push_back(vlab::lab_status(lab_dir_for(a, a.positional[0])));
  } else {
    for (const auto& l : vlab::list_labs(cache_of(a))) labs.push_back(vlab::lab_status(l.dir));
  }
  bool healthy = true;
  for (const auto& l : labs) {
    healthy = healthy && l.phase == "running";
    for (const auto& h : l.hosts) healthy = healthy && h.alive;
  }
  if (a.has("--json")) {
    out << "[";
    for (size_t i = 0; i < labs.size(); ++i) out << (i ? "," : "") << labs[i].to_json();
    out << "]\n";
  } else if (labs.empty()) {
    out << "no virtual lab is up\n";
  } else {
    for (const auto& l : labs) {
      out << fmt::format("{}: {}{}\n", l.name, l.phase, l.error.empty() ? "" : " (" + l.error + ")");
      out << fmt::format("  timing: {}{}\n", l.timing.summary(),
                         l.timing.error.empty() ? "" : "; last change refused: " + l.timing.error);
      for (const auto& h : l.hosts) {
        if (!h.alive)
          out << fmt::format("  {} is DEAD: {}; console log {}\n", h.name, h.exit.empty() ? "gone" : h.exit,
                             vlab::console_log(l, h));
      }
      print_inventory(l, out);
    }
  }
  return healthy ? kExitOk : kExitFailed;
}

int cmd_ssh(const Args& a, const std::vector<std::string>& remote) {
  if (a.positional.size() != 1) throw UsageError("usage: ocslab vlab ssh HOST [--lab NAME] [COMMAND...]");
  vlab::LabState s = vlab::LabState::load(lab_dir_for(a, ""));
  const auto& h = s.host(a.positional[0]);
  std::vector<std::string> argv = {"ssh",
                                   "-i",
                                   s.client_key(),
                                   "-o",
                                   "UserKnownHostsFile=" + s.known_hosts(),
                                   "-o",
                                   "GlobalKnownHostsFile=/dev/null",
                                   "-o",
                                   "StrictHostKeyChecking=yes",
                                   "-o",
                                   "LogLevel=ERROR",
                                   "-p",
                                   std::to_string(h.ssh_port),
                                   "root@127.0.0.1"};
  argv.insert(argv.end(), remote.begin(), remote.end());
  std::vector<char*> c;
  for (auto& s2 : argv) c.push_back(s2.data());
  c.push_back(nullptr);
  std::cout.flush();
  ::execvp("ssh", c.data());
  throw SystemError("cannot run ssh (package openssh-client)", errno);
}

int cmd_console(const Args& a, std::ostream&, std::ostream& err) {
  if (a.positional.size() != 1) throw UsageError("usage: ocslab vlab console HOST");
  vlab::LabState s = vlab::LabState::load(lab_dir_for(a, ""));
  const auto& h = s.host(a.positional[0]);
  std::string path = vlab::console_socket(s, h);
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    int e = errno;
    ::close(fd);
    throw SystemError("cannot open the console of " + h.name + " (" + path + ")", e);
  }
  bool tty = ::isatty(0);
  termios saved{};
  if (tty) {
    ::tcgetattr(0, &saved);
    termios raw = saved;
    ::cfmakeraw(&raw);
    ::tcsetattr(0, TCSANOW, &raw);
  }
  err << "console of " << h.name << " (Ctrl-] leaves)\r\n";
  ::write(fd, "\n", 1);
  pollfd p[2] = {{0, POLLIN, 0}, {fd, POLLIN, 0}};
  char buf[4096];
  for (bool done = false; !done;) {
    if (::poll(p, 2, -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    if (p[0].revents & (POLLIN | POLLHUP)) {
      ssize_t n = ::read(0, buf, sizeof(buf));
      if (n <= 0) break;
      for (ssize_t i = 0; i < n; ++i) {
        if (buf[i] == 0x1d) {
          n = i;
          done = true;
        }
      }
      if (n > 0 && ::write(fd, buf, static_cast<size_t>(n)) < 0) break;
    }
    if (p[1].revents & (POLLIN | POLLHUP)) {
      ssize_t n = ::read(fd, buf, sizeof(buf));
      if (n <= 0) break;
      if (::write(1, buf, static_cast<size_t>(n)) < 0) break;
    }
  }
  if (tty) ::tcsetattr(0, TCSANOW, &saved);
  ::close(fd);
  err << "\n";
  return kExitOk;
}

int run_vlab(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  if (args.size() < 2 || args[1] == "--help" || args[1] == "-h" || args[1] == "help") {
    (args.size() < 2 ? err : out) << kVlabHelp;
    return args.size() < 2 ? kExitUsage : kExitOk;
  }
  const std::string& sub = args[1];
  // ssh: only the words before the remote command are ocslab's.
  auto remote = args.begin() + static_cast<std::ptrdiff_t>(sub == "ssh" ? vlab_ssh_remote_start(args) : args.size());
  Args a = parse(std::vector<std::string>(args.begin(), remote), 2);
  if (a.has("--help")) {
    out << (sub == "timing" ? kTimingHelp : kVlabHelp);
    return kExitOk;
  }
  if (sub != "timing") {
    for (const auto& [option, field] : kTimingOptions) {
      if (a.has(option)) throw UsageError(option + " only applies to `ocslab vlab timing`");
    }
    for (const char* option : {"--hold-down", "--release", "--release-all", "--dark-port", "--light-port", "--dark-for"}) {
      if (a.has(option)) throw UsageError(std::string(option) + " only applies to `ocslab vlab timing`");
    }
  }
  if (sub == "timing") return cmd_timing(a, out, err);
  if (sub == "up") return cmd_up(a, out, err);
  if (sub == "down") return cmd_down(a, out, err);
  if (sub == "status") return cmd_status(a, out, err);
  if (sub == "ssh") return cmd_ssh(a, std::vector<std::string>(remote, args.end()));
  if (sub == "console") return cmd_console(a, out, err);
  if (sub == "supervise") {
    if (a.positional.size() != 1) throw UsageError("usage: ocslab vlab supervise DIR");
    return vlab::lab_supervise(a.positional[0]);
  }
  throw unknown_word("vlab command", sub, {"up", "down", "status", "timing", "ssh", "console", "supervise"},
                     "ocslab vlab");
}

// --json among ocslab's own words (not after `--`, not in the remote command of `vlab ssh`).
bool json_requested(const std::vector<std::string>& args) {
  const size_t end = std::min(vlab_ssh_remote_start(args), args.size());
  for (size_t i = 0; i < end && args[i] != "--"; ++i) {
    if (args[i] == "--json" || args[i] == "--json-stream") return true;
  }
  return false;
}

// "FILE:LINE:COL: MESSAGE" split at the first ":LINE:COL: " (a message may quote another file's
// position after it); false for a message without one.
bool split_position(const std::string& text, std::string& file, int& line, int& col, std::string& message) {
  auto digits = [&](size_t& i) {
    const size_t start = i;
    while (i < text.size() && i - start < 9 && std::isdigit(static_cast<unsigned char>(text[i]))) ++i;
    return i > start ? std::stoi(text.substr(start, i - start)) : -1;
  };
  for (size_t c = text.find(':'); c != std::string::npos && c > 0; c = text.find(':', c + 1)) {
    size_t i = c + 1;
    line = digits(i);
    if (line < 0 || i >= text.size() || text[i] != ':') continue;
    ++i;
    col = digits(i);
    if (col < 0 || text.compare(i, 2, ": ") != 0) continue;
    file = text.substr(0, c);
    message = text.substr(i + 2);
    return true;
  }
  return false;
}

// A failure: the message on stderr; with --json also {"error": MESSAGE, "exit_code": N} on
// stdout, so a script reading stdout sees the failure (docs/cli.md). With `at`, a bad input's
// position also as keys file, line, col and message, so a script or an editor can point at the
// spot (`ocslab run --check --json`).
int report_failure(const std::string& message, int code, bool json, std::ostream& out, std::ostream& err,
                   bool at = false) {
  err << "ocslab: " << message << "\n";
  if (!json) return code;
  nlohmann::json j{{"error", message}, {"exit_code", code}};
  std::string file, text;
  int line = 0, col = 0;
  if (at && split_position(message, file, line, col, text)) {
    j["file"] = file;
    j["line"] = line;
    j["col"] = col;
    j["message"] = text;
  }
  out << j.dump() << "\n";
  return code;
}

}  // namespace

size_t vlab_ssh_remote_start(const std::vector<std::string>& args) {
  static const std::set<std::string> kValued = {"--cache", "--timeout", "--lab", "--log-level"};
  static const std::set<std::string> kAfterHost = {"--lab", "--cache", "--log-level", "--help", "-h"};
  auto name_of = [](const std::string& w) { return w.substr(0, w.find('=')); };
  auto step = [&](const std::string& w) -> size_t {
    return kValued.count(name_of(w)) && w.find('=') == std::string::npos ? 2 : 1;
  };
  // The command words `vlab ssh`; the global --log-level may come before or between them.
  size_t i = 0;
  std::vector<std::string> command;
  while (i < args.size() && command.size() < 2) {
    if (name_of(args[i]) == "--log-level") {
      i += step(args[i]);
    } else {
      command.push_back(args[i++]);
    }
  }
  if (command != std::vector<std::string>{"vlab", "ssh"}) return args.size();
  bool host_seen = false;
  while (i < args.size()) {
    const std::string& w = args[i];
    if (w == "--") return std::min(args.size(), i + (host_seen ? 1 : 2));  // `-- HOST COMMAND...`
    bool option = w.size() > 1 && w[0] == '-';
    if (!host_seen && !option) {
      host_seen = true;
      ++i;
      continue;
    }
    if (host_seen && !kAfterHost.count(name_of(w))) return i;
    i += step(w);  // before HOST every option is ocslab's: parse() rejects the unknown ones
  }
  return args.size();
}

int run_ocslab(const std::vector<std::string>& args_in, std::ostream& out, std::ostream& err) {
  // --log-level is global and may come anywhere, except inside the remote command of `vlab ssh`.
  const size_t remote = vlab_ssh_remote_start(args_in);
  std::vector<std::string> args;
  std::string level = "warn";
  for (size_t i = 0; i < args_in.size(); ++i) {
    if (i >= remote) {
      args.push_back(args_in[i]);
    } else if (args_in[i] == "--log-level" && i + 1 < args_in.size()) {
      level = args_in[++i];
    } else if (args_in[i].rfind("--log-level=", 0) == 0) {
      level = args_in[i].substr(12);
    } else {
      args.push_back(args_in[i]);
    }
  }
  try {
    bool supervise = args.size() >= 2 && args[0] == "vlab" && args[1] == "supervise";
    init_logging(supervise ? "info" : level);
    if (args.empty() || args[0] == "--help" || args[0] == "-h" || args[0] == "help") {
      (args.empty() ? err : out) << kTopHelp << "\n" << exit_code_help();
      return args.empty() ? kExitUsage : kExitOk;
    }
    if (args[0] == "--version" || args[0] == "-V") {
      out << "ocslab " << project_version() << "\n";
      return kExitOk;
    }
    if (args[0] == "vlab") return run_vlab(args, out, err);
    if (args[0] == "run") return run_run(args, out, err);
    if (args[0] == "recover") return run_recover(args, out, err);
    if (args[0] == "forwarding") return run_forwarding(args, out, err);
    if (args[0] == "analyze") return run_analyze(args, out, err);
    if (args[0] == "plot") return run_plot(args, out, err);
    if (args[0] == "controller") return run_controller(args, out, err);
    if (args[0] == "schedule") return run_schedule(args, out, err);
    throw unknown_word("command", args[0],
                       {"run", "recover", "forwarding", "vlab", "analyze", "plot", "controller", "schedule", "help"},
                       "ocslab");
  } catch (const UsageError& e) {
    return report_failure(e.what(), kExitUsage, json_requested(args), out, err);
  } catch (const BadValue& e) {
    return report_failure(e.what(), kExitInput, json_requested(args), out, err);
  } catch (const ConfigError& e) {
    return report_failure(e.what(), kExitInput, json_requested(args), out, err, true);
  } catch (const CommandFailure& e) {
    return report_failure(e.what(), e.code, json_requested(args), out, err);
  } catch (const std::exception& e) {
    return report_failure(e.what(), kExitFailed, json_requested(args), out, err);
  }
}

}  // namespace ocslab::cli
