#include "ocslab/testing/sshd_fixture.h"

#include "ocslab/common/process.h"
#include "ocslab/testing/processes.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pwd.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <stdexcept>
#include <string>
#include <thread>

namespace ocslab::testing {

std::string run_command(const std::string& cmd) {
  std::string out;
  FILE* p = ::popen((cmd + " 2>&1").c_str(), "r");
  if (!p) throw std::runtime_error("cannot run: " + cmd);
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), p)) > 0) out.append(buf, n);
  int rc = ::pclose(p);
  if (rc != 0) throw std::runtime_error("command failed (" + std::to_string(rc) + "): " + cmd + "\n" + out);
  return out;
}

std::string bin_path(const std::string& name) {
  if (const char* d = std::getenv("OCSLAB_BIN_DIR"); d && *d) return std::string(d) + "/" + name;
  char self[4096];
  ssize_t n = ::readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (n <= 0) throw std::runtime_error("cannot locate the test binary");
  std::string exe(self, static_cast<size_t>(n));
  return exe.substr(0, exe.rfind('/')) + "/../bin/" + name;
}

int free_loopback_port() { return ocslab::free_loopback_port(SOCK_STREAM); }

TempDir::TempDir() {
  char tmpl[] = "/tmp/ocslab-test-XXXXXX";
  if (!::mkdtemp(tmpl)) throw std::runtime_error("mkdtemp failed");
  path_ = tmpl;
}

TempDir::~TempDir() {
  // OCSLAB_KEEP_TEST_DIRS=1: left for a look (a run's results folder, its emulator's record).
  if (const char* keep = std::getenv("OCSLAB_KEEP_TEST_DIRS"); keep && *keep && std::string(keep) != "0") {
    std::fprintf(stderr, "kept %s (OCSLAB_KEEP_TEST_DIRS)\n", path_.c_str());
    return;
  }
  std::string cmd = "rm -rf '" + path_ + "'";
  if (std::system(cmd.c_str()) != 0) std::fprintf(stderr, "warning: cannot remove %s\n", path_.c_str());
}

std::string SshdFixture::user() const {
  passwd* pw = ::getpwuid(::getuid());
  return pw ? pw->pw_name : "root";
}

SshdFixture::SshdFixture(const SshdOptions& options) {
  char tmpl[] = "/tmp/ocslab-sshd-XXXXXX";
  if (!::mkdtemp(tmpl)) throw std::runtime_error("mkdtemp failed");
  dir_ = tmpl;
  ::chmod(dir_.c_str(), 0755);
  run_command("ssh-keygen -q -t ed25519 -N '' -f " + dir_ + "/host_key");
  run_command("ssh-keygen -q -t ed25519 -N '' -f " + dir_ + "/client_key");
  run_command("cp " + dir_ + "/client_key.pub " + dir_ + "/authorized_keys && chmod 600 " + dir_ + "/authorized_keys");
  ::mkdir("/run/sshd", 0755);  // privilege separation folder sshd insists on

  for (int attempt = 0; attempt < 5; ++attempt) {
    port_ = free_loopback_port();
    {
      std::ofstream cfg(dir_ + "/sshd_config");
      cfg << "ListenAddress 127.0.0.1:" << port_ << "\n"
          << "HostKey " << dir_ << "/host_key\n"
          << "PidFile " << dir_ << "/sshd.pid\n"
          << "AuthorizedKeysFile " << dir_ << "/authorized_keys\n"
          << "PubkeyAuthentication yes\nPasswordAuthentication no\nKbdInteractiveAuthentication no\n"
          << "PermitRootLogin prohibit-password\nStrictModes no\nUsePAM no\nUseDNS no\n"
          << "LogLevel ERROR\nMaxSessions 100\n"
          // sshd runs every command as `$SHELL -c ...`, and bash then sources ~/.bashrc when it
          // is a top-level shell (SHLVL < 2). A developer's .bashrc (pyenv init, ...) costs each
          // session up to a second of CPU: tens of concurrent sessions (runner fan-out tests)
          // then miss their request timeouts. The commands tests run need nothing from it.
          << "SetEnv SHLVL=1\n";
      if (!options.max_startups.empty()) cfg << "MaxStartups " << options.max_startups << "\n";
      if (!options.netconf_subsystem.empty()) cfg << "Subsystem netconf " << options.netconf_subsystem << "\n";
      // ForceCommand would also override subsystems, so a fixture serves one or the other.
      if (!options.force_command.empty()) cfg << "ForceCommand " << options.force_command << "\n";
    }
    pid_ = ::fork();
    if (pid_ == 0) {
      // A test that crashes takes its sshd with it: a listener left behind would hold the test's
      // output pipe open and ctest would wait on it until the entry's timeout.
      ::prctl(PR_SET_PDEATHSIG, SIGTERM);
      // sshd re-executes itself and insists on an absolute argv[0].
      ::execl("/usr/sbin/sshd", "/usr/sbin/sshd", "-D", "-e", "-f", (dir_ + "/sshd_config").c_str(), nullptr);
      ::_exit(127);
    }
    // Ready when the port accepts connections; 1,500 tries (30 s) are a hang guard: a loaded machine can
    // take seconds to start sshd.
    for (int i = 0; i < 1500; ++i) {
      int fd = ::socket(AF_INET, SOCK_STREAM, 0);
      sockaddr_in addr{};
      addr.sin_family = AF_INET;
      addr.sin_port = htons(static_cast<uint16_t>(port_));
      addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
      ::close(fd);
      if (ok) {
        std::string pub = run_command("cat " + dir_ + "/host_key.pub");
        std::ofstream(known_hosts()) << "[127.0.0.1]:" << port_ << " " << pub;
        return;
      }
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) break;  // died (port taken?): retry
      // load-safe: the retry interval of the bounded wait for sshd's port.
      std::this_thread::sleep_for(std::chrono::milliseconds(20));  // retry interval of this bounded wait for the port
    }
    ::kill(pid_, SIGTERM);
    ::waitpid(pid_, nullptr, 0);
  }
  throw std::runtime_error("sshd did not start (config in " + dir_ + ")");
}

int SshdFixture::drop_connections() const {
  const auto under = descendants_of(pid_);
  for (pid_t p : under) ::kill(p, SIGKILL);
  return static_cast<int>(under.size());
}

SshdFixture::~SshdFixture() {
  if (pid_ > 0) {
    ::kill(pid_, SIGTERM);
    ::waitpid(pid_, nullptr, 0);
  }
  std::string cmd = "rm -rf '" + dir_ + "'";
  if (std::system(cmd.c_str()) != 0) std::fprintf(stderr, "warning: cannot remove %s\n", dir_.c_str());
}

}  // namespace ocslab::testing
