// Routes: shortest paths on rings, tori and random regular graphs, the documented tie rule,
// per-destination consistency (what relays need), bandwidth tax and load balancing.
#include <catch2/catch.hpp>
#include <cstdlib>
#include <set>
#include <string>

#include "fabrics.h"
#include "ocslab/forwarding/routes.h"

using namespace ocslab;
using namespace ocslab::forwarding;

namespace {

std::string describe(const Path& p) {
  std::string s;
  for (const auto& hop : p) s += (s.empty() ? "" : " ") + to_string(hop);
  return s;
}

// Every ordered pair: a path exists, is connected hop to hop, has the BFS length, and every
// tree is consistent (a host's path continues along the next host's path).
void check_all_pairs(const Fabric& f, const Routes& r) {
  for (const auto& s : f.hosts) {
    auto dist = fabrics::bfs(f, s.name);
    for (const auto& d : f.hosts) {
      Path p = r.path(s.name, d.name);
      INFO(s.name << " -> " << d.name << ": " << describe(p));
      REQUIRE(static_cast<int>(p.size()) == dist.at(d.name));
      std::string at = s.name;
      for (const auto& hop : p) {
        REQUIRE(hop.from.host == at);
        at = hop.to.host;
      }
      REQUIRE(at == d.name);
    }
  }
  for (const auto& t : r.trees())
    for (const auto& [host, hop] : t.next) {
      REQUIRE(t.distance.at(host) == t.distance.at(hop.to.host) + 1);
      if (hop.to.host == t.dst.host) REQUIRE(hop.to == t.dst);
    }
}

int ring_distance(int a, int b, int n) {
  int k = ((b - a) % n + n) % n;
  return std::min(k, n - k);
}

}  // namespace

TEST_CASE("rings: every pair takes the shorter way round") {
  for (int n : {4, 5, 8}) {
    INFO("ring of " << n);
    Fabric f = fabrics::ring(n);
    validate(f);
    Routes r = compute_routes(f);
    check_all_pairs(f, r);
    for (int a = 0; a < n; ++a)
      for (int b = 0; b < n; ++b)
        CHECK(int(r.path(fabrics::host(a), fabrics::host(b)).size()) == ring_distance(a, b, n));
  }
}

TEST_CASE("2D torus: path length is the wrapped Manhattan distance") {
  Fabric f = fabrics::torus(4, 5);
  validate(f);
  Routes r = compute_routes(f);
  check_all_pairs(f, r);
  for (int a = 0; a < 20; ++a)
    for (int b = 0; b < 20; ++b)
      CHECK(int(r.path(fabrics::host(a), fabrics::host(b)).size()) ==
            ring_distance(a / 5, b / 5, 4) + ring_distance(a % 5, b % 5, 5));
  CHECK(compute_routes(f, {true, {}}).path(fabrics::host(0), fabrics::host(12)).size() == 4);
}

TEST_CASE("random regular graphs: every pair reachable at its BFS distance") {
  for (unsigned seed : {1u, 2u, 3u, 42u, 2026u}) {
    for (auto [n, d] : {std::pair{12, 3}, std::pair{16, 4}, std::pair{9, 2}}) {
      INFO("seed " << seed << " n " << n << " d " << d);
      Fabric f = fabrics::random_regular(n, d, seed);
      check_all_pairs(f, compute_routes(f));
      check_all_pairs(f, compute_routes(f, {true, {}}));
    }
  }
}

