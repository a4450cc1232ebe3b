// The agent core in-process over socketpairs: requests and replies, garbage answered with an
// error while the session stays up, live samples, and a second session catching up from the
// spool with every sequence number exactly once.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <thread>

#include "ocslab/agent/agent.h"
#include "ocslab/agent/client.h"
#include "ocslab/agent/heartbeat_probe.h"
#include "ocslab/ocsctl/errors.h"
#include "ocslab/testing/fd_stream.h"
#include "ocslab/testing/small_disk.h"
#include "ocslab/testing/sshd_fixture.h"
#include "ocslab/testing/wait.h"

using namespace ocslab::agent;
using namespace std::chrono_literals;

namespace {

using ocslab::testing::FdStream;

// One session served by agent on a thread; the client end comes back as a stream.
struct Served {
  Served(Agent& agent) {
    int sv[2];
    REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0);
    server_fd = sv[0];
    client_fd = sv[1];
    thread = std::thread([&agent, fd = server_fd] { agent.serve(fd, fd); });
  }
  ~Served() {
    ::shutdown(server_fd, SHUT_RDWR);
    thread.join();
    ::close(server_fd);
  }
  std::unique_ptr<ocslab::ocs::Stream> stream() { return std::make_unique<FdStream>(client_fd, "socketpair"); }
  int server_fd, client_fd;
  std::thread thread;
};

std::string read_line(int fd) {
  std::string line;
  char c;
  while (::read(fd, &c, 1) == 1 && c != '\n') line += c;
  return line;
}

AgentOptions options(const std::string& spool_dir) {
  AgentOptions o;
  o.host = "h1";
  o.spool_dir = spool_dir;
  return o;
}

ProbeRequest heartbeat(int interval_ms) {
  ProbeRequest p;
  p.name = "heartbeat";
  p.interval_ms = interval_ms;
  return p;
}

}  // namespace

TEST_CASE("garbage gets an error reply and the session stays up", "[agent][session]") {
  ocslab::testing::TempDir dir;
  Agent agent(options(dir.path() + "/spool"));
  Served s(agent);
  std::string garbage = "{\"type\":\"hello\",\"id\":1,\"version\":1\n\x01\x02\n[]\n{\"type\":\"x\",\"id\":5}\n";
  REQUIRE(::write(s.client_fd, garbage.data(), garbage.size()) == ssize_t(garbage.size()));
  CHECK(read_line(s.client_fd).find("not JSON") != std::string::npos);
  CHECK(read_line(s.client_fd).find("not JSON") != std::string::npos);
  CHECK(read_line(s.client_fd).find("must be a JSON object") != std::string::npos);
  auto unknown = nlohmann::json::parse(read_line(s.client_fd));
  CHECK(unknown["type"] == "error");
  CHECK(unknown["id"] == 5);
  CHECK(unknown["message"].get<std::string>().find("unknown request type 'x'") == 0);

  AgentClient client(s.stream());
  HelloInfo h = client.hello();
  CHECK(h.version == 1);
  CHECK(h.host == "h1");
  CHECK(h.pid == ::getpid());
  // This machine's clock state as adjtimex reports it (a container may run no sync daemon).
  CHECK((h.clock_sync.rfind("synchronized", 0) == 0 || h.clock_sync.rfind("unsynchronized", 0) == 0));
  CHECK(h.probes == std::vector<std::string>{"carrier", "firmware", "gid", "heartbeat", "rdma", "rx_power"});
}

TEST_CASE("unsupported version, unknown probe, double start and fetch without capture are refused",
          "[agent][session]") {
  ocslab::testing::TempDir dir;
  Agent agent(options(dir.path() + "/spool"));
  Served s(agent);
  std::string bad = "{\"type\":\"hello\",\"id\":1,\"version\":2}\n";
  REQUIRE(::write(s.client_fd, bad.data(), bad.size()) == ssize_t(bad.size()));
  CHECK(read_line(s.client_fd).find("unsupported protocol version 2; this agent speaks 1") != std::string::npos);

  AgentClient client(s.stream());
  CHECK_THROWS_WITH(client.fetch(1), Catch::Contains("no capture yet"));
  ProbeRequest nope;
  nope.name = "no_such_probe";
  auto r = client.start({heartbeat(50), nope});
  REQUIRE(r.probes.size() == 2);
  CHECK(r.probes[0].available);
  CHECK_FALSE(r.probes[1].available);
  CHECK(r.probes[1].reason ==
        "unknown probe 'no_such_probe' (this agent knows: carrier, firmware, gid, heartbeat, rdma, rx_power)");
  CHECK_THROWS_WITH(client.start({heartbeat(50)}), Catch::Contains("probes already running"));
  auto st = client.status();
  CHECK(st["running"] == nlohmann::json::array({"heartbeat"}));
  client.stop();
  CHECK(client.status()["running"].empty());
}

