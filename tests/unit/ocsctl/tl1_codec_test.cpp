#include <catch2/catch.hpp>

#include "ocslab/ocsctl/errors.h"
#include "ocslab/ocsctl/tl1_codec.h"

using namespace ocslab;
using namespace ocslab::ocs;

namespace {

std::string crlf(std::string s) {
  std::string out;
  for (char c : s) {
    if (c == '\n') out += '\r';
    out += c;
  }
  return out;
}

std::vector<Tl1Block> drain(Tl1ReplyParser& p) {
  std::vector<Tl1Block> out;
  while (auto b = p.next()) out.push_back(std::move(*b));
  return out;
}

std::vector<Tl1Block> parse_all(const std::string& bytes) {
  Tl1ReplyParser p;
  p.feed(bytes);
  return drain(p);
}

std::vector<Tl1Block> parse_bytewise(const std::string& bytes) {
  Tl1ReplyParser p;
  std::vector<Tl1Block> out;
  for (char c : bytes) {
    p.feed(std::string_view(&c, 1));
    for (auto& b : drain(p)) out.push_back(std::move(b));
  }
  return out;
}

// next_block() as the driver uses it: the block stays in the parser, which may reuse its
// fields for the next one (next() moves them out and so never sees that reuse).
std::vector<Tl1Block> parse_in_place(const std::string& bytes, size_t chunk) {
  Tl1ReplyParser p;
  std::vector<Tl1Block> out;
  for (size_t at = 0; at < bytes.size(); at += chunk) {
    p.feed(std::string_view(bytes).substr(at, chunk));
    while (Tl1Block* b = p.next_block()) out.push_back(*b);
  }
  return out;
}

void check_same(const std::vector<Tl1Block>& a, const std::vector<Tl1Block>& b) {
  REQUIRE(a.size() == b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    INFO("block " << i << ": " << a[i].text);
    CHECK(a[i].kind == b[i].kind);
    CHECK(a[i].sid == b[i].sid);
    CHECK(a[i].date == b[i].date);
    CHECK(a[i].time == b[i].time);
    CHECK(a[i].code == b[i].code);
    CHECK(a[i].tag == b[i].tag);
    CHECK(a[i].status == b[i].status);
    CHECK(a[i].data == b[i].data);
    CHECK(a[i].error_code == b[i].error_code);
    CHECK(a[i].comment == b[i].comment);
    CHECK(a[i].text == b[i].text);
  }
}

const std::string kList =
    "   OCS-1 24-05-01 12:00:01\n"
    "M  7 COMPLD\n"
    "   \"11,28\"\n"
    "   \"12,29\"\n"
    ";\n";

const std::string kDeny =
    "\n\n   \"OCS 1\" 24-05-01 12:00:02\n"
    "M  8 DENY\n"
    "   IDNV\n"
    "   /* Invalid OXC port: 1000 */\n"
    ";\n";

const std::string kAutonomous =
    "   OCS-1 24-05-01 12:00:03\n"
    "*C 1001 REPT ALM EQPT\n"
    "   \"PSU-1:CR,PWR,SA:\\\"Power supply 1 failed\\\"\"\n"
    ";\n";

}  // namespace

TEST_CASE("TL1 responses parse the same with CRLF and bare LF, whole or byte at a time") {
  for (const std::string& bytes : {kList, crlf(kList)}) {
    for (const auto& blocks : {parse_all(bytes), parse_bytewise(bytes)}) {
      REQUIRE(blocks.size() == 1);
      const auto& b = blocks[0];
      CHECK(b.kind == Tl1Block::Kind::kResponse);
      CHECK(b.sid == "OCS-1");
      CHECK(b.date == "24-05-01");
      CHECK(b.time == "12:00:01");
      CHECK(b.code == "M");
      CHECK(b.tag == "7");
      CHECK(b.status == "COMPLD");
      CHECK(b.data == std::vector<std::string>{"11,28", "12,29"});
      CHECK(b.error_code.empty());
      CHECK(b.text.find("M  7 COMPLD") != std::string::npos);
      CHECK(b.text.find('\r') == std::string::npos);
    }
  }
}

