// Protocol v1 parser and serializer: every request type, the errors garbage gets, samples
// round-tripping through their wire form, and line splitting.
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <cmath>
#include <limits>

#include "ocslab/agent/protocol.h"

using namespace ocslab::agent;
using nlohmann::json;

namespace {

std::string error_of(const std::string& line) {
  try {
    parse_request(line);
  } catch (const ProtocolError& e) {
    return e.what();
  }
  return "(accepted)";
}

}  // namespace

TEST_CASE("every request type parses", "[agent][protocol]") {
  auto h = parse_request(R"({"type":"hello","id":1,"version":1})");
  CHECK(h.type == RequestType::kHello);
  CHECK(h.id == 1);
  CHECK(h.version == 1);

  auto c = parse_request(R"({"type":"clock","id":"c7","t1":1700000000123456789})");
  CHECK(c.type == RequestType::kClock);
  CHECK(c.id == "c7");
  CHECK(c.t1 == 1700000000123456789LL);

  auto s = parse_request(R"({"type":"probes.start","id":2,"probes":[{"name":"heartbeat","interval_ms":5},)"
                         R"({"name":"carrier","interfaces":["ens1f0","ens1f1"],"netlink_groups":3}]})");
  CHECK(s.type == RequestType::kProbesStart);
  REQUIRE(s.probes.size() == 2);
  CHECK(s.probes[0].name == "heartbeat");
  CHECK(s.probes[0].interval_ms == 5);
  CHECK(s.probes[0].interfaces.empty());
  CHECK(s.probes[1].interfaces == std::vector<std::string>{"ens1f0", "ens1f1"});
  CHECK(s.probes[1].interval_ms == 1000);
  CHECK(s.probes[1].params["netlink_groups"] == 3);  // probe-specific keys reach the factory

  CHECK(parse_request(R"({"type":"probes.stop","id":3})").type == RequestType::kProbesStop);
  CHECK(parse_request(R"({"type":"status","id":4})").type == RequestType::kStatus);
  CHECK(parse_request(R"({"type":"bye","id":5})").type == RequestType::kBye);

  auto f = parse_request(R"({"type":"spool.fetch","id":6,"from_seq":42})");
  CHECK(f.type == RequestType::kSpoolFetch);
  CHECK(f.from_seq == 42);
  CHECK(f.follow);
  CHECK_FALSE(parse_request(R"({"type":"spool.fetch","id":6,"from_seq":1,"follow":false})").follow);
  CHECK(f.max_count == 0);  // not paged
  CHECK(parse_request(R"({"type":"spool.fetch","id":6,"from_seq":1,"max_count":100000})").max_count == 100000);
}