TEST_CASE("tie rule: lowest next-hop host name, then lowest local port; input order does not matter") {
  Fabric f = fabrics::ring(4);
  Routes r = compute_routes(f);
  // h00 -> h02: via h01 or h03, both two hops; h01 < h03.
  CHECK(describe(r.path("h00", "h02")) == "h00:p1->h01:p0 h01:p1->h02:p0");
  // h01 -> h03: h03's addresses p0 (faces h02) and p1 (faces h00) are both 2 hops away; p0 wins.
  CHECK(describe(r.path("h01", "h03")) == "h01:p1->h02:p0 h02:p1->h03:p0");
  // h03 -> h01 arrives on h01:p0 (faces h00): via h00.
  CHECK(describe(r.path("h03", "h01")) == "h03:p1->h00:p0 h00:p1->h01:p0");

  // Two parallel circuits between h00 and h01: the lower local port is used.
  Fabric par = fabrics::hosts_with_ports(3, 3);
  fabrics::connect(par, 0, 2, 1, 0);
  fabrics::connect(par, 0, 1, 1, 1);
  fabrics::connect(par, 1, 2, 2, 0);
  validate(par);
  CHECK(describe(compute_routes(par).path("h00", "h02")) == "h00:p1->h01:p1 h01:p2->h02:p0");

  // Same fabric with hosts and circuits listed in reverse: same paths.
  Fabric f8 = fabrics::random_regular(10, 3, 7);
  Fabric rev = f8;
  std::reverse(rev.hosts.begin(), rev.hosts.end());
  std::reverse(rev.circuits.begin(), rev.circuits.end());
  for (auto& c : rev.circuits) std::swap(c.a, c.b);
  Routes r1 = compute_routes(f8), r2 = compute_routes(rev), r3 = compute_routes(f8);
  for (const auto& s : f8.hosts)
    for (const auto& d : f8.hosts) {
      CHECK(describe(r1.path(s.name, d.name)) == describe(r2.path(s.name, d.name)));
      CHECK(describe(r1.path(s.name, d.name)) == describe(r3.path(s.name, d.name)));
    }
}

TEST_CASE("bandwidth tax on hand-checked cases") {
  SECTION("4-ring all-to-all: 8 one-hop + 4 two-hop pairs") {
    Fabric f = fabrics::ring(4);
    LoadReport rep = evaluate(f, compute_routes(f), all_to_all(f));
    CHECK(rep.demanded == 12);
    CHECK(rep.carried == 16);
    CHECK(rep.tax() == Approx(16.0 / 12.0));
    CHECK(rep.link_load.size() == 8);
  }
  SECTION("5-ring all-to-all: each host 2 at one hop, 2 at two") {
    Fabric f = fabrics::ring(5);
    LoadReport rep = evaluate(f, compute_routes(f), all_to_all(f));
    CHECK(rep.tax() == Approx(30.0 / 20.0));
  }
  SECTION("8-ring all-to-all: 1+1+2+2+3+3+4 = 16 per host") {
    Fabric f = fabrics::ring(8);
    LoadReport rep = evaluate(f, compute_routes(f), all_to_all(f, 2.0));
    CHECK(rep.demanded == 112);
    CHECK(rep.tax() == Approx(128.0 / 56.0));
  }
  SECTION("ring traffic on a ring: every pair is one hop, tax 1, every forward link carries 1") {
    Fabric f = fabrics::ring(5);
    LoadReport rep = evaluate(f, compute_routes(f), ring(f));
    CHECK(rep.tax() == 1.0);
    CHECK(rep.max_load == 1.0);
    CHECK(rep.link_load.at("h00:p1->h01:p0") == 1.0);
    CHECK(rep.link_load.at("h01:p0->h00:p1") == 0.0);
  }
  SECTION("explicit matrix on a 4-ring: opposite pair") {
    Fabric f = fabrics::ring(4);
    LoadReport rep = evaluate(f, compute_routes(f), {{"h00", "h02", 5.0}, {"h00", "h01", 1.0}});
    CHECK(rep.carried == 11.0);
    CHECK(rep.max_load == 6.0);
    CHECK(rep.max_link == "h00:p1->h01:p0");
    CHECK(rep.tax() == Approx(11.0 / 6.0));
  }
  SECTION("unknown host in ring order") {
    Fabric f = fabrics::ring(4);
    CHECK_THROWS_WITH(ring(f, 1.0, {"h00", "h09"}), Catch::Matchers::Contains("unknown host 'h09'"));
  }
}

TEST_CASE("load balancing spreads equal-cost pairs and lowers the maximum link load") {
  for (int n : {4, 6, 8}) {
    INFO("ring of " << n);
    Fabric f = fabrics::ring(n);
    TrafficMatrix tm = all_to_all(f);
    LoadReport plain = evaluate(f, compute_routes(f), tm);
    LoadReport balanced = evaluate(f, compute_routes(f, {true, tm}), tm);
    INFO("plain max " << plain.max_load << " balanced max " << balanced.max_load);
    CHECK(balanced.max_load < plain.max_load);
    CHECK(balanced.carried == plain.carried);  // still shortest paths
  }
  Fabric f = fabrics::ring(4);
  LoadReport balanced = evaluate(f, compute_routes(f, {true, all_to_all(f)}), all_to_all(f));
  CHECK(balanced.max_load == 2.0);  // 16 units over 8 directed links: the optimum
}