TEST_CASE("TL1 DENY carries its error code and comment") {
  for (const auto& blocks : {parse_all(crlf(kDeny)), parse_bytewise(kDeny)}) {
    REQUIRE(blocks.size() == 1);
    CHECK(blocks[0].sid == "OCS 1");
    CHECK(blocks[0].status == "DENY");
    CHECK(blocks[0].error_code == "IDNV");
    CHECK(blocks[0].comment == "Invalid OXC port: 1000");
    CHECK(blocks[0].data.empty());
  }
  // A comment may span lines and sit next to the code.
  auto b = parse_all("M  9 DENY\n   IIAC /* bad\n   access id */\n;");
  REQUIRE(b.size() == 1);
  CHECK(b[0].error_code == "IIAC");
  CHECK(b[0].comment == "bad access id");
}

TEST_CASE("TL1 prompts after ';' are skipped, with or without a line end") {
  std::string two = "   S 24-05-01 12:00:00\r\nM  1 COMPLD\r\n;<   S 24-05-01 12:00:00\r\nM  2 COMPLD\r\n;\r\n>\r\n";
  for (const auto& blocks : {parse_all(two), parse_bytewise(two)}) {
    REQUIRE(blocks.size() == 2);
    CHECK(blocks[0].tag == "1");
    CHECK(blocks[1].tag == "2");
  }
  // ';' completes a block at once: a driver must not wait for the line end to arrive.
  Tl1ReplyParser p;
  p.feed("M  3 COMPLD\n;");
  auto b = p.next();
  REQUIRE(b);
  CHECK(b->tag == "3");
}

TEST_CASE("TL1 autonomous messages between responses keep their own identity") {
  std::string bytes = crlf(kList + "<" + kAutonomous + "<\n   OCS-1 24-05-01 12:00:04\nA  1002 REPT EVT PORT\n   \"5:LOS,TC\"\n;\n" + kDeny);
  for (const auto& blocks : {parse_all(bytes), parse_bytewise(bytes)}) {
    REQUIRE(blocks.size() == 4);
    CHECK(blocks[0].tag == "7");
    CHECK(blocks[1].kind == Tl1Block::Kind::kAutonomous);
    CHECK(blocks[1].code == "*C");
    CHECK(blocks[1].tag == "1001");
    CHECK(blocks[1].status == "REPT ALM EQPT");
    CHECK(blocks[1].data == std::vector<std::string>{"PSU-1:CR,PWR,SA:\"Power supply 1 failed\""});
    CHECK(blocks[2].kind == Tl1Block::Kind::kAutonomous);
    CHECK(blocks[2].code == "A");
    CHECK(blocks[2].status == "REPT EVT PORT");
    CHECK(blocks[3].status == "DENY");
  }
  auto crit = parse_all("   S 24-05-01 12:00:00\n** 5 REPT ALM\n;\n*  6 REPT ALM\n;\n");
  REQUIRE(crit.size() == 2);
  CHECK(crit[0].code == "**");
  CHECK(crit[1].code == "*");
}

