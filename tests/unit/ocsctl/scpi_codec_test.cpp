#include <catch2/catch.hpp>

#include "ocslab/ocsctl/scpi_codec.h"

using namespace ocslab;
using namespace ocslab::ocs;

using Lists = std::vector<std::vector<Port>>;

TEST_CASE("scpi channel lists parse singles, ranges, whitespace and empty lists") {
  CHECK(parse_scpi_channel_lists("(@1,2),(@17,18)") == Lists{{1, 2}, {17, 18}});
  CHECK(parse_scpi_channel_lists("(@1:4)") == Lists{{1, 2, 3, 4}});
  CHECK(parse_scpi_channel_lists("(@1,2,5:8)") == Lists{{1, 2, 5, 6, 7, 8}});
  CHECK(parse_scpi_channel_lists("  ( @ 1 , 3 : 4 ) ,\t(@ 20 )\r") == Lists{{1, 3, 4}, {20}});
  CHECK(parse_scpi_channel_lists("(@8:5)") == Lists{{8, 7, 6, 5}});  // descending, as written
  CHECK(parse_scpi_channel_lists("(@),(@)") == Lists{{}, {}});
  CHECK(parse_scpi_channel_lists("(@7:7)") == Lists{{7}});
}

TEST_CASE("scpi channel lists reject malformed input, quoting it") {
  CHECK_THROWS_AS(parse_scpi_channel_lists(""), ProtocolError);
  CHECK_THROWS_WITH(parse_scpi_channel_lists("(1,2)"), Catch::Contains("expected '(@'") && Catch::Contains("'(1,2)'"));
  CHECK_THROWS_WITH(parse_scpi_channel_lists("(@1,2"), Catch::Contains("unterminated channel list"));
  CHECK_THROWS_WITH(parse_scpi_channel_lists("(@1,,2)"), Catch::Contains("empty entry"));
  CHECK_THROWS_WITH(parse_scpi_channel_lists("(@1,x)"), Catch::Contains("bad channel 'x'"));
  CHECK_THROWS_WITH(parse_scpi_channel_lists("(@0)"), Catch::Contains("channel 0 out of range"));
  CHECK_THROWS_WITH(parse_scpi_channel_lists("(@-3)"), Catch::Contains("out of range"));
  CHECK_THROWS_WITH(parse_scpi_channel_lists("(@1)(@2)"), Catch::Contains("expected ','"));
  CHECK_THROWS_WITH(parse_scpi_channel_lists("(@1),"), Catch::Contains("trailing ','"));
  CHECK_THROWS_WITH(parse_scpi_channel_lists("(@1:2:3)"), Catch::Contains("bad channel"));
  CHECK_THROWS_WITH(parse_scpi_channel_lists("(@1:99999999999)"), Catch::Contains("bad channel"));
  // Huge ranges are refused before anything is allocated for them.
  CHECK_THROWS_WITH(parse_scpi_channel_lists("(@1:1000000)"), Catch::Contains("longer than 65536"));
  CHECK_THROWS_WITH(parse_scpi_channel_lists("(@1:40000),(@1:40000)"), Catch::Contains("longer than 65536"));
  CHECK_THROWS_WITH(parse_scpi_channel_lists("(@1)\x01"),
                    Catch::Contains("control characters") && Catch::Contains("\\x01"));
}

TEST_CASE("scpi connection state pairs the two lists in order") {
  CHECK(parse_scpi_connections("(@1,2),(@17,18)") == std::vector<Circuit>{{1, 17}, {2, 18}});
  CHECK(parse_scpi_connections("(@1:3,9),(@20:22,17)") == std::vector<Circuit>{{1, 20}, {2, 21}, {3, 22}, {9, 17}});
  CHECK(parse_scpi_connections("(@),(@)").empty());
  CHECK_THROWS_WITH(parse_scpi_connections("(@1,2),(@17)"),
                    Catch::Contains("differ in length (2 ingress, 1 egress)") && Catch::Contains("'(@1,2),(@17)'"));
  CHECK_THROWS_WITH(parse_scpi_connections("(@1,2)"), Catch::Contains("expected two channel lists"));
  CHECK_THROWS_WITH(parse_scpi_connections("(@1),(@2),(@3)"), Catch::Contains("got 3"));
  CHECK_THROWS_AS(parse_scpi_connections("ERROR"), ProtocolError);
}