TEST_CASE("live samples arrive in order, each once, and the spool holds them all", "[agent][session]") {
  ocslab::testing::TempDir dir;
  Agent agent(options(dir.path() + "/spool"));
  Served s(agent);
  AgentClient client(s.stream());
  std::vector<uint64_t> got;
  client.on_sample([&](const SeqSample& x) {
    CHECK(x.sample.source == "heartbeat");
    CHECK(x.sample.host == "h1");
    CHECK(x.sample.value == double(x.seq));  // one probe: its counter is the seq
    got.push_back(x.seq);
  });
  client.start({heartbeat(2)});
  client.poll_for(300ms);
  uint64_t last = client.stop();
  REQUIRE(last > 10);
  REQUIRE(got.size() == last);
  for (size_t i = 0; i < got.size(); ++i) CHECK(got[i] == i + 1);
  auto st = client.status();
  CHECK(st["last_seq"] == last);
  CHECK(st["spool_bytes"].get<uint64_t>() > 0);

  // Fetching after the stop replays exactly the capture.
  got.clear();
  auto f = client.fetch(1, false);
  CHECK(f.count == last);
  CHECK(got.size() == last);
}

// Samples from many probe threads, while the client does not read for a while (the pipe or
// socket fills: probe threads' non-blocking writes of due batches come back short or EAGAIN and
// the writer thread finishes them) and while replies are interleaved: every seq once, in order.
TEST_CASE("a full pipe or socket loses, repeats and reorders no sample", "[agent][session]") {
  ocslab::testing::TempDir dir;
  Agent agent(options(dir.path() + "/spool"));
  int to_agent[2], from_agent[2];
  bool pipes = GENERATE(false, true);
  INFO((pipes ? "pipes" : "socketpair"));
  if (pipes) {
    REQUIRE(::pipe2(to_agent, O_CLOEXEC) == 0);
    REQUIRE(::pipe2(from_agent, O_CLOEXEC) == 0);
  } else {
    int sv[2];
    REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0);
    to_agent[0] = from_agent[1] = sv[0];
    to_agent[1] = from_agent[0] = sv[1];
  }
  // A jthread: when a REQUIRE below fails, the client's stream closes first (inner scope), the
  // session sees EOF and the server is joined, so the failure is reported instead of terminating.
  std::jthread server([&] { agent.serve(to_agent[0], from_agent[1]); });
  {
    AgentClient client(std::make_unique<FdStream>(from_agent[0], to_agent[1]));
    std::vector<uint64_t> got;
    client.on_sample([&](const SeqSample& x) { got.push_back(x.seq); });
    std::vector<ProbeRequest> probes;
    for (int i = 0; i < 8; ++i) {
      ProbeRequest p = heartbeat(1);
      p.params = {{"label", "hb" + std::to_string(i)}};
      probes.push_back(p);
    }
    client.start(probes);
    for (int round = 0; round < 3; ++round) {
      // Not reading while the agent produces 1,800 more samples (about 300 KB, 300 ms on a quiet
      // machine): they queue up. Counted at the agent, so a slow machine only takes longer.
      const uint64_t target = (round + 1) * uint64_t{1800};
      ocslab::testing::wait_until(
          "the agent's sequence to reach " + std::to_string(target),
          [&] { return agent.status()["last_seq"].get<uint64_t>() >= target; }, 60s);
      client.status();  // a reply behind them
      client.poll_for(100ms);
    }
    uint64_t last = client.stop();
    for (int i = 0; i < 100 && client.last_seq() < last; ++i) client.poll_for(50ms);
    REQUIRE(last > 5000);
    REQUIRE(got.size() == last);
    for (size_t i = 0; i < got.size(); ++i) {
      if (got[i] != i + 1) FAIL("sample " << i << " has seq " << got[i]);
    }
  }
  // The client's stream closed its fds: EOF ends the session.
  server.join();
  if (pipes) {
    ::close(to_agent[0]);
    ::close(from_agent[1]);
  } else {
    ::close(to_agent[0]);
  }
}