TEST_CASE("garbage gets an error naming the problem", "[agent][protocol]") {
  CHECK(error_of("hello") == "not JSON: 'hello'");
  CHECK(error_of("").find("not JSON") == 0);
  CHECK(error_of("{\"type\":\"hello\"").find("not JSON") == 0);
  CHECK(error_of("[1,2]") == "a request must be a JSON object");
  CHECK(error_of(R"({"id":1})") == "a request needs a string 'type'");
  CHECK(error_of(R"({"type":7,"id":1})") == "a request needs a string 'type'");
  CHECK(error_of(R"({"type":"hello","version":1})") == "request 'hello' needs an 'id'");
  CHECK(error_of(R"({"type":"hello","id":1.5,"version":1})") == "'id' must be an integer or a string");
  CHECK(error_of(R"({"type":"reboot","id":1})") ==
        "unknown request type 'reboot' (known: hello, clock, probes.start, probes.stop, status, spool.fetch, "
        "spool.delete, bye)");
  CHECK(error_of(R"({"type":"hello","id":1})") == "hello needs 'version'");
  CHECK(error_of(R"({"type":"hello","id":1,"version":"1"})") == "'version' in hello must be an integer");
  CHECK(error_of(R"({"type":"hello","id":1,"version":1,"extra":true})") ==
        "unknown key 'extra' in hello (known: type, id, version)");
  CHECK(error_of(R"({"type":"clock","id":1,"t1":-5})").find("'t1' in clock is -5, out of range") == 0);
  CHECK(error_of(R"({"type":"clock","id":1,"t1":18446744073709551615})").find("out of range") != std::string::npos);
  CHECK(error_of(R"({"type":"probes.start","id":1,"probes":[]})") == "probes.start needs a non-empty array 'probes'");
  CHECK(error_of(R"({"type":"probes.start","id":1,"probes":[{"interval_ms":5}]})") ==
        "probes[0] needs a non-empty string 'name'");
  CHECK(error_of(R"({"type":"probes.start","id":1,"probes":[{"name":"heartbeat","interval_ms":0}]})") ==
        "'interval_ms' in probes[0] (heartbeat) is 0, out of range [1, 3600000]");
  CHECK(error_of(R"({"type":"probes.start","id":1,"probes":[{"name":"carrier","interfaces":"eth0"}]})") ==
        "'interfaces' in probes[0] (carrier) must be an array of strings");
  CHECK(error_of(R"({"type":"probes.start","id":1,"probes":[{"name":"a"},{"name":"a"}]})") ==
        "probe 'a' named twice in probes.start (give each a distinct 'label')");
  CHECK(error_of(R"({"type":"probes.start","id":1,"probes":[{"name":"a","label":"x"},{"name":"a","label":"x"}]})") ==
        "probe 'a' named twice in probes.start (give each a distinct 'label')");
  CHECK(parse_request(R"({"type":"probes.start","id":1,"probes":[{"name":"a","label":"x"},{"name":"a","label":"y"}]})")
            .probes.size() == 2);
  CHECK(error_of(R"({"type":"spool.fetch","id":1,"from_seq":0})").find("out of range") != std::string::npos);
  CHECK(error_of(R"({"type":"spool.fetch","id":1,"from_seq":1,"follow":1})") ==
        "'follow' in spool.fetch must be true or false");
  CHECK(error_of(R"({"type":"spool.fetch","id":1,"from_seq":1,"max_count":0})") ==
        "'max_count' in spool.fetch is 0, out of range [1, 100000]");
  CHECK(error_of(R"({"type":"spool.fetch","id":1,"from_seq":1,"max_count":100001})") ==
        "'max_count' in spool.fetch is 100001, out of range [1, 100000]");
  CHECK(error_of(R"({"type":"spool.fetch","id":1,"from_seq":1,"max_count":"5"})") ==
        "'max_count' in spool.fetch must be an integer");
  CHECK(
      parse_request(R"({"type":"probes.start","id":1,"run":"demo-20261126T1200Z_a.1","probes":[{"name":"a"}]})").run ==
      "demo-20261126T1200Z_a.1");
  CHECK(error_of(R"({"type":"probes.start","id":1,"run":"../etc","probes":[{"name":"a"}]})") ==
        "'run' in probes.start '../etc' must not start with '.'");
  CHECK(error_of(R"({"type":"probes.start","id":1,"run":"a/b","probes":[{"name":"a"}]})") ==
        "'run' in probes.start 'a/b' has '/': only A-Z a-z 0-9 . _ - are allowed");
  CHECK(error_of(R"({"type":"probes.start","id":1,"run":"","probes":[{"name":"a"}]})") ==
        "'run' in probes.start must be 1 to 64 characters, got 0");
  CHECK(error_of(R"({"type":"probes.start","id":1,"run":7,"probes":[{"name":"a"}]})") ==
        "'run' in probes.start must be a string");
  CHECK(parse_request(R"({"type":"spool.delete","id":1,"capture":"20261126T120000-42-1.demo"})").capture ==
        "20261126T120000-42-1.demo");
  CHECK(error_of(R"({"type":"spool.delete","id":1})") == "spool.delete needs a string 'capture'");
  CHECK(error_of(R"({"type":"spool.delete","id":1,"capture":"x y"})") ==
        "'capture' in spool.delete 'x y' has ' ': only A-Z a-z 0-9 . _ - are allowed");
  CHECK(error_of(R"({"type":"spool.delete","id":1,"capture":"x","run":"y"})") ==
        "unknown key 'run' in spool.delete (known: type, id, capture)");
  CHECK(error_of(R"({"type":"status","id":1,"verbose":true})") == "unknown key 'verbose' in status (known: type, id)");
}

