// `ocslab-agent forwarding` against this machine's kernel: a network namespace plays one fabric
// host (its if1 devices are veths to a peer namespace). Routes and permanent neighbours are
// applied, diffed, re-applied, changed, rolled back and cleared; a kill -9 and a SIGTERM in
// the middle of a big apply; a kernel refusal. Routes and neighbours the test adds itself
// (other protocols, not ocslab's) are checked unchanged before and after every step.
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>

#include <catch2/catch.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>
#include "ocslab/common/exit_code.h"

#include "ocslab/common/file.h"
#include "ocslab/forwarding/rule_plan.h"
#include "ocslab/testing/kernel_state.h"
#include "ocslab/testing/source_dir.h"
#include "ocslab/testing/wait.h"

using namespace ocslab::forwarding;
namespace fs = std::filesystem;

namespace {

struct Result {
  int rc = -1;
  std::string out;
  std::string err;
};

// Runs a shell command; stdout and stderr apart.
Result sh(const std::string& cmd) {
  static int n = 0;
  std::string base = fmt::format("/tmp/ocslab-t-fwdnl-it-{}-{}", ::getpid(), n++);
  int status = std::system((cmd + " >" + base + ".out 2>" + base + ".err").c_str());
  Result r{WIFEXITED(status) ? WEXITSTATUS(status) : -1, ocslab::read_file_or_empty(base + ".out"),
           ocslab::read_file_or_empty(base + ".err")};
  fs::remove(base + ".out");
  fs::remove(base + ".err");
  return r;
}

std::string must(const std::string& cmd) {
  Result r = sh(cmd);
  if (r.rc != 0) FAIL("command failed (" << r.rc << "): " << cmd << "\n" << r.out << r.err);
  return r.out;
}

std::string agent_path() {
  const char* d = std::getenv("OCSLAB_BIN_DIR");
  REQUIRE(d);
  return std::string(d) + "/ocslab-agent";
}

// A host namespace whose if1 devices are veths to a peer namespace, plus a state directory.
class Lab {
 public:
  // devs: (name, address/prefix)
  explicit Lab(const std::vector<std::pair<std::string, std::string>>& devs) {
    static int count = 0;
    ns = fmt::format("ocslab-t-fwdnl-{}-{}", ::getpid(), count);
    peer = ns + "p";
    state = fmt::format("/tmp/ocslab-t-fwdnl-state-{}-{}", ::getpid(), count++);
    fs::remove_all(state);
    must("ip netns add " + ns);
    must("ip netns add " + peer);
    std::ofstream host_batch(state + ".host"), peer_batch(state + ".peer");
    int i = 0;
    for (const auto& [dev, addr] : devs) {
      std::string p = fmt::format("x{}", i++);
      host_batch << "link add " << dev << " type veth peer name " << p << " netns " << peer << "\n"
                 << "addr add " << addr << " dev " << dev << "\n"
                 << "link set " << dev << " up\n";
      peer_batch << "link set " << p << " up\n";
    }
    host_batch.close();
    peer_batch.close();
    must("ip -n " + ns + " -batch " + state + ".host");
    must("ip -n " + peer + " -batch " + state + ".peer");
    fs::remove(state + ".host");
    fs::remove(state + ".peer");
    must("ip netns exec " + ns + " sysctl -qw net.ipv6.conf.all.disable_ipv6=1");
  }
  ~Lab() {
    sh("ip netns del " + ns);
    sh("ip netns del " + peer);
    fs::remove_all(state);
    std::string prefix = fs::path(state).filename().string() + "-";  // the test's fabric variants
    for (const auto& f : fs::directory_iterator(fs::path(state).parent_path()))
      if (f.path().filename().string().rfind(prefix, 0) == 0) fs::remove(f.path());
  }
  Lab(const Lab&) = delete;
  Lab& operator=(const Lab&) = delete;

  std::string agent_cmd(const std::string& args) const {
    return "ip netns exec " + ns + " " + agent_path() + " forwarding " + args + " --state-dir " + state;
  }
  Result agent(const std::string& args) const { return sh(agent_cmd(args)); }
  nlohmann::json ipj(const std::string& args) const {
    std::string out = must("ip -j -n " + ns + " " + args);
    return out.empty() ? nlohmann::json::array() : nlohmann::json::parse(out);
  }

