// The runner's fan-out at lab scale, end to end over a real loopback sshd with one local agent
// daemon per simulated host: the SSH handshakes bounded by the pool's connect_concurrency
// (HandshakeGate), a pool larger than sshd's default MaxStartups (10:30:100) reached without a
// refusal, and probes.stop answered behind a backlog of samples a slow runner is still draining.
#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>

#include "ocslab/runner/host_session.h"
#include "ocslab/testing/agent_lab.h"
#include "ocslab/testing/sshd_fixture.h"
#include "ocslab/testing/wait.h"

using namespace ocslab;
using namespace ocslab::runner;
using namespace std::chrono_literals;

namespace fanout_test {

struct FanoutLab {
  testing::TempDir dir;
  testing::SshdFixture sshd;
  testing::DaemonReaper reaper{dir.path()};
  explicit FanoutLab(const testing::SshdOptions& o = {}) : sshd(o) {}

  HostTarget target(const std::string& name, int interval_ms) const {
    HostTarget t;
    t.name = name;
    t.ssh = testing::agent_ssh_options(sshd);
    t.agent_command = testing::agent_command(dir.path(), name, name, /*daemon=*/true);
    agent::ProbeRequest hb;
    hb.name = "heartbeat";
    hb.interval_ms = interval_ms;
    t.probes = {hb};
    return t;
  }
};

// Connects and starts every host of the pool, expecting no failure.
void connect_and_start(SessionPool& pool, FanoutLab& lab) {
  auto connected = pool.connect_all();
  for (auto& s : pool.sessions()) lab.reaper.add(s->hello().pid);
  for (size_t i = 0; i < connected.size(); ++i) {
    INFO(pool.sessions()[i]->name());
    CHECK(connected[i] == "");
  }
  auto started = pool.start_all();
  for (const auto& e : started) CHECK(e == "");
}

void check_whole(const HostReport& r) {
  INFO("host " << r.name << (r.errors.empty() ? "" : ": " + r.errors.front()));
  CHECK_FALSE(r.lost);
  CHECK(r.last_seq > 0);
  CHECK(r.samples == r.last_seq);
  CHECK(r.recovered == 0);
  CHECK(r.errors.empty());
}

}  // namespace fanout_test

using fanout_test::FanoutLab;

TEST_CASE("12 hosts at connect_concurrency 3: never more than 3 SSH handshakes at once, the others queue",
          "[runner][integration][fanout]") {
  FanoutLab lab;
  std::atomic<uint64_t> delivered{0};
  SessionPool pool([&](const std::string&, const agent::SeqSample&) { ++delivered; }, 3);
  for (int i = 0; i < 12; ++i) pool.add(lab.target("gated-" + std::to_string(i), 10));
  fanout_test::connect_and_start(pool, lab);
  CHECK(pool.gate().limit() == 3);
  CHECK(pool.gate().peak() == 3);  // bounded, and the bound was used
  CHECK(pool.gate().entered() == 12);
  int waited = 0;
  for (auto& s : pool.sessions()) {
    HostReport r = s->report();
    const ConnectPhases& p = r.connect_phases;
    INFO(r.name << ": queue " << p.queue.count() << ", ssh " << p.ssh.count() << ", hello " << p.hello.count()
                << ", clock " << p.clock.count() << " ms, in all " << r.connect_time.count());
    CHECK(p.ssh.count() > 0);
    CHECK(r.connect_time >= p.queue + p.ssh + p.hello + p.clock);
    CHECK(r.connect_time <= p.queue + p.ssh + p.hello + p.clock + 3ms);  // contiguous phases, each rounded down
    if (p.queue.count() > 0) ++waited;
  }
  CHECK(waited >= 9);  // all but the first three waited for a slot
  REQUIRE(testing::poll_until([&] { return delivered.load() >= 12 * 5; }, 10s));
  auto reports = pool.stop_all();
  for (const auto& r : reports) fanout_test::check_whole(r);
  CHECK(pool.gate().in_flight() == 0);
  CHECK(pool.gate().peak() == 3);
}

