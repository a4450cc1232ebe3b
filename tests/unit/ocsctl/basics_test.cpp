#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <fstream>

#include "ocslab/ocsctl/credentials.h"
#include "ocslab/ocsctl/mapping.h"
#include "ocslab/ocsctl/port_set.h"
#include "ocslab/ocsctl/switch_url.h"
#include "ocslab/testing/sshd_fixture.h"

using namespace ocslab;
using namespace ocslab::ocs;

TEST_CASE("port sets parse lists and ranges and print compactly") {
  auto s = PortSet::parse("1..4, 7 9..10");
  CHECK(s.to_vector() == std::vector<Port>{1, 2, 3, 4, 7, 9, 10});
  CHECK(s.to_string() == "1..4,7,9..10");
  CHECK(s.contains(3));
  CHECK_FALSE(s.contains(5));
  CHECK_THROWS_WITH(PortSet::parse("1..x"), Catch::Contains("bad port '1..x'"));
  CHECK_THROWS_WITH(PortSet::parse("5..2"), Catch::Contains("end is below start"));
  CHECK_THROWS_WITH(PortSet::parse("0"), Catch::Contains("numbered from 1"));
  CHECK_THROWS_WITH(PortSet::parse("1-4"), Catch::Contains("ranges are written A..B"));
}

TEST_CASE("circuits parse as INGRESS-EGRESS") {
  CHECK(parse_circuit("1-33") == Circuit{1, 33});
  CHECK_THROWS_WITH(parse_circuit("1:33"), Catch::Contains("bad circuit '1:33'"));
  CHECK_THROWS_WITH(parse_circuit("1-2-3"), Catch::Contains("bad circuit"));
  CHECK_THROWS_WITH(parse_circuit("a-3"), Catch::Contains("bad port 'a-3'"));
}

TEST_CASE("switch URLs") {
  auto u = SwitchUrl::parse("tl1://admin@10.0.0.5:3082");
  CHECK(u.protocol == Protocol::kTl1);
  CHECK(u.user == "admin");
  CHECK(u.host == "10.0.0.5");
  CHECK(u.port == 3082);
  CHECK(SwitchUrl::parse("tl1+ssh://ops@sw1").port == 22);
  CHECK(SwitchUrl::parse("netconf://sw1").port == 830);
  CHECK(SwitchUrl::parse("netconf://sw1").user == "admin");
  CHECK(SwitchUrl::parse("scpi://sw1").port == 5025);
  CHECK(SwitchUrl::parse("scpi://[::1]:6000").host == "::1");
  CHECK(SwitchUrl::parse("scpi://[::1]:6000").to_string() == "scpi://[::1]:6000");
  CHECK(SwitchUrl::parse("tl1://sw1").to_string() == "tl1://admin@sw1:3082");
  CHECK_THROWS_WITH(SwitchUrl::parse("http://sw1"), Catch::Contains("unknown scheme 'http'"));
  CHECK_THROWS_WITH(SwitchUrl::parse("tl1://admin:secret@sw1"), Catch::Contains("must not contain a password"));
  CHECK_THROWS_WITH(SwitchUrl::parse("tl1://admin:secret@sw1"), !Catch::Contains("secret"));
  CHECK_THROWS_WITH(SwitchUrl::parse("tl1://sw1:99999"), Catch::Contains("bad port '99999'"));
  CHECK_THROWS_WITH(SwitchUrl::parse("tl1://"), Catch::Contains("missing host"));
  CHECK_THROWS_WITH(SwitchUrl::parse("sw1:3082"), Catch::Contains("expected SCHEME://"));
}

