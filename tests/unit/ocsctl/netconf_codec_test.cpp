// NETCONF framing and XML codec: both RFC 6242 framings under every split, the strict
// chunk-header checks, hello capability parsing and rpc-reply / rpc-error decoding.
#include <catch2/catch.hpp>

#include "ocslab/ocsctl/netconf_codec.h"

using namespace ocslab;
using namespace ocslab::ocs;

namespace {

// Runs fn once and returns the message of the exception of type E it threw ("" if none).
template <class E, class F>
std::string thrown(F&& fn) {
  try {
    fn();
  } catch (const E& e) {
    return e.what();
  }
  return "(nothing thrown)";
}

std::vector<std::string> drain(FrameDecoder& d) {
  std::vector<std::string> out;
  while (auto m = d.next()) out.push_back(*m);
  return out;
}

std::vector<std::string> feed_bytewise(FrameDecoder& d, const std::string& wire) {
  std::vector<std::string> out;
  for (char c : wire) {
    d.feed(std::string_view(&c, 1));
    for (auto& m : drain(d)) out.push_back(m);
  }
  return out;
}

void expect_chunked_error(const std::string& wire, const std::string& reason, size_t max = kDefaultMaxNetconfMessage) {
  INFO("wire: " << wire);
  FrameDecoder whole(Framing::kChunked, max);
  whole.feed(wire);
  CHECK_THAT(thrown<ProtocolError>([&] { (void)drain(whole); }), Catch::Contains(reason));
  FrameDecoder bytewise(Framing::kChunked, max);
  CHECK_THAT(thrown<ProtocolError>([&] { (void)feed_bytewise(bytewise, wire); }), Catch::Contains(reason));
}

}  // namespace

TEST_CASE("end-of-message framing splits messages whole and byte at a time") {
  std::string wire = "<a/>]]>]]><b>x]]></b>]]>]]>\n<c/>]]>]]>";
  FrameDecoder whole;
  whole.feed(wire);
  auto msgs = drain(whole);
  REQUIRE(msgs == std::vector<std::string>{"<a/>", "<b>x]]></b>", "\n<c/>"});
  FrameDecoder bytewise;
  CHECK(feed_bytewise(bytewise, wire) == msgs);
  CHECK(bytewise.pending() == 0);
  CHECK(encode_frame("<a/>", Framing::kEndOfMessage) == "<a/>]]>]]>");
}

TEST_CASE("end-of-message framing enforces the size bound") {
  FrameDecoder d(Framing::kEndOfMessage, 16);
  d.feed(std::string(17, 'x'));
  CHECK_THAT(thrown<ProtocolError>([&] { (void)d.next(); }), Catch::Contains("within 16 bytes"));
  CHECK_THROWS_AS(d.next(), ProtocolError);  // stays failed
}

TEST_CASE("chunked framing: several chunks and messages per feed, any split") {
  std::string m1 = "<rpc-reply message-id=\"1\"><ok/></rpc-reply>";
  std::string m2 = "<rpc-reply message-id=\"2\"><data/></rpc-reply>";
  std::string wire = encode_frame(m1, Framing::kChunked, 5) + encode_frame(m2, Framing::kChunked);
  CHECK(wire.substr(0, 4) == "\n#5\n");
  CHECK(encode_frame("abc", Framing::kChunked) == "\n#3\nabc\n##\n");
  FrameDecoder whole(Framing::kChunked);
  whole.feed(wire);
  CHECK(drain(whole) == std::vector<std::string>{m1, m2});
  FrameDecoder bytewise(Framing::kChunked);
  CHECK(feed_bytewise(bytewise, wire) == std::vector<std::string>{m1, m2});
  // Every two-piece split.
  for (size_t cut = 0; cut <= wire.size(); ++cut) {
    FrameDecoder d(Framing::kChunked);
    d.feed(wire.substr(0, cut));
    auto got = drain(d);
    d.feed(wire.substr(cut));
    for (auto& m : drain(d)) got.push_back(m);
    REQUIRE(got == std::vector<std::string>{m1, m2});
  }
  // Hand-written example in the RFC 6242 style: two chunks "\n#4\n" + "\n#18\n".
  FrameDecoder rfc(Framing::kChunked);
  rfc.feed("\n#4\n<rpc\n#18\n message-id=\"102\"\n\n##\n");
  CHECK(drain(rfc) == std::vector<std::string>{"<rpc message-id=\"102\"\n"});
}

TEST_CASE("framing switches to chunked after the hello even within one read") {
  FrameDecoder d;
  d.feed("<hello/>]]>]]>" + encode_frame("<rpc-reply/>", Framing::kChunked));
  REQUIRE(d.next() == std::optional<std::string>("<hello/>"));
  d.set_framing(Framing::kChunked);
  CHECK(d.next() == std::optional<std::string>("<rpc-reply/>"));
  CHECK(d.next() == std::nullopt);
}

