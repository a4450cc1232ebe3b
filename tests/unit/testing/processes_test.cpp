// ocslab/testing/processes.h: finds a process by its command line, and never throws while
// processes come and go (a read of /proc/PID/cmdline fails with ESRCH once PID has exited).
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <string>
#include <thread>

#include "ocslab/testing/processes.h"
#include "ocslab/testing/wait.h"

using namespace std::chrono_literals;
using ocslab::testing::list_processes;
using ocslab::testing::processes_matching;

TEST_CASE("processes_matching finds a child by its command line, and not once it is gone", "[testing][processes]") {
  const std::string marker = "ocslab-processes-test-" + std::to_string(::getpid());
  // The child waits in the shell's own `read` on a pipe this test holds: no process of its own
  // (a `sleep` would be forked by a shell that carries the marker until its exec, so a listing
  // could see two matches, and the `sleep` would outlive the kill holding ctest's output open).
  int gate[2];
  REQUIRE(::pipe(gate) == 0);
  pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    ::dup2(gate[0], STDIN_FILENO);
    ::close(gate[0]);
    ::close(gate[1]);
    ::execl("/bin/sh", "sh", "-c", "read -r x", marker.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  ::close(gate[0]);
  // The child's command line is the shell's once exec has run: wait for it (bounded).
  bool found = ocslab::testing::poll_until([&] { return !processes_matching(marker).empty(); }, 5s, 10ms);
  auto matches = processes_matching(marker);
  ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, 0);
  ::close(gate[1]);
  REQUIRE(found);
  REQUIRE(matches.size() == 1);
  CHECK(matches[0].pid == child);
  CHECK(matches[0].args_text() == "sh -c read -r x " + marker);
  CHECK(matches[0].cmdline == std::string("sh\0-c\0read -r x\0", 16) + marker + std::string(1, '\0'));
  CHECK(processes_matching(marker).empty());
}

TEST_CASE("listing /proc while processes start and exit never throws", "[testing][processes]") {
  std::atomic<bool> stop{false};
  std::atomic<int> spawned{0};
  std::thread churn([&] {
    while (!stop) {
      pid_t p = ::fork();
      if (p == 0) ::_exit(0);
      if (p > 0) {
        ::waitpid(p, nullptr, 0);
        ++spawned;
      }
    }
  });
  int listings = 0;
  size_t most = 0;
  // load-safe: the length of a stress loop (listings while processes come and go), not an expected latency.
  auto end = std::chrono::steady_clock::now() + 1s;
  bool threw = false;
  while (std::chrono::steady_clock::now() < end) {
    try {
      most = std::max(most, list_processes().size());
    } catch (...) {
      threw = true;
    }
    ++listings;
  }
  stop = true;
  churn.join();
  INFO(listings << " listings while " << spawned << " processes came and went");
  CHECK_FALSE(threw);
  CHECK(spawned > 0);
  CHECK(most >= 2);  // this process and at least init or the runner
}
