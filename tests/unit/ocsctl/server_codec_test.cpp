// Server-side protocol semantics shared by the OCS emulator and the grammar test peers:
// the NETCONF cross-connects edit-config evaluation, the SCPI error queue and string data,
// and the TL1 response body.
#include <catch2/catch.hpp>

#include <variant>

#include "ocslab/ocsctl/netconf_codec.h"
#include "ocslab/ocsctl/scpi_codec.h"
#include "ocslab/ocsctl/tl1_codec.h"

using namespace ocslab;
using namespace ocslab::ocs;

namespace {

// 4x4: ingress 1..4, egress 5..8.
CrossConnectEditRules rules_4x4(bool replace_patched = false) {
  CrossConnectEditRules r;
  r.list_name = "pair";
  r.revision = "2018-01-09";
  r.replace_patched = replace_patched;
  r.is_ingress = [](Port p) { return p >= 1 && p <= 4; };
  r.is_egress = [](Port p) { return p >= 5 && p <= 8; };
  return r;
}

std::variant<CrossConnectEdit, RpcError> edit(const std::vector<Circuit>& current, const std::string& config_inner,
                                              const CrossConnectEditRules& rules) {
  auto msg = parse_netconf_message(build_rpc(1, build_edit_config(config_inner)));
  return evaluate_cross_connect_edit(current, parse_rpc(msg).op, rules);
}

std::string cc(const std::string& inner, const std::string& attr = "") {
  return "<cross-connects xmlns=\"" + std::string(kOpticalSwitchNs) + "\"" + attr + ">" + inner + "</cross-connects>";
}

std::string xc(Port in, Port eg, const std::string& op = "") {
  std::string attr = op.empty() ? "" : " operation=\"" + op + "\"";
  return "<pair" + attr + "><ingress>" + std::to_string(in) + "</ingress><egress>" + std::to_string(eg) +
         "</egress></pair>";
}

RpcError error_of(const std::variant<CrossConnectEdit, RpcError>& v) {
  REQUIRE(std::holds_alternative<RpcError>(v));
  return std::get<RpcError>(v);
}

CrossConnectEdit edit_of(const std::variant<CrossConnectEdit, RpcError>& v) {
  if (auto* e = std::get_if<RpcError>(&v)) FAIL(e->tag + ": " + e->message);
  return std::get<CrossConnectEdit>(v);
}

}  // namespace

TEST_CASE("cross-connect edit: merges, deletes and re-keying compute drop and add") {
  std::vector<Circuit> current{{1, 5}, {2, 6}};
  SECTION("a merge of a new pair only adds") {
    auto e = edit_of(edit(current, cc(xc(3, 7)), rules_4x4()));
    CHECK(e.drop.empty());
    CHECK(e.add == std::vector<Circuit>{{3, 7}});
  }
  SECTION("a merge re-keys its ingress to the new egress") {
    auto e = edit_of(edit(current, cc(xc(1, 7)), rules_4x4()));
    CHECK(e.drop == std::vector<Port>{1});
    CHECK(e.add == std::vector<Circuit>{{1, 7}});
  }
  SECTION("an unchanged pair changes nothing") {
    auto e = edit_of(edit(current, cc(xc(1, 5)), rules_4x4()));
    CHECK(e.drop.empty());
    CHECK(e.add.empty());
  }
  SECTION("delete by ingress, and a container delete clears everything") {
    auto e = edit_of(edit(current, cc("<pair operation=\"delete\"><ingress>2</ingress></pair>"), rules_4x4()));
    CHECK(e.drop == std::vector<Port>{2});
    CHECK(e.add.empty());
    e = edit_of(edit(current, cc("", " operation=\"remove\""), rules_4x4()));
    CHECK(e.drop == std::vector<Port>{1, 2});
  }
  SECTION("remove of an absent pair is fine, delete is data-missing") {
    CHECK(edit_of(edit(current, cc("<pair operation=\"remove\"><ingress>3</ingress></pair>"), rules_4x4())).drop.empty());
    auto err = error_of(edit(current, cc("<pair operation=\"delete\"><ingress>3</ingress></pair>"), rules_4x4()));
    CHECK(err.tag == "data-missing");
    CHECK(err.message == "No cross-connect on ingress port 3");
  }
  SECTION("create on a connected ingress is data-exists") {
    auto err = error_of(edit(current, cc(xc(1, 7, "create")), rules_4x4()));
    CHECK(err.tag == "data-exists");
    CHECK(err.message == "Cross-connect on ingress port 1 exists");
  }
}

TEST_CASE("cross-connect edit: taken egress is in-use unless replace_patched") {
  std::vector<Circuit> current{{1, 5}};
  auto err = error_of(edit(current, cc(xc(2, 5)), rules_4x4()));
  CHECK(err.tag == "in-use");
  CHECK(err.message == "Port already connected: 5");
  auto e = edit_of(edit(current, cc(xc(2, 5)), rules_4x4(true)));
  CHECK(e.drop == std::vector<Port>{1});
  CHECK(e.add == std::vector<Circuit>{{2, 5}});
}

