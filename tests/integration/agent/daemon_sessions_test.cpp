// The agent daemon's session cap: a local client that opens sessions without end gets an error
// line and a close past the limit, and the daemon keeps serving the sessions it has and new ones
// once one closes (docs/guarantees.md, "Network exposure").
#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "ocslab/common/file.h"
#include "ocslab/common/process.h"
#include "ocslab/testing/processes.h"
#include "ocslab/testing/sshd_fixture.h"
#include "ocslab/testing/wait.h"

namespace daemon_sessions_test {

using Catch::Matchers::Contains;

namespace {

constexpr int kLimit = 64;  // the daemon's kMaxSessions

int connect_to(const std::string& path) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  REQUIRE(fd >= 0);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    ::close(fd);
    return -1;
  }
  timeval tv{20, 0};  // a hang guard for the reads below, not a bound of the case
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  return fd;
}

// Everything the daemon sends until it closes, or until the first newline when one_line.
std::string read_reply(int fd, bool one_line) {
  std::string text;
  char buf[512];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n <= 0) break;
    text.append(buf, static_cast<size_t>(n));
    if (one_line && text.find('\n') != std::string::npos) break;
  }
  return text;
}

// A hello on a fresh session and its answer: the daemon served it.
bool served(const std::string& socket) {
  int fd = connect_to(socket);
  if (fd < 0) return false;
  const std::string hello = "{\"type\":\"hello\",\"id\":1,\"version\":1}\n";
  // MSG_NOSIGNAL: a session refused past the limit may be closed before the hello is written.
  bool ok = ::send(fd, hello.data(), hello.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(hello.size());
  std::string reply = ok ? read_reply(fd, true) : "";
  ::close(fd);
  return reply.find("\"type\":\"hello\"") != std::string::npos && reply.find("\"ok\":true") != std::string::npos;
}

}  // namespace

TEST_CASE("the agent daemon refuses sessions past its limit with an error line and goes on serving",
          "[agent][daemon]") {
  ocslab::testing::TempDir dir;
  const std::string socket = dir.path() + "/agent.sock";
  ocslab::SpawnOptions so;
  so.log_file = dir.path() + "/daemon.log";
  pid_t daemon = ocslab::spawn_program(
      {ocslab::testing::bin_path("ocslab-agent"), "serve", "--socket", socket, "--spool-dir", dir.path() + "/spool"},
      so);
  struct Stop {
    pid_t pid;
    ~Stop() {
      ::kill(pid, SIGTERM);
      ::waitpid(pid, nullptr, 0);
    }
  } stop{daemon};
  REQUIRE(ocslab::testing::poll_until([&] { return served(socket); }, std::chrono::seconds(20),
                                      std::chrono::milliseconds(25)));

  // kLimit sessions, each served (a hello answered), held open.
  std::vector<int> held;
  const std::string hello = "{\"type\":\"hello\",\"id\":1,\"version\":1}\n";
  for (int i = 0; i < kLimit; ++i) {
    int fd = connect_to(socket);
    REQUIRE(fd >= 0);
    REQUIRE(::send(fd, hello.data(), hello.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(hello.size()));
    REQUIRE_THAT(read_reply(fd, true), Contains("\"ok\":true"));
    held.push_back(fd);
  }
  // One more: an error line naming the limit, then the close.
  int extra = connect_to(socket);
  REQUIRE(extra >= 0);
  const std::string refused = read_reply(extra, false);
  ::close(extra);
  INFO(ocslab::read_file_or_empty(so.log_file));
  CHECK_THAT(refused, Contains("too many sessions: this daemon serves 64 at once"));
  CHECK(refused.find("\"type\":\"error\"") != std::string::npos);
  // The held sessions are still served.
  REQUIRE(::send(held[0], hello.data(), hello.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(hello.size()));
  CHECK_THAT(read_reply(held[0], true), Contains("\"ok\":true"));
  // One closes: a new session is served again (once the daemon has seen that close).
  ::close(held.back());
  held.pop_back();
  CHECK(ocslab::testing::poll_until([&] { return served(socket); }, std::chrono::seconds(20),
                                    std::chrono::milliseconds(25)));
  for (int fd : held) ::close(fd);
  CHECK_THAT(ocslab::read_file_or_empty(so.log_file), Contains("session refused: 64 sessions open (the limit)"));
}

}  // namespace daemon_sessions_test

namespace daemon_sessions_test {

// docs/guarantees.md, "Privileges": the bridge sudo runs as root never starts a daemon of its own
// (full root, outside the unit's limits, holding the lock the service needs); run as root without
// sudo (the virtual lab's guests, root's own SSH) it still does.
TEST_CASE("a bridge run through sudo does not start a root daemon; without sudo it does", "[agent][daemon]") {
  ocslab::testing::TempDir dir;
  const std::string socket = dir.path() + "/agent.sock";
  auto bridge = [&](const std::vector<std::string>& env) {
    std::vector<std::string> argv = {"env"};
    argv.insert(argv.end(), env.begin(), env.end());
    argv.insert(argv.end(), {"timeout", "20", ocslab::testing::bin_path("ocslab-agent"), "serve", "--stdio", "--socket",
                             socket, "--spool-dir", dir.path() + "/spool"});
    return ocslab::run_program_status(argv);  // stdin: /dev/null, so a bridge that connects ends at once
  };
  auto sudoed = bridge({"SUDO_UID=1000", "SUDO_GID=1000", "SUDO_USER=ocslab", "SUDO_COMMAND=/usr/bin/ocslab-agent"});
  CHECK(sudoed.status == 5);
  CHECK_THAT(sudoed.err, Contains("no agent daemon serves " + socket) &&
                             Contains("start the service (systemctl start ocslab-agent)"));
  CHECK_FALSE(std::filesystem::exists(socket));
  CHECK_FALSE(std::filesystem::exists(socket + ".lock"));  // no daemon took the lock

  auto plain = bridge({"-u", "SUDO_UID", "-u", "SUDO_USER"});
  INFO(plain.err);
  CHECK(plain.status == 0);
  // The daemon it started serves there; found among the processes by its socket, and stopped.
  CHECK(std::filesystem::exists(socket));
  pid_t pid = 0;
  for (const auto& p : ocslab::testing::processes_matching(socket)) {
    if (p.args_text().find("--stdio") == std::string::npos) pid = p.pid;
  }
  REQUIRE(pid > 0);
  ::kill(pid, SIGTERM);
  CHECK(ocslab::testing::poll_until([&] { return !std::filesystem::exists(socket); }, std::chrono::seconds(20),
                                    std::chrono::milliseconds(25)));
}

}  // namespace daemon_sessions_test
