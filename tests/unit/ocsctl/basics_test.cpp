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
  // The variable bound to sw1 comes first; the file is not read.
  ::setenv(kPasswordEnv, "fromenv", 1);
  ::setenv(kPasswordHostEnv, "sw1", 1);
  CHECK(resolve_password(url, path) == "fromenv");
  ::unsetenv(kPasswordHostEnv);
  ::unsetenv(kPasswordEnv);
}

TEST_CASE("credentials: a '#' inside a password is part of it; comments start a line or follow the fields") {
  testing::TempDir dir;
  std::string path = dir.path() + "/credentials";
  std::ofstream(path) << "  # indented comment\n"
                         "sw1 admin pa#ss\n"
                         "sw2 admin #secret # the switch in rack 2\n"
                         "sw3 admin x#\n";
  ::chmod(path.c_str(), 0600);
  CHECK(lookup_password(SwitchUrl::parse("tl1://admin@sw1"), path) == "pa#ss");
  CHECK(lookup_password(SwitchUrl::parse("tl1://admin@sw2"), path) == "#secret");
  CHECK(lookup_password(SwitchUrl::parse("tl1://admin@sw3"), path) == "x#");
  // A fourth field that is not a comment is an error naming the line, never echoing the password.
  CHECK_THROWS_WITH(parse_credentials_line("sw1 admin s3cr3t w0rd", "f:7"),
                    Catch::StartsWith("f:7: expected") && !Catch::Contains("s3cr3t") && !Catch::Contains("w0rd"));
  CHECK_FALSE(parse_credentials_line("   ", "f:1"));
  CHECK_FALSE(parse_credentials_line("#sw1 admin pw", "f:1"));
}

TEST_CASE("credentials: IPv6 hosts in brackets, with or without a port; malformed hosts name file:line") {
  testing::TempDir dir;
  std::string path = dir.path() + "/credentials";
  std::ofstream(path) << "[::1]:3083 admin six\n[fe80::1] admin any-port\n";
  ::chmod(path.c_str(), 0600);
  CHECK(lookup_password(SwitchUrl::parse("tl1://admin@[::1]:3083"), path) == "six");
  CHECK_FALSE(lookup_password(SwitchUrl::parse("tl1://admin@[::1]:3082"), path));
  CHECK(lookup_password(SwitchUrl::parse("netconf://admin@[fe80::1]"), path) == "any-port");
  auto e = parse_credentials_line("[2001:db8::5]:830 ops pw", "f:1");
  REQUIRE(e);
  CHECK(e->host == "2001:db8::5");
  CHECK(e->port == 830);
  CHECK(e->user == "ops");
  CHECK(e->password == "pw");
  // Before brackets, '::1' split at its last ':' into host ':' and port 1.
  std::ofstream(path) << "sw1 admin ok\n::1 admin pw\n";
  CHECK_THROWS_WITH(lookup_password(SwitchUrl::parse("tl1://admin@[::1]:1"), path),
                    Catch::StartsWith(path + ":2: IPv6 host '::1' must be in brackets"));
  CHECK_THROWS_WITH(parse_credentials_line("[::1 admin pw", "f:3"), Catch::StartsWith("f:3: unterminated '['"));
  CHECK_THROWS_WITH(parse_credentials_line("[::1]3082 admin pw", "f:4"), Catch::StartsWith("f:4: expected ':<port>'"));
  CHECK_THROWS_WITH(parse_credentials_line("[]:3082 admin pw", "f:5"), Catch::StartsWith("f:5: empty host"));
  CHECK_THROWS_WITH(parse_credentials_line("sw1:30x admin pw", "f:6"), Catch::StartsWith("f:6: bad port in 'sw1:30x'"));
  CHECK_THROWS_WITH(parse_credentials_line("sw1:70000 admin pw", "f:7"), Catch::Contains("bad port"));
  CHECK_THROWS_WITH(parse_credentials_line("sw1: admin pw", "f:8"), Catch::Contains("bad port"));
  CHECK_THROWS_WITH(parse_credentials_line(":3082 admin pw", "f:9"), Catch::StartsWith("f:9: empty host"));
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