TEST_CASE("cross-connect edit: egresses freed and taken within one request") {
  std::vector<Circuit> current{{1, 5}, {2, 6}, {3, 7}};
  SECTION("a swap re-keys both ingresses: nothing is in use") {
    auto e = edit_of(edit(current, cc(xc(1, 6) + xc(2, 5)), rules_4x4()));
    CHECK(e.drop == std::vector<Port>{1, 2});
    CHECK(e.add == std::vector<Circuit>{{1, 6}, {2, 5}});
  }
  SECTION("an egress freed by an earlier merge is free for a later one") {
    auto e = edit_of(edit(current, cc(xc(4, 5) + xc(1, 8)), rules_4x4()));
    CHECK(e.drop == std::vector<Port>{1});
    CHECK(e.add == std::vector<Circuit>{{1, 8}, {4, 5}});
  }
  SECTION("replacing takes each egress from whoever holds it after the merges before") {
    auto e = edit_of(edit(current, cc(xc(4, 5) + xc(1, 7)), rules_4x4(true)));
    CHECK(e.drop == std::vector<Port>{1, 3});
    CHECK(e.add == std::vector<Circuit>{{1, 7}, {4, 5}});
    auto err = error_of(edit(current, cc(xc(4, 5) + xc(1, 7)), rules_4x4()));
    CHECK(err.tag == "in-use");
    CHECK(err.message == "Port already connected: 7");
  }
}

TEST_CASE("cross-connect edit: invalid requests and the two wordings") {
  auto rules = rules_4x4();
  auto err = error_of(edit({}, cc(xc(5, 6)), rules));
  CHECK(err.tag == "invalid-value");
  CHECK(err.message == "Invalid OXC port: 5");
  err = error_of(edit({}, cc(xc(1, 5) + xc(2, 5)), rules));
  CHECK(err.tag == "invalid-value");
  CHECK(err.message == "Port used twice in request: " + to_string(Circuit{2, 5}));
  err = error_of(edit({}, cc("<pairs><ingress>1</ingress><egress>5</egress></pairs>"), rules));
  CHECK(err.tag == "unknown-element");
  CHECK(err.message == "Unknown element 'pairs' in cross-connects (optical-switch 2018-01-09 uses 'pair')");
  err = error_of(edit({}, cc(xc(1, 5, "frobnicate")), rules));
  CHECK(err.tag == "bad-attribute");
  CHECK(err.type == "protocol");
  err = error_of(edit({}, cc("<pair><ingress>1</ingress></pair>"), rules));
  CHECK(err.tag == "missing-element");
  CHECK(err.message == "Missing element 'egress'");
  std::string long_text(100, 'x');
  err = error_of(edit({}, cc("<pair><ingress>" + long_text + "</ingress><egress>5</egress></pair>"), rules));
  CHECK(err.message == "Invalid OXC port: " + long_text.substr(0, 64));

  // The test peer's wording: same tags, shorter texts, request text echoed whole.
  rules.port_noun = "port";
  rules.echo_limit = std::string::npos;
  rules.name_pair_used_twice = false;
  CHECK(error_of(edit({}, cc(xc(5, 6)), rules)).message == "Invalid port: 5");
  CHECK(error_of(edit({}, cc(xc(1, 5) + xc(2, 5)), rules)).message == "Port used twice in request");
  CHECK(error_of(edit({}, cc("<pair><ingress>" + long_text + "</ingress><egress>5</egress></pair>"), rules)).message ==
        "Invalid port: " + long_text);
}

TEST_CASE("cross-connect edit: only running, and config is required") {
  auto rpc = [](const std::string& body) {
    return parse_netconf_message(build_rpc(1, body));
  };
  auto msg = rpc("<edit-config><target><candidate/></target><config/></edit-config>");
  auto err = error_of(evaluate_cross_connect_edit({}, parse_rpc(msg).op, rules_4x4()));
  CHECK(err.tag == "invalid-value");
  CHECK(err.type == "protocol");
  msg = rpc("<edit-config><target><running/></target></edit-config>");
  err = error_of(evaluate_cross_connect_edit({}, parse_rpc(msg).op, rules_4x4()));
  CHECK(err.tag == "missing-element");
  msg = rpc("<edit-config><target><running/></target><config><port-config/></config></edit-config>");
  err = error_of(evaluate_cross_connect_edit({}, parse_rpc(msg).op, rules_4x4()));
  CHECK(err.tag == "unknown-element");
  CHECK(err.message == "Unknown element 'port-config'");
}

TEST_CASE("scpi error queue: oldest first, overflow marks the loss, replies parse back") {
  ScpiErrorQueue q(3);
  CHECK(q.pop_reply() == "0,\"No error\"");
  q.push(-222, "Data out of range; say \"hi\"");
  CHECK(q.pop_reply() == "-222,\"Data out of range; say \"\"hi\"\"\"");
  for (int i = 0; i < 5; ++i) q.push(-100 - i, "e" + std::to_string(i));
  CHECK(q.size() == 3);
  CHECK(q.pop_reply() == "-100,\"e0\"");
  CHECK(q.pop_reply() == "-101,\"e1\"");
  auto last = parse_scpi_error(q.pop_reply());
  CHECK(last.code == -350);
  CHECK(last.message == "Queue overflow");
  CHECK(q.empty());
  q.push(-102, "Syntax error");
  q.clear();
  CHECK(q.pop_reply() == "0,\"No error\"");
  CHECK(format_scpi_string("a\"b") == "\"a\"\"b\"");
}

TEST_CASE("tl1 response bodies and quoted data") {
  CHECK(tl1_quote_data("a\"b\\c") == "\"a\\\"b\\\\c\"");
  CHECK(format_tl1_response_body("7", true, {"1,33:x", "q\""}, "", "", "\r\n") ==
        "M  7 COMPLD\r\n   \"1,33:x\"\r\n   \"q\\\"\"\r\n");
  CHECK(format_tl1_response_body("8", false, {}, "IDNV", "Invalid OXC port: 1000", "\n") ==
        "M  8 DENY\n   IDNV\n   /* Invalid OXC port: 1000 */\n");
}