TEST_CASE("scpi power replies with and without parentheses") {
  CHECK(parse_scpi_power("(-29.55,-30.05)") == std::vector<double>{-29.55, -30.05});
  CHECK(parse_scpi_power("-29.55, -30.05\r") == std::vector<double>{-29.55, -30.05});
  CHECK(parse_scpi_power("(+1.5E+00)") == std::vector<double>{1.5});
  CHECK(parse_scpi_power("-60") == std::vector<double>{-60});
  CHECK(parse_scpi_power("()").empty());
  CHECK_THROWS_WITH(parse_scpi_power("(-29.55,abc)"), Catch::Contains("bad power value 'abc'"));
  CHECK_THROWS_WITH(parse_scpi_power("(-29.55,)"), Catch::Contains("bad power value ''"));
  CHECK_THROWS_WITH(parse_scpi_power("(-29.55"), Catch::Contains("unbalanced"));
  CHECK_THROWS_WITH(parse_scpi_power("nan"), Catch::Contains("bad power value"));
  CHECK_THROWS_WITH(parse_scpi_power("inf"), Catch::Contains("bad power value"));
  CHECK_THROWS_WITH(parse_scpi_power(""), Catch::Contains("empty power reply"));
}

TEST_CASE("scpi *IDN? replies") {
  auto id = parse_scpi_idn("Polatis,Series 6000 192x192,001234,7.1.2\r");
  CHECK(id.vendor == "Polatis");
  CHECK(id.model == "Series 6000 192x192");
  CHECK(id.serial == "001234");
  CHECK(id.version == "7.1.2");
  CHECK(parse_scpi_idn("Polatis,N-OCS,42,7.1,build 3").version == "7.1,build 3");
  CHECK(parse_scpi_idn("\"Polatis,X,1,2\"").model == "X");
  CHECK_THROWS_WITH(parse_scpi_idn("Polatis,X,1"), Catch::Contains("vendor,model,serial,version"));
  CHECK_THROWS_WITH(parse_scpi_idn(",X,1,2"), Catch::Contains("without vendor or model"));
  CHECK_THROWS_WITH(parse_scpi_idn("\x01\x7fgarbage"), Catch::Contains("control characters"));
  CHECK_THROWS_WITH(parse_scpi_idn("\"Polatis,X,1,2"), Catch::Contains("unterminated string"));
}

TEST_CASE("scpi size replies") {
  CHECK(parse_scpi_size("192,192") == std::pair{192, 192});
  CHECK(parse_scpi_size(" 32 , 64\r") == std::pair{32, 64});
  CHECK_THROWS_WITH(parse_scpi_size("192"), Catch::Contains("N,M") && Catch::Contains("'192'"));
  CHECK_THROWS_WITH(parse_scpi_size("192x192"), Catch::Contains("N,M"));
  CHECK_THROWS_WITH(parse_scpi_size("0,4"), Catch::Contains("implausible"));
  CHECK_THROWS_WITH(parse_scpi_size("999999,999999"), Catch::Contains("implausible"));
}

TEST_CASE("scpi error queue replies") {
  auto ok = parse_scpi_error("0,\"No error\"");
  CHECK(ok.code == 0);
  CHECK(ok.message == "No error");
  auto e = parse_scpi_error("-222,\"Data out of range\"\r");
  CHECK(e.code == -222);
  CHECK(e.message == "Data out of range");
  CHECK(parse_scpi_error("-200,\"Execution error; port \"\"5\"\" busy\"").message ==
        "Execution error; port \"5\" busy");
  CHECK(parse_scpi_error("+0,No error").message == "No error");
  CHECK(parse_scpi_error("0").code == 0);
  CHECK_THROWS_WITH(parse_scpi_error("\"No error\""), Catch::Contains("error code"));
  CHECK_THROWS_WITH(parse_scpi_error("-222,\"Data out"), Catch::Contains("unterminated string"));
  CHECK_THROWS_WITH(parse_scpi_error("-222,\"x\" y"), Catch::Contains("text after closing quote"));
  CHECK_THROWS_WITH(parse_scpi_error("99999999999,\"x\""), Catch::Contains("error code"));
}