TEST_CASE("a session joining mid-capture gets the gap from the spool, then live, none twice", "[agent][session]") {
  ocslab::testing::TempDir dir;
  Agent agent(options(dir.path() + "/spool"));
  Served a(agent), b(agent);
  AgentClient starter(a.stream());
  starter.start({heartbeat(2)});
  // The spool holds a gap before the late session joins (a quiet machine: about 200 ms).
  ocslab::testing::wait_until(
      "samples in the spool", [&] { return agent.status()["last_seq"].get<uint64_t>() >= 20; }, 60s);

  AgentClient late(b.stream());
  std::map<uint64_t, int> count;
  late.on_sample([&](const SeqSample& x) { ++count[x.seq]; });
  late.hello();
  auto f = late.fetch(1);
  CHECK(f.count == f.last_seq);
  CHECK(f.last_seq > 0);
  late.poll_for(200ms);
  uint64_t last = starter.stop();
  // The late session's last samples were queued before the stop returned; wait for them.
  for (int i = 0; i < 100 && late.last_seq() < last; ++i) late.poll_for(50ms);
  REQUIRE(last > f.last_seq);
  CHECK(count.size() == last);
  for (uint64_t seq = 1; seq <= last; ++seq) {
    INFO("seq " << seq);
    CHECK(count[seq] == 1);
  }
}

TEST_CASE("a paged fetch replays the gap page by page, in order, and follows live only after the last page",
          "[agent][session]") {
  ocslab::testing::TempDir dir;
  Agent agent(options(dir.path() + "/spool"));
  Served a(agent), b(agent);
  AgentClient starter(a.stream());
  starter.start({heartbeat(1)});
  // The spool holds a gap before the late session joins (a quiet machine: about 200 ms).
  ocslab::testing::wait_until(
      "samples in the spool", [&] { return agent.status()["last_seq"].get<uint64_t>() >= 20; }, 60s);

  AgentClient late(b.stream());
  std::vector<uint64_t> got;
  late.on_sample([&](const SeqSample& x) { got.push_back(x.seq); });
  auto f = late.fetch(1, /*follow=*/true, /*page_size=*/7);
  CHECK(f.pages >= 2);
  CHECK(f.following);
  CHECK(f.next_seq == f.last_seq + 1);
  late.poll_for(200ms);
  uint64_t last = starter.stop();
  for (int i = 0; i < 100 && late.last_seq() < last; ++i) late.poll_for(50ms);
  REQUIRE(got.size() == last);
  for (size_t i = 0; i < got.size(); ++i) {
    if (got[i] != i + 1) FAIL("sample " << i << " has seq " << got[i]);
  }

  // After the stop: exactly the capture, in ceil(last / 10) pages; one page past the end is empty.
  got.clear();
  f = late.fetch(1, false, 10);
  CHECK(f.count == last);
  CHECK(f.pages == (last + 9) / 10);
  CHECK_FALSE(f.following);
  CHECK(got.size() == last);
  got.clear();
  f = late.fetch(last + 1, false, 10);
  CHECK(f.count == 0);
  CHECK(f.pages == 1);
  CHECK(f.next_seq == last + 1);
  CHECK(got.empty());
  CHECK_THROWS_WITH(late.fetch(1, false, kMaxFetchPage + 1), Catch::Contains("above the agent's limit of 100000"));
}