  // What ocslab owns as seen by iproute2: proto 79 routes, and permanent neighbours except
  // the foreign ones the test made.
  std::set<std::string> owned_routes() const {
    std::set<std::string> s;
    for (const auto& r : ipj("route show table main proto 79"))
      s.insert(fmt::format("{}/32 dev {} src {}", r.at("dst").get<std::string>(), r.at("dev").get<std::string>(),
                           r.value("prefsrc", "")));
    return s;
  }
  std::set<std::string> owned_neighbours() const {
    std::set<std::string> s;
    for (const auto& n : ipj("neigh show nud permanent")) {
      std::string dst = n.at("dst");
      if (foreign_neigh.count(dst)) continue;
      s.insert(fmt::format("{} dev {} lladdr {}", dst, n.at("dev").get<std::string>(), n.value("lladdr", "")));
    }
    return s;
  }
  // Everything not ocslab's: the main table's other routes and the test's own neighbours, each
  // list sorted (the kernel's dump order changes as its tables grow, see kernel_state.h).
  std::string foreign() const {
    nlohmann::json routes = nlohmann::json::array(), neigh = nlohmann::json::array();
    for (const auto& r : ipj("route show table main"))
      if (r.value("protocol", "") != "79") routes.push_back(r);
    for (const auto& n : ipj("neigh show nud all"))
      if (foreign_neigh.count(n.at("dst"))) neigh.push_back(n);
    return ocslab::testing::sorted_entries(routes).dump() + "\n" + ocslab::testing::sorted_entries(neigh).dump();
  }
  // Adds the foreign routes and neighbours: another protocol, not permanent, or permanent for
  // addresses no plan uses.
  void add_foreign(const std::string& dev_a, const std::string& dev_b) {
    must(fmt::format("ip -n {} route add 192.168.77.0/24 dev {} proto static", ns, dev_a));
    must(fmt::format("ip -n {} route add 10.250.0.1/32 dev {}", ns, dev_b));
    must(fmt::format("ip -n {} neigh add 192.0.2.98 lladdr 02:ee:00:00:00:98 dev {} nud permanent", ns, dev_a));
    // A NOARP entry is not permanent: the kernel's periodic neighbour GC reaps it once it has
    // gone unused for gc_stale_time (60 s) while the table holds gc_thresh1 (128) entries or
    // more, which ocslab's thousands of permanent ones make true. Under ASan the kill -9 section
    // runs past 60 s and the kernel, not ocslab, removed it; keep it fresh for the test's life.
    must(fmt::format("ip netns exec {} sysctl -qw net.ipv4.neigh.{}.gc_stale_time=3600", ns, dev_b));
    must(fmt::format("ip -n {} neigh add 192.0.2.97 lladdr 02:ee:00:00:00:97 dev {} nud noarp", ns, dev_b));
    foreign_neigh = {"192.0.2.98", "192.0.2.97"};
    REQUIRE(foreign().find("192.168.77.0/24") != std::string::npos);
    REQUIRE(foreign().find("02:ee:00:00:00:97") != std::string::npos);
  }

