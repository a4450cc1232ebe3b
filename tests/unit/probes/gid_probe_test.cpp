// The GID probe against fake sysfs trees laid out as the kernel lays out
// /sys/class/infiniband/<dev>/ports/<p>/{gids,gid_attrs/ndevs,gid_attrs/types}/<i>: the
// parsers, the table reader, the diff, the probe's rows for an address removed and re-added at
// another index (and none without a change), and the neighbour parser and dump on loopback.
#include "ocslab/probes/gid_probe.h"

#include <linux/neighbour.h>
#include <linux/rtnetlink.h>
#include <net/if.h>
#include <sys/socket.h>

#include <catch2/catch.hpp>
#include <condition_variable>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>

#include "ocslab/common/netlink_socket.h"
#include "ocslab/testing/sshd_fixture.h"
#include "ocslab/testing/wait.h"

using namespace ocslab::probes;
namespace fs = std::filesystem;

// Named, so that the helpers do not meet the other tests' in the unity build.
namespace gid_probe_test {

namespace {

constexpr const char* kZero = "0000:0000:0000:0000:0000:0000:0000:0000\n";
constexpr const char* kLinkLocal = "fe80:0000:0000:0000:5054:00ff:fe12:3401\n";
constexpr const char* kV4 = "0000:0000:0000:0000:0000:ffff:0a0a:0001\n";  // ::ffff:10.10.0.1

void put(const fs::path& p, const std::string& text) {
  fs::create_directories(p.parent_path());
  std::ofstream(p) << text;
}

// A device with one port and `size` slots, all empty.
struct FakeDevice {
  fs::path port;
  FakeDevice(const std::string& root, const std::string& dev, int size) : port(fs::path(root) / dev / "ports" / "1") {
    for (int i = 0; i < size; ++i) put(port / "gids" / std::to_string(i), kZero);
  }
  // The kernel's slot in use: its netdev and type, then the GID (a probe polling meanwhile sees
  // the slot empty until the GID is written).
  void set(int i, const char* gid, const std::string& ndev, const std::string& type = "RoCE v2") {
    put(port / "gid_attrs" / "ndevs" / std::to_string(i), ndev + "\n");
    put(port / "gid_attrs" / "types" / std::to_string(i), type + "\n");
    put(port / "gids" / std::to_string(i), gid);
  }
  // A free slot: zeros, and the attribute files fail to read (here: are absent).
  void clear(int i) {
    put(port / "gids" / std::to_string(i), kZero);
    fs::remove(port / "gid_attrs" / "ndevs" / std::to_string(i));
    fs::remove(port / "gid_attrs" / "types" / std::to_string(i));
  }
};

struct Collected {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<ocslab::Sample> samples;
  SampleSink sink() {
    return [this](const ocslab::Sample& s) {
      std::lock_guard lock(mu);
      samples.push_back(s);
      cv.notify_all();
    };
  }
  bool await_samples(size_t n) {
    std::unique_lock lock(mu);
    // load-safe: an event wait (the sink's notify); 10 s is its hang guard.
    return cv.wait_for(lock, std::chrono::seconds(10), [&] { return samples.size() >= n; });
  }
  std::vector<ocslab::Sample> copy() {
    std::lock_guard lock(mu);
    return samples;
  }
};

// The probe offers no event for a quiet poll: its own count, polled.
bool wait_polls(const GidProbe& p, uint64_t n) {
  return ocslab::testing::poll_until([&] { return p.polls() >= n; }, std::chrono::seconds(10));
}

}  // namespace

TEST_CASE("gid: sysfs GID text, types and addresses", "[gid]") {
  auto g = parse_sysfs_gid(kV4);
  REQUIRE(g);
  CHECK(gid_address(*g) == "::ffff:10.10.0.1");
  CHECK_FALSE(gid_link_local(*g));
  auto ll = parse_sysfs_gid(kLinkLocal);
  REQUIRE(ll);
  CHECK(gid_address(*ll) == "fe80::5054:ff:fe12:3401");
  CHECK(gid_link_local(*ll));
  CHECK(gid_empty(*parse_sysfs_gid(kZero)));
  CHECK_FALSE(parse_sysfs_gid("fe80::1\n"));
  CHECK_FALSE(parse_sysfs_gid("fe80:0000:0000:0000:5054:00ff:fe12:340g\n"));
  CHECK_FALSE(parse_sysfs_gid("fe80-0000:0000:0000:5054:00ff:fe12:3401\n"));
  CHECK_FALSE(parse_sysfs_gid(""));
  CHECK(parse_gid_type("RoCE v2\n") == GidType::kRoceV2);
  CHECK(parse_gid_type("IB/RoCE v1\n") == GidType::kRoceV1);
  CHECK(parse_gid_type("RoCE v3") == GidType::kUnknown);
  CHECK(std::string(gid_type_name(GidType::kRoceV2)) == "roce_v2");
}

TEST_CASE("gid: the ports that serve an interface, and its entries only", "[gid]") {
  ocslab::testing::TempDir tmp;
  const std::string root = tmp.path() + "/class/infiniband";
  FakeDevice a(root, "rxe_eth1", 8), b(root, "rxe_eth2", 8);
  a.set(0, kLinkLocal, "eth1");
  a.set(1, kV4, "eth1");
  a.set(2, "0000:0000:0000:0000:0000:ffff:0a0b:0001\n", "eth1.100");  // a VLAN's entry on the same port
  b.set(0, "fe80:0000:0000:0000:5054:00ff:fe12:3402\n", "eth2");
  fs::create_directories(root + "/bad name/ports/1");  // not a plain word: skipped

  auto ports = find_gid_ports("eth1", root);
  REQUIRE(ports.size() == 1);
  CHECK(ports[0].device == "rxe_eth1");
  CHECK(ports[0].port == 1);
  CHECK(ports[0].table_size == 8);
  CHECK(find_gid_ports("eth3", root).empty());

  GidTableReader r(root, "eth1", ports);
  auto t = r.read(true);
  REQUIRE(t.size() == 2);
  CHECK(t[0].index == 0);
  CHECK(t[1].index == 1);
  CHECK(t[1].type == GidType::kRoceV2);
  CHECK(gid_address(t[1].gid) == "::ffff:10.10.0.1");
  CHECK(r.errors().empty());

  SECTION("no change: the same table, no diff") {
    auto again = r.read(false);
    CHECK(again == t);
    CHECK(diff_gid_tables(t, again).empty());
  }
  SECTION("the address removed and re-added at another index: a removal and an addition") {
    a.clear(1);
    a.set(3, kV4, "eth1");
    auto now = r.read(false);
    auto d = diff_gid_tables(t, now);
    REQUIRE(d.size() == 2);
    CHECK(d[0].kind == GidChange::Kind::kAdded);
    CHECK(d[0].entry.index == 3);
    CHECK(d[1].kind == GidChange::Kind::kRemoved);
    CHECK(d[1].entry.index == 1);
    CHECK(gid_address(d[1].entry.gid) == "::ffff:10.10.0.1");
  }
  SECTION("another GID at the same index: a change") {
    a.set(1, "0000:0000:0000:0000:0000:ffff:0a0a:0009\n", "eth1");
    auto d = diff_gid_tables(t, r.read(false));
    REQUIRE(d.size() == 1);
    CHECK(d[0].kind == GidChange::Kind::kChanged);
    CHECK(gid_address(d[0].entry.gid) == "::ffff:10.10.0.9");
    CHECK(gid_address(d[0].before.gid) == "::ffff:10.10.0.1");
  }
  SECTION("an unreadable GID file is reported once and keeps the slot's last reading") {
    put(a.port / "gids" / "1", "garbage\n");
    auto now = r.read(false);
    CHECK(now == t);
    REQUIRE(r.errors().size() == 1);
    CHECK(r.errors()[0].find("gids/1: 'garbage' is not a GID") != std::string::npos);
    r.read(false);
    CHECK(r.errors().empty());
  }
}

TEST_CASE("gid: the probe emits the table at start, then a row per change, and none without", "[gid]") {
  ocslab::testing::TempDir tmp;
  const std::string root = tmp.path() + "/class/infiniband";
  FakeDevice dev(root, "rxe_lo", 8);
  // "lo" so the neighbour part runs too, on a real interface with no neighbours.
  dev.set(0, kLinkLocal, "lo");
  dev.set(1, kV4, "lo");
  GidProbeConfig c;
  c.interface = "lo";
  c.interval = std::chrono::milliseconds(5);
  c.host = "h1";
  c.sysfs_root = root;
  GidProbe probe(c);
  Collected got;
  auto status = probe.start(got.sink());
  REQUIRE(status.available);
  CHECK(status.method == "sysfs GID table (rxe_lo port 1) + RTM_GETNEIGH dump every 5 ms");
  // The start's rows are all handed over before the thread's first poll (the second in all).
  REQUIRE(wait_polls(probe, 2));
  // The GID rows first, then loopback's neighbour entries (`neigh`, NOARP), if it has any.
  auto first = got.copy();
  REQUIRE(first.size() >= 2);
  const size_t at_start = first.size();
  for (size_t i = 2; i < at_start; ++i) CHECK(first[i].signal == "neigh");
  CHECK(first[0].signal == "gid");
  CHECK(first[0].value == 0);
  CHECK(first[1].source == "gid");
  CHECK(first[1].subject == "rxe_lo/1/lo");
  CHECK(first[1].signal == "gid");
  CHECK(first[1].value == 1);
  CHECK(first[1].unit == "roce_v2 ::ffff:10.10.0.1");
  CHECK(first[1].host == "h1");
  CHECK(first[1].t_ns > 0);

  // No change: five more polls, no row.
  const uint64_t polled = probe.polls();
  REQUIRE(wait_polls(probe, polled + 5));
  CHECK(got.copy().size() == at_start);

  // The address removed and re-added: the kernel gives it the lowest free slot, here 2 (1 is
  // still being freed).
  dev.set(2, kV4, "lo");
  dev.clear(1);
  REQUIRE(got.await_samples(at_start + 2));
  probe.stop();
  // Both changes may come from one poll or from two (the files are not written atomically).
  std::vector<std::pair<std::string, double>> rows;
  for (const auto& s : got.copy()) {
    if (s.signal.rfind("gid_", 0) != 0) continue;
    rows.emplace_back(s.signal, s.value);
    CHECK(s.unit == "roce_v2 ::ffff:10.10.0.1");
    CHECK(s.subject == "rxe_lo/1/lo");
  }
  CHECK(rows.size() == 2);
  CHECK(std::count(rows.begin(), rows.end(), std::make_pair(std::string("gid_removed"), 1.0)) == 1);
  CHECK(std::count(rows.begin(), rows.end(), std::make_pair(std::string("gid_added"), 2.0)) == 1);
}

TEST_CASE("gid: a probe on an interface nothing serves, without neighbours, is unavailable", "[gid]") {
  ocslab::testing::TempDir tmp;
  GidProbeConfig c;
  c.interface = "eth9";
  c.sysfs_root = tmp.path();
  c.neighbours = false;
  GidProbe probe(c);
  auto status = probe.start([](const ocslab::Sample&) {});
  CHECK_FALSE(status.available);
  CHECK(status.reason.find("no RDMA device serves eth9") != std::string::npos);
}

namespace {

// An RTM_NEWNEIGH message as the kernel sends it in a dump.
std::vector<char> neigh_message(int ifindex, uint16_t state, const std::vector<uint8_t>& dst,
                                const std::vector<uint8_t>& lladdr) {
  std::vector<char> buf(512);
  auto* nlh = mnl_nlmsg_put_header(buf.data());
  nlh->nlmsg_type = RTM_NEWNEIGH;
  auto* nd = static_cast<ndmsg*>(mnl_nlmsg_put_extra_header(nlh, sizeof(ndmsg)));
  nd->ndm_family = dst.size() == 4 ? AF_INET : AF_INET6;
  nd->ndm_ifindex = ifindex;
  nd->ndm_state = state;
  mnl_attr_put(nlh, NDA_DST, dst.size(), dst.data());
  if (!lladdr.empty()) mnl_attr_put(nlh, NDA_LLADDR, lladdr.size(), lladdr.data());
  buf.resize(nlh->nlmsg_len);
  return buf;
}

}  // namespace

TEST_CASE("gid: neighbour messages, diffs and a dump on loopback", "[gid]") {
  auto m = neigh_message(7, NUD_REACHABLE, {10, 10, 0, 2}, {0x52, 0x54, 0, 0x12, 0x34, 0x02});
  auto e = parse_neigh_message(m.data(), m.size(), 7);
  REQUIRE(e);
  CHECK(e->address == "10.10.0.2");
  CHECK(e->lladdr == "52:54:00:12:34:02");
  CHECK(nud_state_name(e->state) == "REACHABLE");
  CHECK_FALSE(parse_neigh_message(m.data(), m.size(), 8));      // another interface
  CHECK_FALSE(parse_neigh_message(m.data(), m.size() - 1, 7));  // shorter than it claims
  auto failed = neigh_message(7, NUD_FAILED, {10, 10, 0, 3}, {});
  auto f = parse_neigh_message(failed.data(), failed.size(), 7);
  REQUIRE(f);
  CHECK(f->lladdr.empty());
  CHECK(nud_state_name(NUD_STALE | NUD_NOARP) == "STALE|NOARP");

  NeighEntry reachable{"10.10.0.2", "52:54:00:12:34:02", NUD_REACHABLE};
  NeighEntry stale = reachable;
  stale.state = NUD_STALE;
  auto d = diff_neighbours({reachable, *f}, {stale});
  REQUIRE(d.size() == 2);
  CHECK(d[0].kind == NeighChange::Kind::kChanged);
  CHECK(d[0].entry.state == NUD_STALE);
  CHECK(d[1].kind == NeighChange::Kind::kRemoved);
  CHECK(d[1].entry.address == "10.10.0.3");
  CHECK(diff_neighbours({reachable}, {reachable}).empty());

  ocslab::NetlinkSocket sock(NETLINK_ROUTE);
  // Loopback resolves nothing, but holds NOARP entries (0.0.0.0 and the like) on some hosts.
  for (const auto& n : dump_neighbours(sock, static_cast<int>(if_nametoindex("lo")))) {
    CHECK_FALSE(n.address.empty());
    CHECK((n.state & NUD_NOARP) != 0);
  }
}

}  // namespace gid_probe_test
