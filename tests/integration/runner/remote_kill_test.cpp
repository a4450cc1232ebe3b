// The injected crash (rank-killed, agent-killed) through a real sshd on loopback (this machine is
// the "host"): RemoteKiller's session opened ahead kills the process it names, refuses a pid that
// runs another program, survives its connection being dropped (a fresh one at the kill), and a
// host it could never reach is named in the error.
#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <string>

#include "ocslab/common/error.h"
#include "ocslab/runner/remote_kill.h"
#include "ocslab/testing/agent_lab.h"
#include "ocslab/testing/sshd_fixture.h"
#include "ocslab/testing/wait.h"

// This file's helpers in a namespace of its own: the unity build compiles it together with
// the other tests of its binary.
namespace remote_kill_test {

using namespace ocslab;
using Catch::Matchers::Contains;

namespace {

// A `sleep` child of this test, reaped (and killed if still running) at the end.
struct Sleeper {
  pid_t pid = -1;
  Sleeper() {
    pid = ::fork();
    if (pid == 0) {
      ::execl("/bin/sleep", "sleep", "300", nullptr);
      ::_exit(127);
    }
    REQUIRE(pid > 0);
    // Running `sleep` (its comm) before the test names it: exec has happened.
    REQUIRE(testing::poll_until([&] { return comm() == "sleep"; }, std::chrono::seconds(30)));
  }
  ~Sleeper() {
    if (pid > 0) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
    }
  }
  std::string comm() const {
    std::ifstream in("/proc/" + std::to_string(pid) + "/comm");
    std::string s;
    std::getline(in, s);
    return s;
  }
  // How it ended: the signal that killed it (0: exited); waits at most ~5 s.
  int killed_by() {
    int status = 0;
    for (int i = 0; i < 3000; ++i) {
      if (::waitpid(pid, &status, WNOHANG) == pid) {
        pid = -1;
        return WIFSIGNALED(status) ? WTERMSIG(status) : 0;
      }
      // load-safe: the poll interval of a wait for the process's exit; 3,000 tries (30 s) are a hang guard.
      ::usleep(10'000);
    }
    return -1;  // still running
  }
};

}  // namespace

TEST_CASE("RemoteKiller: the session opened ahead kills the named program and refuses a pid running another",
          "[runner][remote-kill]") {
  testing::SshdFixture sshd{testing::SshdOptions{}};
  runner::RemoteKiller killer(testing::agent_ssh_options(sshd));
  CHECK(killer.connected_ahead());

  Sleeper other;
  try {
    killer.kill(other.pid, "ocslab-agent", "h1's agent");
    FAIL("a pid that runs sleep was killed as ocslab-agent");
  } catch (const Error& e) {
    CHECK_THAT(e.what(), Contains("h1's agent: kill -KILL " + std::to_string(other.pid) + " failed (status 3)") &&
                             Contains("is not ocslab-agent any more"));
  }
  CHECK(other.comm() == "sleep");  // untouched

  killer.kill(other.pid, "sleep", "rank 2 on h3");  // the same session, a second command
  CHECK(other.killed_by() == SIGKILL);

  try {
    killer.kill(0, "sleep", "rank 1 on h2");
    FAIL("pid 0 was accepted");
  } catch (const Error& e) {
    CHECK(std::string(e.what()) == "rank 1 on h2: no process to kill (its pid is not known)");
  }
}

TEST_CASE("RemoteKiller: a connection dropped since it was opened is made again at the kill", "[runner][remote-kill]") {
  testing::SshdFixture sshd{testing::SshdOptions{}};
  runner::RemoteKiller killer(testing::agent_ssh_options(sshd));
  REQUIRE(killer.connected_ahead());
  REQUIRE(sshd.drop_connections() >= 1);  // the killer's session was one of them

  Sleeper victim;
  killer.kill(victim.pid, "sleep", "rank 0 on h1");
  CHECK(victim.killed_by() == SIGKILL);
}

TEST_CASE("RemoteKiller: a host it cannot reach is named when the kill is due", "[runner][remote-kill]") {
  testing::SshdFixture sshd{testing::SshdOptions{}};
  auto options = testing::agent_ssh_options(sshd);
  options.port = testing::free_loopback_port();  // nothing listens there
  runner::RemoteKiller killer(options);
  CHECK_FALSE(killer.connected_ahead());
  Sleeper victim;
  try {
    killer.kill(victim.pid, "sleep", "rank 3 on h4");
    FAIL("a kill through an unreachable host succeeded");
  } catch (const std::exception& e) {
    CHECK_THAT(e.what(), Contains("127.0.0.1:" + std::to_string(options.port)));
  }
  CHECK(victim.comm() == "sleep");
}

}  // namespace remote_kill_test
