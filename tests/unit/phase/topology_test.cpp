// topo_id encoding, digit diffing and sub-mapping decomposition for the paper's Figure 8 job
// shape (PP=3, DP=2, CP=2): one digit per pipeline stage, rings per symmetric dimension.
#include <catch2/catch.hpp>

#include <set>

#include "ocslab/phase/topology.h"

using namespace ocslab::phase;

namespace {

JobLayout fig8() { return JobLayout{"fig8", 3, {{"dp", 2}, {"cp", 2}}}; }

std::vector<RankEdge> edges_from(const std::vector<RankEdge>& all, int first_rank, int last_rank) {
  std::vector<RankEdge> out;
  for (auto e : all) {
    if (e.src >= first_rank && e.src <= last_rank) out.push_back(e);
  }
  return out;
}

}  // namespace

TEST_CASE("layout numbers ranks stage-major with dims[0] fastest", "[phase][topology]") {
  auto l = fig8();
  l.validate();
  CHECK(l.ranks_per_stage() == 4);
  CHECK(l.ranks() == 12);
  CHECK(l.stage_of(7) == 1);
  CHECK(l.coords(l.local_of(7)) == std::vector<int>{1, 1});
  CHECK(l.local_from({0, 1}) == 2);
  CHECK(l.digit_of("pp") == 0);
  CHECK(l.digit_of("cp") == 2);
  CHECK_THROWS_WITH(l.digit_of("tp"), Catch::Contains("job fig8: no dimension 'tp'") && Catch::Contains("1=dp, 2=cp"));
  CHECK_THROWS_WITH((JobLayout{"j", 2, {{"dp", 2}, {"dp", 2}}}.validate()),
                    Catch::Contains("dimension 'dp' appears twice"));
  CHECK_THROWS_WITH((JobLayout{"j", 0, {}}.validate()), Catch::Contains("job j: pp = 0"));
}

TEST_CASE("topo_ids parse one digit per stage and reject digits the job lacks", "[phase][topology]") {
  auto l = fig8();
  CHECK(TopoId::parse("012", l).digits() == std::vector<uint8_t>{0, 1, 2});
  CHECK(TopoId::uniform(l, 1).str() == "111");
  CHECK_THROWS_WITH(TopoId::parse("13", l), Catch::Contains("has 2 digits but the job has 3 pipeline stages"));
  CHECK_THROWS_WITH(TopoId::parse("130", l),
                    Catch::Contains("digit 3 at stage 1 names a dimension the job lacks (0=pp, 1=dp, 2=cp)"));
  CHECK_THROWS_WITH(TopoId::parse("1a0", l), Catch::Contains("character 2 ('a') is not a digit"));
  CHECK(changed_stages(TopoId::parse("111", l), TopoId::parse("121", l)) == std::vector<int>{1});
  CHECK(changed_stages(TopoId::parse("111", l), TopoId::parse("100", l)) == std::vector<int>{1, 2});
  CHECK(changed_stages(TopoId::parse("000", l), TopoId::parse("000", l)).empty());
}

TEST_CASE("sub-mapping storage is n_parallel x n_rank entries", "[phase][topology]") {
  SubMappingTable t(fig8());
  CHECK(t.count() == 3 * 3);  // pp stages x (pp + dp + cp)
  CHECK(t.stored_entries() == static_cast<size_t>(t.layout().n_parallel() * t.layout().ranks()));
  CHECK(t.stored_entries() == 36);
  // A bigger job: storage grows with ranks x dimensions, not with the number of topo_ids.
  SubMappingTable big(JobLayout{"big", 8, {{"dp", 4}, {"cp", 2}, {"tp", 2}}});
  CHECK(big.stored_entries() == static_cast<size_t>(4 * 8 * 16));
  CHECK(big.count() == 8 * 4);
}

TEST_CASE("figure 8: all stages in DP are rings of two inside each stage", "[phase][topology]") {
  SubMappingTable t(fig8());
  auto e = t.compose(TopoId::parse("111", t.layout()));
  REQUIRE(e.size() == 12);
  CHECK(edges_from(e, 0, 3) == std::vector<RankEdge>{{0, 1}, {1, 0}, {2, 3}, {3, 2}});
  CHECK(edges_from(e, 8, 11) == std::vector<RankEdge>{{8, 9}, {9, 8}, {10, 11}, {11, 10}});
  // Every rank transmits once and receives once: a valid circuit set.
  std::set<int> dst;
  for (auto x : e) dst.insert(x.dst);
  CHECK(dst.size() == 12);
}