TEST_CASE("scpi *OPC? replies: 1 is operation complete, anything else is refused") {
  CHECK_NOTHROW(parse_scpi_opc("1"));
  CHECK_NOTHROW(parse_scpi_opc("+1\r"));
  CHECK_NOTHROW(parse_scpi_opc(" 1 "));
  CHECK_THROWS_WITH(parse_scpi_opc("0"), Catch::Contains("*OPC? reply must be 1") && Catch::Contains("'0'"));
  CHECK_THROWS_WITH(parse_scpi_opc("0,\"No error\""), Catch::Contains("*OPC? reply must be 1"));
  CHECK_THROWS_WITH(parse_scpi_opc("11"), Catch::Contains("*OPC? reply must be 1"));
  CHECK_THROWS_WITH(parse_scpi_opc(""), Catch::Contains("empty *OPC? reply"));
  CHECK_THROWS_WITH(parse_scpi_opc("1\x01"), Catch::Contains("control characters"));
}

TEST_CASE("scpi port replies") {
  CHECK(parse_scpi_port_reply("\"18\"") == 18);
  CHECK(parse_scpi_port_reply("18") == 18);
  CHECK(parse_scpi_port_reply("(@18)") == 18);
  CHECK_FALSE(parse_scpi_port_reply("\"\""));
  CHECK_FALSE(parse_scpi_port_reply("\"0\""));
  CHECK_FALSE(parse_scpi_port_reply("(@)"));
  CHECK_THROWS_WITH(parse_scpi_port_reply("\"x\""), Catch::Contains("bad channel"));
  CHECK_THROWS_WITH(parse_scpi_port_reply("(@1,2)"), Catch::Contains("one port"));
}

TEST_CASE("scpi garbage is quoted, escaped and truncated in errors") {
  std::string junk(500, 'z');
  try {
    parse_scpi_size(junk);
    FAIL("no exception");
  } catch (const ProtocolError& e) {
    std::string what = e.what();
    CHECK(what.find(std::string(200, 'z')) != std::string::npos);
    CHECK(what.find(std::string(201, 'z')) == std::string::npos);
    CHECK(what.find("(500 bytes)") != std::string::npos);
  }
  CHECK(scpi_quote("a\r\n\x02") == "'a\\r\\n\\x02'");
}

TEST_CASE("scpi command headers match long, short and lower-case forms") {
  for (const char* line : {":OXC:SWITch:CONNect:ADD (@1),(@17)", ":OXC:SWIT:CONN:ADD (@1),(@17)",
                           ":oxc:switch:connect:add (@1),(@17)", "OXC:Swit:CONNECT:add (@1),(@17)"}) {
    INFO(line);
    auto cmds = parse_scpi_command_line(line);
    REQUIRE(cmds.size() == 1);
    CHECK(cmds[0].is("OXC:SWITch:CONNect:ADD"));
    CHECK(cmds[0].is(":OXC:SWITch:CONNect:ADD"));
    CHECK_FALSE(cmds[0].is("OXC:SWITch:CONNect:SUB"));
    CHECK_FALSE(cmds[0].query);
    CHECK(cmds[0].channel_lists == Lists{{1}, {17}});
  }
  // Neither the short nor the long form: SCPI does not accept other abbreviations.
  CHECK_FALSE(parse_scpi_command_line(":OXC:SWITC:CONN:ADD (@1),(@17)")[0].is("OXC:SWITch:CONNect:ADD"));
  CHECK_FALSE(parse_scpi_command_line(":OXC:SW:CONN:ADD (@1),(@17)")[0].is("OXC:SWITch:CONNect:ADD"));

  auto q = parse_scpi_command_line(":syst:err?")[0];
  CHECK(q.query);
  CHECK(q.is("SYSTem:ERRor[:NEXT]"));
  CHECK(parse_scpi_command_line(":SYSTEM:ERROR:NEXT?")[0].is("SYSTem:ERRor[:NEXT]"));
  CHECK_FALSE(parse_scpi_command_line(":SYST:NEXT?")[0].is("SYSTem:ERRor[:NEXT]"));

  auto idn = parse_scpi_command_line("*idn?")[0];
  CHECK(idn.common());
  CHECK(idn.query);
  CHECK(idn.header == std::vector<std::string>{"*IDN"});
}

TEST_CASE("scpi command arguments") {
  auto c = parse_scpi_command_line(":OXC:SWITch:CONNect:ADD (@1:3, 7),(@17,18,19,20)\r")[0];
  CHECK(c.args == std::vector<std::string>{"(@1:3, 7)", "(@17,18,19,20)"});
  CHECK(c.channel_lists == Lists{{1, 2, 3, 7}, {17, 18, 19, 20}});
  CHECK(c.text == ":OXC:SWITch:CONNect:ADD (@1:3, 7),(@17,18,19,20)");
  auto p = parse_scpi_command_line(":OXC:SWIT:CONN:PORT? 2")[0];
  CHECK(p.query);
  CHECK(p.args == std::vector<std::string>{"2"});
  CHECK(p.channel_lists.empty());
  auto s = parse_scpi_command_line(":DISP:TEXT \"a,b;c\",5")[0];
  CHECK(s.args == std::vector<std::string>{"\"a,b;c\"", "5"});
}

