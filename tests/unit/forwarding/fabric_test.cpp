// The fabric YAML: the example loads, and every malformed or inconsistent entry is rejected
// with a message that names the file position and the entry.
#include <catch2/catch.hpp>
#include <cstdlib>
#include <string>

#include "fabrics.h"
#include "ocslab/forwarding/fabric.h"

using namespace ocslab;
using namespace ocslab::forwarding;

namespace {

// The three-host line of the virtual lab's relay check: h1 - h2 - h3.
constexpr const char* kIf2 = "{name: e2v, mac: \"02:00:00:00:02:12\"}";

std::string line3(const std::string& h2_p1_if2 = kIf2, const std::string& h3_ip = "10.0.0.3/24",
                  const std::string& circuits =
                      "  - \"h1:p0 <-> h2:p0\"\n"
                      "  - \"h2:p1 <-> h3:p0\"\n") {
  return "hosts:\n"
         "  - name: h1\n"
         "    ports:\n"
         "      - name: p0\n"
         "        if1: {name: e1, ip: 10.0.0.1/24, mac: \"02:00:00:00:01:01\"}\n"
         "        if2: {name: e1v, mac: \"02:00:00:00:01:11\"}\n"
         "  - name: h2\n"
         "    ports:\n"
         "      - name: p0\n"
         "        if1: {name: e1, ip: 10.0.0.2/24, mac: \"02:00:00:00:02:01\"}\n"
         "        if2: {name: e1v, mac: \"02:00:00:00:02:11\"}\n"
         "      - name: p1\n"
         "        if1: {name: e2, ip: 10.0.0.12/24, mac: \"02:00:00:00:02:02\"}\n"
         "        if2: " +
         h2_p1_if2 +
         "\n"
         "  - name: h3\n"
         "    ports:\n"
         "      - name: p0\n"
         "        if1: {name: e1, ip: " +
         h3_ip +
         ", mac: \"02:00:00:00:03:01\"}\n"
         "        if2: {name: e1v, mac: \"02:00:00:00:03:11\"}\n"
         "circuits:\n" +
         circuits;
}

std::string error_of(const std::string& yaml) {
  try {
    load_fabric_string(yaml, "t.yaml");
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "(accepted)";
}

}  // namespace

TEST_CASE("the three-host line loads with positions and normalised MACs") {
  Fabric f = load_fabric_string(line3(), "t.yaml");
  REQUIRE(f.hosts.size() == 3);
  REQUIRE(f.circuits.size() == 2);
  CHECK(f.hosts[1].ports[1].if1.ip.prefix_len == 24);
  CHECK(format_ipv4(f.hosts[1].ports[1].if1.ip.addr) == "10.0.0.12");
  CHECK(f.circuits[1].a == PortRef{"h2", "p1"});
  CHECK(f.circuits[1].b == PortRef{"h3", "p0"});
  CHECK(f.circuits[1].where == "t.yaml:22:5");
  CHECK(f.hosts[2].where == "t.yaml:15:5");
}

TEST_CASE("the ring4 example loads") {
  Fabric f = load_fabric_file(fabrics::example("ring4.yaml"));
  CHECK(f.hosts.size() == 4);
  CHECK(f.circuits.size() == 4);
  CHECK(f.find_port({"h3", "p1"})->if2->mac == "02:00:00:00:03:11");
  CHECK(f.find_port({"h3", "p1"})->if1.rdma == "rxe1");
}

TEST_CASE("address and MAC parsing") {
  CHECK(normalize_mac("02:AB:00:00:00:0F") == "02:ab:00:00:00:0f");
  CHECK_FALSE(normalize_mac("02:ab:00:00:00"));
  CHECK_FALSE(normalize_mac("02-ab-00-00-00-0f"));
  CHECK_FALSE(normalize_mac("02:ab:00:00:00:0g"));
  CHECK(parse_ipv4_prefix("192.168.1.254/31")->prefix_len == 31);
  CHECK(parse_ipv4_prefix("1.2.3.4")->prefix_len == 32);
  CHECK_FALSE(parse_ipv4_prefix("1.2.3.256/24"));
  CHECK_FALSE(parse_ipv4_prefix("1.2.3/24"));
  CHECK_FALSE(parse_ipv4_prefix("1.2.3.4/33"));
  CHECK_FALSE(parse_ipv4_prefix("1.2.3.4.5"));
  CHECK_FALSE(parse_ipv4_prefix("1.2.3.4/"));
}

TEST_CASE("bad fabrics are rejected with the entry and its position") {
  using Catch::Matchers::Contains;
  using Catch::Matchers::StartsWith;

  SECTION("port without if2") {
    std::string e = error_of(line3("null"));
    CHECK_THAT(e, StartsWith("t.yaml:12:9: "));
    CHECK_THAT(e, Contains("port 'h2:p1' has no if2"));
  }
  SECTION("MAC used twice (if2 of h2:p1 = if1 of h1:p0)") {
    std::string e = error_of(line3("{name: e2v, mac: \"02:00:00:00:01:01\"}"));
    CHECK_THAT(e, StartsWith("t.yaml:14:14: "));
    CHECK_THAT(e, Contains("MAC 02:00:00:00:01:01 of h2:p1 if2 already used by h1:p0 if1 (t.yaml:5:14)"));
  }
  SECTION("MAC used twice across hosts (reported at the later entry), malformed MAC") {
    std::string e = error_of(line3("{name: e2v, mac: \"02:00:00:00:03:11\"}"));
    CHECK_THAT(e,
               StartsWith("t.yaml:19:14: MAC 02:00:00:00:03:11 of h3:p0 if2 already used by h2:p1 if2 (t.yaml:14:14)"));
    e = error_of(line3("{name: e2v, mac: \"02:00:00:00:03:1\"}"));
    CHECK_THAT(e, StartsWith("t.yaml:14:31: "));
    CHECK_THAT(e, Contains("expected a MAC address"));
  }
  SECTION("IP used twice") {
    std::string e = error_of(line3("{name: e2v, mac: \"02:00:00:00:02:12\"}", "10.0.0.1/24"));
    CHECK_THAT(e, StartsWith("t.yaml:18:14: "));
    CHECK_THAT(e, Contains("IP 10.0.0.1 of h3:p0 if1 already used by h1:p0 if1 (t.yaml:5:14)"));
  }
  SECTION("IP without prefix or malformed") {
    CHECK_THAT(error_of(line3("{name: e2v, mac: \"02:00:00:00:02:12\"}", "10.0.0.3")),
               StartsWith("t.yaml:18:29: expected an IPv4 address with prefix"));
    CHECK_THAT(error_of(line3("{name: e2v, mac: \"02:00:00:00:02:12\"}", "10.0.300.3/24")),
               Contains("got '10.0.300.3/24'"));
  }
  SECTION("circuit to an unknown host") {
    std::string e = error_of(line3(kIf2, "10.0.0.3/24", "  - \"h1:p0 <-> h2:p0\"\n  - \"h2:p1 <-> h9:p0\"\n"));
    CHECK(e == "t.yaml:22:5: circuit h2:p1 <-> h9:p0: unknown host 'h9'");
  }
  SECTION("circuit to an unknown port") {
    std::string e = error_of(line3(kIf2, "10.0.0.3/24", "  - \"h1:p0 <-> h2:p0\"\n  - \"h2:p1 <-> h3:p7\"\n"));
    CHECK(e == "t.yaml:22:5: circuit h2:p1 <-> h3:p7: host 'h3' has no port 'p7'");
  }
  SECTION("port in two circuits") {
    std::string e = error_of(
        line3(kIf2, "10.0.0.3/24", "  - \"h1:p0 <-> h2:p0\"\n  - \"h2:p1 <-> h3:p0\"\n  - \"h3:p0 <-> h1:p0\"\n"));
    CHECK_THAT(e, StartsWith("t.yaml:23:5: port h3:p0 is in two circuits: h2:p1 <-> h3:p0 and h3:p0 <-> h1:p0"));
  }
  SECTION("circuit back to the same host") {
    std::string e = error_of(line3(kIf2, "10.0.0.3/24", "  - \"h1:p0 <-> h2:p0\"\n  - \"h2:p1 <-> h2:p1\"\n"));
    CHECK_THAT(e, StartsWith("t.yaml:22:5: circuit h2:p1 <-> h2:p1 loops back to host 'h2'"));
  }
  SECTION("unreachable host") {
    std::string e = error_of(line3(kIf2, "10.0.0.3/24", "  - \"h1:p0 <-> h2:p0\"\n"));
    CHECK(e == "t.yaml:15:5: host 'h3' is unreachable from 'h1' over the circuits");
  }
  SECTION("malformed circuits") {
    CHECK_THAT(error_of(line3(kIf2, "10.0.0.3/24", "  - \"h1:p0 -> h2:p0\"\n")),
               StartsWith("t.yaml:21:5: expected 'h1:p0 <-> h2:p1'"));
    CHECK_THAT(error_of(line3(kIf2, "10.0.0.3/24", "  - \"h1 <-> h2:p0\"\n")),
               StartsWith("t.yaml:21:5: expected 'host:port', got 'h1'"));
  }
  SECTION("duplicate host and port names, unknown keys") {
    std::string y = line3();
    std::string dup_host = y;
    dup_host.replace(dup_host.find("name: h3"), 8, "name: h2");
    CHECK_THAT(error_of(dup_host), StartsWith("t.yaml:15:5: host 'h2' defined twice (t.yaml:7:5)"));
    std::string dup_port = y;
    dup_port.replace(dup_port.find("name: p1"), 8, "name: p0");
    CHECK_THAT(error_of(dup_port), StartsWith("t.yaml:12:9: port 'h2:p0' defined twice"));
    std::string bad_key = y;
    bad_key.replace(bad_key.find("ip: 10.0.0.2"), 2, "ipv4");
    CHECK_THAT(error_of(bad_key), StartsWith("t.yaml:10:25: unknown key 'ipv4'"));
  }
}

TEST_CASE("validate() on fabrics built in code names the entry without a position") {
  Fabric f = load_fabric_string(line3(), "t.yaml");
  f.circuits.push_back({{"h3", "p0"}, {"h1", "p0"}, ""});
  CHECK_THROWS_WITH(validate(f), Catch::Matchers::StartsWith("port h3:p0 is in two circuits"));
}