TEST_CASE("spools carry the run id, go on spool.delete once stopped, and old ones go when a capture starts",
          "[agent][session][retention]") {
  ocslab::testing::TempDir dir;
  const std::string spool_dir = dir.path() + "/spool";
  AgentOptions o = options(spool_dir);
  o.retention.max_age = std::chrono::hours(24);
  Agent agent(o);
  // Left by an earlier capture two days ago, and a symlink with a spool's name: only the first goes.
  std::ofstream(spool_dir + "/capture-20000101T000000-1-1.jsonl") << "{}\n";
  timespec old[2] = {{std::time(nullptr) - 2 * 86400, 0}, {std::time(nullptr) - 2 * 86400, 0}};
  REQUIRE(::utimensat(AT_FDCWD, (spool_dir + "/capture-20000101T000000-1-1.jsonl").c_str(), old, 0) == 0);
  std::ofstream(dir.path() + "/precious") << "keep\n";
  REQUIRE(::symlink((dir.path() + "/precious").c_str(), (spool_dir + "/capture-link.jsonl").c_str()) == 0);
  REQUIRE(::utimensat(AT_FDCWD, (spool_dir + "/capture-link.jsonl").c_str(), old, AT_SYMLINK_NOFOLLOW) == 0);

  Served s(agent);
  AgentClient client(s.stream());
  auto started = client.start({heartbeat(5)}, "demo-20261126T120000Z");
  CHECK_THAT(started.capture, Catch::EndsWith(".demo-20261126T120000Z"));
  CHECK(started.spool == spool_dir + "/capture-" + started.capture + ".jsonl");
  CHECK(std::filesystem::exists(started.spool));
  CHECK_FALSE(std::filesystem::exists(spool_dir + "/capture-20000101T000000-1-1.jsonl"));
  CHECK(std::filesystem::is_symlink(spool_dir + "/capture-link.jsonl"));
  CHECK_THROWS_WITH(client.start({heartbeat(5)}, "a/b"), Catch::Contains("'run' in probes.start 'a/b' has '/'"));

  CHECK_THROWS_WITH(client.delete_spool(started.capture),
                    Catch::Contains("capture " + started.capture + " is still running; send probes.stop first"));
  CHECK(std::filesystem::exists(started.spool));
  client.poll_for(50ms);
  client.stop();
  CHECK(client.delete_spool(started.capture));
  CHECK_FALSE(std::filesystem::exists(started.spool));
  CHECK_FALSE(client.delete_spool(started.capture));  // gone already: nothing to do
  CHECK_THROWS_WITH(client.fetch(1, false),
                    Catch::Contains("the spool of capture " + started.capture + " was deleted"));
  CHECK_THROWS_WITH(client.delete_spool("../x"),
                    Catch::Contains("'capture' in spool.delete '../x' must not start with '.'"));
  CHECK(client.status()["spool"].is_null());
  CHECK(std::filesystem::exists(dir.path() + "/precious"));
}

TEST_CASE("the retention timer deletes a spool that grew old while no capture started", "[agent][retention]") {
  ocslab::testing::TempDir dir;
  AgentOptions o = options(dir.path() + "/spool");
  o.retention.max_age = std::chrono::hours(1);
  o.retention_interval = std::chrono::seconds(1);
  Agent agent(o);
  const std::string old_spool = dir.path() + "/spool/capture-20000101T000000-1-1.old-run.jsonl";
  std::ofstream(old_spool) << "{}\n";
  timespec t[2] = {{std::time(nullptr) - 7200, 0}, {std::time(nullptr) - 7200, 0}};
  REQUIRE(::utimensat(AT_FDCWD, old_spool.c_str(), t, 0) == 0);
  const std::string young = dir.path() + "/spool/capture-20000101T000000-1-2.jsonl";
  std::ofstream(young) << "{}\n";
  // The retention timer runs every second; 30 s is a hang guard.
  CHECK(ocslab::testing::poll_until([&] { return !std::filesystem::exists(old_spool); }, 30s, 100ms));
  CHECK(std::filesystem::exists(young));
}

TEST_CASE("status reports a spool write failure once, with the dropped count, and the live stream goes on",
          "[agent][session]") {
  ocslab::testing::SmallDisk disk("64k");
  AgentOptions o = options(disk.path() + "/spool");
  o.spool = {16, std::chrono::milliseconds(10)};
  Agent agent(o);
  Served s(agent);
  AgentClient client(s.stream());
  std::vector<uint64_t> got;
  client.on_sample([&](const SeqSample& x) { got.push_back(x.seq); });
  client.start({heartbeat(1)});
  nlohmann::json st;
  for (int i = 0; i < 100; ++i) {  // about 450 samples fill 64 KiB
    client.poll_for(100ms);
    st = client.status();
    if (!st["spool_error"].is_null() && st["spool_dropped"].get<uint64_t>() > 100) break;
  }
  CHECK_THAT(st["spool_error"].get<std::string>(), Catch::Contains("No space left on device"));
  uint64_t last = client.stop();
  for (int i = 0; i < 100 && client.last_seq() < last; ++i) client.poll_for(50ms);
  REQUIRE(got.size() == last);  // live: every sample, spool or not
  for (size_t i = 0; i < got.size(); ++i) CHECK(got[i] == i + 1);
  st = client.status();
  uint64_t dropped = st["spool_dropped"].get<uint64_t>();
  CHECK(dropped > 100);
  // What reached the disk is fetchable, in order, paged; the rest is counted, not there.
  got.clear();
  auto f = client.fetch(1, false, 100);
  CHECK(f.count == last - dropped);
  REQUIRE(got.size() == last - dropped);
  for (size_t i = 0; i < got.size(); ++i) CHECK(got[i] == i + 1);
  CHECK(f.next_seq == last + 1);
}