TEST_CASE("scpi compound lines split at ';' and resolve relative headers") {
  auto cmds = parse_scpi_command_line("*CLS;*IDN?");
  REQUIRE(cmds.size() == 2);
  CHECK(cmds[0].header == std::vector<std::string>{"*CLS"});
  CHECK(cmds[1].query);

  cmds = parse_scpi_command_line(":OXC:SWIT:CONN:ADD (@1),(@17);SUB (@2),(@18);*OPC;:SYST:ERR?");
  REQUIRE(cmds.size() == 4);
  CHECK(cmds[0].is("OXC:SWITch:CONNect:ADD"));
  CHECK(cmds[1].is("OXC:SWITch:CONNect:SUB"));  // relative to :OXC:SWIT:CONN
  CHECK(cmds[1].text == "SUB (@2),(@18)");
  CHECK(cmds[1].channel_lists == Lists{{2}, {18}});
  CHECK(cmds[2].header == std::vector<std::string>{"*OPC"});
  CHECK(cmds[3].is("SYSTem:ERRor"));  // a leading ':' goes back to the root

  CHECK(parse_scpi_command_line("*IDN?;").size() == 1);
  CHECK(parse_scpi_command_line("   ").empty());
}

TEST_CASE("scpi command syntax errors throw") {
  CHECK_THROWS_WITH(parse_scpi_command_line(":OXC::ADD"), Catch::Contains("bad header"));
  CHECK_THROWS_WITH(parse_scpi_command_line(":OXC:AD?D"), Catch::Contains("bad header"));
  CHECK_THROWS_WITH(parse_scpi_command_line("*"), Catch::Contains("bad common command"));
  CHECK_THROWS_WITH(parse_scpi_command_line(":A (@1"), Catch::Contains("unbalanced '('"));
  CHECK_THROWS_WITH(parse_scpi_command_line(":A (@1),,(@2)"), Catch::Contains("empty argument"));
  CHECK_THROWS_WITH(parse_scpi_command_line(":A (1)"), Catch::Contains("expected '(@'"));
  CHECK_THROWS_WITH(parse_scpi_command_line(":A \"abc"), Catch::Contains("unterminated string"));
  // The range budget is per line, not per argument.
  CHECK_THROWS_WITH(parse_scpi_command_line(":A (@1:40000);:B (@1:40000)"), Catch::Contains("longer than 65536"));
}

TEST_CASE("scpi channel lists format compactly and round trip") {
  CHECK(format_scpi_channel_list({}) == "(@)");
  CHECK(format_scpi_channel_list({5}) == "(@5)");
  CHECK(format_scpi_channel_list({1, 2}) == "(@1,2)");
  CHECK(format_scpi_channel_list({1, 2, 3}) == "(@1:3)");
  CHECK(format_scpi_channel_list({1, 2, 3, 4, 7, 9, 10, 11, 20, 19}) == "(@1:4,7,9:11,20,19)");
  CHECK(format_scpi_connections({{1, 17}, {2, 18}}) == "(@1,2),(@17,18)");
  std::vector<std::vector<Port>> samples{{}, {3}, {1, 2, 3, 4, 5}, {9, 8, 7, 1, 2, 3, 100, 4}, {5, 5, 6, 7}};
  for (const auto& s : samples) {
    INFO(format_scpi_channel_list(s));
    CHECK(parse_scpi_channel_lists(format_scpi_channel_list(s)) == Lists{s});
  }
  std::vector<Circuit> cs{{3, 40}, {1, 33}, {2, 34}, {4, 35}, {5, 36}, {6, 37}};
  CHECK(parse_scpi_connections(format_scpi_connections(cs)) == cs);
  auto cmd = parse_scpi_command_line(":OXC:SWITch:CONNect:ADD " + format_scpi_connections(cs))[0];
  CHECK(cmd.channel_lists.size() == 2);
  CHECK(cmd.channel_lists[0] == std::vector<Port>{3, 1, 2, 4, 5, 6});
}
