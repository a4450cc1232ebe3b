// The NETCONF grammar peer over plain TCP (no SSH): the bytes it puts on the wire for each
// framing, and its rpc-error replies, checked with the same codec the driver uses.
#include <catch2/catch.hpp>

#include "ocslab/ocsctl/netconf_codec.h"
#include "ocslab/ocsctl/stream.h"
#include "ocslab/testing/peers.h"

using namespace ocslab;
using namespace ocslab::ocs;
using namespace std::chrono_literals;

namespace {

// A raw client: collects the peer's bytes and cuts them with a FrameDecoder.
struct RawClient {
  explicit RawClient(int port) : stream(tcp_connect("127.0.0.1", port, 2000ms)) {}

  NetconfMessage next(std::string* wire = nullptr) {
    // load-safe: a hang guard for one message from the peer.
    Deadline deadline = Clock::now() + 3s;
    for (;;) {
      if (auto m = decoder.next()) return parse_netconf_message(*m);
      std::string bytes = stream->read_some(deadline);
      REQUIRE_FALSE(bytes.empty());
      if (wire) *wire += bytes;
      decoder.feed(bytes);
    }
  }

  std::unique_ptr<Stream> stream;
  FrameDecoder decoder;
};

}  // namespace

TEST_CASE("netconf peer over TCP: chunked after a base:1.1 hello, rpc-errors") {
  testing::PeerSwitch sw(32, 32);
  testing::TcpPeer peer(testing::PeerProtocol::kNetconf, sw);
  RawClient c(peer.port());
  std::string wire;
  auto hello = parse_hello(c.next(&wire));
  CHECK(wire.size() >= 6);
  CHECK(wire.substr(wire.size() - 6) == "]]>]]>");
  CHECK(hello.base11);
  CHECK(hello.optical_revision == "2018-01-09");
  CHECK_FALSE(hello.session_id.empty());
  c.stream->write(encode_frame(build_hello({kNetconfBase10, kNetconfBase11}), Framing::kEndOfMessage));
  c.decoder.set_framing(Framing::kChunked);

  // A request in three chunks, written one byte at a time.
  std::string req = encode_frame(build_rpc(1, build_get(build_opm_power_filter({1000}))), Framing::kChunked, 40);
  for (char ch : req) c.stream->write(std::string_view(&ch, 1));
  wire.clear();
  auto reply = c.next(&wire);
  CHECK(wire.substr(0, 2) == "\n#");
  CHECK(wire.substr(wire.size() - 4) == "\n##\n");
  try {
    parse_rpc_reply(reply);
    FAIL("no rpc-error");
  } catch (const DenyError& e) {
    CHECK(e.code() == "invalid-value");
    CHECK(e.text() == "Invalid port: 1000");
  }

  c.stream->write(encode_frame("<rpc message-id=\"2\"><get>", Framing::kChunked));
  CHECK_THROWS_WITH(parse_rpc_reply(c.next()), Catch::Contains("malformed-message"));
  c.stream->write(encode_frame(build_rpc(3, "<reboot-everything/>"), Framing::kChunked));
  auto unsupported = c.next();
  CHECK(std::string(unsupported.root.attribute("message-id").value()) == "3");
  CHECK_THROWS_WITH(parse_rpc_reply(unsupported), Catch::Contains("operation-not-supported"));

  // Wrong list name for this revision (2018: "pair"), and a delete of a missing pair.
  c.stream->write(
      encode_frame(build_rpc(4, build_edit_config(build_cross_connects({{1, 33}}, {}, "pairs"))), Framing::kChunked));
  CHECK_THROWS_WITH(parse_rpc_reply(c.next()), Catch::Contains("unknown-element"));
  c.stream->write(
      encode_frame(build_rpc(5, build_edit_config(build_cross_connects({}, {9}, "pair"))), Framing::kChunked));
  CHECK_THROWS_WITH(parse_rpc_reply(c.next()), Catch::Contains("data-missing"));
  CHECK(sw.circuits().empty());

  c.stream->write(
      encode_frame(build_rpc(6, build_edit_config(build_cross_connects({{1, 33}}, {}, "pair"))), Framing::kChunked));
  CHECK(parse_rpc_reply(c.next()).ok);
  CHECK(sw.circuits() == std::vector<Circuit>{{1, 33}});
  c.stream->write(
      encode_frame(build_rpc(7, "<get-config><source><running/></source></get-config>"), Framing::kChunked));
  auto config = parse_rpc_reply(c.next());
  CHECK(parse_cross_connects(config.data) == std::vector<Circuit>{{1, 33}});
  CHECK(parse_port_config_ids(config.data).size() == 64);
  CHECK(parse_product_information(config.data).model.empty());  // state data is not config

  c.stream->write(encode_frame(build_rpc(8, "<close-session/>"), Framing::kChunked));
  CHECK(parse_rpc_reply(c.next()).ok);
  auto history = sw.history();
  REQUIRE(history.size() == 8);
  CHECK_THAT(history[0], Catch::Contains("<port-id>1000</port-id>"));
  CHECK_THAT(history[7], Catch::Contains("close-session"));
}

TEST_CASE("netconf peer over TCP: base:1.0 only keeps end-of-message framing") {
  testing::PeerSwitch sw(8, 8);
  testing::PeerQuirks q;
  q.netconf_base11 = false;
  q.netconf_revision = "2016-01-01";
  testing::TcpPeer peer(testing::PeerProtocol::kNetconf, sw, q);
  RawClient c(peer.port());
  auto hello = parse_hello(c.next());
  CHECK_FALSE(hello.base11);
  CHECK(pair_list_name(hello.optical_revision) == "pairs");
  c.stream->write(encode_frame(build_hello({kNetconfBase10, kNetconfBase11}), Framing::kEndOfMessage));
  c.stream->write(encode_frame(build_rpc(1, build_edit_config(build_cross_connects({{2, 10}}, {}, "pairs"))),
                               Framing::kEndOfMessage));
  std::string wire;
  CHECK(parse_rpc_reply(c.next(&wire)).ok);
  CHECK(wire.substr(wire.size() - 6) == "]]>]]>");
  c.stream->write(
      encode_frame(build_rpc(2, build_get("<cross-connects xmlns=\"http://www.polatis.com/yang/optical-switch\"/>")),
                   Framing::kEndOfMessage));
  auto reply = parse_rpc_reply(c.next());
  REQUIRE(reply.data);
  CHECK(children_local(child_local(reply.data, "cross-connects"), "pairs").size() == 1);
  CHECK(parse_cross_connects(reply.data) == std::vector<Circuit>{{2, 10}});
}

TEST_CASE("netconf peer replace_patched: a merge onto a used egress replaces the old pair") {
  testing::PeerSwitch sw(8, 8);
  testing::PeerQuirks q;
  q.replace_patched = true;
  testing::TcpPeer peer(testing::PeerProtocol::kNetconf, sw, q);
  REQUIRE(sw.connect({{1, 9}}, false).empty());
  RawClient c(peer.port());
  parse_hello(c.next());
  c.stream->write(encode_frame(build_hello({kNetconfBase10}), Framing::kEndOfMessage));
  c.stream->write(encode_frame(build_rpc(1, build_edit_config(build_cross_connects({{2, 9}}, {}, "pair"))),
                               Framing::kEndOfMessage));
  CHECK(parse_rpc_reply(c.next()).ok);
  CHECK(sw.circuits() == std::vector<Circuit>{{2, 9}});
}
