// The RDMA probe's control lines and its server's refusals (rdma_control.h): what parses as a QP
// line, what counts as the secret, which listen addresses are refused before anything listens.
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "ocslab/common/bounded_line.h"
#include "ocslab/common/secret.h"
#include "ocslab/probes/rdma_control.h"

using namespace ocslab;
using namespace ocslab::probes;

namespace {
const std::string kGid = "00000000000000000000ffff0a000001";

std::string refusal(RdmaControlServerOptions o) {
  try {
    RdmaControlServer s(std::move(o));
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}
}  // namespace

TEST_CASE("RDMA control: QP lines parse strictly and print back the same", "[probes][rdma][control]") {
  auto q = parse_qp_line("QP 4660 16777215 " + kGid);
  REQUIRE(q);
  CHECK(q->qpn == 4660);
  CHECK(q->psn == 0xffffff);
  CHECK(q->line() == "QP 4660 16777215 " + kGid + "\n");
  for (const std::string& bad : std::vector<std::string>{
           "", "QP", "QP 1 2", "QP 1 2 " + kGid + " extra", "QP  1 2 " + kGid, "QP 1 2 " + kGid + " ", "qp 1 2 " + kGid,
           "QP -1 2 " + kGid, "QP +1 2 " + kGid, "QP 16777216 2 " + kGid, "QP 1 4294967297 " + kGid, "QP 1 2 xyz",
           "QP 1 2 " + kGid.substr(1), "QP 1 2 " + kGid + "\r", "AUTH " + kGid}) {
    INFO(bad);
    CHECK_FALSE(parse_qp_line(bad));
  }
}

TEST_CASE("RDMA control: the secret line", "[probes][rdma][control]") {
  const std::string s = random_token();
  CHECK(valid_control_secret(s));
  CHECK(valid_control_secret(std::string(32, 'F')));
  CHECK_FALSE(valid_control_secret(std::string(31, 'a')));
  CHECK_FALSE(valid_control_secret(std::string(257, 'a')));
  CHECK_FALSE(valid_control_secret(std::string(40, 'g')));
  CHECK_FALSE(valid_control_secret(""));
  CHECK(auth_line(s) == "AUTH " + s + "\n");
  CHECK(auth_line_matches("AUTH " + s, s));
  CHECK_FALSE(auth_line_matches("AUTH " + s + " ", s));
  CHECK_FALSE(auth_line_matches("AUTH " + s.substr(1), s));
  CHECK_FALSE(auth_line_matches("auth " + s, s));
  CHECK_FALSE(auth_line_matches(s, s));
  CHECK_FALSE(auth_line_matches("AUTH " + random_token(), s));
}

TEST_CASE("RDMA control: the server refuses what it must not listen on", "[probes][rdma][control]") {
  RdmaControlServerOptions o;
  o.secret = random_token();
  SECTION("every address, unless allowed") {
    for (const char* where : {"0.0.0.0:0", ":0", "*:0"}) {
      o.listen = where;
      INFO(where);
      CHECK_THAT(refusal(o), Catch::Contains("is every address of the host"));
    }
    o.listen = "0.0.0.0:0";
    o.any_address = true;
    CHECK(refusal(o).empty());
  }
  SECTION("no secret, or one too short: refused, without quoting it") {
    o.listen = "127.0.0.1:0";
    o.secret = "";
    CHECK_THAT(refusal(o), Catch::Contains("a control secret is required"));
    o.secret = "abcdef0123";
    std::string e = refusal(o);
    CHECK_THAT(e, Catch::Contains("a control secret is required"));
    CHECK(e.find("abcdef0123") == std::string::npos);
  }
  SECTION("a name that resolves to loopback, a bad port, no port") {
    o.listen = "localhost:18520";
    CHECK_THAT(refusal(o), Catch::Contains("resolves to loopback"));
    o.listen = "127.0.0.1:65536";
    CHECK_THAT(refusal(o), Catch::Contains("is not a port number"));
    o.listen = "127.0.0.1";
    CHECK_THAT(refusal(o), Catch::Contains("expected ADDRESS:PORT"));
  }
  SECTION("a loopback literal is what it says: allowed (tests)") {
    o.listen = "127.0.0.1:0";
    RdmaControlServer s(o);
    CHECK(s.port() != 0);
    CHECK(s.pending() == 0);
  }
}