TEST_CASE("figure 8, symmetric shift: one stage DP -> CP touches only that stage", "[phase][topology]") {
  SubMappingTable t(fig8());
  auto a = TopoId::parse("111", t.layout());
  auto b = TopoId::parse("121", t.layout());
  CHECK(t.affected_stages(a, b) == std::vector<int>{1});
  auto eb = t.compose(b);
  CHECK(edges_from(eb, 4, 7) == std::vector<RankEdge>{{4, 6}, {5, 7}, {6, 4}, {7, 5}});
  CHECK(edges_from(eb, 0, 3) == edges_from(t.compose(a), 0, 3));
  CHECK(edges_from(eb, 8, 11) == edges_from(t.compose(a), 8, 11));
}

TEST_CASE("figure 8, asymmetric shift: stages entering PP link to the next PP stage", "[phase][topology]") {
  SubMappingTable t(fig8());
  auto a = TopoId::parse("111", t.layout());
  auto b = TopoId::parse("100", t.layout());
  CHECK(t.affected_stages(a, b) == std::vector<int>{1, 2});
  auto eb = t.compose(b);
  // Stages 1 and 2 are the only PP stages: a pair, same coordinates.
  CHECK(edges_from(eb, 4, 7) == std::vector<RankEdge>{{4, 8}, {5, 9}, {6, 10}, {7, 11}});
  CHECK(edges_from(eb, 8, 11) == std::vector<RankEdge>{{8, 4}, {9, 5}, {10, 6}, {11, 7}});
  // Stage 0 joins PP: its digit changes, and stage 2's PP successor moves from 1 to 0 although
  // stage 2's digit does not change. Stage 1 keeps its circuits.
  auto c = TopoId::parse("000", t.layout());
  CHECK(changed_stages(b, c) == std::vector<int>{0});
  CHECK(t.affected_stages(b, c) == std::vector<int>{0, 2});
  auto ec = t.compose(c);
  CHECK(edges_from(ec, 0, 3) == std::vector<RankEdge>{{0, 4}, {1, 5}, {2, 6}, {3, 7}});
  CHECK(edges_from(ec, 4, 7) == edges_from(eb, 4, 7));
  CHECK(edges_from(ec, 8, 11) == std::vector<RankEdge>{{8, 0}, {9, 1}, {10, 2}, {11, 3}});
  // A lone PP stage has no peer on this rail: its transmitters go dark.
  CHECK(edges_from(t.compose(TopoId::parse("101", t.layout())), 4, 7).empty());
}

TEST_CASE("giant ring and circuits through slots", "[phase][topology]") {
  SubMappingTable t(JobLayout{"j", 2, {{"dp", 2}}});
  CHECK(t.giant_ring() == std::vector<RankEdge>{{0, 1}, {1, 2}, {2, 3}, {3, 0}});
  std::vector<Slot> slots{{1, 17}, {2, 18}, {3, 19}, {4, 20}};
  auto c = to_circuits(t.compose(TopoId::parse("11", t.layout())), slots);
  CHECK(c == std::vector<ocslab::ocs::Circuit>{{1, 18}, {2, 17}, {3, 20}, {4, 19}});
  CHECK_THROWS_WITH(to_circuits({{0, 5}}, slots), Catch::Contains("edge 0->5 names a rank without a slot"));
}

TEST_CASE("two jobs on disjoint slots never share a port in any topology", "[phase][topology]") {
  SubMappingTable a(fig8());
  SubMappingTable b(JobLayout{"other", 2, {{"dp", 3}}});
  std::vector<Slot> sa, sb;
  for (int i = 0; i < 12; ++i) sa.push_back({1 + i, 33 + i});
  for (int i = 0; i < 6; ++i) sb.push_back({13 + i, 45 + i});
  std::set<int> ports_a;
  for (auto d0 : {0, 1, 2}) {
    for (auto d1 : {0, 1, 2}) {
      for (auto d2 : {0, 1, 2}) {
        for (auto c : to_circuits(a.compose(TopoId({uint8_t(d0), uint8_t(d1), uint8_t(d2)})), sa)) {
          ports_a.insert(c.ingress);
          ports_a.insert(c.egress);
        }
      }
    }
  }
  for (auto topo : {"00", "01", "10", "11"}) {
    for (auto c : to_circuits(b.compose(TopoId::parse(topo, b.layout())), sb)) {
      CHECK(ports_a.count(c.ingress) == 0);
      CHECK(ports_a.count(c.egress) == 0);
    }
  }
}
