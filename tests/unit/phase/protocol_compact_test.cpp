// The protocol's quick path (no JSON document per line) against the nlohmann path it stands in
// for: encode writes the same bytes as encode_json, and decode_compact either gives exactly
// what decode_json gives or declines (nullopt), never accepting a line decode_json refuses.
#include <catch2/catch.hpp>

#include <random>
#include <string>
#include <vector>

#include "ocslab/phase/protocol.h"

using namespace ocslab::phase;

namespace {

// Every type, with its optional fields both left out and set, and strings of every kind.
std::vector<Message> sample_messages() {
  const std::vector<std::string> texts{"g",
                                       "dp-s0_1",
                                       "",
                                       "a\"b",
                                       "back\\slash",
                                       "tab\there",
                                       "caf\xc3\xa9",
                                       "bad \xff utf8",
                                       "slash/and ~",
                                       std::string("nul\0x", 5)};
  std::vector<Message> out;
  for (auto t : {MsgType::kHello, MsgType::kRegister, MsgType::kRequest, MsgType::kDone, MsgType::kBye,
                 MsgType::kWelcome, MsgType::kRegistered, MsgType::kAck, MsgType::kFallback, MsgType::kPeerLost,
                 MsgType::kMasked, MsgType::kError}) {
    for (size_t i = 0; i < texts.size(); ++i) {
      const bool set = i % 2 == 0;
      Message m;
      m.type = t;
      m.job = texts[i];
      m.rank = static_cast<int>(i);
      m.world = 512;
      m.token = set ? texts[i] : "";
      m.group = texts[(i + 1) % texts.size()];
      m.dim = "dp";
      m.ranks = set ? std::vector<int>{0, 1, 1048576} : std::vector<int>{};
      m.seq = set ? (int64_t{1} << 53) : static_cast<int64_t>(i) - 1;
      m.op = set ? -1 : 7;
      m.provision = set;
      if (set) m.digit = 9;
      m.run = set ? 65536 : 0;
      m.topo = set ? std::map<std::string, std::string>{{"rail0", "012"}, {texts[i], texts[(i + 2) % texts.size()]}}
                   : std::map<std::string, std::string>{};
      m.reconfigured = !set;
      m.fallback = set;
      m.wait_us = set ? 123456789 : 0;
      m.keep = set ? 3 : 0;
      m.reason = texts[(i + 3) % texts.size()];
      m.message = texts[i];
      m.groups = set ? std::vector<std::string>{"a", texts[i]} : std::vector<std::string>{};
      m.rail = texts[(i + 4) % texts.size()];
      m.port = set ? 1048576 : 19;
      m.ingress = static_cast<int>(i) + 1;
      m.egress = static_cast<int>(i) + 17;
      out.push_back(m);
    }
  }
  return out;
}

// decode_compact agrees with decode_json on this line: the same message, or it declines.
// Returns whether the quick path took it.
bool check_agree(const std::string& line) {
  INFO(line);
  auto quick = wire::decode_compact(line);
  try {
    auto full = wire::decode_json(line, "x");
    if (quick) CHECK(*quick == full);
  } catch (const ProtocolError&) {
    CHECK_FALSE(quick.has_value());
  }
  return quick.has_value();
}

}  // namespace

TEST_CASE("encode writes byte for byte what the nlohmann encoder writes", "[phase][protocol]") {
  for (const auto& m : sample_messages()) {
    INFO(to_string(m.type) << " job " << m.job);
    CHECK(encode(m) == wire::encode_json(m));
  }
}

TEST_CASE("the quick decoder takes the lines the protocol writes and gives decode_json's message",
          "[phase][protocol]") {
  size_t quick = 0;
  for (const auto& m : sample_messages()) {
    const auto line = encode(m);
    check_agree(line);
    quick += wire::decode_compact(line).has_value();
  }
  CHECK(quick > 20);  // every type with plain strings and its required fields set
  Message req;
  req.type = MsgType::kRequest;
  req.group = "all_dp";
  req.seq = 11;
  req.op = 11;
  auto d = wire::decode_compact(encode(req));
  REQUIRE(d.has_value());
  CHECK(*d == decode(encode(req)));
  Message ack;
  ack.type = MsgType::kAck;
  ack.group = "all_dp";
  ack.seq = 11;
  ack.topo = {{"rail0", "12"}, {"rail1", "21"}};
  ack.wait_us = 42;
  CHECK(wire::decode_compact(encode(ack)) == std::optional<Message>(decode(encode(ack))));
}