TEST_CASE("a stream of plain replies parses in one pass exactly as line by line") {
  // The one-pass path (a plain header, a plain response line and ';' all received) and its
  // reuse of the previous reply (the same bytes with another ctag) against the line-by-line
  // state machine, which a byte at a time always takes. Every change below must show.
  const std::string bytes =
      "   OCS 24-05-01 12:00:01\r\nM  1 COMPLD\r\n;\r\n<"
      "   OCS 24-05-01 12:00:01\r\nM  22 COMPLD\r\n;\r\n<"      // longer ctag
      "   OCS 24-05-01 12:00:01\r\nM  3 COMPLD\r\n;\r\n<"       // shorter again
      "   \"OCS 1\" 24-05-01 12:00:01\r\nM  4 COMPLD\r\n;\r\n"   // a SID of two words
      "   OCS 24-05-01 12:00:01\r\nM  \"q5\" COMPLD\r\n;\r\n"   // quoted ctag, unquoted
      "   OCS 24-05-01 12:00:01\r\nM  6 COMPLD\r\n;\r\n"
      "   OCS 24-05-01 12:00:02\r\nM  7 COMPLD\r\n;\r\n"         // the clock ticked
      "   OCS 24-05-01 12:00:02\nM  8 COMPLD\n;\n"                 // bare LF
      "   OCS 24-05-01 12:00:02\nM  9 compld\n;\n"                 // lower case status
      "   OCS 24-05-01 12:00:02\nM  10 DENY\n   IIAC\n   /* no */\n;\n"
      "   OCS 24-05-01 12:00:02\nM  11 DENY\n;\n"                  // a DENY without a body
      "   OCS 24-05-01 12:00:02\nM  12 DENY\n;\n"
      "   OCS 24-05-01 12:00:02\nM  13 COMPLD\n   \"1,33\"\n;\n"  // data: line by line
      "   OCS 24-05-01 12:00:02\n*C 14 REPT ALM EQPT\n;\n"         // autonomous
      "   OCS 24-05-01 12:00:02\nM  15 COMPLD\n;\n"
      "   OCS 24-05-01 12:00:02\nM  16 COMPLD\n  ;\n"              // blanks before ';'
      "   OCS 24-05-01 12:00:02\nM  17 COMPLD\n;"                   // ';' with nothing after
      "\tOCS\t24-05-01  12:00:02 \nM\t18   COMPLD \r\r\n;\n"     // other blanks
      "\tOCS\t24-05-01  12:00:02 \nM\t19   COMPLD \r\r\n;\n"
      "   OCS 24-05-01 12:00:02\n\nM  20 COMPLD\n;\n"              // a blank line between
      "   OCS 24-05-01 12:00:02\nM  21 COMPLD\n;\n";
  const auto expected = parse_bytewise(bytes);
  REQUIRE(expected.size() == 21);
  CHECK(expected[3].sid == "OCS 1");
  CHECK(expected[5].sid == "OCS");
  CHECK(expected[4].tag == "q5");
  CHECK(expected[8].status == "COMPLD");
  CHECK(expected[9].error_code == "IIAC");
  CHECK(expected[12].data == std::vector<std::string>{"1,33"});
  CHECK(expected[13].kind == Tl1Block::Kind::kAutonomous);
  CHECK(expected[17].tag == "18");
  CHECK(expected[17].text == "\tOCS\t24-05-01  12:00:02 \nM\t18   COMPLD \r\n;");
  check_same(parse_all(bytes), expected);
  for (size_t chunk : {bytes.size(), size_t{1}, size_t{7}, size_t{40}, size_t{64}}) {
    INFO("fed in chunks of " << chunk);
    check_same(parse_in_place(bytes, chunk), expected);
  }
}

TEST_CASE("TL1 acknowledgments are skipped") {
  std::string bytes = "IP 7\r\n<PF 7\r\n<OK\r\n<NA 7\r\n<NG 7\r\n<RL 7\r\n<" + crlf(kList);
  for (const auto& blocks : {parse_all(bytes), parse_bytewise(bytes)}) {
    REQUIRE(blocks.size() == 1);
    CHECK(blocks[0].tag == "7");
    CHECK(blocks[0].data.size() == 2);
  }
}

TEST_CASE("an incomplete block waits for more bytes") {
  Tl1ReplyParser p;
  p.feed("   S 24-05-01 12:00:00\r\nM  4 COMPLD\r\n   \"1,33\"\r\n");
  CHECK_FALSE(p.next());
  p.feed("   \"2,3");
  CHECK_FALSE(p.next());
  p.feed("4\"\r\n;");
  auto b = p.next();
  REQUIRE(b);
  CHECK(b->data == std::vector<std::string>{"1,33", "2,34"});
  CHECK_FALSE(p.next());
}

TEST_CASE("garbage from the switch is a ProtocolError naming the line") {
  CHECK_THROWS_AS(parse_all("hello world\r\n"), ProtocolError);
  CHECK_THROWS_WITH(parse_all("hello world\r\n"), Catch::Contains("\"hello world\""));
  CHECK_THROWS_WITH(parse_all("\x02\x7fjunk\r\n"), Catch::Contains("\\x02\\x7fjunk"));
  CHECK_THROWS_WITH(parse_all("   S 24-05-01 12:00:00\r\nnot an id line\r\n"), Catch::Contains("not an id line"));
  CHECK_THROWS_WITH(parse_all("M  1 COMPLD\r\n   \"unterminated\r\n"), Catch::Contains("unterminated"));
  CHECK_THROWS_WITH(parse_all("M  1 COMPLD EXTRA\r\n"), Catch::Contains("M  1 COMPLD EXTRA"));
  // The quoted line is cut short so a megabyte of junk does not become a megabyte of message.
  std::string long_junk(5000, 'x');
  try {
    parse_all(long_junk + "\n");
    FAIL("no exception");
  } catch (const ProtocolError& e) {
    CHECK(std::string(e.what()).size() < 400);
  }
  CHECK_THROWS_WITH(parse_bytewise("ok then\n"), Catch::Contains("ok then"));
}