TEST_CASE("credentials come from a private file, never a world-readable one") {
  testing::TempDir dir;
  std::string path = dir.path() + "/credentials";
  std::ofstream(path) << "# lab switches\nsw1 admin s3cret\nsw2:3083 admin other # comment\n";
  ::chmod(path.c_str(), 0600);
  auto url = SwitchUrl::parse("tl1://admin@sw1");
  CHECK(lookup_password(url, path) == "s3cret");
  CHECK(lookup_password(SwitchUrl::parse("tl1://admin@sw2:3083"), path) == "other");
  CHECK_FALSE(lookup_password(SwitchUrl::parse("tl1://admin@sw2:3082"), path));
  CHECK_FALSE(lookup_password(SwitchUrl::parse("tl1://root@sw1"), path));
  CHECK_FALSE(lookup_password(url, dir.path() + "/missing"));
  ::chmod(path.c_str(), 0644);
  CHECK_THROWS_WITH(lookup_password(url, path), Catch::Contains("chmod 600"));
  std::ofstream(path) << "sw1 admin\n";
  ::chmod(path.c_str(), 0600);
  CHECK_THROWS_WITH(lookup_password(url, path), Catch::Contains(path + ":1:"));
  ::setenv(kPasswordEnv, "fromenv", 1);
  CHECK(resolve_password(url, path) == "fromenv");
  ::unsetenv(kPasswordEnv);
}

TEST_CASE("mapping files are validated with line numbers") {
  auto m = parse_mapping_yaml("circuits:\n  - 1-33\n  - {ingress: 2, egress: 34}\n", "m.yaml");
  CHECK(m == std::vector<Circuit>{{1, 33}, {2, 34}});
  CHECK(parse_mapping_yaml("circuits: []\n", "m.yaml").empty());
  CHECK_THROWS_WITH(parse_mapping_yaml("circuits:\n  - 1-33\n  - 1-34\n", "m.yaml"),
                    Catch::StartsWith("m.yaml:3:5: port 1 used twice as ingress (first at line 2)"));
  CHECK_THROWS_WITH(parse_mapping_yaml("circuits:\n  - 1-33\n  - 2-33\n", "m.yaml"),
                    Catch::Contains("port 33 used twice as egress"));
  CHECK_THROWS_WITH(parse_mapping_yaml("circuits:\n  - one-33\n", "m.yaml"), Catch::StartsWith("m.yaml:2:5: bad port"));
  CHECK_THROWS_WITH(parse_mapping_yaml("circuit:\n  - 1-33\n", "m.yaml"), Catch::Contains("unknown key 'circuit'"));
  CHECK_THROWS_WITH(parse_mapping_yaml("circuits:\n  - {ingress: 1, egres: 3}\n", "m.yaml"), Catch::Contains("unknown key 'egres'"));
  CHECK_THROWS_WITH(parse_mapping_yaml("circuits: 5\n", "m.yaml"), Catch::Contains("must be a list"));
}

TEST_CASE("mapping diff is minimal") {
  std::vector<Circuit> current{{1, 33}, {2, 34}, {3, 35}, {4, 36}};
  SECTION("merge touches only named ports") {
    auto d = diff_mapping(current, {{1, 33}, {2, 35}, {5, 37}}, ApplyMode::kMerge);
    CHECK(d.keep == std::vector<Circuit>{{1, 33}});
    // 2-34 (ingress 2 moves) and 3-35 (egress 35 is taken by 2) conflict; 4-36 untouched.
    CHECK(d.remove == std::vector<Circuit>{{2, 34}, {3, 35}});
    CHECK(d.add == std::vector<Circuit>{{2, 35}, {5, 37}});
  }
  SECTION("replace removes everything else") {
    auto d = diff_mapping(current, {{1, 33}}, ApplyMode::kReplace);
    CHECK(d.remove == std::vector<Circuit>{{2, 34}, {3, 35}, {4, 36}});
    CHECK(d.add.empty());
  }
  SECTION("replace stays within scope") {
    auto d = diff_mapping(current, {}, ApplyMode::kReplace, PortSet::parse("1..2,33..34"));
    CHECK(d.remove == std::vector<Circuit>{{1, 33}, {2, 34}});
  }
  SECTION("nothing to do") {
    CHECK(diff_mapping(current, current, ApplyMode::kReplace).empty());
  }
}