TEST_CASE("malformed chunked framing is a ProtocolError naming the fault") {
  expect_chunked_error("#4\nabcd\n##\n", "must start with LF");
  expect_chunked_error("\nX4\nabcd\n##\n", "expected '#' after LF");
  expect_chunked_error("\n#0\n\n##\n", "without leading zeros");
  expect_chunked_error("\n#04\nabcd\n##\n", "without leading zeros");
  expect_chunked_error("\n#-4\nabcd\n##\n", "expected chunk size or '#'");
  expect_chunked_error("\n#4 \nabcd\n##\n", "must be followed by LF");
  expect_chunked_error("\n#4abcd\n##\n", "must be followed by LF");
  expect_chunked_error("\n#4294967296\n", "exceeds 4294967295");
  expect_chunked_error("\n#12345678901\n", "more than 10 digits");
  expect_chunked_error("\n##\n", "without any chunk");
  expect_chunked_error("\n#4\nabcd\n##X", "must be followed by LF");
  expect_chunked_error("\n#4\nabcdX#4\n", "must start with LF");  // data longer than announced
  expect_chunked_error("\n#4\nabcd\n#4\nefgh\n##\n", "over the 6 byte limit", 6);
  // The largest legal size is accepted as a header (the message bound applies separately).
  FrameDecoder big(Framing::kChunked, size_t{8} << 30);
  big.feed("\n#4294967295\nabc");
  CHECK(big.next() == std::nullopt);
}

TEST_CASE("server hello: base:1.1 and the optical-switch revision pick framing and list name") {
  auto modern = parse_hello(parse_netconf_message(
      "<?xml version=\"1.0\"?><nc:hello xmlns:nc=\"urn:ietf:params:xml:ns:netconf:base:1.0\"><nc:capabilities>"
      "<nc:capability>urn:ietf:params:netconf:base:1.0</nc:capability>"
      "<nc:capability> urn:ietf:params:netconf:base:1.1 </nc:capability>"
      "<nc:capability>http://www.polatis.com/yang/optical-switch?module=optical-switch&amp;revision=2018-01-09"
      "</nc:capability></nc:capabilities><nc:session-id>42</nc:session-id></nc:hello>"));
  CHECK(modern.base10);
  CHECK(modern.base11);
  CHECK(modern.session_id == "42");
  CHECK(modern.optical_revision == "2018-01-09");
  CHECK(pair_list_name(modern.optical_revision) == "pair");

  auto old = parse_hello(parse_netconf_message(build_hello(
      {kNetconfBase10, "http://www.polatis.com/yang/optical-switch?module=optical-switch&revision=2016-01-01",
       "http://www.polatis.com/yang/polatis-switch?module=polatis-switch&revision=2016-01-01"},
      "7")));
  CHECK(old.base10);
  CHECK_FALSE(old.base11);
  CHECK(old.optical_revision == "2016-01-01");
  CHECK(pair_list_name(old.optical_revision) == "pairs");
  CHECK(pair_list_name("2017-08-03") == "pairs");
  CHECK(pair_list_name("2017-08-04") == "pair");
  CHECK(pair_list_name("") == "pair");

  CHECK_THAT(thrown<ProtocolError>([&] { (void)parse_hello(parse_netconf_message("<hello><capabilities/></hello>")); }), Catch::Contains("neither"));
  CHECK_THAT(thrown<ProtocolError>([&] { (void)parse_hello(parse_netconf_message("<rpc-reply/>")); }), Catch::Contains("expected <hello>"));
  CHECK_THAT(thrown<ProtocolError>([&] { (void)parse_netconf_message("<hello><capabilities></hello>"); }), Catch::Contains("malformed XML"));
}