  std::string ns, peer, state;
  std::set<std::string> foreign_neigh;
};

struct Expected {
  std::set<std::string> routes, neighbours;
};

Expected expected(const std::string& fabric_file, const std::string& host) {
  Fabric f = load_fabric_file(fabric_file);
  HostPlan p = make_plan(f, compute_routes(f)).host(host);
  Expected e;
  for (const auto& r : p.routes) e.routes.insert(fmt::format("{} dev {} src {}", r.dst, r.dev, r.src));
  for (const auto& n : p.neighbours) e.neighbours.insert(fmt::format("{} dev {} lladdr {}", n.dst, n.dev, n.lladdr));
  return e;
}

std::string source_file(const std::string& rel) { return ocslab::testing::source_dir() + "/" + rel; }

std::string write_file(const std::string& path, const std::string& text) {
  std::ofstream(path) << text;
  return path;
}

std::string replace_all(std::string s, const std::string& from, const std::string& to) {
  for (size_t i = s.find(from); i != std::string::npos; i = s.find(from, i + to.size())) s.replace(i, from.size(), to);
  return s;
}

// A complete graph of n hosts: host i's port p<j> faces host j's p<i>. h01 has n-1 if1s
// (e02..), so it gets a /32 route and a neighbour for all (n-1)^2 other addresses: every
// other host's address is a destination, reached directly or through its owner's neighbour.
// Host i != 1 has addresses 10.<i+shift>.<j>.1; h01's own stay put.
std::string complete_fabric(int n, int shift) {
  std::string y = "hosts:\n";
  for (int i = 1; i <= n; ++i) {
    y += fmt::format("  - name: h{:02}\n    ports:\n", i);
    for (int j = 1; j <= n; ++j) {
      if (j == i) continue;
      int a = i == 1 ? 1 : i + shift;
      y += fmt::format(
          "      - name: p{:02}\n        if1: {{name: e{:02}, ip: 10.{}.{}.1/24, mac: \"02:01:{:02x}:{:02x}:00:00\"}}\n"
          "        if2: {{name: e{:02}v, mac: \"02:02:{:02x}:{:02x}:{:02x}:00\"}}\n",
          j, j, a, j, i, j, j, i, j, shift);
    }
  }
  y += "circuits:\n";
  for (int i = 1; i <= n; ++i)
    for (int j = i + 1; j <= n; ++j) y += fmt::format("  - \"h{:02}:p{:02} <-> h{:02}:p{:02}\"\n", i, j, j, i);
  return y;
}

// Starts the agent in the background with the pause test hook; returns its pid once it has
// paused (ip netns exec execs the agent in place, so the pid is the agent's).
pid_t start_paused(const Lab& lab, const std::string& args, size_t pause_after, const std::string& err_file) {
  pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    ::setenv("OCSLAB_FORWARDING_TEST_PAUSE_AFTER", std::to_string(pause_after).c_str(), 1);
    int fd = ::open(err_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int null = ::open("/dev/null", O_WRONLY);
    ::dup2(null, 1);
    ::dup2(fd, 2);
    std::string cmd = lab.agent_cmd(args);
    ::execl("/bin/sh", "sh", "-c", ("exec " + cmd).c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  std::string marker = fmt::format("test hook: paused after {} changes", pause_after);
  bool ended = false;
  bool paused = ocslab::testing::poll_until(
      [&] {
        if (ocslab::read_file_or_empty(err_file).find(marker) != std::string::npos) return true;
        ended = ended || ::waitpid(pid, nullptr, WNOHANG) == pid;
        return ended;
      },
      std::chrono::seconds(180), std::chrono::milliseconds(20));
  if (ended) FAIL("agent ended before pausing:\n" << ocslab::read_file_or_empty(err_file));
  if (!paused) {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
    FAIL("agent did not pause within 180 s:\n" << ocslab::read_file_or_empty(err_file));
  }
  CHECK(ocslab::read_file_or_empty(fmt::format("/proc/{}/comm", pid)).rfind("ocslab-agent", 0) == 0);
  return pid;
}

}  // namespace

TEST_CASE("forwarding: apply, diff, re-apply, change, rollback, clear on ring4's h1; foreign state untouched") {
  Lab lab({{"eth1", "10.0.0.10/24"}, {"eth2", "10.0.0.11/24"}});
  lab.add_foreign("eth1", "eth2");
  const std::string foreign = lab.foreign();
  std::string ring4 = source_file("forwarding/examples/ring4.yaml");
  std::string ring4b = write_file(lab.state + "-ring4b.yaml", replace_all(ocslab::read_file_or_empty(ring4),
                                                                          "02:00:00:00:02:10", "02:00:00:00:02:1a"));
  Expected e4 = expected(ring4, "h1"), e4b = expected(ring4b, "h1");
  REQUIRE(e4.routes.size() == 6);
  REQUIRE(e4.neighbours.size() == 6);
  REQUIRE(e4.neighbours != e4b.neighbours);

  // A foreign route where the plan needs one: refused before anything changes.
  must("ip -n " + lab.ns + " route add 10.0.0.20/32 dev eth1 proto static");
  Result r = lab.agent("apply --fabric " + ring4 + " --host h1 --no-relay");
  CHECK(r.rc == 5);
  CHECK_THAT(r.err, Catch::Contains("10.0.0.20/32 dev eth1 proto 4, which is not ocslab's"));
  CHECK(lab.owned_routes().empty());
  CHECK(lab.owned_neighbours().empty());
  must("ip -n " + lab.ns + " route del 10.0.0.20/32 dev eth1 proto static");
  CHECK(lab.foreign() == foreign);

  r = lab.agent("apply --fabric " + ring4 + " --host h1 --no-relay");
  REQUIRE(r.rc == 0);
  CHECK_THAT(r.out, Catch::Contains("apply: host h1: 12 change(s) (routes +6 ~0 -0, neighbours +6 ~0 -0)"));
  CHECK(lab.owned_routes() == e4.routes);
  CHECK(lab.owned_neighbours() == e4.neighbours);
  CHECK(lab.foreign() == foreign);

  r = lab.agent("diff --json --fabric " + ring4 + " --host h1 --no-relay");
  REQUIRE(r.rc == 0);
  auto j = nlohmann::json::parse(r.out);
  CHECK(j["changes"]["changes"] == 0);
  CHECK(j["not_programmed"]["filters"] == 4);
  std::string journal = ocslab::read_file_or_empty(lab.state + "/journal.json");
  r = lab.agent("apply --fabric " + ring4 + " --host h1 --no-relay");
  REQUIRE(r.rc == 0);
  CHECK_THAT(r.out, Catch::Contains("apply: host h1: no changes"));
  CHECK(ocslab::read_file_or_empty(lab.state + "/journal.json") == journal);  // nothing changed, not even the journal
  CHECK(lab.owned_routes() == e4.routes);
  CHECK(lab.foreign() == foreign);

  // h2:p0's if2 MAC changes: exactly the two neighbours sent through it change.
  r = lab.agent("diff --json --fabric " + ring4b + " --host h1 --no-relay");
  REQUIRE(r.rc == 0);
  j = nlohmann::json::parse(r.out);
  CHECK(j["changes"]["changes"] == 2);
  r = lab.agent("apply --json --fabric " + ring4b + " --host h1 --no-relay");
  REQUIRE(r.rc == 0);
  j = nlohmann::json::parse(r.out);
  CHECK(j["changes"]["routes"].empty());
  REQUIRE(j["changes"]["neighbours"].size() == 2);
  for (const auto& c : j["changes"]["neighbours"]) {
    CHECK(c["op"] == "replace");
    CHECK(c["rule"]["lladdr"] == "02:00:00:00:02:1a");
    CHECK(c["old"]["lladdr"] == "02:00:00:00:02:10");
  }
  CHECK(lab.owned_routes() == e4b.routes);
  CHECK(lab.owned_neighbours() == e4b.neighbours);
  CHECK(lab.foreign() == foreign);

  r = lab.agent("rollback");
  REQUIRE(r.rc == 0);
  CHECK(lab.owned_routes() == e4.routes);
  CHECK(lab.owned_neighbours() == e4.neighbours);
  CHECK(lab.foreign() == foreign);
  r = lab.agent("rollback");
  CHECK(r.rc == 5);
  CHECK_THAT(r.err, Catch::Contains("nothing to roll back"));

  r = lab.agent("clear");
  REQUIRE(r.rc == 0);
  CHECK_THAT(r.out, Catch::Contains("routes +0 ~0 -6, neighbours +0 ~0 -6"));
  CHECK(lab.owned_routes().empty());
  CHECK(lab.owned_neighbours().empty());
  CHECK(lab.foreign() == foreign);
  r = lab.agent("rollback");  // undoes the clear
  REQUIRE(r.rc == 0);
  CHECK(lab.owned_routes() == e4.routes);
  CHECK(lab.owned_neighbours() == e4.neighbours);
  CHECK(lab.foreign() == foreign);
}

TEST_CASE("forwarding: a kernel refusal rolls back and shows the kernel's message") {
  Lab lab({{"eth1", "10.0.0.10/24"}, {"eth2", "10.0.0.11/24"}});
  lab.add_foreign("eth1", "eth1");
  std::string ring4 = source_file("forwarding/examples/ring4.yaml");
  std::string ring4b = write_file(lab.state + "-ring4b.yaml", replace_all(ocslab::read_file_or_empty(ring4),
                                                                          "02:00:00:00:02:10", "02:00:00:00:02:1a"));
  REQUIRE(lab.agent("apply --fabric " + ring4 + " --host h1 --no-relay").rc == 0);
  // eth2 goes down: the kernel drops what went through it; routes through it are refused now.
  must("ip -n " + lab.ns + " link set eth2 down");
  auto routes = lab.owned_routes();
  auto neighbours = lab.owned_neighbours();
  const std::string foreign = lab.foreign();
  CHECK(routes.size() == 3);
  Result r = lab.agent("apply --fabric " + ring4b + " --host h1 --no-relay");
  CHECK(r.rc == 5);
  CHECK_THAT(r.err, Catch::Contains("kernel refused 'ip route replace 10.0.0.20/32 dev eth2 src 10.0.0.11 proto 79'"));
  CHECK_THAT(r.err, Catch::Contains("(kernel: Device for nexthop is not up)"));
  CHECK_THAT(r.err, Catch::Contains("the previous state was restored"));
  CHECK(lab.owned_routes() == routes);
  CHECK(lab.owned_neighbours() == neighbours);
  CHECK(lab.foreign() == foreign);

  // A device the namespace does not have: named, nothing changed.
  std::string bad = write_file(lab.state + "-bad.yaml",
                               replace_all(ocslab::read_file_or_empty(ring4b), "{name: eth1,", "{name: nosuch1,"));
  r = lab.agent("apply --fabric " + bad + " --host h1 --no-relay");
  CHECK(r.rc == 5);
  CHECK_THAT(r.err, Catch::Contains("no network device 'nosuch1' in this namespace"));
  CHECK(lab.owned_routes() == routes);
  CHECK(lab.owned_neighbours() == neighbours);
  CHECK(lab.foreign() == foreign);
}

// This machine's kernel has clsact but no flower: a relay host's apply creates its if2
// macvlans and clsacts, the kernel refuses the first flower filter, and everything ocslab made
// is taken away again. A macvlan of that name that ocslab did not create is never touched.
TEST_CASE("forwarding: relay side on a kernel without flower fails with the kernel's message and rolls back") {
  Lab lab({{"eth1", "10.0.0.10/24"}, {"eth2", "10.0.0.11/24"}});
  lab.add_foreign("eth1", "eth1");
  const std::string foreign = lab.foreign();
  std::string ring4 = source_file("forwarding/examples/ring4.yaml");
  auto links = [&] {
    std::set<std::string> names;
    for (const auto& l : lab.ipj("link show")) names.insert(l["ifname"].get<std::string>());
    return names;
  };
  auto qdiscs = [&](const std::string& dev) { return must("tc -n " + lab.ns + " qdisc show dev " + dev); };
  const auto links_before = links();
  REQUIRE(links_before.count("eth1") == 1);
  REQUIRE(links_before.count("eth1v") == 0);

  Result r = lab.agent("diff --fabric " + ring4 + " --host h1 --if2-macvlan");
  REQUIRE(r.rc == 0);
  CHECK_THAT(r.out, Catch::Contains("macvlans +2 ~0 -0, qdiscs +2 -0, filters +4 ~0 -0"));
  CHECK_THAT(r.out,
             Catch::Contains("ip link add link eth1 name eth1v address 02:00:00:00:01:10 type macvlan mode private"));

  r = lab.agent("apply --fabric " + ring4 + " --host h1 --if2-macvlan");
  CHECK(r.rc == 5);
  CHECK_THAT(r.err, Catch::Contains("TC classifier not found"));
  CHECK_THAT(r.err, Catch::Contains("after 4 of 20 changes"));  // 2 macvlans + 2 clsacts made, then the filters
  CHECK_THAT(r.err, Catch::Contains("the previous state was restored"));
  CHECK(links() == links_before);  // the macvlans ocslab created are gone again
  CHECK(lab.owned_routes().empty());
  CHECK(lab.owned_neighbours().empty());
  CHECK(lab.foreign() == foreign);
  CHECK(!fs::exists(lab.state + "/journal.json"));  // no earlier operation: no journal

  // Someone else's macvlan named like an if2: refused before any change, left as it was.
  must("ip -n " + lab.ns + " link add link eth1 name eth1v address 02:aa:00:00:00:01 type macvlan mode bridge");
  must("tc -n " + lab.ns + " qdisc add dev eth1v clsact");
  const std::string theirs = must("ip -n " + lab.ns + " -d link show eth1v");
  r = lab.agent("apply --fabric " + ring4 + " --host h1 --if2-macvlan");
  CHECK(r.rc == 5);
  CHECK_THAT(r.err, Catch::Contains("an interface eth1v exists and is not ocslab's"));
  CHECK(must("ip -n " + lab.ns + " -d link show eth1v") == theirs);
  CHECK_THAT(qdiscs("eth1v"), Catch::Contains("clsact"));
  CHECK(links().count("eth2v") == 0);
  // Without --if2-macvlan the plan wants a clsact on eth1v, which is someone else's: refused.
  r = lab.agent("apply --fabric " + ring4 + " --host h1");
  CHECK(r.rc == 5);
  CHECK_THAT(r.err, Catch::Contains("eth1v already has a clsact qdisc that is not ocslab's"));
  CHECK_THAT(qdiscs("eth1v"), Catch::Contains("clsact"));
  // clear removes only what ocslab owns: nothing here.
  r = lab.agent("clear --host h1");
  CHECK(r.rc == 0);
  CHECK(must("ip -n " + lab.ns + " -d link show eth1v") == theirs);
  CHECK_THAT(qdiscs("eth1v"), Catch::Contains("clsact"));
  CHECK(lab.foreign() == foreign);
}

// SIGTERM on the relay side: after the two macvlans and one clsact, the apply stops and takes
// them away again itself (exit 5); no flower needed, the filters are never reached.
TEST_CASE("forwarding: SIGTERM after the first relay objects restores, macvlans and clsact included") {
  Lab lab({{"eth1", "10.0.0.10/24"}, {"eth2", "10.0.0.11/24"}});
  std::string ring4 = source_file("forwarding/examples/ring4.yaml");
  auto links = [&] {
    std::set<std::string> names;
    for (const auto& l : lab.ipj("link show")) names.insert(l["ifname"].get<std::string>());
    return names;
  };
  const auto before = links();
  std::string err = lab.state + "-sigterm.err";
  pid_t pid = start_paused(lab, "apply --fabric " + ring4 + " --host h1 --if2-macvlan", 3, err);
  auto during = links();
  CHECK(during.count("eth1v") == 1);
  CHECK(during.count("eth2v") == 1);
  CHECK_THAT(must("tc -n " + lab.ns + " qdisc show dev eth1v"), Catch::Contains("clsact"));
  REQUIRE(fs::exists(lab.state + "/journal.json"));
  CHECK_THAT(ocslab::read_file_or_empty(lab.state + "/journal.json"), Catch::Contains("\"applying\""));
  ::kill(pid, SIGTERM);
  int status = 0;
  ::waitpid(pid, &status, 0);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 5);
  CHECK_THAT(ocslab::read_file_or_empty(err), Catch::Contains("interrupted by SIGTERM"));
  CHECK_THAT(ocslab::read_file_or_empty(err), Catch::Contains("after 3 of 20 changes"));
  CHECK(links() == before);
  CHECK(lab.owned_routes().empty());
  CHECK(!fs::exists(lab.state + "/journal.json"));
}

TEST_CASE("forwarding: verify reports drift read-only, with exit 3") {
  Lab lab({{"eth1", "10.0.0.10/24"}, {"eth2", "10.0.0.11/24"}});
  std::string ring4 = source_file("forwarding/examples/ring4.yaml");
  REQUIRE(lab.agent("apply --fabric " + ring4 + " --host h1 --no-relay").rc == 0);
  Result r = lab.agent("verify --fabric " + ring4 + " --host h1 --no-relay");
  CHECK(r.rc == 0);
  CHECK_THAT(r.out, Catch::Contains("verify: host h1: in sync with the plan"));
  const std::string journal = ocslab::read_file_or_empty(lab.state + "/journal.json");
  // Someone deletes one of ocslab's routes: verify names the fix and changes nothing.
  must("ip -n " + lab.ns + " route del 10.0.0.20/32 dev eth2 proto 79");
  auto routes = lab.owned_routes();
  r = lab.agent("verify --fabric " + ring4 + " --host h1 --no-relay");
  CHECK(r.rc == ocslab::kExitMismatch);  // 7: a check found a difference (common/exit_code.h)
  CHECK_THAT(r.out, Catch::Contains("verify: host h1: 1 difference(s) (routes +1 ~0 -0"));
  CHECK_THAT(r.out, Catch::Contains("ip route replace 10.0.0.20/32 dev eth2 src 10.0.0.11 proto 79"));
  r = lab.agent("verify --json --fabric " + ring4 + " --host h1 --no-relay");
  CHECK(r.rc == ocslab::kExitMismatch);
  auto j = nlohmann::json::parse(r.out);
  CHECK(j["in_sync"] == false);
  CHECK(j["diff"]["changes"] == 1);
  CHECK(j["filters"].empty());  // --no-relay: no filters looked at
  CHECK(lab.owned_routes() == routes);
  CHECK(ocslab::read_file_or_empty(lab.state + "/journal.json") == journal);
  // Without --no-relay the plan's relay side is missing too (this kernel has none of it).
  r = lab.agent("verify --fabric " + ring4 + " --host h1");
  CHECK(r.rc == ocslab::kExitMismatch);
  CHECK_THAT(r.out, Catch::Contains("qdiscs +2 -0, filters +4 ~0 -0"));
}

TEST_CASE("forwarding: kill -9 and SIGTERM in the middle of a big apply") {
  const int n = 48;  // h01 gets 47 * 47 = 2209 routes and as many neighbours
  std::vector<std::pair<std::string, std::string>> devs;
  for (int j = 2; j <= n; ++j) devs.push_back({fmt::format("e{:02}", j), fmt::format("10.1.{}.1/24", j)});
  Lab lab(devs);
  lab.add_foreign("e02", "e03");
  const std::string foreign = lab.foreign();
  std::string a = write_file(lab.state + "-a.yaml", complete_fabric(n, 0));
  std::string b = write_file(lab.state + "-b.yaml", complete_fabric(n, 100));
  Expected ea = expected(a, "h01");
  REQUIRE(ea.routes.size() == 2209);
  Result r = lab.agent("apply --fabric " + a + " --host h01 --no-relay");
  REQUIRE(r.rc == 0);
  CHECK(lab.owned_routes() == ea.routes);
  CHECK(lab.owned_neighbours() == ea.neighbours);
  CHECK(lab.foreign() == foreign);

  SECTION("kill -9 after 3000 of 8836 changes, then rollback") {
    std::string err = lab.state + "-kill.err";
    pid_t pid = start_paused(lab, "apply --fabric " + b + " --host h01 --no-relay", 3000, err);
    REQUIRE(::kill(pid, SIGKILL) == 0);
    int status = 0;
    ::waitpid(pid, &status, 0);
    CHECK((WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL));
    // Half-applied: b's 2209 neighbours and 791 of its routes are in, a's all still there.
    CHECK(lab.owned_routes().size() == 2209 + 791);
    // Apply refuses to build on a half-finished one.
    r = lab.agent("apply --fabric " + a + " --host h01 --no-relay");
    CHECK(r.rc == 5);
    CHECK_THAT(r.err, Catch::Contains("did not finish"));
    r = lab.agent("rollback");
    REQUIRE(r.rc == 0);
    CHECK_THAT(r.out, Catch::Contains("routes +0 ~0 -791, neighbours +0 ~0 -2209"));
    CHECK(lab.owned_routes() == ea.routes);
    CHECK(lab.owned_neighbours() == ea.neighbours);
    CHECK(lab.foreign() == foreign);
    fs::remove(err);
  }
  SECTION("SIGTERM after 1000 changes restores, and the earlier apply can still be rolled back") {
    std::string err = lab.state + "-term.err";
    pid_t pid = start_paused(lab, "apply --fabric " + b + " --host h01 --no-relay", 1000, err);
    REQUIRE(::kill(pid, SIGTERM) == 0);
    int status = 0;
    ::waitpid(pid, &status, 0);
    REQUIRE(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 5);
    CHECK_THAT(ocslab::read_file_or_empty(err),
               Catch::Contains("interrupted by SIGTERM; the previous state was restored"));
    CHECK(lab.owned_routes() == ea.routes);
    CHECK(lab.owned_neighbours() == ea.neighbours);
    CHECK(lab.foreign() == foreign);
    r = lab.agent("rollback");  // the last completed operation is a's apply: back to nothing
    REQUIRE(r.rc == 0);
    CHECK(lab.owned_routes().empty());
    CHECK(lab.owned_neighbours().empty());
    CHECK(lab.foreign() == foreign);
    fs::remove(err);
  }
  fs::remove(a);
  fs::remove(b);
}

// The runner names each lab-wide apply (--op-id) and retries it once over a fresh SSH session
// when the first one drops. The retry must say the apply is in the journal (so the lab-wide
// rollback includes this host), and a rollback with the id must undo that apply only, once.
TEST_CASE("forwarding: an apply retried under its op id is journaled; rollback --op-id undoes only that one") {
  Lab lab({{"eth1", "10.0.0.10/24"}, {"eth2", "10.0.0.11/24"}});
  const std::string foreign = lab.foreign();
  std::string ring4 = source_file("forwarding/examples/ring4.yaml");
  std::string ring4b = write_file(lab.state + "-ring4b.yaml", replace_all(ocslab::read_file_or_empty(ring4),
                                                                          "02:00:00:00:02:10", "02:00:00:00:02:1a"));
  Expected e4 = expected(ring4, "h1"), e4b = expected(ring4b, "h1");
  auto json_of = [](const Result& r) {
    INFO(r.out << r.err);
    REQUIRE(r.rc == 0);
    return nlohmann::json::parse(r.out);
  };

  auto j = json_of(lab.agent("apply --json --op-id apply-1-x --fabric " + ring4 + " --host h1 --no-relay"));
  CHECK(j["changes"]["changes"] == 12);
  CHECK(j["journaled"] == true);
  CHECK(nlohmann::json::parse(ocslab::read_file_or_empty(lab.state + "/journal.json"))["op_id"] == "apply-1-x");
  // The retry (the first answer was lost with its session): nothing left to do, but journaled.
  j = json_of(lab.agent("apply --json --op-id apply-1-x --fabric " + ring4 + " --host h1 --no-relay"));
  CHECK(j["changes"]["changes"] == 0);
  CHECK(j["journaled"] == true);
  CHECK_THAT(j["note"].get<std::string>(),
             Catch::Contains("already done by an earlier attempt of operation apply-1-x"));
  // Another operation that happens to find the same state did not journal anything.
  j = json_of(lab.agent("apply --json --op-id apply-2-y --fabric " + ring4 + " --host h1 --no-relay"));
  CHECK(j["journaled"] == false);
  // A rollback of an operation that is not the journal's last is a no-op that says so.
  j = json_of(lab.agent("rollback --json --op-id apply-2-y"));
  CHECK(j["changes"]["changes"] == 0);
  CHECK_THAT(j["note"].get<std::string>(),
             Catch::Contains(
                 "nothing to roll back for operation apply-2-y: the journal's last operation is apply 'apply-1-x'"));
  CHECK(lab.owned_neighbours() == e4.neighbours);

  j = json_of(lab.agent("apply --json --op-id apply-3-z --fabric " + ring4b + " --host h1 --no-relay"));
  CHECK(j["changes"]["changes"] == 2);
  j = json_of(lab.agent("rollback --json --op-id apply-1-x"));  // older: never undone by id
  CHECK(j["changes"]["changes"] == 0);
  CHECK(lab.owned_neighbours() == e4b.neighbours);
  j = json_of(lab.agent("rollback --json --op-id apply-3-z"));
  CHECK(j["changes"]["changes"] == 2);
  CHECK(lab.owned_neighbours() == e4.neighbours);
  CHECK(lab.owned_routes() == e4.routes);
  // Retried too: the second rollback of the same id changes nothing (exit 0, a note).
  j = json_of(lab.agent("rollback --json --op-id apply-3-z"));
  CHECK(j["changes"]["changes"] == 0);
  CHECK_THAT(j["note"].get<std::string>(), Catch::Contains("operation apply-3-z was already rolled back"));
  CHECK(lab.owned_neighbours() == e4.neighbours);
  CHECK(lab.foreign() == foreign);

  Result bad = lab.agent("apply --op-id 'a b' --fabric " + ring4 + " --host h1 --no-relay");
  CHECK(bad.rc == ocslab::kExitUsage);
  CHECK_THAT(bad.err, Catch::Contains("--op-id 'a b': an operation id has only letters, digits and . _ : -"));
  lab.agent("clear");
}

TEST_CASE("forwarding: the state directory is checked and its lock and journal never followed through a symlink",
          "[forwarding][state-files]") {
  // As root, the lock and the journal's temporary file were opened by name, following symlinks:
  // whoever could write into the state directory could have root write over any file.
  Lab lab({{"eth1", "10.0.0.10/24"}, {"eth2", "10.0.0.11/24"}});
  std::string ring4 = source_file("forwarding/examples/ring4.yaml");
  const std::string apply = "apply --fabric " + ring4 + " --host h1 --no-relay";
  const std::string target = lab.state + "-target";  // removed by ~Lab (the state's name + "-")
  auto plant = [&](const std::string& name) {
    fs::remove_all(lab.state);
    REQUIRE(::mkdir(lab.state.c_str(), 0700) == 0);
    std::ofstream(target) << "keep me\n";
    REQUIRE(::symlink(target.c_str(), (lab.state + "/" + name).c_str()) == 0);
  };

  plant("lock");
  Result r = lab.agent(apply);
  CHECK(r.rc != 0);
  CHECK_THAT(r.err, Catch::Contains("forwarding lock: " + lab.state + "/lock is a symlink (to " + target +
                                    "); refusing to follow it"));
  CHECK(ocslab::read_file(target) == "keep me\n");
  CHECK(lab.owned_routes().empty());  // refused before any change

  // The old temporary name, planted: the journal's temporary file is new (O_EXCL, a unique
  // name), so the apply goes on and the target is not written.
  plant("journal.json.tmp");
  r = lab.agent(apply);
  CHECK(r.rc == 0);
  CHECK(ocslab::read_file(target) == "keep me\n");
  CHECK(fs::is_symlink(lab.state + "/journal.json.tmp"));
  struct stat st {};
  REQUIRE(::lstat((lab.state + "/journal.json").c_str(), &st) == 0);
  CHECK(S_ISREG(st.st_mode));
  const auto routes = lab.owned_routes();
  CHECK_FALSE(routes.empty());

  // A journal that is a symlink is not read: it names what a rollback deletes.
  fs::copy_file(lab.state + "/journal.json", target, fs::copy_options::overwrite_existing);
  const std::string journal = ocslab::read_file(target);
  fs::remove(lab.state + "/journal.json");
  REQUIRE(::symlink(target.c_str(), (lab.state + "/journal.json").c_str()) == 0);
  r = lab.agent("rollback");
  CHECK(r.rc != 0);
  CHECK_THAT(r.err, Catch::Contains("forwarding journal '" + lab.state + "/journal.json' is a symbolic link"));
  CHECK(ocslab::read_file(target) == journal);
  CHECK(lab.owned_routes() == routes);  // nothing rolled back through it
  fs::remove(lab.state + "/journal.json");
  REQUIRE(lab.agent("clear").rc == 0);

  // A state directory others may write into, or someone else's, is refused before any change.
  fs::remove_all(lab.state);
  REQUIRE(::mkdir(lab.state.c_str(), 0700) == 0);
  REQUIRE(::chmod(lab.state.c_str(), 0777) == 0);
  r = lab.agent(apply);
  CHECK(r.rc != 0);
  CHECK_THAT(r.err, Catch::Contains("forwarding state directory: " + lab.state +
                                    " has mode 0777: others may write into it; refusing to use it"));
  REQUIRE(::chmod(lab.state.c_str(), 0755) == 0);
  REQUIRE(::chown(lab.state.c_str(), 65534, 65534) == 0);
  r = lab.agent(apply);
  CHECK(r.rc != 0);
  CHECK_THAT(r.err, Catch::Contains(lab.state + " is owned by uid 65534") && Catch::Contains("refusing to use it"));
  CHECK(lab.owned_routes().empty());
  // Made by the agent itself: 0700, root's.
  fs::remove_all(lab.state);
  REQUIRE(lab.agent(apply).rc == 0);
  REQUIRE(::stat(lab.state.c_str(), &st) == 0);
  CHECK((st.st_mode & 07777) == 0700);
  CHECK(st.st_uid == 0u);
  lab.agent("clear");
}

TEST_CASE(
    "forwarding: a plan naming the management interface, a foreign device or another route protocol is "
    "refused before anything is installed",
    "[forwarding][plan-check]") {
  // The plan comes from standard input, as root through sudo: without a check any main-table
  // route on any device could be installed, and one of another protocol never removed again.
  Lab lab({{"eth1", "10.0.0.10/24"},
           {"eth2", "10.0.0.11/24"},
           {"mgmt0", "192.168.200.2/24"},
           {"docker0", "172.17.0.1/16"}});
  must(fmt::format("ip -n {} route add default via 192.168.200.1 dev mgmt0", lab.ns));
  auto kernel = [&] {
    return ocslab::testing::sorted_entries(lab.ipj("route show table all")).dump() + "\n" +
           ocslab::testing::sorted_entries(lab.ipj("neigh show nud all")).dump();
  };
  const std::string before = kernel();
  std::string ring4 = source_file("forwarding/examples/ring4.yaml");
  nlohmann::json good = nlohmann::json::parse(must(lab.agent_cmd("plan --json --fabric " + ring4 + " --host h1")));
  const std::string dst = good["routes"][0]["dst"], dev = good["routes"][0]["dev"];

  auto apply = [&](const std::function<void(nlohmann::json&)>& change) {
    nlohmann::json p = good;
    change(p);
    return lab.agent("apply --no-relay --plan " + write_file(lab.state + "-plan.json", p.dump()));
  };
  auto refused = [&](const Result& r, const std::string& why) {
    INFO(r.out << r.err);
    CHECK(r.rc == ocslab::kExitFailed);
    CHECK_THAT(r.err,
               Catch::Contains("refused: the plan for host h1: " + why) && Catch::Contains("; nothing was installed"));
    CHECK(kernel() == before);
    CHECK_FALSE(fs::exists(lab.state + "/journal.json"));
  };
  refused(apply([](nlohmann::json& p) { p["routes"][0]["dev"] = "mgmt0"; }),
          "route " + dst + " dev mgmt0: mgmt0 is the management interface (it holds the default route)");
  refused(
      apply([](nlohmann::json& p) { p["routes"][0]["protocol"] = 3; }),
      "route " + dst + " dev " + dev + ": protocol 3 is not ocslab's (79): rollback and clear would never remove it");
  refused(apply([](nlohmann::json& p) { p["routes"][0]["dst"] = "0.0.0.0/0"; }),
          "route 0.0.0.0/0 dev " + dev + ": not an IPv4 /32 host route");
  refused(apply([](nlohmann::json& p) { p["routes"][0]["dev"] = "docker0"; }),
          "route " + dst + " dev docker0: src " + good["routes"][0]["src"].get<std::string>() +
              " is not an address of docker0");
  refused(apply([](nlohmann::json& p) { p["neighbours"][0]["dev"] = "mgmt0"; }),
          "neighbour 10.0.0.20 dev mgmt0: mgmt0 is the management interface");
  refused(apply([](nlohmann::json& p) { p["neighbours"][0]["dev"] = "docker0"; }),
          "neighbour 10.0.0.20 dev docker0: docker0 is not one of the plan's own NICs");
  refused(apply([](nlohmann::json& p) { p["filters"][0]["redirect_dev"] = "mgmt0"; }),
          "filter 10.0.0.20/32 on eth1v -> mgmt0: mgmt0 is the management interface");

  // The fabric's own plan still goes through, beside a management interface.
  Result ok = lab.agent("apply --no-relay --plan " + write_file(lab.state + "-plan.json", good.dump()));
  INFO(ok.out << ok.err);
  CHECK(ok.rc == 0);
  CHECK(lab.owned_routes() == expected(ring4, "h1").routes);
  REQUIRE(lab.agent("clear").rc == 0);
}
