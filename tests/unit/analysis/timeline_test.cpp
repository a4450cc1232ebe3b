// Reading timelines: columns by name, CSV quoting as CsvWriter writes it, and malformed input
// reported with file:line.
#include <catch2/catch.hpp>

#include <sstream>

#include "ocslab/analysis/timeline.h"
#include "ocslab/common/csv_writer.h"
#include "ocslab/common/error.h"

using namespace ocslab;
using namespace ocslab::analysis;
using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;

TEST_CASE("only the rows the breakdown reads are kept, with interned strings") {
  std::string text =
      "t_ns,host,source,subject,signal,value,unit\n"
      "100,h1,carrier,eth1,carrier,1,bool\n"
      "101,h1,rdma,rxe0/eth1@h2,completion,0,wc_status\n"
      "102,h1,carrier,eth1,carrier_up_count,4,count\n"
      "103,h1,rdma,rxe0/eth1@h2,stalled,1,bool\n"
      "104,switch,ocs,m/x@y,command,1,\n"
      "105,h2,heartbeat,eth1,heartbeat,1,bool\n"
      "106,h1,rx_power,eth1,rx_power_dbm,-3.25,dBm\n";
  Timeline t = parse_timeline(text, "cap.csv");
  CHECK_FALSE(t.has_run);
  CHECK_FALSE(t.has_iteration);
  CHECK(t.rows == 7);
  REQUIRE(t.events.size() == 4);
  CHECK(t.events[0].kind == Kind::kCarrier);
  CHECK(t.events[0].t_ns == 100);
  CHECK(t.events[0].line == 2);
  CHECK(t.strings.str(t.events[0].host) == "h1");
  CHECK(t.events[1].kind == Kind::kStalled);
  CHECK(t.events[1].subject == t.events[0].subject);  // rxe0/eth1@h2 -> eth1
  CHECK(t.events[1].line == 5);
  CHECK(t.events[2].kind == Kind::kCommand);
  CHECK(t.strings.str(t.events[2].subject) == "m/x@y");  // a mapping name stays whole
  CHECK(t.events[3].kind == Kind::kRxPower);
  CHECK(t.events[3].value == -3.25);
  CHECK(t.events[3].iteration == -1);
}

TEST_CASE("columns are found by name, in any order, extra columns ignored") {
  std::string text =
      "iteration,extra,value,signal,subject,source,host,t_ns,run,unit\n"
      "3,zz,0,carrier,eth9,carrier,h7,12345,run-a,bool\n";
  Timeline t = parse_timeline(text, "x.csv");
  CHECK(t.has_run);
  CHECK(t.has_iteration);
  REQUIRE(t.events.size() == 1);
  CHECK(t.events[0].t_ns == 12345);
  CHECK(t.events[0].iteration == 3);
  CHECK(t.events[0].value == 0);
  CHECK(t.strings.str(t.events[0].run) == "run-a");
  CHECK(t.strings.str(t.events[0].host) == "h7");
  CHECK(t.strings.str(t.events[0].subject) == "eth9");
}

TEST_CASE("quoted fields as CsvWriter writes them: commas, quotes and line breaks; CRLF") {
  std::ostringstream s;
  CsvWriter w(s);
  w.header({"t_ns", "host", "source", "subject", "signal", "value", "unit"});
  w.row({"1", "h1", "ocs", "a,b \"c\"\nd", "command", "1", ""});
  w.row({"2", "h1", "rdma", "multi\nline\nsubject", "completion", "0", "wc_status"});
  w.row({"3", "h,1", "carrier", "eth1", "carrier", "0", "bool"});
  std::string text = s.str();
  REQUIRE(text.find("\"a,b \"\"c\"\"\nd\"") != std::string::npos);
  text += "4,h1,carrier,eth1,carrier,1,bool\r\n";
  text += "\n";  // a blank line is skipped
  text += "\"5\",h1,carrier,\"eth1\",carrier,\"0\",bool\r\n";
  Timeline t = parse_timeline(text, "q.csv");
  CHECK(t.rows == 5);
  REQUIRE(t.events.size() == 4);
  CHECK(t.strings.str(t.events[0].subject) == "a,b \"c\"\nd");
  CHECK(t.events[0].line == 2);
  CHECK(t.strings.str(t.events[1].host) == "h,1");
  CHECK(t.events[1].line == 7);  // after the two rows spanning 2 and 3 lines
  CHECK(t.events[2].t_ns == 4);
  CHECK(t.events[2].value == 1);
  CHECK(t.events[2].line == 8);
  CHECK(t.events[3].t_ns == 5);
  CHECK(t.events[3].line == 10);  // after the blank line 9
  CHECK(t.strings.str(t.events[3].subject) == "eth1");
}

TEST_CASE("malformed timelines name the file and line") {
  const std::string header = "t_ns,host,source,subject,signal,value,unit,run,iteration\n";
  auto error_of = [](const std::string& text) -> std::string {
    try {
      parse_timeline(text, "t.csv");
    } catch (const ConfigError& e) {
      return e.what();
    }
    return "(no error)";
  };
  CHECK(error_of("") == "t.csv:1: empty file, no header");
  CHECK_THAT(error_of("t_ns,host,source,subject,value,unit\n1,h,carrier,eth1,1,bool\n"),
             StartsWith("t.csv:1: missing column 'signal'") && Contains("header: t_ns,host,source,subject,value,unit"));
  CHECK(error_of(header + "1,h1,carrier,eth1,carrier,1,bool,r,1\n2,h1,carrier,eth1,carrier,1,bool,r\n") ==
        "t.csv:3: 8 field(s), the header has 9");
  CHECK(error_of(header + "1,h1,rdma,x,completion,0,wc,r,1,extra\n") == "t.csv:2: 10 field(s), the header has 9");
  CHECK(error_of(header + "\n\n12x,h1,carrier,eth1,carrier,1,bool,r,1\n") ==
        "t.csv:4: bad number '12x' in column t_ns");
  CHECK(error_of(header + "1,h1,carrier,eth1,carrier,,bool,r,1\n") == "t.csv:2: bad number '' in column value");
  CHECK(error_of(header + "1,h1,carrier,eth1,carrier,1,bool,r,one\n") ==
        "t.csv:2: bad number 'one' in column iteration");
  CHECK(error_of(header + "1,h1,carrier,\"eth1,carrier,1,bool,r,1\n2,h1,x,y,z,1,u,r,1\n") ==
        "t.csv:2: unterminated quoted field");
  CHECK_THAT(error_of(header + "1,h1,carrier,\"eth1\"x,carrier,1,bool,r,1\n"), StartsWith("t.csv:2: unexpected 'x'"));
  // Rows the breakdown does not read are not parsed as numbers (that is what makes it fast),
  // but their field count is checked.
  CHECK(error_of(header + "zz,h1,rdma,x,completion,0,wc,r,1\n") == "(no error)");
}

TEST_CASE("read_timeline: a missing file or a folder is an input error naming it") {
  CHECK_THROWS_WITH(read_timeline("/nonexistent/timeline.csv"),
                    StartsWith("/nonexistent/timeline.csv: cannot open: No such file"));
  CHECK_THROWS_AS(read_timeline("/tmp"), ConfigError);
}
