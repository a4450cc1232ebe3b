#include "ocslab/runner/target.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <ostream>
#include <vector>

#include "ocslab/common/error.h"
#include "ocslab/vlab/lab_control.h"

namespace ocslab::runner {

namespace fs = std::filesystem;

namespace {

void say(const TargetOptions& o, const std::string& msg) {
  if (o.log) o.log(msg);
}

// 12 hex digits of the file's FNV-1a 64 hash: a short name for its bytes.
std::string content_tag(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("cannot read " + path);
  uint64_t h = 0xcbf29ce484222325ULL;
  std::vector<char> buf(size_t{1} << 16);
  while (in) {
    in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
    for (std::streamsize i = 0; i < in.gcount(); ++i) {
      h ^= static_cast<unsigned char>(buf[static_cast<size_t>(i)]);
      h *= 0x100000001b3ULL;
    }
  }
  return fmt::format("{:012x}", h >> 16);
}

// Same size and the same bytes.
bool same_file(const std::string& a, const std::string& b) {
  std::error_code ec;
  auto sa = fs::file_size(a, ec);
  if (ec) return false;
  auto sb = fs::file_size(b, ec);
  if (ec || sa != sb) return false;
  std::ifstream fa(a, std::ios::binary), fb(b, std::ios::binary);
  if (!fa || !fb) return false;
  std::vector<char> ba(size_t{1} << 16), bb(size_t{1} << 16);
  while (fa && fb) {
    fa.read(ba.data(), static_cast<std::streamsize>(ba.size()));
    fb.read(bb.data(), static_cast<std::streamsize>(bb.size()));
    if (fa.gcount() != fb.gcount() || !std::equal(ba.begin(), ba.begin() + fa.gcount(), bb.begin())) return false;
  }
  return fa.eof() && fb.eof();
}

// The spec's lab when it is up and healthy; a lab of that name in another state is stopped (it
// is restarted below). Throws when the name is taken by a lab from another file.
bool reuse_running_lab(const ExperimentSpec& spec, const std::string& dir, const TargetOptions& o,
                       vlab::LabState& lab) {
  if (!fs::exists(dir + "/state.json")) return false;
  lab = vlab::lab_status(dir);
  bool healthy = lab.phase == "running" &&
                 std::all_of(lab.hosts.begin(), lab.hosts.end(), [](const auto& h) { return h.alive; });
  if (!healthy) {
    say(o, "virtual lab '" + spec.vlab_name + "' is not healthy (" + lab.phase + "); restarting it");
    vlab::lab_down(dir, [](const std::string&) {});
    return false;
  }
  if (fs::weakly_canonical(lab.spec) != fs::weakly_canonical(spec.vlab)) {
    // Same name, another file: its switch and NIC settings may differ from what the spec expects.
    throw Error(fmt::format("a virtual lab named '{}' is up from {}, not {}; stop it first (ocslab vlab down {})",
                            spec.vlab_name, lab.spec, spec.vlab, spec.vlab_name));
  }
  return true;
}

vlab::LabState boot_lab(const ExperimentSpec& spec, const std::string& cache, const TargetOptions& o) {
  vlab::UpOptions up;
  up.cache_dir = cache;
  up.self_exe = o.self_exe;
  up.interrupted = o.interrupted;
  say(o, "starting virtual lab " + spec.vlab);
  auto lab = vlab::lab_up(spec.vlab, up, [&](const std::string& m) {
    if (o.progress) *o.progress << "\r\033[K" << m << std::flush;
  });
  if (o.progress) *o.progress << "\r\033[K";
  return lab;
}

// The guests' SSH details and this build's agent, where the guests see it.
void point_hosts_at_lab(Target& t, const TargetOptions& o) {
  std::string src = o.agent_binary.empty() ? exe_dir(o.self_exe) + "/ocslab-agent" : o.agent_binary;
  std::string agent = install_binary(src, t.bin_dir(), "ocslab-agent");
  for (auto& h : t.spec.hosts) {
    h.ssh_host = "127.0.0.1";
    h.ssh_port = t.lab.host(h.name).ssh_port;
    h.user = "root";
    h.identity_file = t.lab.client_key();
    h.known_hosts = t.lab.known_hosts();
    h.agent = agent;
  }
}

}  // namespace

SwitchAccess switch_access(const ExperimentSpec& spec, const vlab::LabState& lab) {
  ocs::DriverOptions dopt;
  dopt.allow = spec.allow;
  dopt.identity_file = spec.switch_identity_file;
  dopt.known_hosts_file = spec.switch_known_hosts;
  std::string url_text = spec.switch_url;
  if (url_text.empty()) {
    url_text = lab.switch_url();
    dopt.password = lab.switch_password;
  }
  return {ocs::SwitchUrl::parse(url_text), dopt};
}

std::string Target::bin_dir() const { return lab.dir.empty() ? std::string() : lab.dir + "/bin"; }

std::vector<ocs::SshOptions> Target::ssh() const {
  std::vector<ocs::SshOptions> out;
  for (const auto& h : spec.hosts) out.push_back(ssh_options(h));
  return out;
}

Target resolve_target(const ExperimentSpec& spec, const TargetOptions& o) {
  Target t;
  t.spec = spec;
  if (spec.vlab.empty()) return t;
  std::string cache = o.cache_dir.empty() ? vlab::default_cache_dir() : o.cache_dir;
  std::string dir = vlab::labs_dir(cache) + "/" + spec.vlab_name;
  if (o.lab == LabUse::kRunning) {
    if (!fs::exists(dir + "/state.json"))
      throw Error(fmt::format("the virtual lab '{}' is not up (ocslab vlab up {})", spec.vlab_name, spec.vlab));
    t.lab = vlab::lab_status(dir);
  } else if (reuse_running_lab(spec, dir, o, t.lab)) {
    say(o, "using the running virtual lab '" + spec.vlab_name + "'");
  } else {
    t.lab = boot_lab(spec, cache, o);
    t.started_lab = true;
  }
  point_hosts_at_lab(t, o);
  return t;
}

void release_target(const Target& t, const std::function<void(const std::string&)>& log) {
  if (!t.started_lab || t.spec.keep_lab) return;
  if (log) log("stopping the virtual lab (lab.keep: false)");
  vlab::lab_down(t.lab.dir, [](const std::string&) {});
}

ocs::SshOptions ssh_options(const HostEntry& h) {
  ocs::SshOptions o;
  o.host = h.ssh_host;
  o.port = h.ssh_port;
  o.user = h.user;
  o.identity_file = h.identity_file;
  o.known_hosts_file = h.known_hosts;
  return o;
}

std::string exe_dir(const std::string& self) {
  std::error_code ec;
  auto p = fs::read_symlink(self.empty() ? "/proc/self/exe" : self, ec);
  if (ec) p = self.empty() ? fs::path("/proc/self/exe") : fs::path(self);
  return p.parent_path().string();
}

// What to do about a program missing next to the runner: a build tree (its CMakeCache.txt one
// folder up) builds it; an installed tree gets it from its Debian package, and a package user
// has no build to run.
static std::string missing_binary_hint(const std::string& src, const std::string& name) {
  const fs::path bin = fs::path(src).parent_path();
  std::error_code ec;
  if (fs::exists(bin.parent_path() / "CMakeCache.txt", ec))
    return fmt::format("build it first (cmake --build {} --target {})", bin.parent_path().string(), name);
  const std::string package = name == "ocslab-agent" ? "ocslab-agent" : "ocslab";
  return fmt::format("install the {} package (apt-get install {})", package, package);
}

std::string install_binary(const std::string& src, const std::string& dir, const std::string& name) {
  if (!fs::exists(src)) throw Error(fmt::format("cannot find {} ({}): {}", name, src, missing_binary_hint(src, name)));
  // A name per content: the guests see this folder through 9p with cache=loose, which keeps
  // serving a replaced file's old bytes under its old name (a rebuilt agent would not reach a
  // running lab). A new name is looked up afresh.
  const std::string dst = fmt::format("{}/{}.{}", dir, name, content_tag(src));
  if (same_file(src, dst)) return dst;
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw Error(fmt::format("cannot make {} for {}: {}", dir, name, ec.message()));
  std::string tmp = dst + ".new." + std::to_string(::getpid());
  fs::copy_file(src, tmp, fs::copy_options::overwrite_existing, ec);
  if (ec) throw Error(fmt::format("cannot copy {} to {}: {}", src, tmp, ec.message()));
  fs::permissions(tmp, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec | fs::perms::others_read |
                           fs::perms::others_exec, ec);
  fs::rename(tmp, dst, ec);
  if (ec) {
    fs::remove(tmp);
    throw Error(fmt::format("cannot install {} at {}: {}", src, dst, ec.message()));
  }
  return dst;
}

}  // namespace ocslab::runner
