#include "ocslab/agent/server.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <list>
#include <thread>

#include <fmt/format.h>

#include "ocslab/agent/protocol.h"
#include "ocslab/common/error.h"
#include "ocslab/common/log.h"
#include "ocslab/common/safe_fs.h"

namespace ocslab::agent {

namespace {

// Sessions one daemon serves at once: each is a thread and a socket. A runner opens one per
// host and a recover or a second terminal one more; beyond this a session is refused with an
// error line, so a local client that opens sessions in a loop cannot exhaust threads.
constexpr size_t kMaxSessions = 64;

sockaddr_un unix_address(const std::string& path) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof(addr.sun_path)) {
    throw Error("unix socket path too long (" + std::to_string(path.size()) + " bytes, max " +
                std::to_string(sizeof(addr.sun_path) - 1) + "): " + path);
  }
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  return addr;
}

bool copy_all(int fd, const char* data, size_t size) {
  while (size > 0) {
    ssize_t n = ::write(fd, data, size);
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    data += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

// Blocks the stop signals in this thread and so in every thread started afterwards (the
// agent's flusher and probe threads, which would otherwise take SIGTERM's default action and
// end the process without finishing the spool); wait() then takes them on a thread of its own.
class StopSignals {
 public:
  StopSignals() {
    sigemptyset(&set_);
    for (int s : {SIGTERM, SIGINT, SIGHUP}) sigaddset(&set_, s);
    ::pthread_sigmask(SIG_BLOCK, &set_, nullptr);
  }

  void wait(std::function<void()> on_stop) {
    std::thread([set = set_, on_stop = std::move(on_stop)] {
      int sig = 0;
      ::sigwait(&set, &sig);
      spdlog::info("signal {}: stopping", sig);
      on_stop();
    }).detach();  // the process ends while it may still be waiting
  }

 private:
  sigset_t set_;
};

}  // namespace

int connect_unix(const std::string& path) {
  sockaddr_un addr = unix_address(path);
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) throw SystemError("socket(AF_UNIX)", errno);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

void run_daemon(const AgentOptions& options, const std::string& socket_path) {
  ::signal(SIGPIPE, SIG_IGN);
  sockaddr_un addr = unix_address(socket_path);
  std::string lock_path = socket_path + ".lock";
  int lock_fd = open_no_follow(lock_path, O_RDWR | O_CREAT, 0600, "the agent's lock file");
  if (::flock(lock_fd, LOCK_EX | LOCK_NB) != 0) {
    ::close(lock_fd);
    throw Error("another ocslab-agent daemon serves " + socket_path + " (" + lock_path + " is locked)");
  }
  // Holding the lock, any socket file left there is stale (a daemon that was killed).
  ::unlink(socket_path.c_str());
  int listen_fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (listen_fd < 0) throw SystemError("socket(AF_UNIX)", errno);
  mode_t old = ::umask(0077);  // only the owner may drive the probes
  int rc = ::bind(listen_fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  int e = errno;
  ::umask(old);
  if (rc != 0 || ::listen(listen_fd, 16) != 0) {
    if (rc == 0) e = errno;
    ::close(listen_fd);
    ::close(lock_fd);
    throw SystemError("bind/listen unix socket " + socket_path, e);
  }

  StopSignals signals;
  Agent agent(options);
  std::atomic<bool> stop{false};
  signals.wait([&] {
    stop = true;
    ::shutdown(listen_fd, SHUT_RDWR);  // wakes accept()
  });
  spdlog::info("ocslab-agent daemon pid {} on {} (spool {})", ::getpid(), socket_path, options.spool_dir);

  struct Conn {
    int fd;
    std::atomic<bool> done{false};
    std::thread thread;
  };
  std::list<Conn> conns;
  while (!stop) {
    int fd = ::accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (!stop) spdlog::error("accept on {}: {}", socket_path, std::strerror(errno));
      break;
    }
    conns.remove_if([](Conn& c) {
      if (!c.done) return false;
      c.thread.join();
      ::close(c.fd);
      return true;
    });
    if (conns.size() >= kMaxSessions) {
      const std::string line = to_line(error_reply(
          nullptr, fmt::format("too many sessions: this daemon serves {} at once; close one and retry", kMaxSessions)));
      copy_all(fd, line.data(), line.size());  // a full socket buffer just loses the courtesy
      ::close(fd);
      spdlog::warn("session refused: {} sessions open (the limit)", conns.size());
      continue;
    }
    Conn& c = conns.emplace_back();
    c.fd = fd;
    c.thread = std::thread([&agent, &c] {
      try {
        agent.serve(c.fd, c.fd);
      } catch (const std::exception& ex) {
        spdlog::error("session: {}", ex.what());
      }
      // The peer (a bridge) sees EOF now; the fd itself is closed when the thread is reaped.
      ::shutdown(c.fd, SHUT_RDWR);
      c.done = true;
    });
  }
  agent.shutdown_sessions();
  for (auto& c : conns) {
    c.thread.join();
    ::close(c.fd);
  }
  agent.stop_probes();
  ::unlink(socket_path.c_str());
  ::close(listen_fd);
  ::close(lock_fd);
}

void serve_stdio(const AgentOptions& options) {
  ::signal(SIGPIPE, SIG_IGN);
  StopSignals signals;
  Agent agent(options);
  signals.wait([&agent] { agent.shutdown_sessions(); });
  agent.serve(STDIN_FILENO, STDOUT_FILENO);
  agent.stop_probes();
}

void start_detached(const std::vector<std::string>& argv, const std::string& log_file) {
  // Opened here, not in the child, so a log name that is a symlink is refused with a message.
  int log_fd = log_file.empty() ? ::open("/dev/null", O_WRONLY | O_CLOEXEC)
                                : open_no_follow(log_file, O_WRONLY | O_CREAT | O_APPEND, 0600, "the agent's log");
  if (log_fd < 0) throw SystemError("open /dev/null", errno);
  pid_t pid = ::fork();
  if (pid < 0) {
    int e = errno;
    ::close(log_fd);
    throw SystemError("fork for the agent daemon", e);
  }
  if (pid == 0) {
    ::setsid();  // no controlling terminal, own session: an SSH hangup does not reach it
    if (::fork() != 0) ::_exit(0);
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    int in = ::open("/dev/null", O_RDONLY);
    if (in < 0) ::_exit(127);
    ::dup2(in, 0);
    ::dup2(log_fd, 1);
    ::dup2(log_fd, 2);
    // The SSH session's pipes must not stay open in the daemon, or sshd would wait on them.
    for (int fd = 3; fd < 1024; ++fd) ::close(fd);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    ::execv(args[0], args.data());
    ::_exit(127);
  }
  ::close(log_fd);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
}

void bridge_stdio(const std::string& socket_path, const std::vector<std::string>& daemon_argv,
                  const std::string& log_file, std::chrono::milliseconds start_timeout) {
  ::signal(SIGPIPE, SIG_IGN);
  int fd = connect_unix(socket_path);
  if (fd < 0 && daemon_argv.empty()) {
    throw Error("no agent daemon serves " + socket_path +
                ", and a bridge run through sudo does not start one (it would run as full root, outside the "
                "service's limits, and hold the lock the service needs): start the service (systemctl start "
                "ocslab-agent) and retry");
  }
  if (fd < 0) {
    start_detached(daemon_argv, log_file);
    auto deadline = std::chrono::steady_clock::now() + start_timeout;
    while ((fd = connect_unix(socket_path)) < 0) {
      if (std::chrono::steady_clock::now() > deadline) {
        throw Error("the agent daemon did not come up on " + socket_path + " within " +
                    std::to_string(start_timeout.count()) + " ms (its log: " + log_file + ")");
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  pollfd fds[2] = {{STDIN_FILENO, POLLIN, 0}, {fd, POLLIN, 0}};
  char buf[65536];
  for (;;) {
    if (::poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    if (fds[0].fd >= 0 && fds[0].revents) {
      ssize_t n = ::read(STDIN_FILENO, buf, sizeof(buf));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        // The client closed its side: let the daemon finish its replies, then end.
        ::shutdown(fd, SHUT_WR);
        fds[0].fd = -1;
      } else if (!copy_all(fd, buf, static_cast<size_t>(n))) {
        break;
      }
    }
    if (fds[1].revents) {
      ssize_t n = ::read(fd, buf, sizeof(buf));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0 || !copy_all(STDOUT_FILENO, buf, static_cast<size_t>(n))) break;
    }
  }
  ::close(fd);
}

}  // namespace ocslab::agent