TEST_CASE("32 hosts through one sshd with its default MaxStartups: none refused at the default concurrency",
          "[runner][integration][fanout]") {
  testing::SshdOptions o;
  o.max_startups = "";  // sshd's default 10:30:100, as on a stock lab host
  FanoutLab lab(o);
  constexpr int kHosts = 32;
  std::atomic<uint64_t> delivered{0};
  SessionPool pool([&](const std::string&, const agent::SeqSample&) { ++delivered; });
  for (int i = 0; i < kHosts; ++i) pool.add(lab.target("stock-" + std::to_string(i), 10));
  const auto t0 = std::chrono::steady_clock::now();
  fanout_test::connect_and_start(pool, lab);
  const auto took = std::chrono::steady_clock::now() - t0;
  CHECK(pool.gate().limit() == kDefaultConnectConcurrency);
  CHECK(pool.gate().peak() <= kDefaultConnectConcurrency);
  REQUIRE(testing::poll_until([&] { return delivered.load() >= kHosts * 5; }, 10s));
  auto reports = pool.stop_all();
  REQUIRE(reports.size() == kHosts);
  for (const auto& r : reports) fanout_test::check_whole(r);
  std::printf(
      "fan-out against sshd's default MaxStartups: %d hosts connected and started in %lld ms, peak %d "
      "handshakes\n",
      kHosts, (long long)std::chrono::duration_cast<std::chrono::milliseconds>(took).count(), pool.gate().peak());
}

TEST_CASE("probes.stop behind a backlog the runner is still draining: answered, nothing reconnects",
          "[runner][integration][fanout]") {
  FanoutLab lab;
  // The sink holds the reader for the whole capture (heartbeat every 1 ms, 2 s), so at stop the
  // reply queues behind every sample; then it drains slowly (15 ms every 10th sample: at least
  // 3 s for 2000 samples), longer than the request timeout, well within 8 of them.
  // The hold starts once start() has returned: on a loaded machine the first samples reach the
  // client ahead of start's reply and are delivered on the thread inside start(), which a hold
  // there would stop for good (it hung the instrumented build under the load harness).
  std::atomic<uint64_t> delivered{0};
  std::atomic<bool> hold{true}, started{false};
  HostTarget t = lab.target("backlog", 1);
  t.request_timeout = 1500ms;
  HostSession s(t, [&](const std::string&, const agent::SeqSample&) {
    // load-safe: the stalled consumer under test (the poll interval of its hold).
    while (started.load() && hold.load()) std::this_thread::sleep_for(1ms);  // kept: the stalled consumer under test
    // load-safe: the slow consumer under test: a lower bound on its slowness.
    if (++delivered % 10 == 0) std::this_thread::sleep_for(15ms);  // kept: the slow consumer under test
  });
  s.connect();
  lab.reaper.add(s.hello().pid);
  s.start();
  started = true;
  // load-safe: a capture that builds a backlog; a longer one only builds more.
  std::this_thread::sleep_for(2000ms);  // kept: the capture that builds the backlog
  const auto t0 = std::chrono::steady_clock::now();
  hold = false;
  HostReport r = s.stop();
  const auto took = std::chrono::steady_clock::now() - t0;
  std::printf("stop behind a backlog: %llu samples, %lld ms to stop (request timeout %lld ms)\n",
              (unsigned long long)r.samples,
              (long long)std::chrono::duration_cast<std::chrono::milliseconds>(took).count(),
              (long long)t.request_timeout.count());
  CHECK(took > t.request_timeout);  // the backlog outlasted the timeout: the case under test
  fanout_test::check_whole(r);
  CHECK(delivered.load() == r.last_seq);
  CHECK(r.clock_after.exchanges > 0);
}