TEST_CASE("a reply over 1 MiB without a terminator is refused") {
  Tl1ReplyParser p;
  p.feed("M  1 COMPLD\r\n");
  CHECK_FALSE(p.next());
  std::string line = "   \"" + std::string(1000, 'a') + "\"\r\n";
  bool thrown = false;
  for (int i = 0; i < 1100 && !thrown; ++i) {
    p.feed(line);
    try {
      if (p.next()) FAIL("a block without ';' completed");
    } catch (const ProtocolError& e) {
      CHECK_THAT(e.what(), Catch::Contains("without a terminator"));
      thrown = true;
    }
  }
  CHECK(thrown);
  Tl1ReplyParser q;
  q.feed(std::string(Tl1ReplyParser::kMaxPending + 10, 'z'));
  CHECK_THROWS_WITH(q.next(), Catch::Contains("without a terminator"));
}

TEST_CASE("TL1 commands parse into their fields") {
  auto c = parse_tl1_command("ent-patch::1&2,33&34:17:;\r\n");
  CHECK(c.verb == "ENT-PATCH");
  CHECK(c.tid.empty());
  CHECK(c.aid == "1&2,33&34");
  CHECK(c.ctag == "17");
  CHECK(c.params.empty());

  auto login = parse_tl1_command("ACT-USER::admin:\"a:b\"::root;");
  CHECK(login.verb == "ACT-USER");
  CHECK(login.aid == "admin");
  CHECK(login.ctag == "a:b");
  CHECK(login.positional == std::vector<std::string>{"root"});

  auto eq = parse_tl1_command("RTRV-EQPT:SW1:SYSTEM:5:GB:parameter=SIZE,Wave=\"1310\":extra");
  CHECK(eq.tid == "SW1");
  CHECK(eq.aid == "SYSTEM");
  CHECK(eq.gb == "GB");
  CHECK(eq.params.at("PARAMETER") == "SIZE");
  CHECK(eq.params.at("WAVE") == "1310");
  CHECK(eq.positional == std::vector<std::string>{"extra"});

  CHECK(parse_tl1_command("RTRV-HDR:::c1;").ctag == "c1");

  CHECK_THROWS_AS(parse_tl1_command(""), ProtocolError);
  CHECK_THROWS_WITH(parse_tl1_command(";"), Catch::Contains("empty command"));
  CHECK_THROWS_WITH(parse_tl1_command("RTRV-HDR;"), Catch::Contains("missing CTAG"));
  CHECK_THROWS_WITH(parse_tl1_command("RTRV-HDR:::;"), Catch::Contains("missing CTAG"));
  CHECK_THROWS_WITH(parse_tl1_command("RTRV HDR:::1;"), Catch::Contains("malformed verb"));
  CHECK_THROWS_WITH(parse_tl1_command("-RTRV:::1;"), Catch::Contains("malformed verb"));
  CHECK_THROWS_WITH(parse_tl1_command("RTRV-:::1;"), Catch::Contains("malformed verb"));
  CHECK_THROWS_WITH(parse_tl1_command("RTRV-HDR:::\"1;"), Catch::Contains("CTAG"));
  CHECK_THROWS_WITH(parse_tl1_command("ech:::\"\""), Catch::Contains("empty CTAG"));
  CHECK_THROWS_WITH(parse_tl1_command("RTRV-HDR:::a b;"), Catch::Contains("\"RTRV-HDR:::a b;\""));
  CHECK_THROWS_WITH(parse_tl1_command("X:::1::=5;"), Catch::Contains("parameter without a name"));
}