TEST_CASE("the quick decoder declines what lies outside its subset; decode still decides", "[phase][protocol]") {
  const std::string base = R"("group":"g","seq":1,"type":"done","v":2)";
  CHECK(wire::decode_compact("{" + base + "}").has_value());
  for (std::string line : {
           R"({"group":"g","seq":1,"type":"done","v":2,"seq":2})",  // repeated key: nlohmann keeps the last
           R"({ "group":"g","seq":1,"type":"done","v":2})",         // whitespace
           R"({"group":"g","seq":1.0,"type":"done","v":2})",        // not an integer
           R"({"group":"g","seq":01,"type":"done","v":2})",         // not JSON
           R"({"group":"g","seq":1e2,"type":"done","v":2})",        // an exponent
           R"({"group":"g","seq":9999999999999999999,"type":"done","v":2})",
           R"({"group":"g\u0041","seq":1,"type":"done","v":2})",      // an escape
           R"({"group":"g","seq":1,"type":"done","v":2}x)",           // trailing bytes
           R"({"group":"g","seq":1,"type":"done","v":2,"x":null})",   // null
           R"({"group":"g","seq":1,"type":"done","v":2,"x":[[1]]})",  // nesting
           R"({"group":"g","seq":-1,"type":"done","v":2})",           // a check fails
           R"({"group":"","seq":1,"type":"done","v":2})",
           R"({"group":"g","seq":1,"type":"done","v":1})",
           R"({"group":"g","seq":1,"type":"jump","v":2})",
           R"({"group":"g","type":"done","v":2})",
       }) {
    INFO(line);
    CHECK_FALSE(wire::decode_compact(line).has_value());
    check_agree(line);
  }
  CHECK(decode(R"({"group":"g","seq":1,"type":"done","v":2,"seq":2})").seq == 2);
  CHECK(decode(R"({ "group":"g\u0041","seq":1,"type":"done","v":2})").group == "gA");
  CHECK_THROWS_WITH(decode(R"({"group":"g","seq":1.0,"type":"done","v":2})", "rank 3"),
                    Catch::Contains("rank 3: field 'seq' must be an integer"));
}

TEST_CASE("mutated lines: the quick decoder never accepts what decode_json refuses, nor differs", "[phase][protocol]") {
  std::vector<std::string> seeds;
  for (const auto& m : sample_messages()) seeds.push_back(encode(m));
  seeds.push_back(R"({"dim":"dp","group":"g","ranks":[0,1,2],"type":"register","v":2})");
  seeds.push_back(R"({"fallback":false,"job":"j","rank":1,"topo":{"r0":"1","r1":"2"},"type":"welcome","v":2})");
  const std::string alphabet = "{}[]:,\"\\-0123456789.eE tfrnul xyz\x01\x7f\xc3\xff";
  std::mt19937 rng(20261128);
  size_t taken = 0;
  for (int i = 0; i < 30000; ++i) {
    std::string line = seeds[rng() % seeds.size()];
    for (int k = 1 + static_cast<int>(rng() % 3); k > 0 && !line.empty(); --k) {
      const size_t at = rng() % line.size();
      const char c = alphabet[rng() % alphabet.size()];
      switch (rng() % 4) {
        case 0:
          line[at] = c;
          break;
        case 1:
          line.erase(at, 1 + rng() % 4);
          break;
        case 2:
          line.insert(at, 1, c);
          break;
        default:
          line.insert(at, line.substr(rng() % line.size(), rng() % 12));
      }
    }
    taken += check_agree(line);
  }
  CHECK(taken > 300);  // mutations the quick path still takes (digits changed, say) are compared too
}