TEST_CASE("rpc-reply: ok, data with prefixes, rpc-error becomes DenyError") {
  auto ok = parse_rpc_reply(parse_netconf_message(build_ok_reply("5")));
  CHECK(ok.ok);
  CHECK(ok.message_id == "5");
  CHECK_FALSE(ok.data);

  auto data = parse_rpc_reply(parse_netconf_message(
      "<nc:rpc-reply xmlns:nc=\"urn:ietf:params:xml:ns:netconf:base:1.0\" message-id=\"9\"><nc:data>"
      "<os:cross-connects xmlns:os=\"http://www.polatis.com/yang/optical-switch\">"
      "<os:pair><os:ingress>1</os:ingress><os:egress> 33 </os:egress></os:pair>"
      "<os:pairs><os:ingress>2</os:ingress><os:egress>34</os:egress></os:pairs></os:cross-connects>"
      "<os:opm-power xmlns:os=\"http://www.polatis.com/yang/optical-switch\"><os:port><os:port-id>33</os:port-id>"
      "<os:power>-3.25</os:power></os:port></os:opm-power>"
      "<product-information xmlns=\"http://www.polatis.com/yang/optical-switch\"><manufacturer>Polatis</manufacturer>"
      "<model-name>N-VST-48x48-HU1</model-name><serial-number>12345</serial-number></product-information>"
      "</nc:data></nc:rpc-reply>"));
  CHECK(data.message_id == "9");
  REQUIRE(data.data);
  CHECK(parse_cross_connects(data.data) == std::vector<Circuit>{{1, 33}, {2, 34}});
  auto power = parse_opm_power(data.data);
  REQUIRE(power.size() == 1);
  CHECK(power[0].port == 33);
  CHECK(power[0].dbm == Approx(-3.25));
  auto pi = parse_product_information(data.data);
  CHECK(pi.manufacturer == "Polatis");
  CHECK(pi.model == "N-VST-48x48-HU1");
  CHECK(pi.serial == "12345");
  CHECK(pi.software_version.empty());  // missing leaves are tolerated

  auto error = parse_netconf_message(build_error_reply("3", {"application", "invalid-value", "error", "Invalid port: 1000"}));
  try {
    parse_rpc_reply(error);
    FAIL("rpc-error did not throw");
  } catch (const DenyError& e) {
    CHECK(e.code() == "invalid-value");
    CHECK(e.text() == "Invalid port: 1000");
    CHECK_THAT(e.what(), Catch::Matchers::Contains("rpc-error invalid-value (application): Invalid port: 1000"));
  }
  // A warning alone is not a failure.
  auto warn = parse_rpc_reply(parse_netconf_message(
      "<rpc-reply message-id=\"4\"><rpc-error><error-tag>x</error-tag><error-severity>warning</error-severity>"
      "</rpc-error><ok/></rpc-reply>"));
  CHECK(warn.ok);
  CHECK_THROWS_AS(parse_rpc_reply(parse_netconf_message("<hello/>")), ProtocolError);
  CHECK_THAT(thrown<ProtocolError>([&] { (void)parse_cross_connects(parse_netconf_message(
                           "<data><cross-connects><pair><ingress>x</ingress><egress>3</egress></pair>"
                           "</cross-connects></data>").root); }), Catch::Contains("'x' is not a port number"));
}

TEST_CASE("rpc requests round-trip through build_rpc and parse_rpc") {
  std::string xml = build_rpc(12, build_edit_config(build_cross_connects({{1, 33}}, {2}, "pairs")));
  auto req = parse_rpc(parse_netconf_message(xml));
  CHECK(req.message_id == "12");
  CHECK(req.operation == "edit-config");
  auto cc = child_local(child_local(req.op, "config"), "cross-connects");
  REQUIRE(cc);
  auto pairs = children_local(cc, "pairs");
  REQUIRE(pairs.size() == 2);
  CHECK(attribute_local(pairs[0], "operation") == std::optional<std::string>("delete"));
  CHECK(child_text(pairs[0], "ingress") == std::optional<std::string>("2"));
  CHECK_FALSE(attribute_local(pairs[1], "operation"));
  CHECK(parse_cross_connects(cc) == std::vector<Circuit>{{1, 33}});
  CHECK_THROWS_AS(build_rpc(1, "<unclosed>"), std::invalid_argument);
  CHECK_THAT(thrown<ProtocolError>([&] { (void)parse_rpc(parse_netconf_message("<rpc message-id=\"1\"/>")); }), Catch::Contains("without an operation"));
  CHECK_THAT(thrown<ProtocolError>([&] { (void)parse_rpc(parse_netconf_message("<rpc><get/><get/></rpc>")); }), Catch::Contains("more than one"));
  auto power = parse_rpc(parse_netconf_message(build_rpc(2, build_get(build_opm_power_filter({5, 40})))));
  auto ports = children_local(child_local(child_local(power.op, "filter"), "opm-power"), "port");
  REQUIRE(ports.size() == 2);
  CHECK(child_text(ports[1], "port-id") == std::optional<std::string>("40"));
  CHECK(xml_escape("a<b&\"c'>") == "a&lt;b&amp;&quot;c&apos;&gt;");
}

TEST_CASE("switch size from Polatis model names") {
  CHECK(switch_size_from_model("N-VST-48x48-HU1-DMHNV-405") == std::optional<std::pair<int, int>>({48, 48}));
  CHECK(switch_size_from_model("Series 6000 384x384") == std::optional<std::pair<int, int>>({384, 384}));
  CHECK(switch_size_from_model("OST-16x32") == std::optional<std::pair<int, int>>({16, 32}));
  CHECK(switch_size_from_model("N-VST-192xCC-HU1") == std::optional<std::pair<int, int>>({96, 96}));
  CHECK_FALSE(switch_size_from_model("Polatis 7000"));
  CHECK_FALSE(switch_size_from_model("x48"));
  CHECK(parse_port_config_ids(parse_netconf_message("<data><port-config><port><port-id>1</port-id></port>"
                                                    "<port><port-id>2</port-id></port></port-config></data>")
                                  .root) == std::vector<Port>{1, 2});
}