TEST_CASE("TL1 port lists parse, expand ranges and print compactly") {
  CHECK(parse_tl1_port_list("11", 64) == std::vector<Port>{11});
  CHECK(parse_tl1_port_list("11&4&10", 64) == std::vector<Port>{11, 4, 10});
  CHECK(parse_tl1_port_list("1&&4&9", 64) == std::vector<Port>{1, 2, 3, 4, 9});
  CHECK(parse_tl1_port_list("ALL", 4) == std::vector<Port>{1, 2, 3, 4});
  CHECK(parse_tl1_port_list("all", 3) == std::vector<Port>{1, 2, 3});
  CHECK(parse_tl1_port_list("", 2) == std::vector<Port>{1, 2});
  CHECK(parse_tl1_port_list("1&&640", 640).size() == 640);

  CHECK_THROWS_WITH(parse_tl1_port_list("65", 64), Catch::Contains("port 65") && Catch::Contains("outside 1..64"));
  CHECK_THROWS_WITH(parse_tl1_port_list("0", 64), Catch::Contains("port 0"));
  CHECK_THROWS_WITH(parse_tl1_port_list("5&&2", 64), Catch::Contains("runs backwards"));
  CHECK_THROWS_WITH(parse_tl1_port_list("1&x", 64), Catch::Contains("bad port 'x'"));
  CHECK_THROWS_WITH(parse_tl1_port_list("1&", 64), Catch::Contains("ends with '&'"));
  CHECK_THROWS_AS(parse_tl1_port_list("&1", 64), ProtocolError);
  CHECK_THROWS_AS(parse_tl1_port_list("1&&", 64), ProtocolError);
  CHECK_THROWS_AS(parse_tl1_port_list("1&&&2", 64), ProtocolError);
  CHECK_THROWS_AS(parse_tl1_port_list("99999999999", 64), ProtocolError);

  CHECK(format_tl1_port_list({1, 2, 3, 4, 9}) == "1&&4&9");
  CHECK(format_tl1_port_list({1, 2}) == "1&2");
  CHECK(format_tl1_port_list({11, 4, 10}) == "11&4&10");
  CHECK(format_tl1_port_list({5, 6, 7, 3, 4}) == "5&&7&3&4");
  CHECK(format_tl1_port_list({}).empty());
  // The longest numbers fit the room the writers reserve.
  CHECK(format_tl1_port_list({2147483646, 2147483647}) == "2147483646&2147483647");
  CHECK(format_tl1_port_list({-2147483647 - 1, 2147483647, -2147483647 - 1}) ==
        "-2147483648&2147483647&-2147483648");
  CHECK(format_tl1_patch_aid({{-2147483647 - 1, 2147483647}}) == "-2147483648,2147483647");
  for (std::vector<Port> ports : {std::vector<Port>{1, 2, 3}, {7}, {3, 1, 2, 40, 41, 42, 43, 9}, {1, 3, 5, 6}}) {
    CHECK(parse_tl1_port_list(format_tl1_port_list(ports), 64) == ports);
  }
}

TEST_CASE("TL1 patch AIDs pair the ingress and egress lists in order") {
  CHECK(parse_tl1_patch_aid("1&2,33&34", 64) == std::vector<Circuit>{{1, 33}, {2, 34}});
  CHECK(parse_tl1_patch_aid("1&&3,40&&42", 64) == std::vector<Circuit>{{1, 40}, {2, 41}, {3, 42}});
  CHECK(parse_tl1_patch_aid("11,28", 64) == std::vector<Circuit>{{11, 28}});
  std::vector<Circuit> cs{{1, 33}, {2, 34}, {3, 35}, {7, 60}};
  CHECK(format_tl1_patch_aid(cs) == "1&&3&7,33&&35&60");
  CHECK(parse_tl1_patch_aid(format_tl1_patch_aid(cs), 64) == cs);
  CHECK_THROWS_WITH(parse_tl1_patch_aid("1&2,33", 64), Catch::Contains("2 ingress ports but 1 egress ports"));
  CHECK_THROWS_WITH(parse_tl1_patch_aid("1", 64), Catch::Contains("<ingress-list>,<egress-list>"));
  CHECK_THROWS_WITH(parse_tl1_patch_aid("1,2,3", 64), Catch::Contains("<ingress-list>,<egress-list>"));
  CHECK_THROWS_WITH(parse_tl1_patch_aid("ALL,1", 64), Catch::Contains("must name ports"));
  CHECK_THROWS_WITH(parse_tl1_patch_aid(",1", 64), Catch::Contains("must name ports"));
}