TEST_CASE("registry: a factory by name, one name once", "[agent][registry]") {
  ProbeRegistry r;
  r.add("heartbeat", [](const ProbeConfig& c) { return std::make_unique<HeartbeatProbe>(c.host, c.interval_ms); });
  CHECK_THROWS_WITH(r.add("heartbeat", nullptr), Catch::Contains("registered twice"));
  CHECK(r.create({"h", "nope", {}, 10, {}}) == nullptr);
  auto p = r.create({"h", "heartbeat", {}, 10, {}});
  REQUIRE(p);
  CHECK(p->name() == "heartbeat");
  CHECK(builtin_registry().contains("heartbeat"));
  CHECK_THROWS_AS(HeartbeatProbe("h", 0), ocslab::Error);
  // Interface names arrive over the network and become sysfs paths in a root daemon.
  CHECK_THROWS_WITH(builtin_registry().create({"h", "carrier", {"../../etc"}, 1, {}}),
                    "probe carrier: '../../etc' is not an interface name ('/' is not allowed)");
  CHECK_THROWS_WITH(builtin_registry().create({"h", "rx_power", {"eth1", "eth0:1"}, 1, {}}),
                    Catch::Contains("'eth0:1' is not an interface name"));
}

TEST_CASE("registry: the carrier probe's poll_ms (the live carrier bit) is checked", "[agent][registry]") {
  const auto& r = builtin_registry();
  // Polling is the default; 0 turns it off; 1..1000 ms are intervals.
  for (const auto& params : {nlohmann::json::object(), nlohmann::json{{"poll_ms", 0}}, nlohmann::json{{"poll_ms", 1}},
                             nlohmann::json{{"poll_ms", 1000}}})
    CHECK(r.create({"h", "carrier", {"eth0"}, 10, params}));
  CHECK_THROWS_WITH(r.create({"h", "carrier", {"eth0"}, 10, {{"poll_ms", 1001}}}),
                    "probe carrier: bad params: poll_ms: poll interval 1001 ms: must be 0 (no polling) or 1..1000 ms");
  CHECK_THROWS_WITH(r.create({"h", "carrier", {"eth0"}, 10, {{"poll_ms", -5}}}), Catch::Contains("poll_ms"));
  CHECK_THROWS_WITH(r.create({"h", "carrier", {"eth0"}, 10, {{"poll_ms", "fast"}}}),
                    Catch::StartsWith("probe carrier: bad params: "));
}

TEST_CASE("registry: the firmware probe from a request", "[agent][registry]") {
  const auto& r = builtin_registry();
  REQUIRE(r.contains("firmware"));
  auto p = r.create({"h", "firmware", {"lo"}, 1, {{"op_mod", "uplink"}}});
  REQUIRE(p);
  CHECK(p->name() == "firmware");
  // Loopback has no RDMA device: unavailable with the interface named, no exception.
  auto st = p->start([](const ocslab::Sample&) {});
  CHECK_FALSE(st.available);
  CHECK_THAT(st.reason, Catch::Contains("lo"));
  p->stop();
  CHECK(r.create({"h", "firmware", {"lo"}, 1, {{"vport", 3}}}));
  CHECK_THROWS_WITH(r.create({"h", "firmware", {"lo"}, 1, {{"op_mod", "wan"}}}), Catch::Contains("'wan'"));
  CHECK_THROWS_WITH(r.create({"h", "firmware", {"lo"}, 1, {{"vport", 70000}}}), Catch::Contains("70000"));
  CHECK_THROWS_WITH(r.create({"h", "firmware", {"lo"}, 1, {{"vport", "three"}}}), Catch::Contains("bad params"));
  CHECK_THROWS_WITH(r.create({"h", "firmware", {}, 1, {}}), Catch::Contains("exactly one interface"));
}
