// SshSession (the base of every SSH transport and of the runner's remote commands) when its
// connection is dropped under it: an exec fails with ConnectionError naming the session and the
// step, the session is closed, and nothing crashes (before, the channel of the failed exec was
// freed a second time after the session had freed it).
#include <catch2/catch.hpp>

#include <chrono>
#include <string>

#include "ocslab/ocsctl/errors.h"
#include "ocslab/ocsctl/ssh_session.h"
#include "ocslab/testing/agent_lab.h"
#include "ocslab/testing/sshd_fixture.h"

using namespace ocslab;
using Catch::Matchers::Contains;
using namespace std::chrono_literals;

TEST_CASE("ssh session: an exec on a dropped connection is a ConnectionError and closes the session",
          "[ssh][session]") {
  testing::SshdFixture sshd{testing::SshdOptions{}};
  ocs::SshSession s(testing::agent_ssh_options(sshd));
  const auto r = s.exec("echo one", 10s);
  CHECK(r.exit_status == 0);
  CHECK(r.out == "one\n");

  REQUIRE(sshd.drop_connections() >= 1);
  try {
    s.exec("echo two", 10s);
    FAIL("an exec on a dropped connection succeeded");
  } catch (const ocs::ConnectionError& e) {
    CHECK_THAT(e.what(), Contains(s.describe()) && Contains(" failed"));
  }
  // Closed by the failure: the next exec says so instead of using what was freed.
  CHECK_THROWS_WITH(s.exec("echo three", 10s), Contains(s.describe() + " is closed"));

  ocs::SshSession again(testing::agent_ssh_options(sshd));  // the host itself still answers
  CHECK(again.exec("echo four", 10s).out == "four\n");
}