TEST_CASE("an error carries the request's id when it could be read", "[agent][protocol]") {
  try {
    parse_request(R"({"type":"nope","id":"abc"})");
    FAIL("accepted");
  } catch (const ProtocolError& e) {
    CHECK(e.id() == "abc");
    json r = error_reply(e.id(), e.what());
    CHECK(r["type"] == "error");
    CHECK(r["ok"] == false);
    CHECK(r["id"] == "abc");
  }
  try {
    parse_request("not json");
    FAIL("accepted");
  } catch (const ProtocolError& e) {
    CHECK(e.id().is_null());
  }
}

TEST_CASE("requests round-trip through request_line", "[agent][protocol]") {
  Request r;
  r.type = RequestType::kProbesStart;
  r.id = 9;
  ProbeRequest p;
  p.name = "carrier";
  p.interfaces = {"eth0"};
  p.interval_ms = 20;
  r.probes = {p};
  std::string line = request_line(r);
  REQUIRE(line.back() == '\n');
  auto back = parse_request(std::string_view(line).substr(0, line.size() - 1));
  CHECK(back.id == 9);
  REQUIRE(back.probes.size() == 1);
  CHECK(back.probes[0].name == "carrier");
  CHECK(back.probes[0].interfaces == std::vector<std::string>{"eth0"});
  CHECK(back.probes[0].interval_ms == 20);

  Request f;
  f.type = RequestType::kSpoolFetch;
  f.id = "x";
  f.from_seq = 1234;
  f.follow = false;
  std::string fl = request_line(f);
  auto fb = parse_request(std::string_view(fl).substr(0, fl.size() - 1));
  CHECK(fb.from_seq == 1234);
  CHECK_FALSE(fb.follow);
  CHECK(fb.max_count == 0);
  CHECK(fl.find("max_count") == std::string::npos);  // an unpaged fetch is the request it always was
  Request d;
  d.type = RequestType::kSpoolDelete;
  d.id = 9;
  d.capture = "20261126T120000-42-1";
  std::string dl = request_line(d);
  CHECK(parse_request(std::string_view(dl).substr(0, dl.size() - 1)).capture == d.capture);
  f.max_count = 500;
  fl = request_line(f);
  CHECK(parse_request(std::string_view(fl).substr(0, fl.size() - 1)).max_count == 500);
}

TEST_CASE("sample lines are byte for byte what nlohmann::json writes for the same fields", "[agent][protocol]") {
  // sample_line copies plain strings itself and formats numbers with to_chars and fmt; the
  // reference is the library's dump of each field, in the same order.
  auto reference = [](uint64_t seq, const ocslab::Sample& s) {
    auto str = [](const std::string& v) { return json(v).dump(-1, ' ', false, json::error_handler_t::replace); };
    return "{\"type\":\"sample\",\"seq\":" + std::to_string(seq) + ",\"t_ns\":" + std::to_string(s.t_ns) +
           ",\"mono_ns\":" + std::to_string(s.mono_ns) + ",\"host\":" + str(s.host) + ",\"source\":" + str(s.source) +
           ",\"subject\":" + str(s.subject) + ",\"signal\":" + str(s.signal) +
           ",\"value\":" + (std::isfinite(s.value) ? fmt::format("{}", s.value) : "null") + ",\"unit\":" + str(s.unit) +
           "}\n";
  };
  const std::string odd[] = {"",       "lab-host-01",  "quote \" in",   "back\\slash", "tab\there",  "nl\n",
                             "\x01\x1f", "del\x7f",      "caf\xc3\xa9",    "bad\xff\xfe",  "/slash/", "ens1f0.100"};
  const double values[] = {0, -0.0, 1, 1000, 0.1, -3.25, 1e300, 5e-324, 123456789.125,
                           std::numeric_limits<double>::infinity(), std::numeric_limits<double>::quiet_NaN()};
  uint64_t seq = 1;
  for (const auto& text : odd) {
    for (double v : values) {
      ocslab::Sample s{-5, 9223372036854775807, text, "carrier", text, "signal", v, text};
      INFO("field \"" << text << "\" value " << v);
      CHECK(sample_line(seq, s) == reference(seq, s));
      std::string appended = "x";
      append_sample_line(appended, seq, s);
      CHECK(appended == "x" + reference(seq, s));
      seq = seq * 7 + 1;
    }
  }
}

