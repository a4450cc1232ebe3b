#include "ocslab/vlab/lab_control.h"

#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <cerrno>
#include <cstring>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>

#include "ocslab/common/error.h"
#include "ocslab/common/file.h"
#include "ocslab/common/process.h"
#include "ocslab/emulator/emulator.h"
#include "ocslab/ocsctl/ssh_session.h"
#include "ocslab/vlab/guest_config.h"
#include "ocslab/vlab/lab_spec.h"
#include "ocslab/vlab/lab_timing.h"
#include "ocslab/vlab/lan_hub.h"

namespace fs = std::filesystem;
using namespace std::chrono_literals;

namespace ocslab::vlab {

namespace {

std::string tail(const std::string& path, size_t lines) {
  std::string text = read_file_or_empty(path);
  size_t pos = text.size();
  if (pos > 0 && text[pos - 1] == '\n') --pos;
  for (size_t n = 0; n < lines; ++n) {
    size_t nl = pos == 0 ? std::string::npos : text.rfind('\n', pos - 1);
    if (nl == std::string::npos) return text;
    pos = nl;
  }
  return text.substr(pos + 1);
}

void write_text(const std::string& path, const std::string& text, fs::perms perms = fs::perms(0644)) {
  std::ofstream out(path, std::ios::trunc);
  out << text;
  if (!out) throw Error("cannot write " + path);
  out.close();
  fs::permissions(path, perms);
}

std::string first_word_pair(const std::string& pub) {  // "ssh-ed25519 AAAA... comment" -> type and key
  std::istringstream in(pub);
  std::string type, key;
  in >> type >> key;
  return type + " " + key;
}

// True when QEMU's command line names this lab's folder: a recycled pid is never killed.
bool is_our_process(pid_t pid, const std::string& dir) {
  if (!process_alive(pid)) return false;
  std::string cmd = read_file_or_empty("/proc/" + std::to_string(pid) + "/cmdline");
  for (auto& c : cmd) {
    if (c == '\0') c = ' ';
  }
  return cmd.find(dir) != std::string::npos;
}

void check_cache_location(const std::string& cache) {
  std::string abs = fs::weakly_canonical(fs::absolute(cache)).string() + "/";
  for (const char* bad : {"/tmp/", "/run/", "/proc/", "/sys/", "/dev/"}) {
    if (abs.rfind(bad, 0) == 0) {
      throw Error("the virtual-lab cache " + cache + " is under " + std::string(bad) +
                  ", which every guest replaces with its own mount; choose another --cache");
    }
  }
}

// Two free loopback UDP ports, our end and QEMU's end of one `-netdev socket,udp=`, neither one
// the lab took already (`taken`, which gets both). Each draw binds port 0 and closes it, so the
// kernel may hand out a port again (a lab of 4 hosts with 2 NICs each draws 24), and two ends
// given the same port make QEMU fail at start with "can't bind ... Address already in use", as
// the ring lab did in a CI run (2026-11-29; its folder was removed, so which two is not known).
std::pair<int, int> udp_port_pair(std::set<int>& taken) {
  auto draw = [&] {
    int p = 0;
    do {
      p = free_loopback_port(SOCK_DGRAM);
    } while (!taken.insert(p).second);
    return p;
  };
  const int ours = draw();
  return {ours, draw()};
}

LabState plan_lab(const LabSpec& spec, const std::string& dir, const KernelImage& kernel) {
  LabState s;
  s.name = spec.name;
  s.dir = dir;
  s.spec = fs::absolute(spec.origin).string();
  s.kernel = kernel.package;
  s.vmlinuz = kernel.vmlinuz;
  s.boot_image = kernel.boot_image;
  s.modules_dir = fs::absolute(kernel.root).string() + "/lib/modules";
  s.initramfs = dir + "/initramfs.cpio";
  s.switch_user = spec.emulator.control.user;
  s.switch_password = spec.emulator.control.password;
  s.slurm = spec.slurm;
  std::set<int> udp_ports;  // every port of the lab distinct
  for (size_t hi = 0; hi < spec.hosts.size(); ++hi) {
    const HostSpec& h = spec.hosts[hi];
    HostState hs;
    hs.name = h.name;
    hs.cpus = h.cpus;
    hs.memory_mb = h.memory_mb;
    hs.tcg_cache_mb = h.tcg_cache_mb;
    hs.ssh_port = free_loopback_port(SOCK_STREAM);
    hs.mgmt_mac = fmt::format("52:54:00:6b:{:02x}:00", hi + 1);
    hs.lan_mac = fmt::format("52:54:00:6b:{:02x}:01", hi + 1);
    hs.lan_ip = fmt::format("{}{}/24", kLanPrefix, hi + 1);
    std::tie(hs.lan_hub_port, hs.lan_qemu_port) = udp_port_pair(udp_ports);
    for (size_t ni = 0; ni < h.nics.size(); ++ni) {
      const DataNicSpec& n = h.nics[ni];
      NicState ns;
      ns.name = n.name;
      ns.mac = n.mac;
      ns.ip = n.ip;
      ns.rdma_device = n.rdma ? n.rdma_device() : "";
      ns.if2 = n.if2 ? n.if2_name() : "";
      ns.if2_mac = n.if2_mac;
      ns.tx_port = n.tx_port;
      ns.rx_port = n.rx_port;
      std::tie(ns.emulator_udp_port, ns.qemu_udp_port) = udp_port_pair(udp_ports);
      ns.qmp_socket = dir + "/hosts/" + h.name + "/qmp-" + n.name + ".sock";
      ns.linked_at_start = spec.linked_at_start(NicRef{hi, ni});
      ns.standby_for = n.standby_for;
      hs.nics.push_back(ns);
    }
    s.hosts.push_back(std::move(hs));
  }
  return s;
}

// Keys: one client key per lab (authorized on every host), one host key per host, and the
// known_hosts file every SSH client of the lab verifies against.
void make_keys(const LabState& s) {
  fs::create_directories(s.dir + "/keys");
  run_program({"ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "ocslab-" + s.name, "-f", s.client_key()});
  std::string client_pub = read_file_or_empty(s.client_key() + ".pub");
  std::string known;
  for (const auto& h : s.hosts) {
    std::string hd = s.host_dir(h.name);
    fs::create_directories(hd);
    run_program({"ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "ocslab-" + s.name + "-" + h.name, "-f",
                 hd + "/ssh_host_ed25519_key"});
    write_text(hd + "/authorized_keys", client_pub, fs::perms(0600));
    known += fmt::format("[127.0.0.1]:{} {}\n", h.ssh_port,
                         first_word_pair(read_file_or_empty(hd + "/ssh_host_ed25519_key.pub")));
  }
  write_text(s.known_hosts(), known);
}

void write_guest_files(const LabState& s) {
  fs::create_directories(s.shared_dir());
  if (s.slurm) {
    // One munge key per lab (1 KiB from the kernel's CSPRNG), private like the SSH keys.
    fs::create_directories(s.slurm_dir());
    std::string key(1024, '\0');
    std::ifstream rnd("/dev/urandom", std::ios::binary);
    if (!rnd.read(key.data(), static_cast<std::streamsize>(key.size()))) throw Error("cannot read /dev/urandom");
    write_private_file(s.slurm_dir() + "/munge.key", key);
    write_text(s.slurm_dir() + "/slurm.conf", slurm_conf(s));
    write_text(s.slurm_dir() + "/cgroup.conf", slurm_cgroup_conf());
  }
  for (const auto& h : s.hosts) {
    std::string hd = s.host_dir(h.name);
    write_text(hd + "/inittab", guest_inittab(s, h));
    write_text(hd + "/guest-init.sh", guest_init_script(s, h), fs::perms(0755));
    write_text(hd + "/sshd_config", guest_sshd_config(s, h));
    for (const auto& n : h.nics) {
      if (n.qmp_socket.size() >= sizeof(sockaddr_un::sun_path)) {
        throw Error("socket path " + n.qmp_socket + " is too long for a unix socket; choose a shorter --cache");
      }
    }
  }
}

ocs::SshOptions ssh_options(const LabState& s, const HostState& h) {
  ocs::SshOptions o;
  o.host = "127.0.0.1";
  o.port = h.ssh_port;
  o.user = "root";
  o.identity_file = s.client_key();
  o.known_hosts_file = s.known_hosts();
  o.connect_timeout = 3000ms;
  return o;
}

// One readiness probe: "ready", or what is still missing.
std::string probe_host(const LabState& s, const HostState& h) {
  try {
    ocs::SshSession session(ssh_options(s, h));
    auto r = session.exec(ready_check_command(s, h), 10000ms);
    std::string out = r.out;
    while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
    return r.exit_status == 0 ? "ready" : out;
  } catch (const Error&) {
    return "booting";
  }
}

void stop_supervisor(pid_t pid, bool our_child) {
  if (pid <= 0) return;
  ::kill(pid, SIGTERM);
  auto deadline = std::chrono::steady_clock::now() + 40s;
  for (;;) {
    if (our_child) {
      if (::waitpid(pid, nullptr, WNOHANG) == pid) return;
    } else if (!process_alive(pid)) {
      return;
    }
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(pid, SIGKILL);
      if (our_child) ::waitpid(pid, nullptr, 0);
      return;
    }
    std::this_thread::sleep_for(50ms);
  }
}

void kill_leftovers(const LabState& s) {
  for (const auto& h : s.hosts) {
    if (h.pid > 0 && is_our_process(h.pid, s.dir)) ::kill(h.pid, SIGKILL);
  }
}

}  // namespace

std::string ansible_inventory(const LabState& s) {
  std::string out = fmt::format(
      "# Ansible inventory of the ocslab virtual lab '{}' (written by `ocslab vlab up`).\n"
      "all:\n"
      "  vars:\n"
      "    ansible_user: root\n"
      // The guests run this machine's root, so its Python: naming it skips Ansible's interpreter
      // discovery, which under Mitogen bootstraps the guest's interpreter twice more (a task
      // on a fresh TCG guest: 31 s with discovery, 8.5 s without; docs/ansible.md).
      "    ansible_python_interpreter: /usr/bin/python3\n"
      "    ansible_ssh_private_key_file: {}\n"
      "    ansible_ssh_common_args: \"-o UserKnownHostsFile={} -o GlobalKnownHostsFile=/dev/null -o "
      "StrictHostKeyChecking=yes\"\n"
      "    ocslab_switch_url: \"{}\"\n"
      // What ansible/ needs to know about these hosts: virtio-net data NICs (no firmware, no
      // ethtool speed), Soft-RoCE instead of RDMA NICs, busybox init instead of systemd.
      "    ocslab_nic_kind: virtio\n"
      "    ocslab_vlab: {}\n"
      "  hosts:\n",
      s.name, s.client_key(), s.known_hosts(), s.switch_url(), s.name);
  for (const auto& h : s.hosts) {
    out += fmt::format("    {}:\n      ansible_host: 127.0.0.1\n      ansible_port: {}\n      ocslab_nics:\n", h.name,
                       h.ssh_port);
    for (const auto& n : h.nics) {
      if (!n.standby_for.empty()) continue;  // a bond slave the guest configures; no address of its own
      out += fmt::format(
          "        - {{name: {}, mac: \"{}\", ip: {}, rdma_device: \"{}\", if2: \"{}\", if2_mac: \"{}\", tx_port: {}, "
          "rx_port: {}}}\n",
          n.name, n.mac, n.ip, n.rdma_device, n.if2, n.if2_mac, n.tx_port, n.rx_port);
    }
  }
  return out;
}

std::string find_lab_dir(const std::string& cache_dir, const std::string& name) {
  if (!name.empty()) {
    std::string dir = labs_dir(cache_dir) + "/" + name;
    if (!fs::exists(dir)) throw Error("no virtual lab named '" + name + "' under " + labs_dir(cache_dir));
    return dir;
  }
  auto labs = list_labs(cache_dir);
  if (labs.size() == 1) return labs.front().dir;
  if (labs.empty()) throw Error("no virtual lab is up (ocslab vlab up LAB.yaml)");
  std::string names;
  for (const auto& l : labs) names += (names.empty() ? "" : ", ") + l.name;
  throw Error("several labs are up (" + names + "): name one with --lab");
}

LabState lab_status(const std::string& dir) {
  LabState s = LabState::load(dir);
  bool supervisor = process_alive(s.supervisor_pid);
  if (!supervisor && (s.phase == "running" || s.phase == "starting")) {
    s.phase = "dead";
    s.error = "the supervisor (pid " + std::to_string(s.supervisor_pid) + ") is gone; `ocslab vlab down " + s.name +
              "` cleans up";
  }
  for (auto& h : s.hosts) {
    bool alive = h.pid > 0 && is_our_process(h.pid, s.dir);
    if (h.alive && !alive && h.exit.empty()) h.exit = "gone";
    h.alive = alive;
  }
  return s;
}

LabState lab_up(const std::string& spec_path, const UpOptions& options, const ProgressFn& progress) {
  LabSpec spec = load_lab_spec(spec_path);  // every ConfigError surfaces before anything starts
  std::string cache = options.cache_dir.empty() ? default_cache_dir() : options.cache_dir;
  cache = fs::absolute(cache).lexically_normal().string();
  if (!cache.empty() && cache.back() == '/') cache.pop_back();
  check_cache_location(cache);
  std::string dir = labs_dir(cache) + "/" + spec.name;
  if (fs::exists(dir)) {
    try {
      LabState old = lab_status(dir);
      if (process_alive(old.supervisor_pid)) {
        throw Error("lab '" + spec.name + "' is already up (" + dir + "); `ocslab vlab down " + spec.name + "` first");
      }
    } catch (const Error& e) {
      if (std::string(e.what()).find("already up") != std::string::npos) throw;
    }
    progress("removing the remains of an earlier run of " + spec.name);
    lab_down(dir, [](const std::string&) {});
  }

  KernelImage kernel = ensure_kernel(cache, progress);
  fs::create_directories(dir + "/hosts");
  LabState s;
  pid_t supervisor = -1;
  try {
    s = plan_lab(spec, dir, kernel);
    write_initramfs(kernel, s.initramfs);
    make_keys(s);
    write_guest_files(s);
    // The lab file names the switch password too: the copy is private like state.json.
    write_private_file(dir + "/lab.yaml", read_file(spec_path));
    s.save();

    std::string self = options.self_exe.empty() ? fs::read_symlink("/proc/self/exe").string() : options.self_exe;
    SpawnOptions so;
    so.log_file = dir + "/supervisor.log";
    so.die_with_parent = false;  // it outlives `up`
    supervisor = spawn_program({self, "vlab", "supervise", dir}, so);
    progress(fmt::format("starting {} host(s) (supervisor pid {}, log {})", s.hosts.size(), supervisor, so.log_file));

    auto start = std::chrono::steady_clock::now();
    auto deadline = start + options.ready_timeout;
    std::vector<std::string> status(s.hosts.size(), "starting");
    std::vector<double> ready_at(s.hosts.size(), -1);
    for (;;) {
      if (options.interrupted && options.interrupted->load()) throw Error("interrupted");
      int wstatus = 0;
      if (::waitpid(supervisor, &wstatus, WNOHANG) == supervisor) {
        supervisor = -1;
        LabState now = LabState::load(dir);
        throw Error("the lab supervisor stopped during start-up: " + (now.error.empty() ? "see below" : now.error) +
                    "\n" + tail(dir + "/supervisor.log", 15));
      }
      s = LabState::load(dir);
      if (s.phase == "failed") throw Error("the lab could not start: " + s.error);
      if (s.phase == "running") {
        for (size_t i = 0; i < s.hosts.size(); ++i) {
          const HostState& h = s.hosts[i];
          if (!h.alive) {
            throw Error(fmt::format("host {} died during boot ({}); its console said:\n{}", h.name, h.exit,
                                    tail(console_log(s, h), 20)));
          }
          if (ready_at[i] >= 0) continue;
          std::string console = tail(console_log(s, h), 20);
          if (console.find(kGuestFailedMark) != std::string::npos) {
            throw Error(fmt::format("host {} could not set itself up; its console said:\n{}", h.name, console));
          }
          std::string st = probe_host(s, h);
          if (st == "ready") {
            ready_at[i] = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
            st = fmt::format("ready {:.1f}s", ready_at[i]);
          }
          status[i] = st;
        }
      }
      std::string line;
      size_t ready = 0;
      for (size_t i = 0; i < s.hosts.size(); ++i) {
        line += fmt::format("{}{}: {}", line.empty() ? "" : ", ", s.hosts[i].name, status[i]);
        ready += ready_at[i] >= 0;
      }
      progress(fmt::format("[{}/{} ready, {:.0f}s] {}", ready, s.hosts.size(),
                           std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), line));
      if (ready == s.hosts.size()) break;
      if (std::chrono::steady_clock::now() > deadline) {
        std::string consoles;
        for (size_t i = 0; i < s.hosts.size(); ++i) {
          if (ready_at[i] < 0)
            consoles += "--- " + s.hosts[i].name + " console:\n" + tail(console_log(s, s.hosts[i]), 15);
        }
        throw Error(fmt::format("hosts not ready after {} s: {}\n{}", options.ready_timeout.count(), line, consoles));
      }
      std::this_thread::sleep_for(500ms);
    }
    write_text(s.inventory(), ansible_inventory(s));
    return s;
  } catch (...) {
    if (supervisor > 0) stop_supervisor(supervisor, true);
    kill_leftovers(s);
    std::error_code ec;
    fs::remove_all(dir, ec);
    throw;
  }
}

void lab_down(const std::string& dir, const ProgressFn& progress) {
  if (!fs::exists(dir)) throw Error("no virtual lab at " + dir);
  if (fs::exists(dir + "/state.json")) {
    LabState s = LabState::load(dir);
    if (process_alive(s.supervisor_pid)) {
      progress(fmt::format("stopping {} (supervisor pid {})", s.name, s.supervisor_pid));
      stop_supervisor(s.supervisor_pid, false);
    }
    kill_leftovers(s);
  }
  fs::remove_all(dir);
}

// ---------------------------------------------------------------------------------------------
// The supervisor.

namespace {

std::string describe_exit(int wstatus) {
  if (WIFEXITED(wstatus)) return "exited with status " + std::to_string(WEXITSTATUS(wstatus));
  if (WIFSIGNALED(wstatus)) return std::string("killed by signal ") + strsignal(WTERMSIG(wstatus));
  return "stopped";
}

emu::EmulatorConfig emulator_config(const LabSpec& spec, const LabState& s) {
  emu::EmulatorConfig cfg = spec.emulator;
  if (!cfg.control.tl1) cfg.control.tl1 = emu::ListenAddress{"127.0.0.1", 0};
  if (!cfg.control.events) cfg.control.events = emu::ListenAddress{"127.0.0.1", 0};
  cfg.ground_truth_csv = s.ground_truth();
  cfg.nics.clear();
  for (size_t hi = 0; hi < spec.hosts.size(); ++hi) {
    for (size_t ni = 0; ni < spec.hosts[hi].nics.size(); ++ni) {
      const DataNicSpec& n = spec.hosts[hi].nics[ni];
      const NicState& ns = s.hosts[hi].nics[ni];
      emu::NicConfig nc;
      nc.attachment.name = spec.emulator_nic_name(NicRef{hi, ni});
      nc.attachment.tx_port = n.tx_port;
      nc.attachment.rx_port = n.rx_port;
      nc.attachment.kind = emu::NicAttachment::Kind::kUdp;
      nc.attachment.listen = emu::UdpEndpoint{"127.0.0.1", ns.emulator_udp_port};
      nc.attachment.peer = emu::UdpEndpoint{"127.0.0.1", ns.qemu_udp_port};
      nc.attachment.qmp_socket = ns.qmp_socket;
      nc.attachment.qmp_netdev = ns.name;
      nc.link = n.link;
      nc.link_preset = n.link_preset;
      cfg.sw.source_power_by_port[n.tx_port] = nc.tx_power_dbm;
      cfg.nics.push_back(nc);
    }
  }
  return cfg;
}

// The paths of the unix sockets in this network namespace that are listening (/proc/net/unix:
// flag __SO_ACCEPTCON, 00010000). QEMU binds a QMP socket (its file appears) before it listens on
// it: a connect in between is refused, so a socket counts once it listens, not once it exists.
std::set<std::string> listening_unix_sockets() {
  std::set<std::string> out;
  std::istringstream in(read_file_or_empty("/proc/net/unix"));
  std::string line;
  std::getline(in, line);  // header
  while (std::getline(in, line)) {
    std::istringstream f(line);
    std::string num, refcount, protocol, flags, type, state, inode, path;
    if (!(f >> num >> refcount >> protocol >> flags >> type >> state >> inode)) continue;
    std::getline(f >> std::ws, path);  // the rest of the line: a path may hold blanks
    if (flags == "00010000" && !path.empty()) out.insert(path);
  }
  return out;
}

bool wait_for_sockets(LabState& s, std::chrono::seconds limit) {
  auto deadline = std::chrono::steady_clock::now() + limit;
  for (;;) {
    bool all = true;
    const auto listening = listening_unix_sockets();
    for (const auto& h : s.hosts) {
      if (!listening.count(control_qmp_socket(s, h))) all = false;
      for (const auto& n : h.nics) all = all && listening.count(n.qmp_socket) > 0;
    }
    if (all) return true;
    for (const auto& h : s.hosts) {
      int ws = 0;
      if (::waitpid(h.pid, &ws, WNOHANG) == h.pid) {
        throw Error(fmt::format("QEMU for {} {} at start:\n{}", h.name, describe_exit(ws),
                                tail(s.host_dir(h.name) + "/qemu.log", 10)));
      }
    }
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(20ms);
  }
}

void stop_hosts(LabState& s) {
  for (auto& h : s.hosts) {
    if (h.alive) ::kill(h.pid, SIGTERM);
  }
  auto deadline = std::chrono::steady_clock::now() + 5s;
  for (auto& h : s.hosts) {
    while (h.alive) {
      int ws = 0;
      pid_t r = ::waitpid(h.pid, &ws, WNOHANG);
      if (r == h.pid || r < 0) {
        h.alive = false;
        h.exit = "stopped by down";
        break;
      }
      if (std::chrono::steady_clock::now() > deadline) {
        ::kill(h.pid, SIGKILL);
        ::waitpid(h.pid, nullptr, 0);
        h.alive = false;
        h.exit = "killed by down (did not stop within 5 s)";
        break;
      }
      std::this_thread::sleep_for(20ms);
    }
  }
}

// SIGHUP: <dir>/timing.yaml becomes the emulator's timing, or its error is recorded.
void reload_timing(LabState& s, emu::Emulator& emulator) {
  reload_lab_timing(s, emulator);
  if (s.timing.error.empty()) {
    spdlog::info("lab {}: timing {} applied: {}", s.name, s.timing.generation, s.timing.summary());
  } else {
    spdlog::error("lab {}: timing {} refused: {}", s.name, s.timing.generation, s.timing.error);
  }
  s.save();
}

}  // namespace

// The emulated switch and NICs keep the lab's time: a command's switching time and a link's
// firmware delay are timers on the emulator's threads, and a command is stamped when its thread
// reads it. With the guests busy (TCG vCPUs on a 2-core machine), those threads waited for the
// CPU behind QEMU's: two CI runs (2026-11-29) measured the first reconfiguration of a run 11-12 ms
// over a fixed 25 or 60 ms switching time on every host at once, when the guests were starting
// their probes (later ones within 3 ms); beside two busy loops, up to 7.4 ms at nice 0 and 1.6 ms
// at nice -10 (docs/virtual-lab.md). So the thread that creates the emulator, whose threads
// inherit it (Linux's nice value is per thread), runs at nice -10; QEMU, started before, keeps
// its own. Not fatal when refused (not root): the lab runs, its timing under load as before.
static void emulator_priority() {
  constexpr int kEmulatorNice = -10;
  if (::setpriority(PRIO_PROCESS, 0, kEmulatorNice) != 0) {
    spdlog::warn("the emulator runs at the default priority (setpriority {}: {}): under load its timing may drift",
                 kEmulatorNice, std::strerror(errno));
  }
}

int lab_supervise(const std::string& dir) {
  // All signals are taken synchronously below; threads started later inherit the mask.
  sigset_t set;
  sigemptyset(&set);
  for (int sig : {SIGTERM, SIGINT, SIGCHLD, SIGHUP}) sigaddset(&set, sig);
  ::pthread_sigmask(SIG_BLOCK, &set, nullptr);

  LabState s = LabState::load(dir);
  s.supervisor_pid = ::getpid();
  s.save();
  std::unique_ptr<emu::Emulator> emulator;
  std::unique_ptr<LanHub> lan;
  try {
    LabSpec spec = load_lab_spec(dir + "/lab.yaml");
    std::vector<HubPort> hub_ports;
    for (const auto& h : s.hosts) hub_ports.push_back({h.lan_hub_port, h.lan_qemu_port});
    lan = std::make_unique<LanHub>(hub_ports);
    lan->start();
    for (auto& h : s.hosts) {
      SpawnOptions so;
      so.log_file = s.host_dir(h.name) + "/qemu.log";
      h.pid = spawn_program(qemu_argv(s, h), so);
      h.alive = true;
      spdlog::info("{}: QEMU pid {}", h.name, h.pid);
    }
    s.save();
    if (!wait_for_sockets(s, 20s)) throw Error("QEMU did not listen on its QMP sockets within 20 s");
    emulator_priority();
    emulator = std::make_unique<emu::Emulator>(emulator_config(spec, s));
    emulator->start();
    auto ports = emulator->ports();
    s.tl1_port = ports.tl1.value_or(0);
    s.netconf_port = ports.netconf.value_or(0);
    s.scpi_port = ports.scpi.value_or(0);
    s.events_port = emulator->events_port().value_or(0);
    s.timing = initial_timing(emulator->config());
    auto circuits = spec.initial_circuits();
    if (!circuits.empty()) {
      auto err = emulator->call([&] { return emulator->model().connect(circuits, [] {}); });
      if (err) throw Error("the lab's links could not be made on the emulated switch: " + err->text);
    }
    s.phase = "running";
    s.save();
    spdlog::info("lab {} running: TL1 on 127.0.0.1:{}, ground truth on 127.0.0.1:{}", s.name, s.tl1_port,
                 s.events_port);

    for (;;) {
      siginfo_t info{};
      int sig = ::sigwaitinfo(&set, &info);
      if (sig < 0) continue;
      if (sig == SIGCHLD) {
        for (auto& h : s.hosts) {
          int ws = 0;
          if (h.alive && ::waitpid(h.pid, &ws, WNOHANG) == h.pid) {
            h.alive = false;
            h.exit = describe_exit(ws);
            spdlog::error("{}: QEMU {} (console: {})", h.name, h.exit, console_log(s, h));
          }
        }
        s.save();
        continue;
      }
      if (sig == SIGHUP) {
        reload_timing(s, *emulator);
        continue;
      }
      spdlog::info("lab {}: stopping ({})", s.name, strsignal(sig));
      break;
    }
    s.phase = "stopping";
    s.save();
    stop_hosts(s);
    emulator->stop();
    lan->stop();
    s.phase = "stopped";
    s.save();
    return 0;
  } catch (const std::exception& e) {
    spdlog::error("lab {}: {}", s.name, e.what());
    s.phase = "failed";
    s.error = e.what();
    stop_hosts(s);
    if (emulator) emulator->stop();
    try {
      s.save();
    } catch (const std::exception&) {
    }
    return 1;
  }
}

}  // namespace ocslab::vlab
