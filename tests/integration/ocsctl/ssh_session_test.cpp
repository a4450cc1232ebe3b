// SshSession (the base of every SSH transport and of the runner's remote commands) when its
// connection is dropped under it: an exec fails with ConnectionError naming the session and the
// step, the session is closed, and nothing crashes (before, the channel of the failed exec was
// freed a second time after the session had freed it); and a remote command that prints
// without end (`yes`): stopped at its deadline while its output keeps arriving, with the
// runner's memory bounded (the kept output is capped: head and tail, the rest counted).
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <stdexcept>
#include <string>

#include "ocslab/ocsctl/errors.h"
#include "ocslab/ocsctl/ssh_session.h"
#include "ocslab/testing/agent_lab.h"
#include "ocslab/testing/sshd_fixture.h"

using namespace ocslab;
using Catch::Matchers::Contains;
using namespace std::chrono_literals;

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define OCSLAB_TEST_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) || defined(OCSLAB_TEST_ASAN)
constexpr bool kAddressSanitizer = true;
#else
constexpr bool kAddressSanitizer = false;
#endif

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

namespace {

long rss_kb() {
  std::ifstream in("/proc/self/status");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6));
  return -1;
}

}  // namespace

TEST_CASE("ssh session: a command printing without end is stopped at its deadline, memory bounded",
          "[ssh][session][bounded]") {
  testing::SshdFixture sshd{testing::SshdOptions{}};
  ocs::SshSession s(testing::agent_ssh_options(sshd));
  const long rss_before = rss_kb();
  long rss_peak = rss_before;
  uint64_t seen = 0;
  const auto t0 = std::chrono::steady_clock::now();
  // A safety net, not the check: before the fix the loop never reached its deadline test while
  // `yes` kept the stream busy, and this test would hang instead of failing.
  auto tick = [&] {
    rss_peak = std::max(rss_peak, rss_kb());
    if (std::chrono::steady_clock::now() - t0 > 30s) throw std::runtime_error("exec ran 28 s past its deadline");
  };
  try {
    s.exec(
        "yes", 2s, {}, [&](std::string_view piece) { seen += piece.size(); }, tick, 1 << 20);
    FAIL("yes finished");
  } catch (const ocs::TimeoutError& e) {
    CHECK_THAT(e.what(), Contains("'yes' did not finish within 2000 ms") && Contains("bytes of output"));
  }
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  INFO("took " << took << " s, " << seen << " bytes seen, VmRSS " << rss_before << " -> " << rss_peak << " kB");
  CHECK(took < 10);
  // A real flood: far more than the 1 MiB cap, and in the release build more than the resident
  // bound below too. How much `yes` gets through ssh in 2 s is the machine's speed: 17 MiB under
  // ASan on two loaded cores (the load harness, 2026-12-06), where only the kept sizes show the
  // cap (the resident bound is not asserted there).
  CHECK(seen > (kAddressSanitizer ? (8u << 20) : (32u << 20)));
  // 1 MiB kept (x1.5 between trims), not all of it. Resident memory measures that only without
  // ASan: its quarantine keeps up to 256 MiB of freed chunks resident (seen: +290 MB in the
  // sanitizer stage), so there the cap is shown by the kept sizes below, and the release build
  // asserts the resident bound.
  if (!kAddressSanitizer) CHECK(rss_peak - rss_before < 16 * 1024);

  ocs::SshSession again(testing::agent_ssh_options(sshd));
  // Output that ends: whole under the cap, head and tail around the count above it.
  auto whole = again.exec("seq 1 1000", 10s, {}, {}, {}, 1 << 20);
  CHECK(whole.out_dropped == 0);
  CHECK(whole.out.size() == 3893u);
  auto capped = again.exec("seq 1 200000; echo oops >&2", 10s, {}, {}, {}, 4096);
  CHECK(capped.exit_status == 0);
  CHECK(capped.out.rfind("1\n2\n3\n", 0) == 0);
  CHECK(capped.out.size() < 4096 + 64);
  CHECK_THAT(capped.out, Contains("bytes dropped ...]\n") && Contains("199999\n200000\n"));
  CHECK(capped.out_dropped == 1288895u - 4096u);
  CHECK(capped.err == "oops\n");
  CHECK(capped.err_dropped == 0);
}
