#include "ocslab/common/process.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>

#include "ocslab/common/error.h"

namespace ocslab {

namespace {

std::string join(const std::vector<std::string>& argv) {
  std::string s;
  for (const auto& a : argv) s += (s.empty() ? "" : " ") + a;
  return s;
}

[[noreturn]] void exec_child(const std::vector<std::string>& argv, const std::string& cwd) {
  if (!cwd.empty() && ::chdir(cwd.c_str()) != 0) ::_exit(127);
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  ::execvp(args[0], args.data());
  ::_exit(127);
}

}  // namespace

ProgramResult run_program_status(const std::vector<std::string>& argv, const std::string& cwd) {
  if (argv.empty()) throw Error("run_program: empty command");
  int out[2], err[2];
  if (::pipe2(out, O_CLOEXEC) != 0) throw SystemError("pipe", errno);
  if (::pipe2(err, O_CLOEXEC) != 0) {
    ::close(out[0]);
    ::close(out[1]);
    throw SystemError("pipe", errno);
  }
  pid_t pid = ::fork();
  if (pid < 0) {
    int e = errno;
    for (int fd : {out[0], out[1], err[0], err[1]}) ::close(fd);
    throw SystemError("fork for '" + join(argv) + "'", e);
  }
  if (pid == 0) {
    int devnull = ::open("/dev/null", O_RDONLY);
    ::dup2(devnull, 0);
    ::dup2(out[1], 1);
    ::dup2(err[1], 2);
    exec_child(argv, cwd);
  }
  ::close(out[1]);
  ::close(err[1]);
  std::string stdout_text, stderr_text;
  pollfd fds[2] = {{out[0], POLLIN, 0}, {err[0], POLLIN, 0}};
  int open_fds = 2;
  while (open_fds > 0) {
    if (::poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      char buf[8192];
      ssize_t n = ::read(fds[i].fd, buf, sizeof(buf));
      if (n > 0) {
        (i == 0 ? stdout_text : stderr_text).append(buf, static_cast<size_t>(n));
      } else if (n == 0 || errno != EINTR) {
        ::close(fds[i].fd);
        fds[i].fd = -1;
        --open_fds;
      }
    }
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  ProgramResult r;
  r.signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
  r.status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + r.signal;
  r.out = std::move(stdout_text);
  r.err = std::move(stderr_text);
  return r;
}

std::string run_program(const std::vector<std::string>& argv, const std::string& cwd) {
  ProgramResult r = run_program_status(argv, cwd);
  if (r.status == 0) return std::move(r.out);
  std::string& stderr_text = r.err;
  std::string why = r.signal != 0     ? "was killed by signal " + std::to_string(r.signal)
                    : r.status == 127 ? "could not be run (not installed?)"
                                      : "exited with status " + std::to_string(r.status);
  if (stderr_text.size() > 2000) stderr_text = "..." + stderr_text.substr(stderr_text.size() - 2000);
  throw Error("'" + join(argv) + "' " + why + (stderr_text.empty() ? "" : ":\n" + stderr_text));
}

pid_t spawn_program(const std::vector<std::string>& argv, const SpawnOptions& options) {
  if (argv.empty()) throw Error("spawn_program: empty command");
  pid_t parent = ::getpid();
  pid_t pid = ::fork();
  if (pid < 0) throw SystemError("fork for '" + join(argv) + "'", errno);
  if (pid == 0) {
    if (options.die_with_parent) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != parent) ::_exit(127);  // the parent is already gone
    }
    // Signals blocked in the parent (a supervisor's sigwait loop) must not stay blocked here.
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    ::setpgid(0, 0);  // a Ctrl-C at the terminal reaches the parent, which decides
    int in = ::open("/dev/null", O_RDONLY);
    int out = options.log_file.empty() ? ::open("/dev/null", O_WRONLY)
                                       : ::open(options.log_file.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (in < 0 || out < 0) ::_exit(127);
    ::dup2(in, 0);
    ::dup2(out, 1);
    ::dup2(out, 2);
    exec_child(argv, options.cwd);
  }
  return pid;
}

bool process_alive(pid_t pid) {
  if (pid <= 0 || ::kill(pid, 0) != 0) return false;
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  std::getline(stat, line);
  auto paren = line.rfind(')');
  return paren == std::string::npos || paren + 2 >= line.size() || line[paren + 2] != 'Z';
}

int free_loopback_port(int type) {
  int fd = ::socket(AF_INET, type | SOCK_CLOEXEC, 0);
  if (fd < 0) throw SystemError("socket", errno);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    int e = errno;
    ::close(fd);
    throw SystemError("bind a free loopback port", e);
  }
  ::close(fd);
  return ntohs(addr.sin_port);
}

}  // namespace ocslab