TEST_CASE("samples round-trip, with seq readable from the line's prefix", "[agent][protocol]") {
  ocslab::Sample s{1700000000000000001, 42, "host \"a\"", "carrier", "ens1f0,x", "carrier", -3.25, "dBm\n"};
  std::string line = sample_line(17, s);
  REQUIRE(line.back() == '\n');
  std::string_view body(line.data(), line.size() - 1);
  CHECK(body.find('\n') == std::string_view::npos);  // one line even with a newline in a field
  CHECK(sample_line_seq(body) == 17u);
  auto back = parse_sample(parse_message(body));
  CHECK(back.seq == 17);
  CHECK(back.sample.t_ns == s.t_ns);
  CHECK(back.sample.mono_ns == 42);
  CHECK(back.sample.host == s.host);
  CHECK(back.sample.subject == s.subject);
  CHECK(back.sample.value == -3.25);
  CHECK(back.sample.unit == "dBm\n");

  s.value = std::numeric_limits<double>::quiet_NaN();
  std::string nan_line = sample_line(18, s);
  CHECK(nan_line.find("\"value\":null") != std::string::npos);
  CHECK(std::isnan(parse_sample(parse_message(nan_line)).sample.value));

  s.value = 0.1;
  CHECK(parse_sample(parse_message(sample_line(19, s))).sample.value == 0.1);  // shortest exact form

  CHECK_FALSE(sample_line_seq(R"({"type":"status","id":1})"));
  CHECK_FALSE(sample_line_seq(R"({"type":"sample","seq":12)"));
  CHECK_THROWS_AS(parse_sample(json{{"type", "sample"}, {"seq", 0}}), ProtocolError);
  CHECK_THROWS_AS(parse_message("[]"), ProtocolError);
  CHECK_THROWS_AS(parse_message(R"({"no":"type"})"), ProtocolError);
}

TEST_CASE("LineReader splits lines across arbitrary chunks and skips over-long ones", "[agent][protocol]") {
  LineReader r(16);
  r.feed("ab");
  CHECK_FALSE(r.next());
  r.feed("c\r\nde");
  auto l = r.next();
  REQUIRE(l);
  CHECK(l->text == "abc");
  CHECK_FALSE(r.next());
  r.feed("f\n\n");
  CHECK(r.next()->text == "def");
  CHECK(r.next()->text == "");
  CHECK_FALSE(r.next());

  r.feed(std::string(40, 'x'));
  auto too_long = r.next();
  REQUIRE(too_long);
  CHECK(too_long->too_long);
  r.feed(std::string(40, 'y'));
  CHECK_FALSE(r.next());  // still inside the over-long line: reported once
  r.feed("yy\nok\n");
  CHECK(r.next()->text == "ok");

  r.feed(std::string(20, 'z') + "\n" + "fine\n");  // over-long but complete in one chunk
  CHECK(r.next()->too_long);
  CHECK(r.next()->text == "fine");
}
